import t from "tap";
import { activityPlugin } from "../../src/plugins/activity/activity-plugin.js";
import { createActivityWriter } from "../../src/plugins/activity/writer.js";
import { createAuditWriter } from "../../src/plugins/activity/audit-plugin.js";
import { makeSiteAdmin } from "../helpers/auth.js";
import { bareFastify, fileDatabase, refusesWithout, signedUp } from "./bare.js";

const writerOnFileDatabase = async () => createActivityWriter(createAuditWriter((await fileDatabase()).db));

t.test("it declares the session plugin its API reads the caller from", async (t) =>
  refusesWithout(t, activityPlugin, "tether-session", { writer: await writerOnFileDatabase() }),
);

t.test("activityPlugin alone: fastify.tetherActivity records, and the API shows each user their own", async (t) => {
  const bare = await bareFastify(t, ["tether-db", "tether-session", "tether-errors"]);
  await bare.app.register(activityPlugin, { writer: await writerOnFileDatabase() });
  await bare.app.ready();
  const { app, url } = bare;
  const alice = await signedUp(url, "alice");
  const bob = await signedUp(url, "bob");
  app.tetherActivity.record({ userId: alice.userId, event: "password.change", actor: "session", outcome: "ok" });
  app.tetherActivity.record({ userId: bob.userId, event: "token.create", actor: "session", outcome: "ok", detail: { name: "ci" } });
  await app.tetherActivity.flush();

  const own = (await (await alice.get("/api/activity")).json()) as {
    entries: Array<{ event: string; label: string; user: { id: string } }>;
    nextCursor: string | null;
  };
  t.same(
    own.entries.map((entry) => entry.event),
    ["password.change"],
    "alice sees her event, not bob's",
  );
  t.match(own.entries[0], { label: "Password changed", user: { id: alice.userId } });

  const bad = await alice.get("/api/activity?limit=lots");
  t.equal(bad.status, 400);
  t.match(await bad.json(), { code: "INVALID_INPUT" });

  t.equal((await alice.get("/api/admin/activity")).status, 403, "everyone's log is for site admins");
  await makeSiteAdmin(app, alice.userId);
  const all = (await (await alice.get("/api/admin/activity?event=token.create")).json()) as { entries: Array<{ user: { id: string }; detail: unknown }> };
  t.match(all.entries, [{ user: { id: bob.userId }, detail: { name: "ci" } }]);
});

t.test("a cursor or page size out of range is a 400 that says the range, never a 500", async (t) => {
  const bare = await bareFastify(t, ["tether-db", "tether-session", "tether-errors"]);
  await bare.app.register(activityPlugin, { writer: await writerOnFileDatabase() });
  await bare.app.ready();
  const alice = await signedUp(bare.url, "alice");
  await makeSiteAdmin(bare.app, alice.userId);
  for (const path of ["/api/activity", "/api/admin/activity"]) {
    const past = await alice.get(`${path}?before=9223372036854775808`);
    t.equal(past.status, 400, `${path}: one past the largest bigint`);
    t.same(await past.json(), { code: "INVALID_INPUT", message: 'querystring: "before" must be a whole number from 0 to 9223372036854775807' });
    t.equal((await alice.get(`${path}?before=9223372036854775807`)).status, 200, `${path}: the largest bigint is a cursor`);
    for (const limit of ["0", "101", "-1", "1e2", "007"]) t.equal((await alice.get(`${path}?limit=${limit}`)).status, 400, `${path}: limit=${limit}`);
    t.equal((await alice.get(`${path}?limit=100`)).status, 200, `${path}: the largest page`);
  }
});
