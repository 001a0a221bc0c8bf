import fc from "fast-check";
import t from "tap";
import { LineMatcher, requiredLiteral } from "../../src/tools/line-matcher.js";

// Small regexes over a small alphabet, so matches are frequent and the property is really exercised.
const regex: fc.Arbitrary<string> = fc.letrec<{ re: string; atom: string; piece: string }>((tie) => ({
  atom: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("a", "b", "c", "\\.", ".", "[ab]", "[^a]", "\\d", "\\b", "\\(") },
    { weight: 1, arbitrary: tie("re").map((r) => `(${r})`) },
    { weight: 1, arbitrary: tie("re").map((r) => `(?:${r})`) },
  ),
  piece: fc.tuple(tie("atom"), fc.constantFrom("", "", "", "*", "+", "?", "{2}", "{0,2}", "+?", "*?")).map(([a, q]) => a + q),
  re: fc.oneof(
    { weight: 4, arbitrary: fc.array(tie("piece"), { minLength: 1, maxLength: 6 }).map((p) => p.join("")) },
    { weight: 1, arbitrary: fc.tuple(tie("piece"), tie("piece")).map(([x, y]) => `${x}|${y}`) },
  ),
})).re;

t.test("a required literal is in every string the regex matches", async (t) => {
  fc.assert(
    fc.property(regex, fc.stringMatching(/^[abc.(1 ]{0,12}$/), (source, text) => {
      let re: RegExp;
      try {
        re = new RegExp(source);
      } catch {
        return true; // the generator can build invalid patterns (a quantified \b); grep rejects those
      }
      const literal = requiredLiteral(source);
      if (literal === undefined) return true;
      return !re.test(text) || text.includes(literal);
    }),
    { numRuns: 20_000 },
  );
  t.equal(requiredLiteral("needle_marker = [0-9]+"), "needle_marker = ");
  t.equal(requiredLiteral("a|b"), undefined);
  t.equal(requiredLiteral("x{12345}"), undefined);
  t.equal(requiredLiteral("\\x41zz"), undefined);
});

t.test("matching a batch: line numbers, columns, totals", async (t) => {
  const texts = ["one\ntwo two\r\nthree\n", "", "\n\n", "no newline two"];
  for (const literal of [true, false]) {
    const matcher = new LineMatcher({ pattern: "two", literal, ignoreCase: false, budgetMs: 1000 });
    t.same(
      matcher.match(texts, 10).map((r) => ({ hits: [...r.hits], total: r.total })),
      [
        { hits: [1, 0], total: 1 },
        { hits: [], total: 0 },
        { hits: [], total: 0 },
        { hits: [0, 11], total: 1 },
      ],
    );
  }
  const anchored = new LineMatcher({ pattern: "two$", literal: false, ignoreCase: false, budgetMs: 1000 });
  t.same([...anchored.match(["two two\r\n"], 10)[0]!.hits], [0, 4], "$ matches before a CRLF line end");
  const capped = new LineMatcher({ pattern: "x", literal: true, ignoreCase: false, budgetMs: 1000 });
  const result = capped.match(["x\nx\nx\nx\n"], 2)[0]!;
  t.same({ hits: [...result.hits], total: result.total }, { hits: [0, 0, 1, 0], total: 4 });
  const lookaround = new LineMatcher({ pattern: "(?<!\\n)^b", literal: false, ignoreCase: false, budgetMs: 1000 });
  t.same([...lookaround.match(["a\nb\n"], 5)[0]!.hits], [1, 0], "lookarounds skip the whole-text prefilter");
});
