/**
 * A tool on the wire: its name rule, its class and modes, and the shape of an announcement. The tools
 * library (`src/tools/define.ts`) checks a definition against the same name rule, so a tool the device
 * can define is a tool the server accepts, and nothing else is.
 */
import { Type, type Static } from "@sinclair/typebox";

/**
 * The one tool-name rule: a letter, then letters, digits, `_` or `-`, 64 characters at most (the MCP
 * alphabet without `.`, `/` or `:`). A name is a path segment on the `/devices` page, so `.` and `..`,
 * which a browser normalises away, can never be one.
 */
export const TOOL_NAME_PATTERN = "^[A-Za-z][A-Za-z0-9_-]{0,63}$";
export const TOOL_NAME = new RegExp(TOOL_NAME_PATTERN);
export const ToolName = Type.String({ pattern: TOOL_NAME_PATTERN, maxLength: 64 });

/** `read` and `action` tools run; `mutate` tools plan (an exact diff, disk untouched) then apply. */
export const ToolClassSchema = Type.Union([Type.Literal("read"), Type.Literal("mutate"), Type.Literal("action")]);
export type ToolClass = Static<typeof ToolClassSchema>;

/**
 * What a tool's definition may say about its effects beyond its class (MCP's tool annotations):
 * `destructive` if it may remove or replace what is there (rather than only add), `idempotent` if
 * calling it again with the same input changes nothing more.
 */
export interface ToolHints {
  destructive?: boolean;
  idempotent?: boolean;
}

/**
 * A tool's hints, complete: its own where it gives them, else its class's. A read tool changes
 * nothing (so it is idempotent and never destructive); an action tool acts on the screen, not on
 * data; a mutate tool may replace or remove, and is not assumed idempotent.
 */
export function toolHints(toolClass: ToolClass, own: ToolHints = {}): Required<ToolHints> {
  if (toolClass === "read") return { destructive: false, idempotent: true };
  const byClass = toolClass === "action" ? { destructive: false, idempotent: false } : { destructive: true, idempotent: false };
  return { ...byClass, ...own };
}

/** `run` for read and action tools; `plan` then `apply` for mutate tools. */
export const ToolModeSchema = Type.Union([Type.Literal("run"), Type.Literal("plan"), Type.Literal("apply")]);
export type ToolMode = Static<typeof ToolModeSchema>;

/** Any JSON value but `null`: an `enum` offering null cannot become a form option. */
const NonNullJson = Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Array(Type.Unknown()), Type.Object({})]);

/**
 * One property of a tool's input, as far as the server reads it (the form on `/devices` and the
 * assistant's schema). Other JSON Schema keywords pass through untouched; the device validates the
 * input in full.
 */
const PropertySchema = Type.Object({
  type: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 16 })])),
  enum: Type.Optional(Type.Array(NonNullJson, { maxItems: 1024 })),
  anyOf: Type.Optional(Type.Array(Type.Object({}), { maxItems: 1024 })),
  oneOf: Type.Optional(Type.Array(Type.Object({}), { maxItems: 1024 })),
  allOf: Type.Optional(Type.Array(Type.Object({}), { maxItems: 1024 })),
  items: Type.Optional(Type.Object({})),
  properties: Type.Optional(Type.Record(Type.String(), Type.Object({}))),
  description: Type.Optional(Type.String({ maxLength: 8192 })),
});

/** A tool's input: a JSON Schema object whose properties are schemas (MCP's `inputSchema`). */
export const ToolInputSchema = Type.Object({
  type: Type.Literal("object"),
  properties: Type.Optional(Type.Record(Type.String(), PropertySchema)),
  required: Type.Optional(Type.Array(Type.String(), { maxItems: 1024 })),
});

/** A tool as a device announces it: the MCP triple plus its class. */
export const AnnouncedToolSchema = Type.Object(
  {
    name: ToolName,
    description: Type.String({ maxLength: 8192 }),
    inputSchema: ToolInputSchema,
    class: ToolClassSchema,
  },
  { additionalProperties: false },
);
/** The announced schema is plain JSON Schema; code reading it goes through `Record` lookups. */
export type AnnouncedTool = Omit<Static<typeof AnnouncedToolSchema>, "inputSchema"> & { inputSchema: Record<string, unknown> };

/** The first name announced twice, if any: a device's tool names are unique. */
export function duplicateToolName(tools: readonly { name: string }[]): string | undefined {
  const names = new Set<string>();
  for (const tool of tools) {
    if (names.has(tool.name)) return tool.name;
    names.add(tool.name);
  }
  return undefined;
}
