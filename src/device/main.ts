#!/usr/bin/env node
/**
 * The `tether-host` command with the built-in tools: the npm `bin` entry (built to
 * dist/src/device/main.js) and, through bin/host.ts, the single executable's entry. Free of top-level
 * await and import.meta, which a CommonJS bundle inside a single executable cannot have.
 */
import { builtinTools } from "../tools/index.js";
import { runCli } from "./cli.js";

function exit(code: number): void {
  // Let stdout drain (a pipe may still hold the result) before leaving.
  process.stdout.write("", () => process.exit(code));
}

runCli(process.argv.slice(2), builtinTools).then(exit, (error: unknown) => {
  process.stderr.write(`tether-host: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  exit(1);
});
