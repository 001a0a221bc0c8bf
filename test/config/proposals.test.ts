import t from "tap";
import { DEFAULT_PROPOSAL_CONFIG, loadConfig } from "../../src/config/env.js";

t.test("proposal limits and retention come from the environment, with documented defaults", async (t) => {
  t.strictSame(loadConfig({}).proposals, DEFAULT_PROPOSAL_CONFIG, "unset: the defaults");
  t.same(DEFAULT_PROPOSAL_CONFIG, { maxPendingPerUser: 50, maxPendingPerDevice: 20, retentionMs: 7 * 24 * 3_600_000 });
  const set = loadConfig({ MAX_PENDING_PROPOSALS_PER_USER: "200", MAX_PENDING_PROPOSALS_PER_DEVICE: "5", PROPOSAL_RETENTION: "12h" }).proposals;
  t.same(set, { maxPendingPerUser: 200, maxPendingPerDevice: 5, retentionMs: 12 * 3_600_000 });
  t.equal(loadConfig({ PROPOSAL_RETENTION: "30d" }).proposals.retentionMs, 30 * 86_400_000);
  t.equal(loadConfig({ PROPOSAL_RETENTION: "0s" }).proposals.retentionMs, 0, "0: cleared at the next sweep");
});

t.test("a bad proposal setting stops the server with a line saying which", async (t) => {
  t.throws(() => loadConfig({ MAX_PENDING_PROPOSALS_PER_USER: "0", MAX_PENDING_PROPOSALS_PER_DEVICE: "many", PROPOSAL_RETENTION: "a week" }), {
    name: "ConfigError",
    problems: [
      /MAX_PENDING_PROPOSALS_PER_USER=0 is not a positive whole number/,
      /MAX_PENDING_PROPOSALS_PER_DEVICE=many/,
      /PROPOSAL_RETENTION=a week is not a duration/,
    ],
  });
});
