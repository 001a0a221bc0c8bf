/**
 * Line matching for grep, safe against catastrophic backtracking.
 *
 * A regex comes from the model, and JavaScript's engine backtracks: `(a+)+$` against a long line of `a`s runs for
 * ages and would freeze the whole device host. So a user regex is only ever executed inside a `vm` context with a
 * timeout, which V8 enforces even in the middle of a regex match. Matching runs in batches of files, so the
 * watchdog costs tens of microseconds per batch, not per line. Literal searches (an escaped pattern) cannot
 * backtrack and run directly.
 */
import vm from "node:vm";
import { ToolError } from "./errors.js";

const SOURCE = `(function matchTexts(re, reWhole, texts, maxHits) {
  var results = [];
  for (var t = 0; t < texts.length; t++) {
    var text = texts[t];
    var hits = [];
    var lengths = [];
    var total = 0;
    if (text.length > 0 && (reWhole === null || reWhole.test(text))) {
      var lineNo = 0;
      var pos = 0;
      for (;;) {
        var nl = text.indexOf("\\n", pos);
        var stop = nl === -1 ? text.length : nl;
        var line = text.charCodeAt(stop - 1) === 13 && stop > pos ? text.slice(pos, stop - 1) : text.slice(pos, stop);
        var m = re.exec(line);
        if (m !== null) {
          total++;
          if (hits.length < maxHits * 2) {
            hits.push(lineNo, m.index);
            lengths.push(m[0].length);
          }
        }
        lineNo++;
        if (nl === -1 || nl + 1 >= text.length) break;
        pos = nl + 1;
      }
    }
    results.push({ hits: hits, lengths: lengths, total: total });
  }
  return results;
})`;

export interface TextMatches {
  /** Flattened pairs: 0-based line index, 0-based column of the first match on it. */
  hits: number[];
  /** The length of each hit's match (UTF-16 code units, as columns are): lengths[h] belongs to hits[2h]. */
  lengths: number[];
  /** Matching lines in the text, including those beyond `maxHits`. */
  total: number;
}

type MatchFn = (re: RegExp, reWhole: RegExp | null, texts: string[], maxHits: number) => TextMatches[];

const direct = vm.runInThisContext(SOURCE) as MatchFn;

export interface LineMatcherOptions {
  pattern: string;
  literal: boolean;
  ignoreCase: boolean;
  /** Total time the regex may run over the whole search. */
  budgetMs: number;
}

/**
 * A substring every match of `source` must contain, or undefined when none is certain. Conservative by design:
 * any alternation gives up, only literal runs outside groups and classes count, and a character followed by a
 * quantifier that allows zero of it is dropped. Used to skip files (without decoding them) that cannot match.
 */
export function requiredLiteral(source: string): string | undefined {
  // Alternation makes nothing certain; escapes with a payload (\u0041, \x41, \cJ, \p{L}, \k<n>) are not parsed.
  if (source.includes("|") || /\\[uxcpPk]/.test(source)) return undefined;
  let best = "";
  let run = "";
  let depth = 0;
  const end = () => {
    if (run.length > best.length) best = run;
    run = "";
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    const next = source[i + 1];
    let literal: string | undefined;
    if (c === "\\") {
      // Escaped punctuation is itself; letters and digits are classes, anchors or back-references.
      if (next !== undefined && /[^A-Za-z0-9]/.test(next)) literal = next;
      i++;
    } else if (c === "[") {
      for (i++; i < source.length && source[i] !== "]"; i++) if (source[i] === "\\") i++;
    } else if (c === "{") {
      while (i < source.length && source[i] !== "}") i++;
    } else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (!".^$*+?{}".includes(c)) literal = c;
    const quantifier = source[i + 1];
    if (literal === undefined || depth > 0) {
      end();
      if (quantifier === "*" || quantifier === "?" || quantifier === "{") end();
      continue;
    }
    if (quantifier === "*" || quantifier === "?" || quantifier === "{") {
      end(); // this character may be absent or repeated: not part of a fixed run
      continue;
    }
    run += literal;
    if (quantifier === "+") end(); // present, but repeated: the run cannot continue past it
  }
  end();
  return best.length >= 2 ? best : undefined;
}

export class LineMatcher {
  /** Bytes every matching file must contain, checked before decoding a file at all (case-sensitive only). */
  readonly literalBytes: Buffer | undefined;
  private readonly re: RegExp;
  private readonly reWhole: RegExp | null;
  private readonly sandboxed: boolean;
  private context: vm.Context | undefined;
  private call: vm.Script | undefined;
  private spentMs = 0;

  constructor(private readonly opts: LineMatcherOptions) {
    const source = opts.literal ? opts.pattern.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&") : opts.pattern;
    const flags = opts.ignoreCase ? "i" : "";
    try {
      this.re = new RegExp(source, flags);
    } catch (error) {
      throw new ToolError("INVALID_INPUT", `Invalid "pattern": ${(error as Error).message}`, { field: "pattern" });
    }
    // Testing the whole text first skips most files in one call. With the m flag a match on any line is also a
    // match on the whole text, except for lookarounds, which can see past a line's ends.
    this.reWhole = /\(\?<?[=!]/.test(source) ? null : new RegExp(source, `${flags}m`);
    this.sandboxed = !opts.literal;
    const required = opts.ignoreCase ? undefined : opts.literal ? opts.pattern : requiredLiteral(opts.pattern);
    this.literalBytes = required === undefined ? undefined : Buffer.from(required, "utf8");
  }

  match(texts: string[], maxHits: number): TextMatches[] {
    if (texts.length === 0) return [];
    if (!this.sandboxed) return direct(this.re, this.reWhole, texts, maxHits);
    const remaining = this.opts.budgetMs - this.spentMs;
    if (remaining <= 0) throw this.timeoutError();
    if (!this.context) {
      this.context = vm.createContext({});
      vm.runInContext(`var matchTexts = ${SOURCE};`, this.context);
      this.call = new vm.Script("matchTexts(re, reWhole, texts, maxHits)");
    }
    Object.assign(this.context, { re: this.re, reWhole: this.reWhole, texts, maxHits });
    const started = performance.now();
    try {
      return this.call!.runInContext(this.context, { timeout: Math.max(1, Math.ceil(remaining)) }) as TextMatches[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") throw this.timeoutError();
      throw error;
    } finally {
      this.spentMs += performance.now() - started;
      Object.assign(this.context, { texts: null });
    }
  }

  private timeoutError(): ToolError {
    return new ToolError(
      "TIMEOUT",
      `The regular expression ran for more than ${this.opts.budgetMs} ms (catastrophic backtracking?); simplify it or search with literal: true`,
      { field: "pattern", budgetMs: this.opts.budgetMs },
    );
  }
}
