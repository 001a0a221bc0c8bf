/**
 * The one counter store behind every limit (src/db/counter-store.ts), on both backends: a window starts with a
 * key's first hit and ends `windowMs` later, a refund never goes below zero nor restarts an ended window, a
 * reset forgets the key. The in-process store is bounded: a spray of sign-ins with ever new addresses costs
 * at most `maxEntries` entries, ended windows are dropped as new ones start, and within the bound a key's count
 * holds until its window ends.
 */
import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { createMemoryCounterStore, createRedisCounterStore, MEMORY_COUNTERS_MAX_ENTRIES, type CounterStore } from "../../src/db/counter-store.js";
import { connectRedis } from "../../src/db/redis.js";
import { redisTest } from "../helpers/auth.js";
import { TEST_REDIS_URL } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";

/** What both stores do; `expire` ends a key's window (a clock moved on, or a short window waited out). */
async function behaves(t: Test, store: CounterStore, windowMs: number, expire: (key: string) => Promise<void>) {
  const key = `k-${randomUUID()}`;
  t.same(await store.hit(key, windowMs).then(({ count }) => count), 1, "the first hit starts a window at 1");
  const second = await store.hit(key, windowMs);
  t.equal(second.count, 2, "the second counts in the same window");
  t.ok(second.msLeft > 0 && second.msLeft <= windowMs, `with the time left in it (${second.msLeft} ms)`);
  t.equal(await store.get(key), 2, "get reads the count");
  await store.refund(key);
  t.equal(await store.get(key), 1, "a refund takes one back");
  await store.refund(key);
  await store.refund(key);
  t.equal(await store.get(key), 0, "and never goes below zero");
  await store.hit(key, windowMs);
  await store.reset(key);
  t.equal(await store.get(key), 0, "a reset forgets the key");
  t.equal(await store.get(`never-${randomUUID()}`), 0, "an unknown key counts 0");

  const ending = `e-${randomUUID()}`;
  await store.hit(ending, windowMs);
  await store.hit(ending, windowMs);
  await expire(ending);
  await store.refund(ending);
  t.equal(await store.get(ending), 0, "a refund after the window ended does not bring it back");
  t.equal((await store.hit(ending, windowMs)).count, 1, "a hit after it starts a new window");
}

t.test("in memory", async (t) => {
  let clock = 0;
  const store = createMemoryCounterStore({ now: () => clock });
  await behaves(t, store, 60_000, async () => {
    clock += 60_001;
  });
});

redisTest(t, "in Redis", async (t) => {
  const redis = connectRedis(TEST_REDIS_URL!);
  t.teardown(() => redis.disconnect());
  const prefix = `test:counters:${randomUUID()}:`;
  const store = createRedisCounterStore(redis, { prefix });
  // Real time in Redis: a 1 s window, waited out by polling until Redis has expired the key.
  await behaves(t, store, 1_000, async (key) => {
    await eventually(async () => (await redis.exists(prefix + key)) === 0, 5_000, "the window's key to expire");
  });
});

t.test("Redis unreachable: every operation rejects, none lets a hit through", async (t) => {
  const redis = connectRedis("redis://127.0.0.1:1", { failFast: true });
  redis.on("error", () => {});
  t.teardown(() => redis.disconnect());
  const store = createRedisCounterStore(redis, { prefix: "test:down:" });
  await t.rejects(store.hit("k", 1_000), "hit rejects");
  await t.rejects(store.get("k"), "get rejects");
});

t.test("a spray of new keys never grows the memory store past its bound", async (t) => {
  const counters = createMemoryCounterStore({ maxEntries: 1_000 });
  for (let i = 0; i < 50_000; i++) await counters.hit(`sign-in-failures:${i}`, 900_000);
  t.equal(counters.size, 1_000, "50,000 addresses, 1,000 entries");
  t.equal(await counters.get("sign-in-failures:49999"), 1, "the newest are kept");
  t.equal(await counters.get("sign-in-failures:0"), 0, "the oldest went first");
  t.equal(MEMORY_COUNTERS_MAX_ENTRIES, 10_000, "the default bound");
  const byDefault = createMemoryCounterStore();
  for (let i = 0; i < 12_000; i++) await byDefault.hit(`k${i}`, 900_000);
  t.equal(byDefault.size, MEMORY_COUNTERS_MAX_ENTRIES);
});

t.test("ended windows are swept as new ones start, without anyone reading them again", async (t) => {
  let clock = 0;
  const counters = createMemoryCounterStore({ maxEntries: 100, now: () => clock });
  for (let i = 0; i < 50; i++) await counters.hit(`old-${i}`, 60_000);
  clock += 61_000;
  await counters.hit("new", 60_000);
  t.equal(counters.size, 1, "the fifty ended windows are gone once a new one starts");
});

t.test("within the bound a key keeps its count for its whole window", async (t) => {
  let clock = 0;
  const counters = createMemoryCounterStore({ maxEntries: 100, now: () => clock });
  for (let i = 0; i < 5; i++) await counters.hit("victim", 900_000);
  for (let i = 0; i < 99; i++) await counters.hit(`other-${i}`, 900_000);
  t.equal(await counters.get("victim"), 5, "99 other keys do not push it out");
  clock += 899_000;
  t.equal(await counters.get("victim"), 5, "still counted just before the window ends");
  clock += 2_000;
  t.equal(await counters.get("victim"), 0, "and forgotten after it");
});
