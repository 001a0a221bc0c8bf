/**
 * The rotated log file a tether-host keeps where the service manager keeps none (launchd, the Windows task):
 * timestamped lines, rotated by size, a fixed number of old files kept.
 */
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { RotatingLog } from "../../src/device/log-file.js";

t.test("lines are timestamped; past the size the file rotates, keeping three", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-log-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "logs", "tether-host.log");
  const log = new RotatingLog(file, 1_000, 3);
  log.write("tether-host: connected\n");
  t.match(await readFile(file, "utf8"), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z tether-host: connected\n$/);
  if (process.platform !== "win32") t.equal((await stat(file)).mode & 0o777, 0o600, "readable by its user only");
  for (let index = 0; index < 100; index++) log.write(`line ${index} ${"x".repeat(60)}`);
  t.same(
    (await readdir(path.dirname(file))).sort(),
    ["tether-host.log", "tether-host.log.1", "tether-host.log.2", "tether-host.log.3"],
    "the file and three old ones",
  );
  for (const name of await readdir(path.dirname(file))) t.ok((await stat(path.join(path.dirname(file), name))).size <= 1_000, `${name} stays under the size`);
  t.match(await readFile(file, "utf8"), /line 99 x+\n$/, "the newest line is in the current file");
  t.notMatch(
    (await Promise.all((await readdir(path.dirname(file))).map((name) => readFile(path.join(path.dirname(file), name), "utf8")))).join(""),
    /line 0 /,
    "the oldest lines are gone",
  );
  // A new writer (the next start) carries on from the file's size.
  new RotatingLog(file, 1_000, 3).write("after a restart");
  t.match(await readFile(file, "utf8"), /after a restart\n$/);
});
