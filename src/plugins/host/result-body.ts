import type { ToolClass } from "../../protocol/index.js";

/**
 * Bounds on a device's result body, by the class of the tool that was called (known from the call
 * id before a byte of the body is read). A read result carries at most `read_file`'s 1 MB of file text
 * (or 1000 directory entries, 200 grep lines of 1 KB), which JSON escaping can grow a few times; a
 * plan carries a diff of the same order; an action answers a few fields.
 */
export const RESULT_BODY_LIMITS: Record<ToolClass, number> = {
  read: 8 * 1024 * 1024,
  mutate: 8 * 1024 * 1024,
  action: 256 * 1024,
};

/** The largest of them: the route's own Fastify `bodyLimit`. */
export const MAX_RESULT_BODY = Math.max(...Object.values(RESULT_BODY_LIMITS));

/** No tool result is nested deeper than this; deeper is hostile (the parser's recursion is the cost). */
export const MAX_RESULT_DEPTH = 64;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The deepest nesting of `{`/`[` in a JSON text, stopping as soon as it passes `limit`: one pass over
 * the bytes, no allocation, so a body of nested empty arrays is refused before `JSON.parse` sees it.
 */
export function nestingExceeds(json: Buffer, limit = MAX_RESULT_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const byte = json[i]!;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
