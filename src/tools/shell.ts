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
import { defineLocalTool, type LocalTool } from "./define.js";
import { ToolError } from "./errors.js";
import { findExecutable, runProcess } from "./process.js";
import { MAX_PATH_LENGTH } from "./paths.js";

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
      return Type.Integer({ ...(spec.minimum !== undefined ? { minimum: spec.minimum } : {}), ...(spec.maximum !== undefined ? { maximum: spec.maximum } : {}), ...description });
    case "boolean":
      return Type.Boolean({ default: false, ...description });
  }
}

export function defineShellTool(def: ShellToolDefinition): LocalTool {
  const name = def?.name;
  if (!def || typeof def !== "object") throw bad(String(name), "definition must be an object");
  if (!Array.isArray(def.command) || def.command.length === 0) throw bad(name, "command must be a non-empty array");
  const [binary, ...template] = def.command;
  if (typeof binary !== "string" || binary === "" || placeholdersIn(binary).length > 0) throw bad(name, "the executable (command[0]) must be a fixed string");
  if (!path.isAbsolute(binary) && (binary.includes("/") || binary.includes("\\"))) {
    throw bad(name, "the executable must be a bare name (looked up on PATH) or an absolute path, not a relative path");
  }
  const args = def.args ?? {};
  const used = new Set<string>();
  for (const element of template) {
    const parts = typeof element === "string" ? [element] : element;
    if (!Array.isArray(parts) || parts.length === 0 || parts.some((p) => typeof p !== "string" || p.includes("\0"))) {
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
  const input: TObject = Type.Object(properties, { additionalProperties: false });
  const timeoutMs = def.timeoutMs ?? 60_000;
  const maxOutputBytes = def.maxOutputBytes ?? 256 * 1024;
  const env = def.env ? { ...process.env, ...def.env } : process.env;

  return defineLocalTool({
    name,
    description: def.description,
    input,
    class: def.class ?? "action",
    async run(values, ctx) {
      const given = values as Record<string, unknown>;
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
          case "string": {
            const text = value as string;
            if (text.includes("\0")) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": contains a NUL byte`, { field: argName });
            // A value starting with "-" would be read as an option by most programs.
            if (text.startsWith("-") && !spec.allowLeadingDash) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": may not start with "-"`, { field: argName });
            const pattern = patterns.get(argName);
            if (pattern && !pattern.test(text)) throw new ToolError("INVALID_INPUT", `Invalid "${argName}": does not match ${spec.pattern}`, { field: argName });
            resolved.set(argName, text);
            break;
          }
          case "boolean":
            resolved.set(argName, spec.flag);
            break;
          default:
            resolved.set(argName, String(value));
        }
      }
      const argv: string[] = [];
      const substitute = (part: string): string | undefined => {
        let missing = false;
        const out = part.replace(PLACEHOLDER, (_, key: string) => {
          const v = resolved.get(key);
          if (v === undefined) missing = true;
          return v ?? "";
        });
        return missing ? undefined : out;
      };
      for (const element of template) {
        if (typeof element === "string") {
          argv.push(substitute(element)!);
          continue;
        }
        const group: (string | undefined)[] = element.map(substitute);
        if (group.every((g) => g !== undefined)) argv.push(...(group as string[]));
      }
      const executable = findExecutable(binary, env);
      if (!executable) throw new ToolError("COMMAND_NOT_FOUND", `The program ${JSON.stringify(binary)} for ${name} is not installed on this device`, { command: binary });
      const cwd = def.cwd ? await ctx.scope.resolve(def.cwd) : ctx.scope.roots[0]!;
      let output;
      try {
        output = await runProcess(executable, argv, { cwd, env, timeoutMs, maxOutputBytes, ...(ctx.signal ? { signal: ctx.signal } : {}) });
      } catch (error) {
        if (error instanceof ToolError) throw error;
        const errno = (error as NodeJS.ErrnoException).code;
        if (errno === "ENOENT" || errno === "EACCES") throw new ToolError("COMMAND_NOT_FOUND", `Could not start ${JSON.stringify(binary)}: ${errno}`, { command: binary });
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
    },
  });
}
