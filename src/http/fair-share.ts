/**
 * A fair share of the event loop for every credential: at most `perCredential` of one credential's requests are worked on
 * at once; the others wait their turn, in order, costing nothing but a place in a queue. Rate limits
 * bound how many requests a credential may send per minute; this bounds how much of one process a
 * user's requests may hold at any moment, so that one account's many connections (a flood of `/mcp`
 * calls, page loads, several tokens and sessions at once) cannot queue every other user's requests
 * behind its own (issue 24: no user's heavy use slows another).
 *
 * Who a request belongs to: its credential, known without a query so that session resolution stays lazy
 * (a route that never asks for the session costs no database work): a session cookie whose signature
 * holds (only Tether mints those), or a bearer credential (an API token, an OAuth access token); else its
 * client address (`request.ip`: anonymous requests, forged cookies, and the auth API, which resolves its
 * own cookies). A person holding several sessions and tokens has a lane for each; minting them is
 * rate-limited (sign-in) or needs a browser session (tokens). Exempt: device requests (a device token; a call waiting
 * for its device's result must never wait for a slot its own owner holds), long-lived streams (admitted
 * by `tether-streams`), and `/healthz`.
 *
 * A request waiting for a device holds no slot (`outsideFairShare`): the host service releases it around
 * every device round trip, so a user's slow tools never stop their pages loading. Past `maxQueued`
 * waiting requests of one credential: 429 `TOO_MANY_REQUESTS` with `Retry-After`.
 */
import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { DEVICE_TOKEN_PREFIX } from "../protocol/messages.js";
import { verifySignedCookie } from "../plugins/session/cookie-signature.js";
import { bearerToken } from "./bearer.js";
import { HttpError } from "./errors.js";
import { runInSlot, type FairShareSlot } from "./fair-share-context.js";

export { outsideFairShare } from "./fair-share-context.js";

export interface FairShareOptions {
  /** Requests of one credential worked on at once (default 4; 0: no limit, the plugin does nothing). */
  perCredential?: number;
  /** Requests of one credential waiting at once; the next is refused with 429 (default 256). */
  maxQueued?: number;
  /** GET paths of long-lived streams, exempt (they are admitted and capped by `tether-streams`). */
  streamPaths?: string[];
}

/** Where a user's requests stand: how many are worked on, and who waits (in arrival order). */
interface Lane {
  active: number;
  waiting: Slot[];
}

/** A request's place in its lane: released once, when its answer is ready or its client leaves. */
class Slot implements FairShareSlot {
  held = false;
  done = false;
  /** Worked on once: a slot taken back after a wait outside is never withdrawn (its work must finish). */
  admitted = false;
  /** Set while the slot waits in its lane: called when its turn comes. */
  wake: (() => void) | undefined;
  constructor(
    private readonly gate: Gate,
    readonly key: string,
  ) {}
  /** `again`: a request taking its slot back after a wait outside (never refused: it was admitted once). */
  async acquire(again = false): Promise<void> {
    if (this.done) return; // the client left: the rest of its work runs without a slot
    await this.gate.enter(this, again);
    if (this.done) return this.gate.leave(this.key); // it left while this waited to come back
    this.held = true;
    this.admitted = true;
  }
  release(): void {
    if (!this.held) return;
    this.held = false;
    this.gate.leave(this.key);
  }
  /** The response ended or the client left: a held slot passes on, a waiting one leaves the queue. */
  finish(): void {
    this.done = true;
    this.release();
    if (this.wake && !this.admitted) this.gate.withdraw(this);
  }
}

class Gate {
  private readonly lanes = new Map<string, Lane>();
  constructor(
    readonly perCredential: number,
    readonly maxQueued: number,
  ) {}

  /**
   * Resolves when `slot`'s user may have one more request worked on (never, for a slot withdrawn while
   * it waits: its request is abandoned); throws 429 past the queue's bound.
   */
  enter(slot: Slot, again: boolean): Promise<void> {
    let lane = this.lanes.get(slot.key);
    if (!lane) this.lanes.set(slot.key, (lane = { active: 0, waiting: [] }));
    if (lane.active < this.perCredential) {
      lane.active++;
      return Promise.resolve();
    }
    if (lane.waiting.length >= this.maxQueued && !again) {
      return Promise.reject(
        new HttpError(429, "TOO_MANY_REQUESTS", `Your account has ${this.perCredential + lane.waiting.length} requests in progress; wait for some to finish`),
      );
    }
    const waiting = lane.waiting;
    return new Promise((resolve) => {
      slot.wake = () => {
        slot.wake = undefined;
        resolve();
      };
      waiting.push(slot);
    });
  }

  /** One request of `key` is done: the next waiting one (if any) takes its place. */
  leave(key: string): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    const next = lane.waiting.shift();
    if (next) return next.wake!(); // the slot passes on: `active` stays the same
    lane.active--;
    if (lane.active === 0) this.lanes.delete(key);
  }

  /** A waiting slot whose client left: out of the queue, its promise never settles. */
  withdraw(slot: Slot): void {
    const lane = this.lanes.get(slot.key);
    const at = lane?.waiting.indexOf(slot) ?? -1;
    if (at !== -1) lane!.waiting.splice(at, 1);
    slot.wake = undefined;
  }

  /** Requests of `key` worked on and waiting now (tests, metrics). */
  load(key: string): { active: number; waiting: number } {
    const lane = this.lanes.get(key);
    return { active: lane?.active ?? 0, waiting: lane?.waiting.length ?? 0 };
  }
}

declare module "fastify" {
  interface FastifyInstance {
    /** One user's (or address's) requests worked on and waiting now. */
    tetherFairShare: { load(key: string): { active: number; waiting: number } };
  }
}

const AUTH_API = "/api/auth/";

export const fairSharePlugin = fp<FairShareOptions>(
  async (fastify, options) => {
    const perCredential = options.perCredential ?? 4;
    const gate = new Gate(perCredential, options.maxQueued ?? 256);
    fastify.decorate("tetherFairShare", { load: (key: string) => gate.load(key) });
    if (perCredential === 0) return;
    const streamPaths = new Set(options.streamPaths ?? []);
    const { authCookies, secret } = await fastify.tetherAuth.$context;
    const cookieName = authCookies.sessionToken.name;
    const digest = (credential: string) => createHash("sha256").update(credential).digest("base64url");

    /** Whose request this is, or undefined when it is exempt. */
    const keyOf = (request: FastifyRequest): string | undefined => {
      const path = request.routeOptions.url ?? request.url;
      if ((request.method === "GET" && streamPaths.has(path)) || path === "/healthz") return undefined;
      const bearer = bearerToken(request.headers.authorization);
      if (bearer?.startsWith(DEVICE_TOKEN_PREFIX)) return undefined;
      if (path.startsWith(AUTH_API)) return `address:${request.ip}`;
      if (bearer) return `credential:${digest(bearer)}`;
      const session = verifySignedCookie(request.cookies[cookieName] ?? "", secret);
      if (session) return `session:${digest(session)}`;
      return `address:${request.ip}`;
    };

    /** The slot of each gated request still in progress. */
    const slots = new WeakMap<FastifyRequest, Slot>();

    // After validation, before the handler: the handler (and what it awaits) runs inside the slot's
    // context, so `outsideFairShare` finds it. A callback hook, so `done` runs within `runInSlot`.
    fastify.addHook("preHandler", (request, reply, done) => {
      const key = keyOf(request);
      if (key === undefined) return done();
      const slot = new Slot(gate, key);
      slots.set(request, slot);
      // The client left: a held slot passes on, a waiting one gives its turn back at once.
      reply.raw.once("close", () => slot.finish());
      slot.acquire().then(
        () => runInSlot(slot, done),
        (error: unknown) => {
          reply.header("retry-after", "1");
          done(error as Error);
        },
      );
    });
    // The answer is ready: the work is done, the slot passes on. (Not when the response closes: answers
    // to requests pipelined on one connection leave in order, so one may wait for another's slot.)
    fastify.addHook("onSend", (request, _reply, payload, done) => {
      slots.get(request)?.finish();
      done(null, payload);
    });
  },
  { name: "tether-fair-share", fastify: "5.x", dependencies: ["tether-auth", "tether-session"] },
);
