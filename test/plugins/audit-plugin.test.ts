import t from "tap";
import { auditPlugin } from "../../src/plugins/activity/audit-plugin.js";
import { rowCount } from "../helpers/database.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the database it writes to", (t) => refusesWithout(t, auditPlugin, "tether-db"));

t.test("auditPlugin alone: rows are queued, written in a batch, and none is lost at close", async (t) => {
  const { app, db } = await alone(t, auditPlugin, { flushIntervalMs: 60_000 });
  const count = () => rowCount(db, "activity_event");
  const before = await count();
  app.tetherAudit.write({ event: "test.first", actor: "test", outcome: "ok" });
  await app.tetherAudit.flush();
  t.equal(await count(), before + 1, "flush writes what is queued");
  app.tetherAudit.write({ event: "test.second", actor: "test", outcome: "ok" });
  t.equal(await count(), before + 1, "a write returns before the row is in the table");
  await app.close();
  t.equal(await count(), before + 2, "closing the app writes the last queued row");
});
