/**
 * A form generated from a tool's input schema (JSON Schema, as the device announced it), and the
 * reading of that form back into the tool's input. Flat properties get their own control (text,
 * number, checkbox, select, one-per-line list); an array of objects is a repeatable group of fields
 * (items added and removed by submit buttons, so without JavaScript: see `FormAction`); anything else
 * nested is edited as JSON. The device validates the input again in full: this only has to be
 * helpful, not authoritative.
 */

export type FieldKind = "text" | "textarea" | "number" | "checkbox" | "select" | "lines" | "json" | "group";

/** The submit buttons that change a group's items instead of running the tool: `_add=<field>`, `_remove=<field>.<index>`. */
export const ADD_ITEM = "_add";
export const REMOVE_ITEM = "_remove";

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
  /** Whether an empty text is a value (no `minLength`): edit_file's `replace` may be "", its `find` not. */
  allowsEmpty: boolean;
  /** An example value, from the schema's `examples`, else a likely one for the field's name. */
  example: string | undefined;
  /** For a group (an array of objects): each item's fields, and how many items it may have. */
  items?: FormField[][];
  itemLabel?: string;
  minItems?: number;
  maxItems?: number;
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
  minLength?: number;
  pattern?: string;
  items?: PropertySchema;
  anyOf?: PropertySchema[];
  properties?: Record<string, PropertySchema>;
  required?: string[];
  examples?: unknown[];
  minItems?: number;
  maxItems?: number;
}

const CONTROL_PREFIX = "arg.";
/** Strings this long (or of these names) get a multi-line box. */
const LONG_TEXT = 8192;
const LONG_TEXT_NAMES = new Set(["content", "text", "find", "replace", "body"]);

function kindOf(name: string, schema: PropertySchema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.every((v) => typeof v === "string")) return "select";
  const literals = schema.anyOf?.map((s) => (s as { const?: unknown } | null)?.const);
  if (literals && literals.length > 0 && literals.every((v) => typeof v === "string")) return "select";
  // "a string, or a list of them" (grep's include and exclude): one per line.
  if (schema.anyOf?.some((s) => s?.type === "array" && s.items?.type === "string") && schema.anyOf.every((s) => s?.type === "string" || s?.type === "array"))
    return "lines";
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
      if (schema.items?.type === "string") return "lines";
      return schema.items?.type === "object" && schema.items.properties && Object.keys(schema.items.properties).length > 0 ? "group" : "json";
    default:
      return "json";
  }
}

function optionsOf(schema: PropertySchema): string[] {
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  return (schema.anyOf ?? []).map((s) => String((s as { const?: unknown } | null)?.const));
}

function labelOf(name: string): string {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[_-]+/g, " ")
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function shown(value: unknown, kind: FieldKind): string {
  if (value === undefined || value === null) return "";
  if (kind === "lines" && Array.isArray(value)) return value.join("\n");
  if (kind === "json") return JSON.stringify(value, null, 2);
  return typeof value === "object" ? JSON.stringify(value) : `${value as string | number | boolean}`;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Likely values for common names, when the schema gives no `examples`. */
const NAMED_EXAMPLES: Record<string, string> = {
  path: "src/index.js",
  from: "notes/old.txt",
  to: "notes/new.txt",
  pattern: "TODO",
  include: "*.ts",
  exclude: "dist/**",
  find: "const total = a - b;",
  replace: "const total = a + b;",
  content: "Hello, world",
  expectedSha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
};

function exampleOf(name: string, schema: PropertySchema, kind: FieldKind): string | undefined {
  const given = Array.isArray(schema.examples) ? schema.examples[0] : undefined;
  if (given !== undefined) return shown(given, kind);
  if (kind === "checkbox" || kind === "select" || kind === "group") return undefined;
  if (kind === "number") return String(typeof schema.minimum === "number" ? Math.max(schema.minimum, Math.min(10, schema.maximum ?? 10)) : 10);
  if (kind === "lines") return name === "exclude" ? "dist/**\nnode_modules/**" : "*.ts\n*.js";
  return NAMED_EXAMPLES[name];
}

/** What a change to a group's items asks for: another item, or one taken out. */
export interface FormAction {
  add?: string;
  remove?: { field: string; index: number };
}

/** The action a submitted form asks for instead of a run (an "Add another" or "Remove" button), if any. */
export function formAction(body: FormBody): FormAction | undefined {
  const add = first(body[ADD_ITEM]);
  if (add) return { add };
  const remove = first(body[REMOVE_ITEM]);
  const match = remove ? /^(.+)\.(\d{1,3})$/.exec(remove) : null;
  return match ? { remove: { field: match[1]!, index: Number(match[2]) } } : undefined;
}

function field(
  name: string,
  control: string,
  announced: unknown,
  required: boolean,
  submitted: FormBody | undefined,
  action: FormAction | undefined,
): FormField {
  const property: PropertySchema = announced !== null && typeof announced === "object" ? announced : {};
  const kind = kindOf(name, property);
  const raw = submitted ? first(submitted[control]) : undefined;
  const integer = property.type === "integer";
  const base: FormField = {
    name,
    control,
    label: labelOf(name),
    kind,
    required,
    description: typeof property.description === "string" ? property.description : undefined,
    options: kind === "select" ? optionsOf(property) : [],
    min: typeof property.minimum === "number" ? property.minimum : undefined,
    max: typeof property.maximum === "number" ? property.maximum : undefined,
    step: kind === "number" ? (integer ? "1" : "any") : undefined,
    value: raw ?? (submitted ? "" : shown(property.default, kind)),
    checked: submitted ? raw !== undefined : property.default === true,
    allowsEmpty: !(typeof property.minLength === "number" && property.minLength > 0),
    example: exampleOf(name, property, kind),
  };
  if (kind !== "group") return base;
  const itemSchema = property.items!;
  const itemRequired = new Set(Array.isArray(itemSchema.required) ? itemSchema.required : []);
  const maxItems = Math.min(typeof property.maxItems === "number" ? property.maxItems : 100, 100);
  const minItems = typeof property.minItems === "number" ? property.minItems : 0;
  // Submitted items by index (`arg.edits.3.find`), in order; then the action's change.
  const indexes = new Set<number>();
  for (const key of Object.keys(submitted ?? {})) {
    const match = key.startsWith(`${control}.`) ? /^(\d{1,3})\./.exec(key.slice(control.length + 1)) : null;
    if (match) indexes.add(Number(match[1]));
  }
  let order = [...indexes].sort((a, b) => a - b).slice(0, maxItems);
  if (order.length === 0) order = [-1];
  if (action?.remove?.field === name) order = order.filter((_, position) => position !== action.remove!.index);
  if (action?.add === name && order.length < maxItems) order.push(-1);
  if (order.length === 0) order = [-1];
  const items = order.map((index, position) =>
    Object.entries(itemSchema.properties ?? {}).map(([subName, subSchema]) => {
      const sub = field(
        subName,
        `${control}.${position}.${subName}`,
        subSchema,
        itemRequired.has(subName),
        index < 0 ? undefined : renamed(submitted!, `${control}.${index}.`, `${control}.${position}.`),
        undefined,
      );
      return sub;
    }),
  );
  return { ...base, items, itemLabel: labelOf(name).replace(/s$/, ""), minItems, maxItems };
}

/** The submitted controls under `from` (one item's), named under `to` (its place after a removal). */
function renamed(body: FormBody, from: string, to: string): FormBody {
  const out: FormBody = {};
  for (const [key, value] of Object.entries(body)) if (key.startsWith(from)) out[to + key.slice(from.length)] = value;
  return out;
}

/** The form's fields, in the schema's property order, filled from `submitted` when given. */
export function formFields(schema: Record<string, unknown>, submitted?: FormBody, action?: FormAction): FormField[] {
  const properties = (schema.properties ?? {}) as Record<string, PropertySchema>;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  // Announcements are validated at hello (src/protocol/tool.ts); a row stored by an older server may
  // still hold a null property schema, which is then edited as JSON rather than failing the page.
  return Object.entries(properties).map(([name, announced]) => field(name, CONTROL_PREFIX + name, announced, required.has(name), submitted, action));
}

/** One field's value, or an error; `undefined` when left empty (and allowed to be). */
function readField(field: FormField, inItem = false): { value?: unknown; error?: string } {
  if (field.kind === "checkbox") return field.checked ? { value: true } : {};
  if (field.kind === "group") {
    const values: Record<string, unknown>[] = [];
    for (const [position, item] of (field.items ?? []).entries()) {
      // An item left wholly empty is no item.
      if (item.every((sub) => (sub.kind === "checkbox" ? !sub.checked : sub.value.trim() === ""))) continue;
      const value: Record<string, unknown> = {};
      for (const sub of item) {
        const read = readField(sub, true);
        if (read.error) return { error: `${field.itemLabel} ${position + 1}, ${sub.label}: ${read.error}` };
        if (read.value !== undefined) value[sub.name] = read.value;
      }
      values.push(value);
    }
    if (values.length === 0) return field.required ? { error: "this field is required." } : {};
    return { value: values };
  }
  const text = field.value;
  if (text.trim() === "") {
    // Inside an item, a text box is taken as typed even when empty: edit_file's replace "" deletes the found text.
    if (inItem && field.kind === "textarea" && field.allowsEmpty) return { value: text.replace(/\r\n/g, "\n") };
    return field.required ? { error: "this field is required." } : {};
  }
  switch (field.kind) {
    case "number": {
      const value = Number(text);
      if (!Number.isFinite(value) || (field.step === "1" && !Number.isInteger(value)))
        return { error: `“${text.slice(0, 40)}” is not a ${field.step === "1" ? "whole " : ""}number.` };
      return { value };
    }
    case "lines":
      return {
        value: text
          .split(/\r?\n/)
          .map((line) => line.trim())
          .filter((line) => line !== ""),
      };
    case "json":
      try {
        return { value: JSON.parse(text) };
      } catch (error) {
        return { error: `not valid JSON (${(error as Error).message}).` };
      }
    default:
      // Text is taken as typed (a path with spaces, content with trailing newlines).
      return { value: field.kind === "textarea" ? text.replace(/\r\n/g, "\n") : text };
  }
}

/** Reads the submitted form into the tool's input; an empty optional field is left out. */
export function readForm(schema: Record<string, unknown>, body: FormBody): ReadForm {
  const input: Record<string, unknown> = {};
  for (const field of formFields(schema, body)) {
    const read = readField(field);
    if (read.error) return { ok: false, error: `${field.label}: ${read.error}`, field: field.kind === "group" ? `${field.control}.0` : field.control };
    if (read.value !== undefined) input[field.name] = read.value;
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
