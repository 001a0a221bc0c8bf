/**
 * Input validation: runs before any tool code. The input is first copied into plain JSON data (so a `__proto__`
 * key stays an ordinary, rejected property and cannot reach an object's prototype), then defaults are applied and
 * the TypeBox schema is checked. Errors name the field as `edits[0].find`.
 */
import { Kind, type TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import { ToolError } from "./errors.js";

const MAX_DEPTH = 64;

/**
 * `Array.isArray` for values typed as arrays but checked at run time anyway (a JavaScript caller may pass
 * anything): unlike `Array.isArray`, it keeps the declared element type instead of widening it to `any`.
 */
export function isList(value: unknown): value is readonly unknown[] {
  return Array.isArray(value);
}
const MAX_NODES = 100_000;

/** Copies JSON-shaped data; anything else (functions, symbols, bigint, cycles, non-plain objects) is refused. */
export function copyJsonInput(value: unknown): unknown {
  let nodes = 0;
  const visit = (v: unknown, depth: number, where: string): unknown => {
    if (++nodes > MAX_NODES) throw invalid(where, "input is too large");
    if (depth > MAX_DEPTH) throw invalid(where, "input is nested too deeply");
    if (v === null || typeof v === "string" || typeof v === "boolean") return v;
    if (typeof v === "number") {
      if (!Number.isFinite(v)) throw invalid(where, "numbers must be finite");
      return v;
    }
    if (Array.isArray(v)) return v.map((item, i) => visit(item, depth + 1, `${where}[${i}]`));
    if (typeof v === "object") {
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw invalid(where, "expected plain JSON data");
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(v)) {
        const item = (v as Record<string, unknown>)[key];
        if (item === undefined) continue; // JSON.stringify would drop it too
        Object.defineProperty(out, key, { value: visit(item, depth + 1, joinField(where, key)), enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    throw invalid(where, `a ${typeof v} is not JSON data`);
  };
  return visit(value, 0, "");
}

function joinField(base: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? (base ? `${base}.${key}` : key) : `${base}[${JSON.stringify(key)}]`;
}

/** `/edits/0/find` to `edits[0].find`. */
export function fieldFromPointer(pointer: string): string {
  if (pointer === "") return "";
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, seg) => (/^\d+$/.test(seg) ? `${acc}[${seg}]` : joinField(acc, seg)), "");
}

function invalid(field: string, message: string, extra?: object): ToolError {
  const where = field === "" ? "input" : `"${field}"`;
  return new ToolError("INVALID_INPUT", `Invalid ${where}: ${message}`, { field, ...extra });
}

export type Validator = (input: unknown) => unknown;

export function compileValidator(schema: TSchema, toolName: string): Validator {
  if (!schema || typeof schema !== "object" || schema[Kind] !== "Object") {
    throw new ToolError("INVALID_DEFINITION", `Tool ${toolName}: input must be a TypeBox object schema (Type.Object)`);
  }
  const check = TypeCompiler.Compile(schema);
  return (input: unknown) => {
    const value = Value.Default(schema, copyJsonInput(input === undefined ? {} : input));
    if (check.Check(value)) return value;
    const errors = [];
    for (const error of check.Errors(value)) {
      errors.push({ field: fieldFromPointer(error.path), message: error.message });
      if (errors.length >= 5) break;
    }
    const first = errors[0] ?? { field: "", message: "does not match the schema" };
    const message =
      first.message === "Unexpected property"
        ? `unknown property (this tool takes: ${Object.keys((schema as { properties?: object }).properties ?? {}).join(", ")})`
        : first.message;
    throw invalid(first.field, message, { errors, tool: toolName });
  };
}
