import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { HttpError, notFound } from "../../http/errors.js";
import { signedInUser } from "../../web/guard.js";
import { policyWithFormActions } from "../../web/security-headers.js";
import { optionalText } from "../../web/forms.js";
import { loginPath } from "../../web/return-path.js";
import { notifyUserChanged } from "../auth/user-admin.js";
import { OFFLINE_ACCESS_SCOPE, SCOPES } from "../session/scopes.js";
import { mcpOAuthApi, OAUTH_CONSENT_PATH, OAUTH_LOGIN_PATH } from "./oauth.js";
import { clientConfigurations, grantDetails } from "./grant-details.js";
import * as store from "./store.js";
import { deviceGrantsOf, oauthCredential } from "../host/credential-grants.js";

const SETTINGS_PATH = "/settings/mcp";

/** What each scope lets a client do, in the owner's words (the consent page lists them). */
const SCOPE_DESCRIPTIONS: Record<string, string> = {
  [SCOPES.hostCall]:
    "Use your devices through MCP: list them with their folders, read files inside those folders, and propose changes. A change is applied only after you approve it on the Devices page.",
  [SCOPES.hostRead]: "Read only: list your devices and read files inside their folders. It cannot see or use tools that change anything.",
  [OFFLINE_ACCESS_SCOPE]: "Stay connected without asking you again, until you revoke its access on the MCP settings page.",
};

/** The parameters better-auth adds to a signed authorization query; the rest is the client's request. */
const SIGNATURE_PARAMS = ["sig", "exp", "ba_iat", "ba_pl", "ba_param"];

const ConsentQuery = Type.Object({ client_id: optionalText(200), scope: optionalText(500), redirect_uri: optionalText(2000) }, { additionalProperties: true });
/** `devices`: the ticked devices (one value each); none ticked is every device. */
const ConsentForm = Type.Object({
  decision: optionalText(10),
  oauth_query: optionalText(8000),
  access: optionalText(10),
  devices: Type.Optional(Type.Union([Type.String({ maxLength: 100 }), Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100 })])),
});

/** The devices the owner ticked on the consent page; undefined (every device) when none. */
function chosenDevices(devices: string | string[] | undefined): string[] | undefined {
  const ids = (Array.isArray(devices) ? devices : [devices]).filter((id): id is string => typeof id === "string" && id !== "");
  return ids.length > 0 ? ids : undefined;
}

/**
 * The scopes the owner grants: all the client asked for, or, when it asked for both host scopes and the
 * owner chose "read only", without host:call (the provider accepts any subset of the request).
 */
function grantedScopes(requested: readonly string[], access: string | undefined): string[] {
  if (access !== "read" || !requested.includes(SCOPES.hostRead)) return [...requested];
  return requested.filter((scope) => scope !== SCOPES.hostCall);
}
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
      const continueURL = `${basePath}/oauth2/authorize?${params}`;
      // Signing in comes back to the same authorization request, in the same tab.
      return reply.tetherRender("mcp/sign-in", {
        title: "Sign in to continue",
        continueURL,
        signInURL: loginPath(continueURL),
        signedIn: (await request.fetchSession()) !== null,
      });
    });
  },
  { name: "tether-mcp-public-pages", fastify: "5.x", dependencies: ["tether-auth", "tether-session", "tether-page-render"] },
);

/** The consent page and the MCP settings page (inside the guarded context: the owner is signed in). */
const routes: FastifyPluginAsync = async (fastify) => {
  await fastify.register(consentPage);
  await fastify.register(settingsPage);
};

/** The OAuth consent page: what the provider signed, the owner's choice of access and devices, and the decision. */
const consentPage: FastifyPluginAsyncTypebox = async (fastify) => {
  const oauth = mcpOAuthApi(fastify.tetherAuth);
  const db = fastify.tetherDb;

  fastify.get(OAUTH_CONSENT_PATH, { schema: { querystring: ConsentQuery } }, async (request, reply) => {
    // Only what the provider signed is shown: a query anyone can write (another client's name, scopes
    // it never asked for, a redirect URI that was never checked) is refused before it reaches the page.
    const oauthQuery = request.url.split("?")[1] ?? "";
    const consent = await oauth.mcpConsentRequest({ body: { signedQuery: oauthQuery } });
    if (!consent) throw new HttpError(400, "CONSENT_REQUEST_INVALID", "This authorization request expired or was changed. Start again from your MCP client.");
    const client = await oauth.mcpOAuthClient({ body: { clientId: consent.clientId } });
    if (!client) throw new HttpError(400, "UNKNOWN_CLIENT", "This authorization request names no registered client. Start again from your MCP client.");
    const { scope, redirectURI } = consent;
    const scopes = (scope ?? SCOPES.hostCall).split(" ").filter(Boolean);
    // The decision's 303 goes to the client's redirect URI; browsers apply form-action to that redirect
    // too, so this page allows that one origin (the provider checked it against the registered client).
    if (redirectURI) reply.header("content-security-policy", policyWithFormActions([redirectURI]));
    return reply.tetherRender("mcp/consent", {
      title: "Allow access to your devices?",
      client,
      redirectHost: redirectURI ? (safeURL(redirectURI)?.host ?? null) : null,
      scopes: scopes
        .filter((name) => !(name === SCOPES.hostRead && scopes.includes(SCOPES.hostCall)))
        .map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? name })),
      // Asked for both: the owner may give read-only access instead of all it asked for.
      offersReadOnly: scopes.includes(SCOPES.hostCall) && scopes.includes(SCOPES.hostRead),
      readOnlyDescription: SCOPE_DESCRIPTIONS[SCOPES.hostRead],
      allowActions: await store.allowsActions(db, signedInUser(request).id),
      // The owner may limit the client to some devices (none ticked: all, including ones paired later).
      devices: (await fastify.tetherHost.listDevices(signedInUser(request).id)).map((device) => ({
        id: device.id,
        name: device.name,
        platform: device.platform,
      })),
      oauthQuery,
    });
  });

  fastify.post(OAUTH_CONSENT_PATH, { schema: { body: ConsentForm } }, async (request, reply) => {
    const accept = request.body.decision === "allow";
    const oauthQuery = request.body.oauth_query ?? "";
    // The client and scopes as the provider signed them (a posted form is anyone's words); the provider checks again.
    const consent = accept ? await oauth.mcpConsentRequest({ body: { signedQuery: oauthQuery } }) : null;
    const scope = consent?.scope && request.body.access === "read" ? grantedScopes(consent.scope.split(" ").filter(Boolean), "read").join(" ") : undefined;
    // The device grant is stored before the provider records the consent, so no token of this client is
    // ever issued wider than the owner chose. Unknown or another user's devices: 400 UNKNOWN_DEVICE.
    if (consent) await fastify.tetherHost.grantDevices(signedInUser(request).id, oauthCredential(consent.clientId), chosenDevices(request.body.devices));
    const response = await fastify.tetherCallAuth(request, reply, {
      method: "POST",
      path: "/oauth2/consent",
      body: { accept, oauth_query: oauthQuery, ...(scope ? { scope } : {}) },
    });
    const answer = (await response.json().catch(() => ({}))) as { url?: string; redirect_uri?: string };
    const target = answer.url ?? answer.redirect_uri;
    if (!response.ok || !target)
      throw new HttpError(400, "CONSENT_FAILED", "This authorization request expired or was changed. Start again from your MCP client.");
    // The client's own redirect URI (registered, checked by the provider): a 303 works without JavaScript.
    return reply.redirect(target, 303);
  });
};

/** /settings/mcp: the endpoint and client configurations, whether action tools are allowed, and the clients let in. */
const settingsPage: FastifyPluginAsyncTypebox = async (fastify) => {
  const oauth = mcpOAuthApi(fastify.tetherAuth);
  const db = fastify.tetherDb;
  const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");

  const showSettings = async (request: FastifyRequest, reply: FastifyReply, notice?: string) => {
    const userId = signedInUser(request).id;
    const grants = await grantDetails(db, userId, await oauth.mcpOAuthGrants({ body: { userId } }));
    // Which devices each client may use: "All", or the names of those the owner chose (a removed one says so).
    const limits = await deviceGrantsOf(
      db,
      userId,
      grants.map((grant) => oauthCredential(grant.clientId)),
    );
    const names = new Map((await fastify.tetherHost.listDevices(userId)).map((device) => [device.id, device.name]));
    const devicesOf = (clientId: string) =>
      limits
        .get(oauthCredential(clientId))
        ?.map((id) => names.get(id) ?? "a removed device")
        .join(", ") || (limits.has(oauthCredential(clientId)) ? "none" : "All");
    return reply.tetherRender("mcp/settings", {
      title: "MCP",
      endpoint: `${baseURL}/mcp`,
      allowActions: await store.allowsActions(db, userId),
      grants: grants.map((grant) => ({ ...grant, devices: devicesOf(grant.clientId) })),
      configurations: clientConfigurations(`${baseURL}/mcp`),
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
    await fastify.tetherHost.grantDevices(userId, oauthCredential(request.params.clientId), undefined);
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
  dependencies: ["tether-auth", "tether-db", "tether-session", "tether-host", "tether-page-render", "@fastify/formbody"],
});
