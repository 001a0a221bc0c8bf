import fc from "fast-check";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { builtinTools, createScope, invokeTool, ToolError, type Scope, type ToolMode } from "../../src/tools/index.js";

export interface Sandbox {
  /** Real path of a fresh temp directory holding `root` and `outside`. */
  base: string;
  root: string;
  outside: string;
  scope: Scope;
  call(name: string, input: unknown, mode?: ToolMode): Promise<Record<string, unknown>>;
  /** The ToolError a call fails with (fails the test if it succeeds). */
  fail(name: string, input: unknown, mode?: ToolMode): Promise<ToolError>;
  write(rel: string, content: string | Buffer): string;
  /** Writes each file of `files` (relative path to content), making folders as needed. */
  writeAll(files: Record<string, string | Buffer>): void;
}

interface TapLike {
  teardown(fn: () => void): void;
}

export function tempDir(t: TapLike, prefix = "tether-tools-"): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function sandbox(t: TapLike, opts: { extraRoots?: string[] } = {}): Promise<Sandbox> {
  const base = tempDir(t);
  const root = path.join(base, "root");
  const outside = path.join(base, "outside");
  fs.mkdirSync(root);
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, "secret.txt"), "TOP SECRET\n");
  const scope = await createScope([root, ...(opts.extraRoots ?? [])]);
  const call = (name: string, input: unknown, mode?: ToolMode) =>
    invokeTool(builtinTools, name, input, { scope, ...(mode ? { mode } : {}) }) as Promise<Record<string, unknown>>;
  const write = (rel: string, content: string | Buffer) => {
    const file = path.join(root, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
    return file;
  };
  return {
    base,
    root,
    outside,
    scope,
    call,
    async fail(name, input, mode) {
      try {
        await call(name, input, mode);
      } catch (error) {
        if (error instanceof ToolError) return error;
        throw error;
      }
      throw new Error(`${name} was expected to fail with a ToolError`);
    },
    write,
    writeAll(files) {
      for (const [rel, content] of Object.entries(files)) write(rel, content);
    },
  };
}

/** Everything under `dir` as rel path -> content ("<dir>" / "-> target"), for before/after comparisons. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = "<dir>";
        walk(p, r);
      } else if (st.isFile()) out[r] = fs.readFileSync(p, "utf8");
      else out[r] = "<special>";
    }
  };
  walk(dir, "");
  return out;
}

/** "OK" when a tool definition is accepted, else the code of the ToolError it throws. */
export function definitionCode(fn: () => unknown): string {
  try {
    fn();
    return "OK";
  } catch (error) {
    return (error as ToolError).code;
  }
}

/**
 * A fast-check property as one assertion (`fc.check`, sync or async): it fails with fast-check's own
 * report, the shrunk counterexample included.
 */
export async function holds<Ts>(t: Test, property: fc.IRawProperty<Ts>, parameters: fc.Parameters<Ts> = {}, what = "the property holds"): Promise<void> {
  const details = await fc.check(property, parameters);
  t.ok(!details.failed, details.failed ? (fc.defaultReportMessage(details) ?? what) : what);
}
