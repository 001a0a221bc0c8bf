import t from "tap";
import { activityPlugin } from "../../src/plugins/activity/activity-plugin.js";
import { createActivityWriter } from "../../src/plugins/activity/writer.js";
import { createAuditWriter } from "../../src/plugins/audit/audit-plugin.js";
import { makeSiteAdmin } from "../helpers/auth.js";
import { bareFastify, fileDatabase, refusesWithout, signedUp } from "./bare.js";

const writerOnFileDatabase = async () => createActivityWriter(createAuditWriter((await fileDatabase()).db));

t.test("it declares the session plugin its API reads the caller from", async (t) => refusesWithout(t, activityPlugin, "tether-session", { writer: await writerOnFileDatabase() }));

t.test("activityPlugin alone: fastify.tetherActivity records, and the API shows each user their own", async (t) => {
  const bare = await bareFastify(t, ["tether-db", "tether-session", "tether-errors"]);
  await bare.app.register(activityPlugin, { writer: await writerOnFileDatabase() });
  await bare.listen();
  const { app, url } = bare;
  const alice = await signedUp(url, "alice");
  const bob = await signedUp(url, "bob");
  app.tetherActivity.record({ userId: alice.userId, event: "password.change", actor: "session", outcome: "ok" });
  app.tetherActivity.record({ userId: bob.userId, event: "token.create", actor: "session", outcome: "ok", detail: { name: "ci" } });
  await app.tetherActivity.flush();

  const own = (await (await alice.get("/api/activity")).json()) as { entries: Array<{ event: string; label: string; user: { id: string } }>; nextCursor: string | null };
  t.same(own.entries.map((entry) => entry.event), ["password.change"], "alice sees her event, not bob's");
  t.match(own.entries[0], { label: "Password changed", user: { id: alice.userId } });

  const bad = await alice.get("/api/activity?limit=lots");
  t.equal(bad.status, 400);
  t.match(await bad.json(), { code: "INVALID_INPUT" });

  t.equal((await alice.get("/api/admin/activity")).status, 403, "everyone's log is for site admins");
  await makeSiteAdmin(app, alice.userId);
  const all = (await (await alice.get("/api/admin/activity?event=token.create")).json()) as { entries: Array<{ user: { id: string }; detail: unknown }> };
  t.match(all.entries, [{ user: { id: bob.userId }, detail: { name: "ci" } }]);
});
