/**
 * Glob matching without regular expressions.
 *
 * Glob patterns come from the model, and regex-compiling matchers backtrack: picomatch takes seconds per name on
 * `*a*a*a*b`, or on four `**` segments against a deep path. Here a segment is matched with the classic
 * wildcard algorithm (one backtrack point, O(name × pattern)) and `**` with a memoised table over segments
 * (O(path segments × pattern segments)), so no pattern can make matching slow.
 *
 * Syntax: `*` and `?` (not crossing `/`), `[abc]`, `[a-z]`, `[!a]` / `[^a]`, `**` as a whole segment (zero or
 * more folders), `{a,b}` alternatives (nested; at most 256 after expansion), `\` to escape. No extglobs and no
 * POSIX classes. Unless `dot` is set, wildcards never match a name's leading `.`; a literal `.` does.
 */
import { ToolError } from "./errors.js";

type Token = { kind: "char"; char: string } | { kind: "any" } | { kind: "star" } | { kind: "class"; negated: boolean; ranges: [number, number][] };
type Segment = { kind: "globstar" } | { kind: "tokens"; tokens: Token[]; literal: string | undefined };

export interface GlobOptions {
  /** Let wildcards match names that start with a dot. */
  dot?: boolean;
  /** A pattern without `/` is matched against the last path component (`*.ts` matches `src/a.ts`). */
  basename?: boolean;
}

export const MAX_GLOB_ALTERNATIVES = 256;
export const MAX_GLOB_LENGTH = 1000;

function invalid(field: string, message: string): ToolError {
  return new ToolError("INVALID_INPUT", `Invalid "${field}": ${message}`, { field });
}

/** Expands `{a,b}` alternatives (outermost first, recursively), keeping escapes in place. */
export function expandBraces(pattern: string, field = "pattern"): string[] {
  let depth = 0;
  let open = -1;
  const commas: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      i++;
    } else if (c === "{") {
      if (depth++ === 0) {
        open = i;
        commas.length = 0;
      }
    } else if (c === "," && depth === 1) {
      commas.push(i);
    } else if (c === "}" && depth > 0 && --depth === 0) {
      if (commas.length === 0) continue; // `{x}` has no alternatives: literal braces
      const before = pattern.slice(0, open);
      const after = pattern.slice(i + 1);
      const bounds = [open, ...commas, i];
      const out: string[] = [];
      for (let k = 0; k < bounds.length - 1; k++) {
        for (const expanded of expandBraces(before + pattern.slice(bounds[k]! + 1, bounds[k + 1]) + after, field)) {
          out.push(expanded);
          if (out.length > MAX_GLOB_ALTERNATIVES) throw invalid(field, `it expands to more than ${MAX_GLOB_ALTERNATIVES} alternatives`);
        }
      }
      return [...new Set(out)];
    }
  }
  return [pattern];
}

function parseSegment(text: string): Segment {
  if (text === "**") return { kind: "globstar" };
  const tokens: Token[] = [];
  let literal: string | undefined = "";
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === "\\" && i + 1 < chars.length) {
      tokens.push({ kind: "char", char: chars[++i]! });
      literal = literal === undefined ? undefined : literal + chars[i]!;
    } else if (c === "*") {
      if (tokens[tokens.length - 1]?.kind !== "star") tokens.push({ kind: "star" }); // `**` inside a name is `*`
      literal = undefined;
    } else if (c === "?") {
      tokens.push({ kind: "any" });
      literal = undefined;
    } else if (c === "[" && chars.indexOf("]", i + 2) !== -1) {
      let j = i + 1;
      const negated = chars[j] === "!" || chars[j] === "^";
      if (negated) j++;
      const ranges: [number, number][] = [];
      // A "]" right after the opening bracket is a member, as in POSIX.
      for (let first = true; j < chars.length && (first || chars[j] !== "]"); first = false, j++) {
        let lo = chars[j]!;
        if (lo === "\\" && j + 1 < chars.length) lo = chars[++j]!;
        let hi = lo;
        if (chars[j + 1] === "-" && j + 2 < chars.length && chars[j + 2] !== "]") {
          hi = chars[j + 2] === "\\" && j + 3 < chars.length ? chars[(j += 3)]! : chars[(j += 2)]!;
        }
        ranges.push([lo.codePointAt(0)!, hi.codePointAt(0)!]);
      }
      if (j >= chars.length) {
        tokens.push({ kind: "char", char: c }); // no closing bracket after all: a literal "["
        literal = literal === undefined ? undefined : literal + c;
        continue;
      }
      tokens.push({ kind: "class", negated, ranges });
      literal = undefined;
      i = j;
    } else {
      tokens.push({ kind: "char", char: c });
      literal = literal === undefined ? undefined : literal + c;
    }
  }
  return { kind: "tokens", tokens, literal };
}

function tokenMatches(token: Token, char: string): boolean {
  if (token.kind === "char") return token.char === char;
  if (token.kind === "any") return char !== "/";
  if (token.kind === "class") {
    const code = char.codePointAt(0)!;
    const inside = token.ranges.some(([lo, hi]) => code >= lo && code <= hi);
    return char !== "/" && inside !== token.negated;
  }
  return false;
}

/** One name against one segment: greedy with a single backtrack point, so O(name × pattern). */
function matchName(tokens: Token[], name: string, dot: boolean): boolean {
  const chars = Array.from(name);
  if (!dot && chars[0] === "." && !(tokens[0]?.kind === "char" && tokens[0].char === ".")) return false;
  let t = 0;
  let c = 0;
  let starT = -1;
  let starC = 0;
  while (c < chars.length) {
    const token = tokens[t];
    if (token && token.kind !== "star" && tokenMatches(token, chars[c]!)) {
      t++;
      c++;
    } else if (token?.kind === "star") {
      starT = t++;
      starC = c;
    } else if (starT !== -1) {
      t = starT + 1;
      c = ++starC;
    } else {
      return false;
    }
  }
  while (tokens[t]?.kind === "star") t++;
  return t === tokens.length;
}

function globstarMayEnter(name: string, dot: boolean): boolean {
  return name !== "." && name !== ".." && (dot || !name.startsWith("."));
}

class Alternative {
  constructor(
    readonly segments: Segment[],
    private readonly dot: boolean,
  ) {}

  /** The whole path matches. */
  matches(parts: string[]): boolean {
    return this.walk(parts, false);
  }

  /** Something below the folder `parts` could match (so a walk should enter it). */
  couldMatchBelow(parts: string[]): boolean {
    return this.walk(parts, true);
  }

  private walk(parts: string[], prefix: boolean): boolean {
    const P = this.segments.length;
    const S = parts.length;
    const memo = new Uint8Array((P + 1) * (S + 1)); // 0 unknown, 1 false, 2 true
    const visit = (p: number, s: number): boolean => {
      const key = p * (S + 1) + s;
      if (memo[key]) return memo[key] === 2;
      let result: boolean;
      if (s === S) {
        result = prefix ? p < P : this.segments.slice(p).every((seg) => seg.kind === "globstar");
      } else if (p === P) {
        result = false;
      } else {
        const seg = this.segments[p]!;
        result =
          seg.kind === "globstar"
            ? visit(p + 1, s) || (globstarMayEnter(parts[s]!, this.dot) && visit(p, s + 1))
            : matchName(seg.tokens, parts[s]!, this.dot) && visit(p + 1, s + 1);
      }
      memo[key] = result ? 2 : 1;
      return result;
    };
    // Iterative deepening is unnecessary: recursion depth is at most P + S, both bounded by the path length.
    return visit(0, 0);
  }
}

export interface GlobMatcher {
  /** `rel` is a `/`-separated relative path. */
  (rel: string): boolean;
  /** Whether a walk should enter the folder `rel` to find matches. */
  couldMatchBelow(rel: string): boolean;
  /** Literal segment names the pattern spells out (to decide whether it asks for node_modules, say). */
  readonly literalNames: ReadonlySet<string>;
}

export function compileGlobMatcher(pattern: string, field: string, opts: GlobOptions = {}): GlobMatcher {
  if (typeof pattern !== "string" || pattern.length === 0) throw invalid(field, "the pattern is empty");
  if (pattern.length > MAX_GLOB_LENGTH) throw invalid(field, `the pattern is longer than ${MAX_GLOB_LENGTH} characters`);
  if (pattern.includes("\0")) throw invalid(field, "the pattern contains a NUL byte");
  const dot = opts.dot ?? false;
  const alternatives = expandBraces(pattern.replace(/^(\.\/)+/, ""), field).map((alt) => {
    const basename = opts.basename === true && !alt.includes("/");
    const segments = alt
      .split("/")
      .filter((s, i, all) => s !== "" || all.length === 1)
      .map(parseSegment);
    return { basename, alt: new Alternative(basename ? [{ kind: "globstar" }, ...segments] : segments, dot) };
  });
  const literalNames = new Set<string>();
  for (const { alt } of alternatives) for (const seg of alt.segments) if (seg.kind === "tokens" && seg.literal) literalNames.add(seg.literal);
  const split = (rel: string) => (rel === "" ? [] : rel.split("/"));
  const matcher = ((rel: string) => {
    const parts = split(rel);
    return alternatives.some(({ alt }) => alt.matches(parts));
  }) as GlobMatcher;
  matcher.couldMatchBelow = (rel: string) => {
    const parts = split(rel);
    return alternatives.some(({ alt }) => alt.couldMatchBelow(parts));
  };
  Object.defineProperty(matcher, "literalNames", { value: literalNames });
  return matcher;
}
