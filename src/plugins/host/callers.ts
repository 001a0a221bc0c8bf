import type { FastifyRequest } from "fastify";
import { unauthorized } from "../../http/errors.js";
import { requireCookieSession } from "../session/session-plugin.js";
import { SCOPES } from "../session/scopes.js";
import type { Caller } from "./service.js";
import { tokenCredential } from "./credential-grants.js";

/**
 * Who may list devices, call tools and see proposals: the owner's browser session, or an API token
 * carrying `host:call`. The one check, for the JSON API and the /devices page alike.
 */
export async function hostCaller(request: FastifyRequest): Promise<Caller> {
  const session = await request.getSession({ requiredScope: SCOPES.hostCall });
  if (!session) throw unauthorized(`Sign in, or send an API token with the "${SCOPES.hostCall}" scope`);
  if (session.session) return { userId: session.user.id, actor: "session" };
  // Name the token in the audit log, as /mcp does, so the owner's activity says which token made each call.
  const token = await request.getApiToken();
  if (!token) return { userId: session.user.id, actor: "token" };
  const credential = tokenCredential(token.id);
  // A token limited to chosen devices reaches only those, on every route (service.ts checks `deviceIds`).
  const deviceIds = await request.server.tetherHost.deviceGrant(session.user.id, credential);
  return { userId: session.user.id, actor: "token", credential, ...(deviceIds ? { deviceIds } : {}) };
}

/**
 * Pairing, revoking and deciding on proposals are a person's acts: they need the owner's browser
 * session. An agent holding a token can propose a change, never approve its own proposal.
 */
export async function hostPerson(request: FastifyRequest): Promise<Caller> {
  const session = await request.getSession();
  if (!session) throw unauthorized();
  requireCookieSession(session, "This needs the owner's signed-in browser session, not an API token");
  return { userId: session.user.id, actor: "session" };
}
