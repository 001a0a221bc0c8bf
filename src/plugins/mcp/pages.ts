import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { HttpError, notFound } from "../../http/errors.js";
import { signedInUser } from "../../web/guard.js";
import { CONTENT_SECURITY_POLICY } from "../../web/security-headers.js";
import { optionalText } from "../../web/forms.js";
import { notifyUserChanged } from "../auth/user-admin.js";
import { HOST_CALL_SCOPE } from "../host/callers.js";
import { mcpOAuthApi, OAUTH_CONSENT_PATH, OAUTH_LOGIN_PATH } from "./oauth.js";
import * as store from "./store.js";

const SETTINGS_PATH = "/settings/mcp";

/** What each scope lets a client do, in the owner's words (the consent page lists them). */
const SCOPE_DESCRIPTIONS: Record<string, string> = {
  [HOST_CALL_SCOPE]:
    "Use your devices through MCP: list them with their folders, read files inside those folders, and propose changes. A change is applied only after you approve it on the Devices page.",
  offline_access: "Stay connected without asking you again, until you revoke its access on the MCP settings page.",
};

/** The parameters better-auth adds to a signed authorization query; the rest is the client's request. */
const SIGNATURE_PARAMS = ["sig", "exp", "ba_iat", "ba_pl", "ba_param"];

const ConsentQuery = Type.Object({ client_id: optionalText(200), scope: optionalText(500), redirect_uri: optionalText(2000) }, { additionalProperties: true });
const ConsentForm = Type.Object({ decision: optionalText(10), oauth_query: optionalText(8000) });
const ActionsForm = Type.Object({ allowActions: optionalText(10) });
const GrantParams = Type.Object({ clientId: Type.String({ minLength: 1, maxLength: 200 }) });
const SettingsQuery = Type.Object({ notice: optionalText(20) });

/**
 * Where better-auth sends a browser that must sign in before authorizing a client: a page that links
 * to the sign-in page, then back to the same authorization request. Outside the guarded context.
 */
export const mcpPublicPages: FastifyPluginAsync = fp(
  async (fastify) => {
    fastify.get(OAUTH_LOGIN_PATH, async (request, reply) => {
      const params = new URLSearchParams(request.url.split("?")[1] ?? "");
      for (const name of SIGNATURE_PARAMS) params.delete(name);
      if (params.get("prompt") === "login") params.delete("prompt");
      const basePath = fastify.tetherAuth.options.basePath ?? "/api/auth";
      return reply.render("mcp/sign-in", { title: "Sign in to continue", continueURL: `${basePath}/oauth2/authorize?${params}`, signedIn: (await request.fetchSession()) !== null });
    });
  },
  { name: "tether-mcp-public-pages", fastify: "5.x", dependencies: ["tether-auth", "tether-session", "tether-page-render"] },
);

/** The consent page and the MCP settings page (inside the guarded context: the owner is signed in). */
const routes: FastifyPluginAsync = async (instance) => {
  const fastify = instance.withTypeProvider<TypeBoxTypeProvider>();
  const oauth = mcpOAuthApi(fastify.tetherAuth);
  const db = fastify.tetherDb;
  const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");

  fastify.get(OAUTH_CONSENT_PATH, { schema: { querystring: ConsentQuery } }, async (request, reply) => {
    const { client_id: clientId, scope, redirect_uri: redirectURI } = request.query;
    const client = clientId ? await oauth.mcpOAuthClient({ body: { clientId } }) : null;
    if (!client) throw new HttpError(400, "UNKNOWN_CLIENT", "This authorization request names no registered client. Start again from your MCP client.");
    const scopes = (scope ?? HOST_CALL_SCOPE).split(" ").filter(Boolean);
    // The decision's 303 goes to the client's redirect URI; browsers apply form-action to that redirect
    // too, so this page allows that one origin (the provider checked it against the registered client).
    const redirectOrigin = redirectURI ? safeURL(redirectURI)?.origin : undefined;
    if (redirectOrigin) reply.header("content-security-policy", CONTENT_SECURITY_POLICY.replace("form-action 'self'", `form-action 'self' ${redirectOrigin}`));
    return reply.render("mcp/consent", {
      title: "Allow access to your devices?",
      client,
      redirectHost: redirectURI ? (safeURL(redirectURI)?.host ?? null) : null,
      scopes: scopes.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? name })),
      allowActions: await store.allowsActions(db, signedInUser(request).id),
      oauthQuery: request.url.split("?")[1] ?? "",
    });
  });

  fastify.post(OAUTH_CONSENT_PATH, { schema: { body: ConsentForm } }, async (request, reply) => {
    const accept = request.body.decision === "allow";
    const response = await fastify.tetherCallAuth(request, reply, {
      method: "POST",
      path: "/oauth2/consent",
      body: { accept, oauth_query: request.body.oauth_query ?? "" },
    });
    const answer = (await response.json().catch(() => ({}))) as { url?: string; redirect_uri?: string };
    const target = answer.url ?? answer.redirect_uri;
    if (!response.ok || !target) throw new HttpError(400, "CONSENT_FAILED", "This authorization request expired or was changed. Start again from your MCP client.");
    // The client's own redirect URI (registered, checked by the provider): a 303 works without JavaScript.
    return reply.redirect(target, 303);
  });

  const showSettings = async (request: FastifyRequest, reply: FastifyReply, notice?: string) => {
    const userId = signedInUser(request).id;
    return reply.render("mcp/settings", {
      title: "MCP",
      endpoint: `${baseURL}/mcp`,
      allowActions: await store.allowsActions(db, userId),
      grants: await oauth.mcpOAuthGrants({ body: { userId } }),
      notice,
    });
  };

  fastify.get(SETTINGS_PATH, { schema: { querystring: SettingsQuery } }, async (request, reply) => {
    const notices: Record<string, string> = { saved: "Saved.", revoked: "Access revoked. That client's next request is refused." };
    return showSettings(request, reply, notices[request.query.notice ?? ""]);
  });

  fastify.post(`${SETTINGS_PATH}/actions`, { schema: { body: ActionsForm } }, async (request, reply) => {
    await store.setAllowActions(db, signedInUser(request).id, request.body.allowActions === "on");
    return redirectTo(request, reply, `${SETTINGS_PATH}?notice=saved`);
  });

  fastify.post(`${SETTINGS_PATH}/grants/:clientId/revoke`, { schema: { params: GrantParams } }, async (request, reply) => {
    const userId = signedInUser(request).id;
    const { revoked } = await oauth.revokeMcpOAuthGrant({ body: { userId, clientId: request.params.clientId } });
    if (!revoked) throw notFound("This client has no access to revoke. It may have been revoked in another window.");
    // Open MCP notification streams of this user re-check their credential now.
    notifyUserChanged(fastify.tetherAuth, userId);
    return redirectTo(request, reply, `${SETTINGS_PATH}?notice=revoked`);
  });
};

function safeURL(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

export const mcpPages = fp(routes, {
  name: "tether-mcp-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-db", "tether-session", "tether-page-render", "@fastify/formbody"],
});
