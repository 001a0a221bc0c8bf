/**
 * The local-tool contract: a name, a description and a typed input (the Model Context Protocol's triple), plus a
 * class. `read` and `action` tools run; `mutate` tools plan (an exact diff, disk untouched) and apply.
 *
 * The object `defineLocalTool` returns validates its input on every call, so calling `tool.run` directly is as
 * safe as going through `invokeTool`.
 */
import type { Static, TObject, TSchema } from "@sinclair/typebox";
import { boundSummary, planProblem } from "../protocol/plan.js";
import { TOOL_NAME, TOOL_NAME_PATTERN, type ToolClass, type ToolHints, type ToolMode } from "../protocol/tool.js";
import { ToolError, fromFsError, throwIfAborted } from "./errors.js";
import type { Scope } from "./scope.js";
import { compileValidator } from "./validate.js";

export type { ToolClass, ToolHints, ToolMode };

/** A plain JSON object: results cross the network. */
export type ToolResult = { [key: string]: unknown };
export type PlanResult = ToolResult & { diff: string; summary: string };

/**
 * The operating system's opener, as argv prefixes: the target path is appended as the last argument, never
 * through a shell. `revealOpensParent` reveals an item by opening its folder (Linux has no standard "select").
 */
export interface OpenerCommands {
  open: readonly string[];
  reveal: readonly string[];
  revealOpensParent?: boolean;
}

export interface ToolContext {
  scope: Scope;
  signal?: AbortSignal;
  opener?: Partial<OpenerCommands>;
  /** Set by the wrapper to the phase being run. */
  mode?: ToolMode;
  /** A blob the input names by id (write_file's `blob`), as the runtime was given it; undefined when not given. */
  blob?: (id: string) => BlobContent | undefined;
}

/** A blob's bytes as a tool reads them: what they must be, and a stream of them (the runtime fetches it). */
export interface BlobContent {
  size: number;
  sha256: string;
  contentType: string;
  open(signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>>;
}

interface LocalToolBase {
  readonly name: string;
  readonly description: string;
  readonly input: TSchema;
  /** Effects beyond the class (MCP annotations); a class default where absent (see `toolHints`). */
  readonly hints?: ToolHints;
}

export interface RunnableLocalTool extends LocalToolBase {
  readonly class: "read" | "action";
  run(input: unknown, ctx: ToolContext): Promise<ToolResult>;
}

export interface MutatingLocalTool extends LocalToolBase {
  readonly class: "mutate";
  /** Dry run: the exact diff and a summary; touches nothing. */
  plan(input: unknown, ctx: ToolContext): Promise<PlanResult>;
  /** Performs the change from the (stored) input, re-checking everything first. */
  apply(input: unknown, ctx: ToolContext): Promise<ToolResult>;
}

export type LocalTool = RunnableLocalTool | MutatingLocalTool;

type MaybePromise<T> = T | Promise<T>;

export interface RunToolDefinition<S extends TObject> {
  name: string;
  description: string;
  input: S;
  class: "read" | "action";
  hints?: ToolHints;
  run(this: void, input: Static<S>, ctx: ToolContext): MaybePromise<ToolResult>;
}

export interface MutateToolDefinition<S extends TObject> {
  name: string;
  description: string;
  input: S;
  class: "mutate";
  hints?: ToolHints;
  plan(this: void, input: Static<S>, ctx: ToolContext): MaybePromise<PlanResult>;
  apply(this: void, input: Static<S>, ctx: ToolContext): MaybePromise<ToolResult>;
}

export type LocalToolDefinition<S extends TObject> = RunToolDefinition<S> | MutateToolDefinition<S>;

/** A mutate tool written as one `run` that plans, and with `apply` also performs, the change. */
export interface PlannedToolDefinition<S extends TObject> {
  name: string;
  description: string;
  input: S;
  hints?: ToolHints;
  run(this: void, input: Static<S>, ctx: ToolContext, apply: boolean): MaybePromise<PlanResult>;
}

/** The wire protocol's one tool-name rule: what a device can define, the server accepts. */
export { TOOL_NAME };

function definitionError(name: unknown, message: string): ToolError {
  return new ToolError("INVALID_DEFINITION", `Tool ${typeof name === "string" ? name : "(unnamed)"}: ${message}`);
}

export function defineLocalTool<S extends TObject>(def: LocalToolDefinition<S>): LocalTool {
  if (!def || typeof def !== "object") throw definitionError(undefined, "definition must be an object");
  const { name, description } = def;
  if (typeof name !== "string" || !TOOL_NAME.test(name)) throw definitionError(name, `name must match /${TOOL_NAME_PATTERN}/`);
  if (typeof description !== "string" || description.trim() === "") throw definitionError(name, "description must be a non-empty string");
  const validate = compileValidator(def.input, name);
  const cls = def.class as unknown;

  const execute = async <R extends ToolResult>(
    phase: ToolMode,
    fn: (input: never, ctx: ToolContext) => MaybePromise<R>,
    input: unknown,
    ctx: ToolContext,
  ): Promise<R> => {
    if (!ctx || typeof ctx.scope?.resolve !== "function") throw new ToolError("INTERNAL", `Tool ${name}: called without a scope`);
    throwIfAborted(ctx.signal);
    const value = validate(input);
    let result: R;
    try {
      result = await fn(value as never, { ...ctx, mode: phase });
    } catch (error) {
      throw normaliseError(error, name);
    }
    assertJsonResult(result, name);
    if (phase === "plan") {
      if (typeof result.diff !== "string" || typeof result.summary !== "string") {
        throw new ToolError("INTERNAL", `Tool ${name}: plan() must return { diff: string, summary: string }`);
      }
      // The protocol's bounds, checked here as the server checks them: a plan the server would refuse
      // never leaves the device. A long summary is shortened (the same way at apply), not refused.
      result = { ...result, summary: boundSummary(result.summary) };
      const problem = planProblem(result);
      if (problem) throw new ToolError("PLAN_INVALID", `Tool ${name}: its plan is outside the protocol's bounds: ${problem}`);
    }
    return result;
  };

  if (cls === "read" || cls === "action") {
    const runDef = def as RunToolDefinition<S>;
    if (typeof runDef.run !== "function") throw definitionError(name, `a ${cls} tool needs run()`);
    if ("plan" in def || "apply" in def) throw definitionError(name, `a ${cls} tool has run(), not plan()/apply()`);
    return Object.freeze({
      name,
      description,
      input: def.input,
      class: cls,
      ...(def.hints ? { hints: Object.freeze({ ...def.hints }) } : {}),
      run: (input: unknown, ctx: ToolContext) => execute("run", runDef.run, input, ctx),
    });
  }
  if (cls === "mutate") {
    const mutateDef = def as MutateToolDefinition<S>;
    if (typeof mutateDef.plan !== "function" || typeof mutateDef.apply !== "function") throw definitionError(name, "a mutate tool needs plan() and apply()");
    if ("run" in def) throw definitionError(name, "a mutate tool has plan()/apply(), not run()");
    return Object.freeze({
      name,
      description,
      input: def.input,
      class: "mutate" as const,
      ...(def.hints ? { hints: Object.freeze({ ...def.hints }) } : {}),
      plan: (input: unknown, ctx: ToolContext) => execute<PlanResult>("plan", mutateDef.plan, input, ctx),
      apply: (input: unknown, ctx: ToolContext) => execute("apply", mutateDef.apply, input, ctx),
    });
  }
  throw definitionError(name, "class must be read, mutate or action");
}

/** Tool code may throw anything; callers only ever see a ToolError. */
export function normaliseError(error: unknown, toolName: string): ToolError {
  if (error instanceof ToolError) return error;
  if ((error as Error | undefined)?.name === "AbortError") return new ToolError("ABORTED", "The tool call was cancelled");
  const errno = error as NodeJS.ErrnoException | undefined;
  if (typeof errno?.code === "string" && /^E[A-Z]+$/.test(errno.code)) {
    // Our handle paths (/proc/self/fd/N/name) mean nothing to a reader: keep the name only.
    const shown = typeof errno.path === "string" ? errno.path.replace(/^\/proc\/self\/fd\/\d+\//, "") : "a file";
    return fromFsError(error, shown, "use");
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ToolError("INTERNAL", `Tool ${toolName} failed: ${message}`);
}

function assertJsonResult(result: unknown, toolName: string): asserts result is ToolResult {
  const seen = new Set<object>();
  const check = (v: unknown, where: string, depth: number): void => {
    if (depth > 100) throw bad(where, "is nested too deeply");
    if (v === null || typeof v === "string" || typeof v === "boolean") return;
    if (typeof v === "number") {
      if (!Number.isFinite(v)) throw bad(where, "is not a finite number");
      return;
    }
    if (typeof v !== "object") throw bad(where, `is a ${typeof v}`);
    if (seen.has(v)) throw bad(where, "is a cycle");
    seen.add(v);
    if (Array.isArray(v)) v.forEach((item, i) => check(item, `${where}[${i}]`, depth + 1));
    else {
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw bad(where, "is not a plain object");
      for (const [key, item] of Object.entries(v)) if (item !== undefined) check(item, `${where}.${key}`, depth + 1);
    }
    seen.delete(v);
  };
  const bad = (where: string, why: string) => new ToolError("INTERNAL", `Tool ${toolName} returned a result that is not JSON: ${where} ${why}`);
  if (result === null || typeof result !== "object" || Array.isArray(result)) throw bad("result", "must be an object");
  check(result, "result", 0);
}

/** `defineLocalTool` for a mutate tool whose plan is its apply without the change (every built-in one). */
export function definePlannedTool<S extends TObject>(def: PlannedToolDefinition<S>): LocalTool {
  const { name, description, input, hints, run } = def;
  return defineLocalTool({
    name,
    description,
    input,
    class: "mutate",
    hints,
    plan: (value, ctx) => run(value, ctx, false),
    apply: (value, ctx) => run(value, ctx, true),
  });
}
