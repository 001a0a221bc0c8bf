/** Dispatch by name, mode checks, and the description a model sees. */
import type { LocalTool, OpenerCommands, ToolClass, ToolContext, ToolMode, ToolResult } from "./define.js";
import { ToolError } from "./errors.js";
import type { Scope } from "./scope.js";

export interface InvokeOptions {
  scope: Scope;
  /** Default `run` for read/action tools and `plan` for mutate tools. */
  mode?: ToolMode;
  signal?: AbortSignal;
  opener?: Partial<OpenerCommands>;
  /**
   * For `apply`: the plan the user approved (its diff and summary). The plan is computed again first and
   * must come out the same, or the call fails with FILE_CHANGED and touches nothing: what is applied is
   * what was seen (a recursive delete's summary counts what it removes, so it is compared too).
   */
  expectedPlan?: ApprovedPlan;
  /** Blobs the input names by id (see `ToolContext.blob`). */
  blob?: ToolContext["blob"];
}

/** What the user saw and approved of a mutate tool's plan. */
export interface ApprovedPlan {
  diff: string;
  summary: string;
}

const MODES: readonly string[] = ["run", "plan", "apply"];

export async function invokeTool(tools: readonly LocalTool[], name: string, input: unknown, opts: InvokeOptions): Promise<ToolResult> {
  if (!opts || typeof opts.scope?.resolve !== "function") throw new ToolError("INTERNAL", "invokeTool needs a scope");
  if (typeof name !== "string") throw new ToolError("UNKNOWN_TOOL", "The tool name must be a string");
  const matching = tools.filter((tool) => tool.name === name);
  const shownName = JSON.stringify(name.slice(0, 100));
  if (matching.length === 0) {
    throw new ToolError("UNKNOWN_TOOL", `Unknown tool ${shownName}`, { name: name.slice(0, 100), available: tools.map((t) => t.name) });
  }
  if (matching.length > 1) throw new ToolError("INVALID_DEFINITION", `More than one tool is named ${shownName}`);
  const tool = matching[0]!;
  const mode = opts.mode ?? (tool.class === "mutate" ? "plan" : "run");
  if (typeof mode !== "string" || !MODES.includes(mode)) {
    throw new ToolError("INVALID_MODE", `Unknown mode ${JSON.stringify(String(mode).slice(0, 20))}; use run, plan or apply`, {
      mode: String(mode).slice(0, 20),
    });
  }
  const ctx: ToolContext = { scope: opts.scope, mode };
  if (opts.signal) ctx.signal = opts.signal;
  if (opts.opener) ctx.opener = opts.opener;
  if (opts.blob) ctx.blob = opts.blob;
  if (tool.class === "mutate") {
    if (mode === "plan") return tool.plan(input, ctx);
    if (mode === "apply") {
      if (opts.expectedPlan !== undefined) {
        const now = await tool.plan(input, ctx).catch((error: unknown) => {
          // The approved plan was computed fine; failing now (a find gone, a file deleted) means the files changed.
          if (!(error instanceof ToolError)) throw error;
          throw new ToolError("FILE_CHANGED", `The files changed since this ${tool.name} was proposed: ${error.message}`, {
            tool: tool.name,
            cause: error.code,
          });
        });
        if (now.diff !== opts.expectedPlan.diff || now.summary !== opts.expectedPlan.summary) {
          throw new ToolError(
            "FILE_CHANGED",
            `The files changed since this ${tool.name} was proposed, so the approved change no longer describes it; nothing was changed. Propose it again.`,
            { tool: tool.name, diff: now.diff, summary: now.summary },
          );
        }
      }
      return tool.apply(input, ctx);
    }
    throw new ToolError("INVALID_MODE", `${tool.name} changes files: call it with mode "plan" (propose a diff) or "apply"`, { tool: tool.name, mode });
  }
  if (mode !== "run") {
    throw new ToolError("INVALID_MODE", `${tool.name} is a ${tool.class} tool: it only runs (mode "run"), it has no ${mode}`, { tool: tool.name, mode });
  }
  return tool.run(input, ctx);
}

export interface ToolDescription {
  name: string;
  description: string;
  inputSchema: object;
  class: ToolClass;
}

export function describeRoots(scope: Scope): string {
  const [first] = scope.roots;
  return `Allowed roots: ${scope.roots.join(", ")}. Every path must lie inside one of them; relative paths resolve against ${first}.`;
}

export function describeTool(tool: LocalTool, scope?: Scope): ToolDescription {
  let description = tool.description;
  if (tool.class === "mutate") description += " Proposes a change (shown as a diff) that the user approves before it is applied.";
  if (scope) description += ` ${describeRoots(scope)}`;
  // A JSON round trip drops TypeBox's symbol keys, leaving plain JSON Schema.
  const inputSchema = JSON.parse(JSON.stringify(tool.input)) as object;
  return { name: tool.name, description, inputSchema, class: tool.class };
}
