/**
 * Whole numbers that arrive as text (query strings and path parameters are strings; the app does not
 * coerce them): one schema helper that every route declaring one uses, so that a value no column or
 * `Number` can hold is refused as a 400 by the schema instead of reaching SQL (PostgreSQL refuses
 * `9223372036854775808` for a `bigint`, which was a 500) or arithmetic.
 *
 * The bound is a regular expression over the digits, built from the range, so the same schema
 * works under Fastify's Ajv (pages) and TypeBox's checker (the strict JSON APIs) without a custom
 * format or keyword. Only the canonical spelling is accepted (`0`, or digits without a leading
 * zero): a cursor or page size is never typed with padding, and one spelling per number keeps the
 * bound a plain comparison of length and digits.
 */
import { Type, type TString } from "@sinclair/typebox";

/** The largest PostgreSQL `bigint` (`int8`), e.g. an identity column used as a cursor. */
export const BIGINT_MAX = 9223372036854775807n;

export interface WholeNumberRange {
  min: number | bigint;
  max: number | bigint;
}

/** Each pattern the helper has built, with the words an error message uses for it. */
const RANGE_WORDS = new Map<string, string>();

/**
 * A string schema accepting exactly the decimal whole numbers from `min` to `max` (both ≥ 0).
 * Use it for every numeric query or path parameter.
 */
export function WholeNumberText(range: WholeNumberRange): TString {
  const pattern = wholeNumberPattern(range);
  RANGE_WORDS.set(pattern, `must be a whole number from ${range.min} to ${range.max}`);
  return Type.String({ pattern, maxLength: String(range.max).length });
}

/** The value of `text` when it is a whole number in `range` (as the schema accepts it), else undefined. */
export function parseWholeNumber(text: string, range: WholeNumberRange): bigint | undefined {
  if (!/^(?:0|[1-9][0-9]*)$/.test(text) || text.length > String(range.max).length) return undefined;
  const value = BigInt(text);
  return value >= BigInt(range.min) && value <= BigInt(range.max) ? value : undefined;
}

/**
 * What a failed `pattern` check means in words, when the pattern is one of this helper's (the error
 * handler asks, so the 400 says "must be a whole number from 1 to 100" rather than quoting a regex).
 */
export function describeWholeNumberPattern(pattern: unknown): string | undefined {
  return typeof pattern === "string" ? RANGE_WORDS.get(pattern) : undefined;
}

/** `^…$` matching the canonical decimal spelling of every whole number from `min` to `max`. */
export function wholeNumberPattern({ min, max }: WholeNumberRange): string {
  const low = BigInt(min);
  const high = BigInt(max);
  if (low < 0n || high < low) throw new RangeError(`not a range of whole numbers: ${min}..${max}`);
  // Below `min` is refused by a lookahead over the numbers up to min - 1.
  const floor = low === 0n ? "" : `(?!(?:${atMost(low - 1n)})$)`;
  return `^${floor}(?:${atMost(high)})$`;
}

/** Alternatives matching the canonical spelling of every whole number from 0 to `max`. */
function atMost(max: bigint): string {
  const digits = String(max);
  const n = digits.length;
  const alternatives = ["0"];
  // Every number with fewer digits than max.
  if (n >= 2) alternatives.push(n === 2 ? "[1-9]" : `[1-9][0-9]{0,${n - 2}}`);
  // Numbers with as many digits: equal to max up to position i, then a smaller digit, then anything.
  for (let i = 0; i < n; i++) {
    const lowest = i === 0 ? 1 : 0;
    const below = Number(digits[i]) - 1;
    if (below < lowest) continue;
    const rest = n - i - 1;
    alternatives.push(`${digits.slice(0, i)}${digitRange(lowest, below)}${rest > 0 ? `[0-9]{${rest}}` : ""}`);
  }
  if (max > 0n) alternatives.push(digits);
  return alternatives.join("|");
}

function digitRange(from: number, to: number): string {
  return from === to ? String(from) : `[${from}-${to}]`;
}
