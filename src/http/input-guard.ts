/**
 * The edge of every route: input that no handler should ever see is refused here, once, as a 400.
 *
 * - JSON nested deeper than `MAX_JSON_DEPTH` is refused by a linear scan before `JSON.parse` runs, so
 *   a 5,000-deep body costs one pass over its bytes instead of recursion further down (better-auth
 *   re-serialises bodies and overflowed the stack: a 500 `RangeError`).
 * - A NUL character or a lone UTF-16 surrogate in a path parameter, the query, or any string (or key)
 *   of a parsed body is refused: PostgreSQL cannot store either in text (it answers an error, which
 *   became a 500 in a dozen places), and no legitimate name, id, path or file content carries one
 *   (invalid UTF-8 bytes arrive as U+FFFD, which is stored fine).
 *
 * Headers need no check here: Node's HTTP parser refuses NUL, CR and LF in them, and their other bytes
 * arrive as Latin-1 characters, which PostgreSQL stores.
 *
 * Registered first in the app so that every later plugin's routes (and child contexts, which copy the
 * parsers when they are created) inherit both the parser and the hook.
 */
import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { badRequest } from "./errors.js";

/** Deeper than any request Tether or better-auth defines (a tool's input schema is a few levels). */
export const MAX_JSON_DEPTH = 64;

export const INVALID_CHARACTERS = "INVALID_CHARACTERS";
export const TOO_DEEP = "JSON_TOO_DEEP";

/**
 * Whether `text` opens more than `limit` arrays or objects inside one another, counted over the raw
 * JSON text (brackets inside strings are skipped). Malformed JSON is left for the parser to refuse.
 */
export function exceedsJsonDepth(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Jump to the closing quote (one not escaped by an odd run of backslashes): strings are most of
      // a large body, and indexOf crosses them far faster than a loop over their characters.
      let end = i;
      do {
        end = text.indexOf('"', end + 1);
        if (end === -1) return false;
      } while (escaped(text, end));
      i = end;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > limit) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}

function escaped(text: string, at: number): boolean {
  let backslashes = 0;
  while (text.charCodeAt(at - 1 - backslashes) === 0x5c /* \ */) backslashes++;
  return backslashes % 2 === 1;
}

// Code units, not code points (no `u` flag): NUL, a high surrogate not followed by a low one, or a low
// one not preceded by a high one.
// eslint-disable-next-line no-control-regex -- NUL is exactly the character PostgreSQL cannot store
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** False for a NUL or a surrogate half without its partner: text PostgreSQL refuses. */
export function isStorableText(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/**
 * The first place in `value` (a parsed body, query or params object) holding text PostgreSQL refuses,
 * as a dotted path ("" for the value itself), or null when everything is storable. Iterative, so
 * even a value built by a custom parser cannot overflow the stack here. Every request body passes
 * here, so the walk keeps no paths: only a value that fails is walked again to name the place.
 */
export function findUnstorableText(value: unknown): string | null {
  return holdsUnstorableText(value) ? pathToUnstorableText(value) : null;
}

function holdsUnstorableText(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const current = pending.pop();
    if (typeof current === "string") {
      if (!isStorableText(current)) return true;
    } else if (Array.isArray(current)) {
      for (const item of current) pending.push(item);
    } else if (current !== null && typeof current === "object" && !Buffer.isBuffer(current)) {
      for (const key in current) {
        if (!Object.hasOwn(current, key)) continue;
        if (!isStorableText(key)) return true;
        pending.push((current as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

function pathToUnstorableText(value: unknown): string | null {
  const pending: Array<[unknown, string]> = [[value, ""]];
  while (pending.length > 0) {
    const [current, path] = pending.pop()!;
    if (typeof current === "string") {
      if (!isStorableText(current)) return path;
    } else if (Array.isArray(current)) {
      current.forEach((item, index) => pending.push([item, path ? `${path}.${index}` : String(index)]));
    } else if (current !== null && typeof current === "object" && !Buffer.isBuffer(current)) {
      for (const [key, item] of Object.entries(current)) {
        const at = path ? `${path}.${key}` : key;
        if (!isStorableText(key)) return at;
        pending.push([item, at]);
      }
    }
  }
  return null;
}

function refuseUnstorable(where: string, path: string): never {
  const field = path ? ` (at "${[...path].map((c) => (isStorableText(c) ? c : "?")).join("")}")` : "";
  throw badRequest(INVALID_CHARACTERS, `The ${where}${field} contains a NUL character or invalid Unicode, which cannot be accepted`);
}

function checkRequest(request: FastifyRequest): void {
  for (const [where, value] of [
    ["path", request.params],
    ["query", request.query],
    ["body", request.body],
  ] as const) {
    const path = findUnstorableText(value);
    if (path !== null) refuseUnstorable(where, path);
  }
}

export const inputGuardPlugin = fp(
  async (fastify) => {
    // Fastify's own JSON parser (prototype-poisoning checks included), behind the depth scan.
    const parseJson = fastify.getDefaultJsonParser("error", "error");
    fastify.removeContentTypeParser("application/json");
    fastify.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
      const text = body as string;
      if (exceedsJsonDepth(text, MAX_JSON_DEPTH)) {
        done(badRequest(TOO_DEEP, `Request body is nested deeper than ${MAX_JSON_DEPTH} levels`), undefined);
        return;
      }
      void parseJson(request, text, done);
    });

    // preValidation: after routing and body parsing, before schemas and handlers, for every route
    // (the not-found handler included, whose query could otherwise reach a page render).
    // A callback hook: it never waits, and an async one costs a promise and a microtask turn per request.
    fastify.addHook("preValidation", (request, _reply, done) => {
      try {
        checkRequest(request);
      } catch (error) {
        return done(error as Error);
      }
      done();
    });
  },
  { name: "tether-input-guard", fastify: "5.x" },
);
