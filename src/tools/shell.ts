/**
 * Named shell-outs: domain tools such as `convert_ifc` run one fixed executable with an argv built from a fixed
 * template. Only declared arguments vary, each becomes exactly one argv element (never split, never seen by a
 * shell), and path arguments are resolved through the scope. There is deliberately no general exec tool.
 *
 *   defineShellTool({
 *     name: "convert_ifc",
 *     description: "Convert an IFC model",
 *     command: ["ifctool", "convert", "{from}", "--to", "{to}", ["--merge", "{folder}"]],
 *     args: {
 *       from: { type: "enum", values: ["ifc", "step"] },
 *       to: { type: "enum", values: ["ifc", "glb"] },
 *       folder: { type: "path", optional: true },
 *     },
 *   })
 *
 * `{name}` is replaced by the argument's value, also inside a larger element (`--out={file}`). A nested array is
 * an optional group, dropped whole when one of its arguments is absent (or a boolean is false).
 *
 * A path argument is checked when the call starts; the program then opens it by name, so a tree that changes
 * during the run is not pinned the way the built-in tools pin it. The program itself is trusted.
 */
import { Type, type TObject, type TSchema } from "@sinclair/typebox";
import fs from "node:fs";
import path from "node:path";
import { defineLocalTool, type LocalTool, type ToolContext } from "./define.js";
import { ToolError } from "./errors.js";
import { findExecutable, runProcess } from "./process.js";
import { MAX_PATH_LENGTH } from "./paths.js";
import { isList } from "./validate.js";

interface ArgBase {
  description?: string;
  optional?: boolean;
}

export type ShellArgSpec =
  | (ArgBase & { type: "path"; mustExist?: boolean; followSymlinks?: boolean })
  | (ArgBase & { type: "string"; pattern?: string; maxLength?: number; allowLeadingDash?: boolean })
  | (ArgBase & { type: "enum"; values: readonly string[] })
  | (ArgBase & { type: "integer"; minimum?: number; maximum?: number })
  | (ArgBase & { type: "boolean"; flag: string });

export type CommandElement = string | readonly string[];

export interface ShellToolDefinition {
  name: string;
  description: string;
  /** First element: the executable, a bare name looked up on PATH or an absolute path. */
  command: readonly CommandElement[];
  args?: Record<string, ShellArgSpec>;
  /** Shell tools run on arrival; they cannot produce a diff, so they are never `mutate`. Default `action`. */
  class?: "read" | "action";
  timeoutMs?: number;
  /** Per stream; the rest is counted, not kept. Default 256 KB. */
  maxOutputBytes?: number;
  /** Working directory; default the first root. Must be inside the scope. */
  cwd?: string;
  /** Extra environment variables on top of the device's environment. */
  env?: Record<string, string>;
}

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const ARG_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function placeholdersIn(element: string): string[] {
  return [...element.matchAll(PLACEHOLDER)].map((m) => m[1]!);
}

function bad(name: string, message: string): ToolError {
  return new ToolError("INVALID_DEFINITION", `Shell tool ${name}: ${message}`);
}

function schemaFor(spec: ShellArgSpec): TSchema {
  const description = spec.description ? { description: spec.description } : {};
  switch (spec.type) {
    case "path":
      return Type.String({ minLength: 1, maxLength: MAX_PATH_LENGTH, ...description });
    case "string":
      return Type.String({ maxLength: spec.maxLength ?? 1000, ...description });
    case "enum":
      return Type.Union(
        spec.values.map((v) => Type.Literal(v)),
        description,
      );
    case "integer":
      return Type.Integer({
        ...(spec.minimum !== undefined ? { minimum: spec.minimum } : {}),
        ...(spec.maximum !== undefined ? { maximum: spec.maximum } : {}),
        ...description,
      });
    case "boolean":
      return Type.Boolean({ default: false, ...description });
  }
}

export function defineShellTool(def: ShellToolDefinition): LocalTool {
  const name = def?.name;
  if (!def || typeof def !== "object") throw bad(String(name), "definition must be an object");
  if (!isList(def.command) || def.command.length === 0) throw bad(name, "command must be a non-empty array");
  const [binary, ...template] = def.command;
  if (typeof binary !== "string" || binary === "" || placeholdersIn(binary).length > 0) throw bad(name, "the executable (command[0]) must be a fixed string");
  if (!path.isAbsolute(binary) && (binary.includes("/") || binary.includes("\\"))) {
    throw bad(name, "the executable must be a bare name (looked up on PATH) or an absolute path, not a relative path");
  }
  const args = def.args ?? {};
  const used = checkTemplate(name, template, args);
  const { input, patterns } = inputOf(name, args, used);
  const program: Program = {
    tool: name,
    binary,
    env: def.env ? { ...process.env, ...def.env } : process.env,
    timeoutMs: def.timeoutMs ?? 60_000,
    maxOutputBytes: def.maxOutputBytes ?? 256 * 1024,
  };

  return defineLocalTool({
    name,
    description: def.description,
    input,
    class: def.class ?? "action",
    async run(values, ctx) {
      const resolved = await resolveArgs(args, patterns, values, ctx);
      const argv = argvOf(template, resolved);
      const cwd = def.cwd ? await ctx.scope.resolve(def.cwd) : ctx.scope.roots[0]!;
      return runProgram(program, argv, cwd, ctx.signal);
    },
  });
}

/**
 * Checks the command's elements against the declared arguments: every placeholder is declared, and an
 * optional one (or a boolean, a whole element of its own) sits in an optional group. Returns the
 * arguments the command uses.
 */
function checkTemplate(name: string, template: readonly CommandElement[], args: Record<string, ShellArgSpec>): Set<string> {
  const used = new Set<string>();
  for (const element of template) {
    const parts = typeof element === "string" ? [element] : element;
    if (!isList(parts) || parts.length === 0 || parts.some((p) => typeof p !== "string" || p.includes("\0"))) {
      throw bad(name, "command elements are strings or non-empty arrays of strings (optional groups)");
    }
    for (const part of parts) {
      for (const placeholder of placeholdersIn(part)) {
        const spec = args[placeholder];
        if (!spec) throw bad(name, `{${placeholder}} is used in the command but not declared in args`);
        if (spec.type === "boolean" && part !== `{${placeholder}}`) throw bad(name, `boolean {${placeholder}} must be a whole command element`);
        if ((spec.optional || spec.type === "boolean") && typeof element === "string") {
          throw bad(name, `{${placeholder}} is optional, so it must sit in an optional group (a nested array)`);
        }
        used.add(placeholder);
      }
    }
  }
  return used;
}

/** The tool's input schema from the declared arguments (each checked), and the compiled patterns of its string arguments. */
function inputOf(name: string, args: Record<string, ShellArgSpec>, used: Set<string>): { input: TObject; patterns: Map<string, RegExp> } {
  const properties: Record<string, TSchema> = {};
  const patterns = new Map<string, RegExp>();
  for (const [argName, spec] of Object.entries(args)) {
    if (!ARG_NAME.test(argName)) throw bad(name, `argument name ${JSON.stringify(argName)} is not an identifier`);
    if (!used.has(argName)) throw bad(name, `argument ${argName} is declared but never used in the command`);
    if (spec.type === "enum" && (!Array.isArray(spec.values) || spec.values.length === 0)) throw bad(name, `enum ${argName} needs values`);
    if (spec.type === "boolean" && (typeof spec.flag !== "string" || spec.flag === "")) throw bad(name, `boolean ${argName} needs a flag`);
    if (spec.type === "string" && spec.pattern !== undefined) {
      try {
        patterns.set(argName, new RegExp(`^(?:${spec.pattern})$`, "u"));
      } catch (error) {
        throw bad(name, `pattern of ${argName} is not a valid regular expression: ${(error as Error).message}`);
      }
    }
    const schema = schemaFor(spec);
    properties[argName] = spec.optional && spec.type !== "boolean" ? Type.Optional(schema) : spec.type === "boolean" ? Type.Optional(schema) : schema;
  }
  return { input: Type.Object(properties, { additionalProperties: false }), patterns };
}

/** Each argument's argv text for this call (undefined: absent, or a boolean left false); path arguments resolved through the scope. */
async function resolveArgs(
  args: Record<string, ShellArgSpec>,
  patterns: Map<string, RegExp>,
  given: Record<string, unknown>,
  ctx: ToolContext,
): Promise<Map<string, string | undefined>> {
  const resolved = new Map<string, string | undefined>();
  for (const [argName, spec] of Object.entries(args)) {
    const value = given[argName];
    if (value === undefined || value === false) {
      resolved.set(argName, undefined);
      continue;
    }
    switch (spec.type) {
      case "path": {
        const real = await ctx.scope.resolve(value as string, { followFinal: spec.followSymlinks ?? true });
        if (spec.mustExist && !fs.existsSync(real)) throw new ToolError("NOT_FOUND", `${JSON.stringify(value)} does not exist`, { field: argName });
        resolved.set(argName, real);
        break;
      }
      case "string":
        resolved.set(argName, checkedString(argName, spec, patterns.get(argName), value as string));
        break;
      case "enum":
        resolved.set(argName, value as string);
        break;
      case "boolean":
        resolved.set(argName, spec.flag);
        break;
      case "integer":
        resolved.set(argName, (value as number).toString());
    }
  }
  return resolved;
}

function checkedString(argName: string, spec: Extract<ShellArgSpec, { type: "string" }>, pattern: RegExp | undefined, text: string): string {
  if (text.includes("\0")) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": contains a NUL byte`, { field: argName });
  // A value starting with "-" would be read as an option by most programs.
  if (text.startsWith("-") && !spec.allowLeadingDash) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": may not start with "-"`, { field: argName });
  if (pattern && !pattern.test(text)) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": does not match ${spec.pattern}`, { field: argName });
  return text;
}

/** The argv after the executable: each placeholder replaced by its value, an optional group dropped whole when one of its values is absent. */
function argvOf(template: readonly CommandElement[], resolved: Map<string, string | undefined>): string[] {
  const substitute = (part: string): string | undefined => {
    let missing = false;
    const out = part.replace(PLACEHOLDER, (_, key: string) => {
      const v = resolved.get(key);
      if (v === undefined) missing = true;
      return v ?? "";
    });
    return missing ? undefined : out;
  };
  const argv: string[] = [];
  for (const element of template) {
    if (typeof element === "string") {
      argv.push(substitute(element)!);
      continue;
    }
    const group: (string | undefined)[] = element.map(substitute);
    if (group.every((g) => g !== undefined)) argv.push(...group);
  }
  return argv;
}

/** What a shell tool runs, fixed when it is defined. */
interface Program {
  tool: string;
  binary: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  maxOutputBytes: number;
}

/** Runs the program and reports its exit, its output (bounded) and how long it took; a program that cannot start is `COMMAND_NOT_FOUND`. */
async function runProgram(program: Program, argv: string[], cwd: string, signal: AbortSignal | undefined) {
  const { binary, env, timeoutMs, maxOutputBytes } = program;
  const executable = findExecutable(binary, env);
  if (!executable)
    throw new ToolError("COMMAND_NOT_FOUND", `The program ${JSON.stringify(binary)} for ${program.tool} is not installed on this device`, { command: binary });
  let output;
  try {
    output = await runProcess(executable, argv, { cwd, env, timeoutMs, maxOutputBytes, ...(signal ? { signal } : {}) });
  } catch (error) {
    if (error instanceof ToolError) throw error;
    const errno = (error as NodeJS.ErrnoException).code;
    if (errno === "ENOENT" || errno === "EACCES")
      throw new ToolError("COMMAND_NOT_FOUND", `Could not start ${JSON.stringify(binary)}: ${errno}`, { command: binary });
    throw error;
  }
  return {
    command: [executable, ...argv],
    exitCode: output.exitCode,
    signal: output.signal,
    ok: output.exitCode === 0,
    stdout: output.stdout.toString("utf8"),
    stderr: output.stderr.toString("utf8"),
    truncated: output.stdoutOmittedBytes > 0 || output.stderrOmittedBytes > 0,
    limitBytes: maxOutputBytes,
    omittedStdoutBytes: output.stdoutOmittedBytes,
    omittedStderrBytes: output.stderrOmittedBytes,
    durationMs: output.durationMs,
  };
}
