/**
 * A test file whose device executable fails to build fails, locally as in CI: it never ends "ok"
 * with exit 0 as if it had tested something. Run as a separate process with CI unset.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "failed-build.ts");

t.test("a build that was attempted and failed fails the test file, outside CI too", async (t) => {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["CI", "TAP", "TAP_CHILD_ID", "TAP_BEFORE", "TAP_AFTER", "NODE_OPTIONS"]) delete env[name];
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE], { env, stdio: ["ignore", "pipe", "pipe"] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  t.not(code, 0, "the file exits with a failure");
  t.match(output, /the device executable could not be built, so this file cannot test it/, "and says why");
  t.notMatch(output, /reached only when the failed build was swallowed/);
  t.notMatch(output, /# SKIP|skipping/i, "it is not reported as skipped either");
});
