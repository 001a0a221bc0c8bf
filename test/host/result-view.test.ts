/** Results for people on /devices (issue 26): listings navigate, files are numbered with "show more", searches grouped by file. */
import t from "tap";
import { resultView } from "../../src/web/result-view.js";

t.test("a listing's folders list themselves and its files open in read_file", async (t) => {
  const view = resultView("d1", "list_directory", {
    path: "/root/proj",
    entries: [
      { name: "src", path: "src", type: "directory" },
      { name: "a.txt", path: "a.txt", type: "file", size: 3 },
    ],
    truncated: false,
  });
  t.match(view, {
    kind: "listing",
    rows: [
      { name: "src", href: "/devices/d1/tools/list_directory?arg.path=%2Froot%2Fproj%2Fsrc#tool-panel" },
      { name: "a.txt", size: 3, href: "/devices/d1/tools/read_file?arg.path=%2Froot%2Fproj%2Fa.txt#tool-panel" },
    ],
  });
});

t.test("a cut file offers the next lines; a search groups matches by file with the match marked", async (t) => {
  t.match(
    resultView("d1", "read_file", { path: "/r/f", content: "one\ntwo\n", startLine: 5, truncated: true, nextStartLine: 7, limit: 1048576, omittedBytes: 10 }),
    {
      kind: "file",
      lines: [
        { number: 5, text: "one" },
        { number: 6, text: "two" },
      ],
      more: "/devices/d1/tools/read_file?arg.path=%2Fr%2Ff&arg.startLine=7#tool-panel",
    },
  );
  t.match(
    resultView("d1", "grep", {
      path: "/r",
      matches: [
        { path: "a.js", line: 3, column: 7, text: "const TODO = 1;", before: ["// x"], after: [] },
        { path: "b.js", line: 1, column: 1, text: "TODO" },
      ],
    }),
    {
      kind: "matches",
      files: [
        {
          path: "a.js",
          lines: [
            { number: 2, before: "// x", context: true },
            { number: 3, before: "const ", match: "TODO", after: " = 1;" },
          ],
        },
        { path: "b.js" },
      ],
    },
  );
  t.match(resultView("d1", "hash_file", { path: "/r/f", algorithm: "sha256", hash: "abc" }), {
    kind: "values",
    rows: [{ label: "Path" }, { label: "Algorithm", value: "sha256" }, { label: "Hash", value: "abc" }],
  });
  t.equal(resultView("d1", "custom", { x: 1 }), undefined, "unknown shapes stay JSON");
});

t.test("'Show more' keeps the end line that was asked for", async (t) => {
  const cut = { path: "/r/f", content: "one\ntwo\n", startLine: 5, endLine: 6, truncated: true, nextStartLine: 7, limit: 1048576, omittedBytes: 10 };
  t.match(resultView("d1", "read_file", cut, { path: "/r/f", startLine: 5, endLine: 900 }), {
    more: "/devices/d1/tools/read_file?arg.path=%2Fr%2Ff&arg.startLine=7&arg.endLine=900#tool-panel",
  });
  t.match(
    resultView("d1", "read_file", cut, { path: "/r/f", startLine: 5 }),
    { more: "/devices/d1/tools/read_file?arg.path=%2Fr%2Ff&arg.startLine=7#tool-panel" },
    "to the end of the file when no end was asked for",
  );
});

t.test("a search marks exactly the match (matchLength), and guesses only for a device that does not say", async (t) => {
  const line = "call(foo.bar, baz)";
  const exact = resultView("d1", "grep", { path: "/r", matches: [{ path: "a.js", line: 1, column: 6, matchLength: 7, text: line }] });
  t.match(exact, { files: [{ lines: [{ before: "call(", match: "foo.bar", after: ", baz)" }] }] }, "the regex's own match, punctuation and all");
  const cut = resultView("d1", "grep", {
    path: "/r",
    matches: [{ path: "a.js", line: 1, column: 5001, textStartColumn: 4873, matchLength: 6, text: `${"a".repeat(128)}NEEDLEbbb` }],
  });
  t.match(cut, { files: [{ lines: [{ match: "NEEDLE", after: "bbb" }] }] }, "in a line cut around the match");
  const old = resultView("d1", "grep", { path: "/r", matches: [{ path: "a.js", line: 1, column: 6, text: line }] });
  t.match(old, { files: [{ lines: [{ before: "call(", match: "foo.bar,", after: " baz)" }] }] }, "no matchLength: the run of non-space characters");
});
