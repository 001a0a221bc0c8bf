import fc from "fast-check";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { createScope, ToolError } from "../../src/tools/index.js";
import { checkPathSyntax, isWithin } from "../../src/tools/paths.js";
import { holds, tempDir } from "./helpers.js";

/** Longest prefix of an absolute path that exists (lstat), and the rest. */
function existingPrefix(p: string): string {
  let current = p;
  while (!fs.existsSync(current) && !isLink(current)) current = path.dirname(current);
  return current;
}

function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

t.test("resolve agrees with the kernel and never returns a path outside the root", async (t) => {
  const base = tempDir(t);
  const root = path.join(base, "root");
  const outside = path.join(base, "outside");
  fs.mkdirSync(path.join(root, "a", "b"), { recursive: true });
  fs.mkdirSync(path.join(outside, "o"), { recursive: true });
  fs.writeFileSync(path.join(root, "a", "b", "f.txt"), "f");
  fs.writeFileSync(path.join(root, "file.txt"), "x");
  fs.writeFileSync(path.join(outside, "o", "x.txt"), "x");
  fs.symlinkSync("..", path.join(root, "a", "ln-up"));
  fs.symlinkSync("../../outside", path.join(root, "a", "ln-out"));
  fs.symlinkSync("a", path.join(root, "ln-a"));
  fs.symlinkSync(outside, path.join(root, "ln-abs-out"));
  fs.symlinkSync("missing/deeper", path.join(root, "ln-dangling"));
  fs.symlinkSync("ln-loop", path.join(root, "ln-loop"));
  fs.symlinkSync("../root/file.txt", path.join(outside, "back-in"));
  const scope = await createScope([root]);
  const component = fc.constantFrom(
    "a",
    "b",
    "f.txt",
    "file.txt",
    "ln-up",
    "ln-out",
    "ln-a",
    "ln-abs-out",
    "ln-dangling",
    "ln-loop",
    "..",
    ".",
    "missing",
    "o",
    "x.txt",
    "back-in",
    "root",
    "outside",
  );

  await holds(
    t,
    fc.asyncProperty(fc.array(component, { minLength: 1, maxLength: 8 }), fc.boolean(), fc.boolean(), async (parts, absolute, followFinal) => {
      const rel = parts.join("/");
      const input = absolute ? `${root}/${rel}` : rel;
      const raw = `${root}/${rel}`;
      let kernel: string | undefined;
      let kernelError: string | undefined;
      try {
        kernel = fs.realpathSync.native(raw);
      } catch (error) {
        kernelError = (error as NodeJS.ErrnoException).code;
      }
      let result: string | undefined;
      let code: string | undefined;
      try {
        result = await scope.resolve(input, { followFinal });
      } catch (error) {
        if (!(error instanceof ToolError)) throw error;
        code = error.code;
      }
      if (result !== undefined) {
        // Safety: whatever comes back is normalised, inside the root, and real up to its missing tail.
        if (path.normalize(result) !== result || !isWithin(root, result)) return false;
        const existing = existingPrefix(followFinal ? result : path.dirname(result));
        if (fs.realpathSync.native(existing) !== existing) return false;
      }
      if (followFinal && kernel !== undefined) {
        // Agreement: where the kernel can resolve the path, we resolve it to the same place, or refuse it.
        return isWithin(root, kernel) ? result === kernel : code === "OUTSIDE_ROOTS";
      }
      if (kernelError === "ELOOP" && followFinal) return code === "SYMLINK_LOOP" || code === "OUTSIDE_ROOTS";
      return result !== undefined || code === "OUTSIDE_ROOTS" || code === "SYMLINK_LOOP";
    }),
    { numRuns: 3000 },
  );
});

t.test("isWithin compares whole components", async (t) => {
  const segment = fc.stringMatching(/^[a-z]{1,3}$/);
  await holds(
    t,
    fc.property(fc.array(segment, { maxLength: 4 }), fc.array(segment, { maxLength: 6 }), (r, c) => {
      const expected = c.length >= r.length && r.every((x, i) => c[i] === x);
      return isWithin(`/${r.join("/")}`, `/${c.join("/")}`) === expected;
    }),
    { numRuns: 2000 },
  );
  await holds(
    t,
    fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), segment, (r, suffix) => {
      const rootPath = `/${r.join("/")}`;
      return !isWithin(rootPath, rootPath + suffix) && isWithin(rootPath, `${rootPath}/${suffix}`);
    }),
    { numRuns: 1000 },
  );
});

t.test("checkPathSyntax refuses every NUL and every UNC or device prefix", async (t) => {
  const refused = (input: string, flavor: "posix" | "win32") => {
    try {
      checkPathSyntax(input, flavor);
      return false;
    } catch (error) {
      return (error as ToolError).code === "INVALID_PATH";
    }
  };
  const flavor = fc.constantFrom("posix" as const, "win32" as const);
  await holds(
    t,
    fc.property(fc.string(), fc.string(), flavor, (a, b, f) => refused(`${a}\0${b}`, f)),
    { numRuns: 1000 },
  );
  await holds(
    t,
    fc.property(fc.constantFrom("//", "\\\\", "/\\", "\\/"), fc.string(), flavor, (prefix, rest, f) => refused(prefix + rest, f)),
    { numRuns: 1000 },
  );
});
