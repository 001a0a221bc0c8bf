/**
 * Mallory in the noisy-neighbour run (bench/noisy.ts), in a process of her own: every attack of issue 24
 * at once, from one self-registered account, until she is sent SIGTERM.
 *
 * - Long-lived streams: `GET /mcp` notification streams with each of her tokens and `/devices` live views
 *   with each of her sessions, as many as the server admits, and she keeps asking for more.
 * - Floods, each a number of connections sending the next request as soon as the last is answered:
 *   `/mcp` (`tools/call` of her device's mutate tool, which plans the largest diff and summary the
 *   protocol allows and piles up pending proposals; `tools/call` of a read tool; `tools/list`), the auth
 *   API (sign-in with a wrong password, sign-up, password reset, get-session), `POST /api/host/calls` of
 *   the mutate tool, and `/devices` page loads (which render her pending proposals).
 *
 * `node --import tsx bench/noisy-mallory.ts '<json MalloryPlan>'` prints `ready <mcp streams> <live views>`
 * once her first streams are open, and on SIGTERM one JSON line: what each attack got, by status.
 */
import http from "node:http";

export interface MalloryPlan {
  url: string;
  origin: string;
  email: string;
  deviceId: string;
  /** `sk_` tokens with `host:call`. */
  tokens: string[];
  /** Session cookies (`name=value`), one per sign-in. */
  cookies: string[];
  connections: { mcp: number; auth: number; calls: number; pages: number };
}

type Counts = Record<string, number>;
const stats = {
  mcpStreams: { admitted: 0, refused: {} as Counts },
  liveViews: { admitted: 0, refused: {} as Counts },
  mcp: {} as Counts,
  auth: {} as Counts,
  calls: {} as Counts,
  pages: {} as Counts,
  pageBytes: 0,
  errors: 0,
};
const count = (counts: Counts, status: number | string) => (counts[status] = (counts[status] ?? 0) + 1);

let stopping = false;

interface Request {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
}

/** One request on `agent`: its status and body length (the body is read and dropped). */
function send(url: string, agent: http.Agent | false, request: Request): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve) => {
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const headers = { ...(body === undefined ? {} : { "content-type": "application/json" }), ...request.headers };
    const sent = http.request(new URL(request.path, url), { method: request.method, agent, headers }, (response) => {
      let bytes = 0;
      response.on("data", (chunk: Buffer) => (bytes += chunk.length));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, bytes }));
      response.on("error", () => resolve({ status: 0, bytes }));
    });
    sent.on("error", () => resolve({ status: 0, bytes: 0 }));
    sent.end(body);
  });
}

/** `connections` loops, each sending `next()`'s request as soon as the last one is answered. */
function flood(url: string, connections: number, counts: Counts, next: (i: number) => Request, onBytes?: (n: number) => void): Promise<void>[] {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let i = 0;
  return Array.from({ length: connections }, async () => {
    while (!stopping) {
      const { status, bytes } = await send(url, agent, next(i++));
      if (status === 0) {
        stats.errors++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      count(counts, status);
      onBytes?.(bytes);
    }
  });
}

/**
 * Opens a long-lived stream on a connection of its own: true when it opened (it is then held until the
 * process ends), false with the refusal counted.
 */
function openStream(url: string, path: string, headers: Record<string, string>, refused: Counts): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get(new URL(path, url), { agent: false, headers: { accept: "text/event-stream", ...headers } }, (response) => {
      if (response.statusCode === 200) {
        response.on("data", () => {});
        response.on("error", () => {});
        return resolve(true);
      }
      count(refused, response.statusCode ?? 0);
      response.resume().on("end", () => resolve(false));
    });
    request.on("error", () => {
      count(refused, "error");
      resolve(false);
    });
  });
}

/** Streams with each credential until refused; then asks again every `retryMs` for as long as she runs. */
async function holdStreams(
  url: string,
  path: string,
  credentials: Array<Record<string, string>>,
  counter: { admitted: number; refused: Counts },
  retryMs: number,
) {
  await Promise.all(
    credentials.map(async (headers) => {
      // Bounded, should a server admit every stream (a cap of 0).
      for (let i = 0; i < 2_000 && !stopping && (await openStream(url, path, headers, counter.refused)); i++) counter.admitted++;
    }),
  );
  return async () => {
    while (!stopping) {
      for (const headers of credentials) if (await openStream(url, path, headers, counter.refused)) counter.admitted++;
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  };
}

async function main(plan: MalloryPlan): Promise<void> {
  const { url, tokens, cookies } = plan;
  const bearer = (i: number) => ({ authorization: `Bearer ${tokens[i % tokens.length]}` });
  const mcpHeaders = (i: number) => ({ ...bearer(i), accept: "application/json, text/event-stream" });

  const keepAskingMcp = await holdStreams(
    url,
    "/mcp",
    tokens.map((_, i) => mcpHeaders(i)),
    stats.mcpStreams,
    200,
  );
  const keepAskingLive = await holdStreams(
    url,
    "/devices/events",
    cookies.map((cookie) => ({ cookie })),
    stats.liveViews,
    200,
  );
  process.stdout.write(`ready ${stats.mcpStreams.admitted} ${stats.liveViews.admitted}\n`);

  const call = (id: number, name: string, args: Record<string, unknown>) => ({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name, arguments: { device: plan.deviceId, ...args } },
  });
  const mcpRequests = [
    (i: number) => call(i, "write_file", { path: `f${i}`, content: "x" }),
    (i: number) => call(i, "stat", { path: "." }),
    (i: number) => ({ jsonrpc: "2.0", id: i, method: "tools/list", params: {} }),
  ];
  const authRequests: Array<(i: number) => Request> = [
    () => ({ method: "POST", path: "/api/auth/sign-in/email", body: { email: plan.email, password: "not her password" } }),
    (i) => ({
      method: "POST",
      path: "/api/auth/sign-up/email",
      body: { name: "m", email: `mallory-${process.pid}-${i}@example.com`, password: "mallory password" },
    }),
    () => ({ method: "POST", path: "/api/auth/request-password-reset", body: { email: plan.email, redirectTo: "/" } }),
    (i) => ({ method: "GET", path: "/api/auth/get-session", headers: { cookie: cookies[i % cookies.length]! } }),
  ];
  const work = [
    keepAskingMcp(),
    keepAskingLive(),
    ...flood(url, plan.connections.mcp, stats.mcp, (i) => ({
      method: "POST",
      path: "/mcp",
      headers: mcpHeaders(i),
      body: mcpRequests[i % mcpRequests.length]!(i),
    })),
    ...flood(url, plan.connections.auth, stats.auth, (i) => authRequests[i % authRequests.length]!(i)),
    ...flood(url, plan.connections.calls, stats.calls, (i) => ({
      method: "POST",
      path: "/api/host/calls",
      headers: bearer(i),
      body: { deviceId: plan.deviceId, tool: "write_file", input: { path: `g${i}`, content: "x" }, timeoutMs: 30_000 },
    })),
    ...flood(
      url,
      plan.connections.pages,
      stats.pages,
      (i) => ({
        method: "GET",
        path: i % 2 === 0 ? "/devices" : "/devices/panel/proposals",
        headers: { cookie: cookies[i % cookies.length]!, accept: "text/html" },
      }),
      (bytes) => (stats.pageBytes = Math.max(stats.pageBytes, bytes)),
    ),
  ];
  process.on("SIGTERM", () => {
    stopping = true;
    process.stdout.write(`${JSON.stringify(stats)}\n`);
    process.exit(0);
  });
  await Promise.all(work);
}

if (process.argv[2]) await main(JSON.parse(process.argv[2]) as MalloryPlan);
