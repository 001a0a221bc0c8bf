import { createHash, randomBytes } from "node:crypto";
import { UrlElicitationRequiredError } from "@modelcontextprotocol/server";
import type { Kysely } from "kysely";
import { signState, verifyState, type SignedStateKey } from "../../crypto/signed-state.js";
import type { Database } from "../../db/schema.js";
import { canonicalJson } from "../../protocol/manifest.js";
import type { Proposal } from "../host/proposals.js";
import type { HostService } from "../host/service.js";
import { approvalRequest } from "./approval.js";
import { DEVICE_ARGUMENT } from "./catalog.js";
import type { McpCaller } from "./credentials.js";

/**
 * Approval inside the tool call at MCP 2025-11-25, for a client that declared URL-mode elicitation in
 * `initialize`: a mutate tool answers the JSON-RPC error -32042 (URL elicitation required) with the
 * proposal's page; the owner decides there, signed in to Tether; the client retries the same call and
 * gets the applied result, the refusal, or -32042 again while the proposal waits. What the 2026-07-28
 * `input_required` round does (approval.ts), in that revision's words.
 *
 * Tether serves 2025-11-25 without state on any replica, so two things a session would hold travel
 * instead:
 * - **What the client declared.** `initialize` from such a client is answered with an `Mcp-Session-Id`
 *   that says so, signed with a key derived from the app secret; the client sends it on every later
 *   request, and any replica reads it back. A client that declared nothing gets no session id, as before.
 *   The id grants nothing (every request still carries its credential) and a forged one is ignored.
 * - **Which proposal a retry is about.** That revision's retry carries no state, so the call (the user,
 *   the credential, the tool and its arguments) is digested into a key stored with its proposal
 *   (`mcp_url_elicitation`) until a retry takes the decision, or the proposal expires. The same call made
 *   again after that is a new proposal (so is a retry after the proposal expired undecided: the owner gets
 *   a fresh one to decide).
 */

/** A session id is good for a year; past that, the client is served as one that declared nothing. */
const SESSION_LIFETIME_MS = 365 * 24 * 60 * 60_000;

/** The `Mcp-Session-Id` for the answer to `initialize`: only for a client that declared URL-mode elicitation. */
export function legacySessionId(key: SignedStateKey, initialize: unknown): string | undefined {
  const params = (initialize as { params?: { capabilities?: { elicitation?: { url?: unknown } } } } | null)?.params;
  const url = params?.capabilities?.elicitation?.url;
  if (typeof url !== "object" || url === null) return undefined;
  return signState(key, { elicitation: ["url"], n: randomBytes(12).toString("base64url") }, new Date(Date.now() + SESSION_LIFETIME_MS));
}

/** Whether a request's `Mcp-Session-Id` is one `legacySessionId` made. */
export function sessionDeclaresUrlElicitation(key: SignedStateKey, sessionId: string | string[] | undefined): boolean {
  if (typeof sessionId !== "string") return false;
  const checked = verifyState(key, sessionId);
  return checked.ok && Array.isArray(checked.payload.elicitation) && checked.payload.elicitation.includes("url");
}

/** The -32042 error that sends the owner to the proposal's page; its elicitation id is the proposal's. */
export function urlElicitationRequired(proposal: Pick<Proposal, "id" | "tool" | "deviceId">, devicesURL: string): UrlElicitationRequiredError {
  const { message, url } = approvalRequest(proposal, devicesURL, "retry this same call");
  return new UrlElicitationRequiredError([{ mode: "url", elicitationId: proposal.id, url, message }], message);
}

/**
 * Whether a call is known never to propose: its device is connected and announces the tool as a read or an
 * action tool. Such a call is never waiting for a retry, so it needs no lookup (the common call, kept off the
 * database); anything else (a mutate tool, a device named by name or offline) is looked up.
 */
export function neverProposes(host: Pick<HostService, "dispatcher">, tool: string, args: Record<string, unknown>): boolean {
  const reference = args[DEVICE_ARGUMENT];
  const announced = typeof reference === "string" ? host.dispatcher.toolsOf(reference)?.find((candidate) => candidate.name === tool) : undefined;
  return announced !== undefined && announced.class !== "mutate";
}

/** The calls waiting for their retry, by the digest of who called what with which arguments. */
export class UrlElicitationRetries {
  constructor(private readonly db: Kysely<Database>) {}

  /** The key of one call: the same user, credential, tool and arguments (key order aside) make the same key. */
  static keyOf(caller: McpCaller, tool: string, args: Record<string, unknown>): string {
    let canonical: string;
    try {
      canonical = canonicalJson(args);
    } catch {
      // Arguments canonical JSON cannot hold (a fraction): as sent, which a retry repeats.
      canonical = JSON.stringify(args);
    }
    return createHash("sha256")
      .update(JSON.stringify([caller.userId, caller.credentialKey, tool, canonical]))
      .digest("base64url");
  }

  /** The proposal an earlier identical call made and no retry has taken yet. */
  async waiting(userId: string, key: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom("mcp_url_elicitation")
      .select("proposal_id")
      .where("retry_key", "=", key)
      .where("user_id", "=", userId)
      .where("expires_at", ">", new Date())
      .executeTakeFirst();
    return row?.proposal_id;
  }

  /** Ties the call to its new proposal until the proposal expires, and forgets the user's expired ones. */
  async remember(caller: McpCaller, key: string, proposal: Pick<Proposal, "id" | "expiresAt">): Promise<void> {
    await this.db.deleteFrom("mcp_url_elicitation").where("user_id", "=", caller.userId).where("expires_at", "<=", new Date()).execute();
    await this.db
      .insertInto("mcp_url_elicitation")
      .values({ retry_key: key, user_id: caller.userId, credential: caller.credentialKey, proposal_id: proposal.id, expires_at: proposal.expiresAt })
      .onConflict((conflict) => conflict.column("retry_key").doUpdateSet({ proposal_id: proposal.id, expires_at: proposal.expiresAt, created_at: new Date() }))
      .execute();
  }

  /** The proposals of this credential's waiting calls that the owner has decided (their retries will take the outcome). */
  async decided(caller: McpCaller): Promise<string[]> {
    const rows = await this.db
      .selectFrom("mcp_url_elicitation as e")
      .innerJoin("host_proposal as p", "p.id", "e.proposal_id")
      .select("e.proposal_id")
      .where("e.user_id", "=", caller.userId)
      .where("e.credential", "=", caller.credentialKey)
      .where("e.expires_at", ">", new Date())
      .where("p.status", "not in", ["pending", "applying"])
      .execute();
    return rows.map((row) => row.proposal_id);
  }

  /** The retry has taken the decision: the same call made again is a new proposal. */
  async forget(key: string): Promise<void> {
    await this.db.deleteFrom("mcp_url_elicitation").where("retry_key", "=", key).execute();
  }
}

/**
 * `notifications/elicitation/complete` on a 2025-11-25 client's notification stream (its `GET /mcp`): each
 * proposal its credential is waiting on, once the owner has decided it on any replica (the host's watch
 * hears of every decision), so an agent can retry without waiting for its user to say "done". The
 * notification is optional in that revision; a client without the stream retries when its user is done.
 * Returns the function that stops following.
 */
export function notifyDecisions(
  host: Pick<HostService, "watch">,
  retries: UrlElicitationRetries,
  caller: McpCaller,
  notify: (elicitationId: string) => void,
  onError: (error: unknown) => void,
): () => void {
  const told = new Set<string>();
  let stopped = false;
  const check = () => {
    retries.decided(caller).then((ids) => {
      for (const id of ids) {
        if (stopped || told.has(id)) continue;
        told.add(id);
        notify(id);
      }
    }, onError);
  };
  check();
  const unwatch = host.watch(caller.userId, (topic) => topic === "proposals" && check());
  return () => {
    stopped = true;
    unwatch();
  };
}
