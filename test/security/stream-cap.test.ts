/**
 * Live-update streams of /devices are capped per user: past the cap the next one is refused (429 with
 * Retry-After), a stream that ends frees its slot, and other users are not affected.
 */
import t from "tap";
import { MAX_LIVE_STREAMS_PER_USER } from "../../src/web/routes/devices-dashboard.js";
import { startTestApp } from "../helpers/app.js";
import { cookieOf, newUser } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";

const { url } = await startTestApp(t);

async function openStream(cookie: string, accept = "text/event-stream"): Promise<{ status: number; response: Response; abort: AbortController }> {
  const abort = new AbortController();
  const response = await fetch(`${url}/devices/events`, { headers: { cookie, accept }, signal: abort.signal, redirect: "manual" });
  return { status: response.status, response, abort };
}

t.test("the cap, the refusal, and a freed slot", async (t) => {
  const alice = cookieOf((await newUser(url, "streams-alice")).client);
  const bob = cookieOf((await newUser(url, "streams-bob")).client);
  const held: AbortController[] = [];
  t.teardown(() => held.forEach((abort) => abort.abort()));

  for (let i = 0; i < MAX_LIVE_STREAMS_PER_USER; i++) {
    const stream = await openStream(alice);
    t.equal(stream.status, 200, `stream ${i + 1} opens`);
    held.push(stream.abort);
  }
  const refused = await openStream(alice, "application/json");
  t.equal(refused.status, 429, "one more is refused");
  t.match(refused.response.headers.get("retry-after"), /^\d+$/);
  t.match(await refused.response.json(), { code: "TOO_MANY_STREAMS", message: /live \/devices pages/ });
  const page = await openStream(alice, "text/html");
  t.equal(page.status, 429);
  t.match(await page.response.text(), /Too many attempts|live \/devices pages/, "a browser gets a page saying so");

  const other = await openStream(bob);
  t.equal(other.status, 200, "another user is not affected");
  held.push(other.abort);

  held.shift()!.abort();
  await eventually(async () => {
    const retry = await openStream(alice);
    if (retry.status === 200) held.push(retry.abort);
    else await retry.response.arrayBuffer();
    return retry.status === 200;
  }, 10_000, "a freed slot");
  t.equal(held.length, MAX_LIVE_STREAMS_PER_USER + 1, "a closed stream freed its slot for a new one");
});
