/**
 * A form generated from a tool's input schema (JSON Schema, as the device announced it), and the
 * reading of that form back into the tool's input. Flat properties get their own control (text,
 * number, checkbox, select, one-per-line list); anything nested is edited as JSON. The device
 * validates the input again in full: this only has to be helpful, not authoritative.
 */

export type FieldKind = "text" | "textarea" | "number" | "checkbox" | "select" | "lines" | "json";

export interface FormField {
  /** The property name in the tool's input. */
  name: string;
  /** The form control's name (`arg.<property>`), apart from the page's own fields. */
  control: string;
  label: string;
  kind: FieldKind;
  required: boolean;
  description: string | undefined;
  options: string[];
  min: number | undefined;
  max: number | undefined;
  step: string | undefined;
  /** What the control shows: the submitted value, else the schema's default. */
  value: string;
  checked: boolean;
}

export type FormBody = Record<string, string | string[] | undefined>;

export type ReadForm = { ok: true; input: Record<string, unknown> } | { ok: false; error: string; field: string };

interface PropertySchema {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  pattern?: string;
  items?: PropertySchema;
  anyOf?: PropertySchema[];
}

const CONTROL_PREFIX = "arg.";
/** Strings this long (or of these names) get a multi-line box. */
const LONG_TEXT = 8192;
const LONG_TEXT_NAMES = new Set(["content", "text", "find", "replace", "body"]);

function kindOf(name: string, schema: PropertySchema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.every((v) => typeof v === "string")) return "select";
  const literals = schema.anyOf?.map((s) => (s as { const?: unknown } | null)?.const);
  if (literals && literals.length > 0 && literals.every((v) => typeof v === "string")) return "select";
  switch (schema.type) {
    case "string":
      if (LONG_TEXT_NAMES.has(name)) return "textarea";
      if (schema.maxLength === undefined) return schema.pattern === undefined ? "textarea" : "text";
      return schema.maxLength > LONG_TEXT ? "textarea" : "text";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "checkbox";
    case "array":
      return schema.items?.type === "string" ? "lines" : "json";
    default:
      return "json";
  }
}

function optionsOf(schema: PropertySchema): string[] {
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  return (schema.anyOf ?? []).map((s) => String((s as { const?: unknown } | null)?.const));
}

function labelOf(name: string): string {
  const words = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function shown(value: unknown, kind: FieldKind): string {
  if (value === undefined || value === null) return "";
  if (kind === "lines" && Array.isArray(value)) return value.join("\n");
  if (kind === "json") return JSON.stringify(value, null, 2);
  return String(value);
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The form's fields, in the schema's property order, filled from `submitted` when given. */
export function formFields(schema: Record<string, unknown>, submitted?: FormBody): FormField[] {
  const properties = (schema.properties ?? {}) as Record<string, PropertySchema>;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  // Announcements are validated at hello (src/protocol/tool.ts); a row stored by an older server may
  // still hold a null property schema, which is then edited as JSON rather than failing the page.
  return Object.entries(properties).map(([name, announced]) => {
    const property: PropertySchema = announced !== null && typeof announced === "object" ? announced : {};
    const kind = kindOf(name, property);
    const control = CONTROL_PREFIX + name;
    const raw = submitted ? first(submitted[control]) : undefined;
    const integer = property.type === "integer";
    return {
      name,
      control,
      label: labelOf(name),
      kind,
      required: required.has(name),
      description: typeof property.description === "string" ? property.description : undefined,
      options: kind === "select" ? optionsOf(property) : [],
      min: typeof property.minimum === "number" ? property.minimum : undefined,
      max: typeof property.maximum === "number" ? property.maximum : undefined,
      step: kind === "number" ? (integer ? "1" : "any") : undefined,
      value: raw ?? (submitted ? "" : shown(property.default, kind)),
      checked: submitted ? raw !== undefined : property.default === true,
    };
  });
}

/** Reads the submitted form into the tool's input; an empty optional field is left out. */
export function readForm(schema: Record<string, unknown>, body: FormBody): ReadForm {
  const input: Record<string, unknown> = {};
  for (const field of formFields(schema, body)) {
    const fail = (error: string): ReadForm => ({ ok: false, error: `${field.label}: ${error}`, field: field.control });
    if (field.kind === "checkbox") {
      if (field.checked) input[field.name] = true;
      continue;
    }
    const text = field.value;
    if (text.trim() === "") {
      if (field.required) return fail("this field is required.");
      continue;
    }
    switch (field.kind) {
      case "number": {
        const value = Number(text);
        if (!Number.isFinite(value) || (field.step === "1" && !Number.isInteger(value))) return fail(`“${text.slice(0, 40)}” is not a ${field.step === "1" ? "whole " : ""}number.`);
        input[field.name] = value;
        break;
      }
      case "lines":
        input[field.name] = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== "");
        break;
      case "json":
        try {
          input[field.name] = JSON.parse(text);
        } catch (error) {
          return fail(`not valid JSON (${(error as Error).message}).`);
        }
        break;
      default:
        // Text is taken as typed (a path with spaces, content with trailing newlines).
        input[field.name] = field.kind === "textarea" ? text.replace(/\r\n/g, "\n") : text;
    }
  }
  return { ok: true, input };
}

export type DiffLineKind = "added" | "removed" | "hunk" | "header" | "context";

/** A unified diff as lines with their kind, for colouring added and removed lines. */
export function diffLines(diff: string): Array<{ kind: DiffLineKind; text: string }> {
  const lines = diff.endsWith("\n") ? diff.slice(0, -1).split("\n") : diff.split("\n");
  // A hunk header says how many old and new lines follow; outside hunks, lines are file headers
  // (so a removed line "--x" inside a hunk is never taken for a "---" header).
  let oldLeft = 0;
  let newLeft = 0;
  return lines.map((text) => {
    const hunk = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(text);
    if (hunk) {
      oldLeft = hunk[1] === undefined ? 1 : Number(hunk[1]);
      newLeft = hunk[2] === undefined ? 1 : Number(hunk[2]);
      return { kind: "hunk", text };
    }
    if (oldLeft <= 0 && newLeft <= 0) return { kind: "header", text };
    if (text.startsWith("\\")) return { kind: "context", text };
    if (text.startsWith("+")) {
      newLeft--;
      return { kind: "added", text };
    }
    if (text.startsWith("-")) {
      oldLeft--;
      return { kind: "removed", text };
    }
    oldLeft--;
    newLeft--;
    return { kind: "context", text };
  });
}
