import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ForbiddenError, HttpError, LoginRequiredError } from "../../http/errors.js";
import { SESSION_EXPIRES_IN_SECONDS, SESSION_UPDATE_AGE_SECONDS } from "../auth/create-auth.js";
import { notifyUserChanged, onUserChanged } from "../auth/user-changes.js";
import { createApiToken, listApiTokens, revokeApiToken, tokenAllows, type ApiTokenSummary, type CreatedApiToken, type NewApiTokenInput } from "./api-tokens.js";
import { AuthCache } from "./auth-cache.js";
import { verifySignedCookie } from "./cookie-signature.js";
import { createSessionResolver, type CookieSession, type Resolution, type ResolvedSession } from "./resolve-session.js";
import { TokenGrantRegistry, type TokenGrants } from "./token-grants.js";

export interface SessionOptions {
  /** Capability demanded of an API-token caller; a scoped token without it is anonymous. Cookies ignore it. */
  requiredScope?: string;
}

/** What the UI may see (`fetchSession`). */
export interface UiUser {
  id: string;
  name: string;
  email: string;
  isSiteAdmin: boolean;
}
export interface UiSession {
  user: UiUser;
}

/** The signed-in user's API tokens; the one way routes and pages create, list and revoke them. */
export interface ApiTokenService {
  /** Checks `grants` (400 on an unknown kind or id), mints the token, then stores its grants before the value is returned. */
  create(input: NewApiTokenInput & { grants?: TokenGrants }): Promise<CreatedApiToken & { grants?: TokenGrants }>;
  list(userId: string): Promise<(ApiTokenSummary & { grants?: TokenGrants })[]>;
  /** Limits a token may carry besides scopes, registered by the plugins that own them (see token-grants.ts). */
  readonly grants: TokenGrantRegistry;
  /** Deletes one of the user's tokens (false when there is no such token); it stops working at once. */
  revoke(userId: string, tokenId: string): Promise<boolean>;
}

const kReply = Symbol("tether.session.reply");
const kResolution = Symbol("tether.session.resolution");

declare module "fastify" {
  interface FastifyInstance {
    tetherApiTokens: ApiTokenService;
  }
  interface FastifyRequest {
    [kReply]: FastifyReply | null;
    [kResolution]: Promise<Resolution> | null;
    /** The session, or null. For places where anonymous is valid. */
    getSession(options?: SessionOptions): Promise<ResolvedSession | null>;
    /** The session, or a thrown 302 to `/login`. */
    requireSession(options?: SessionOptions): Promise<ResolvedSession>;
    /** The session of a site admin, or a thrown 302 (anonymous) / 403 `Forbidden` (not an admin). */
    requireSiteAdmin(options?: SessionOptions): Promise<ResolvedSession>;
    /**
     * The UI-safe session of a browser (a cookie session), or null. Pages are for browsers: an API
     * token, scoped or not, never opens one (it would read pending diffs and revoke the user's tokens).
     */
    fetchSession(): Promise<UiSession | null>;
    /**
     * The API token this request resolved to (id and scopes), or null for a cookie or anonymous
     * request: for callers that must tell a token from a browser, or name the token in a log.
     */
    getApiToken(): Promise<{ id: string; scopes: string[] } | null>;
  }
}

export const AUTH_INVALIDATION_CHANNEL = "tether_auth_invalidate";

/** The session cache, live only while the database's invalidation channel is. */
async function startAuthCache(fastify: FastifyInstance): Promise<AuthCache> {
  const cache = new AuthCache();
  const subscription = await fastify.tetherDbListen!(AUTH_INVALIDATION_CHANNEL, {
    onMessage: (payload) => cache.invalidate(payload),
    onReady: (proofBoundMs) => cache.resume(proofBoundMs),
    onProven: (sentAt) => cache.prove(sentAt),
    onLost: () => cache.suspend(),
  });
  const stopListening = onUserChanged(fastify.tetherAuth, (userId) => cache.dropUser(userId));
  fastify.addHook("onClose", async () => {
    stopListening();
    cache.suspend();
    await subscription.close();
  });
  return cache;
}

/**
 * For acts only a person at a browser may perform (minting tokens, pairing, approving): a token caller
 * gets 403 `COOKIE_SESSION_REQUIRED`. A token that could do them could, for example, outlive its own revocation.
 */
export function requireCookieSession(session: ResolvedSession, message: string): CookieSession {
  if (session.session === null) throw new HttpError(403, "COOKIE_SESSION_REQUIRED", message);
  return session;
}

/** The one UI-safe view of a user: what pages and `/api/me` may show, never a column added later. */
export function toUiUser(user: ResolvedSession["user"]): UiUser {
  const { id, name, email, isSiteAdmin } = user;
  return { id, name, email, isSiteAdmin: isSiteAdmin === true };
}

export function toUiSession(session: ResolvedSession | null): UiSession | null {
  return session ? { user: toUiUser(session.user) } : null;
}

/**
 * Per-request, lazy session resolution. Nothing runs until a handler asks; the first question
 * resolves the request once and later questions (with any scope) reuse that answer.
 */
export const sessionPlugin = fp(
  async (fastify) => {
    const { tetherAuth: auth, tetherDb: db } = fastify;
    const context = await auth.$context;
    const cookieName = context.authCookies.sessionToken.name;
    const dontRememberCookieName = context.authCookies.dontRememberToken.name;
    const cache = fastify.tetherDbListen ? await startAuthCache(fastify) : undefined;
    const resolveSession = createSessionResolver({
      db,
      auth,
      secret: context.secret,
      expiresInSeconds: SESSION_EXPIRES_IN_SECONDS,
      updateAgeSeconds: SESSION_UPDATE_AGE_SECONDS,
      ...(cache ? { cache } : {}),
    });
    if (cache) forgetOwnSessionAfterAuthCalls(fastify, cache, cookieName, context.secret);

    // Per request: the reply (for cookies better-auth sets while refreshing) and the one resolution.
    // Both start null in the onRequest hook; the helpers are shared functions reading them, so a
    // request that never asks allocates nothing.
    decorateRequests(fastify, (request) =>
      resolveSession({
        sessionCookie: request.cookies[cookieName],
        dontRememberCookie: request.cookies[dontRememberCookieName],
        authorization: request.headers.authorization,
        headers: request.headers,
      }),
    );
    fastify.decorate("tetherApiTokens", apiTokenService(fastify));
  },
  { name: "tether-session", fastify: "5.x", dependencies: ["tether-db", "tether-auth", "tether-errors", "@fastify/cookie"] },
);

/**
 * Whatever an auth API call did to the caller's own session (sign-out, password change), this process
 * forgets it before the response leaves; other processes hear it from the database.
 */
function forgetOwnSessionAfterAuthCalls(fastify: FastifyInstance, cache: AuthCache, cookieName: string, secret: string): void {
  const authBasePath = `${fastify.tetherAuth.options.basePath ?? "/api/auth"}/`;
  fastify.addHook("onSend", (request, _reply, payload, done) => {
    if (request.method === "POST" && request.url.startsWith(authBasePath)) {
      const token = verifySignedCookie(request.cookies[cookieName] ?? "", secret);
      if (token) cache.dropSession(token);
    }
    done(null, payload);
  });
}

/** `request.getSession()` and its siblings, all answered from one resolution per request (`resolve`, run at most once). */
function decorateRequests(fastify: FastifyInstance, resolve: (request: FastifyRequest) => Promise<Resolution>): void {
  const resolveOnce = (request: FastifyRequest): Promise<Resolution> =>
    (request[kResolution] ??= resolve(request).then((resolution) => {
      if (resolution.setCookies.length > 0) request[kReply]?.header("set-cookie", resolution.setCookies);
      return resolution;
    }));

  async function getSession(this: FastifyRequest, options?: SessionOptions) {
    const { session, tokenScopes } = await resolveOnce(this);
    if (session && tokenScopes && !tokenAllows(tokenScopes, options?.requiredScope)) return null;
    return session;
  }
  async function requireSession(this: FastifyRequest, options?: SessionOptions) {
    const session = await this.getSession(options);
    if (!session) throw new LoginRequiredError();
    return session;
  }
  async function requireSiteAdmin(this: FastifyRequest, options?: SessionOptions) {
    const session = await this.requireSession(options);
    if (session.user.isSiteAdmin !== true) throw new ForbiddenError();
    return session;
  }
  async function fetchSession(this: FastifyRequest) {
    const session = await this.getSession();
    return session?.session ? toUiSession(session) : null;
  }
  async function getApiToken(this: FastifyRequest) {
    const { session, tokenScopes, tokenId } = await resolveOnce(this);
    return session && session.session === null && tokenScopes && tokenId ? { id: tokenId, scopes: tokenScopes } : null;
  }

  fastify.decorateRequest(kReply, null);
  fastify.decorateRequest(kResolution, null);
  fastify.decorateRequest("getSession", getSession);
  fastify.decorateRequest("requireSession", requireSession);
  fastify.decorateRequest("requireSiteAdmin", requireSiteAdmin);
  fastify.decorateRequest("fetchSession", fetchSession);
  fastify.decorateRequest("getApiToken", getApiToken);
  fastify.addHook("onRequest", (request, reply, done) => {
    request[kReply] = reply;
    request[kResolution] = null;
    done();
  });
}

/** `fastify.tetherApiTokens`: the token repository, with each change in the activity log and the cache told at once. */
function apiTokenService(fastify: FastifyInstance): ApiTokenService {
  const { tetherAuth: auth, tetherDb: db } = fastify;
  // The activity log (tether-activity) registers after this plugin; it is looked up when a token changes.
  const recordTokenEvent = (userId: string, event: "token.create" | "token.revoke", name: string) => {
    if (fastify.hasDecorator("tetherActivity")) fastify.tetherActivity.record({ userId, event, actor: "session", outcome: "ok", detail: { name } });
  };
  const grants = new TokenGrantRegistry();
  return {
    grants,
    async create({ grants: requested, ...input }) {
      const checked = await grants.check(input.userId, requested);
      const created = await createApiToken(db, input);
      // Nobody holds the value until this returns, so no request can use the token before its grants
      // exist; if storing them fails, the token goes too rather than work unlimited.
      try {
        await grants.store(input.userId, created.id, checked);
      } catch (error) {
        await revokeApiToken(db, input.userId, created.id);
        throw error;
      }
      recordTokenEvent(input.userId, "token.create", created.name);
      return Object.keys(checked).length > 0 ? { ...created, grants: checked } : created;
    },
    async list(userId) {
      const tokens = await listApiTokens(db, userId);
      const granted = await grants.load(
        userId,
        tokens.map((token) => token.id),
      );
      return tokens.map((token) => (granted.has(token.id) ? { ...token, grants: granted.get(token.id)! } : token));
    },
    async revoke(userId, tokenId) {
      const token = (await listApiTokens(db, userId)).find((t) => t.id === tokenId);
      const revoked = await revokeApiToken(db, userId, tokenId);
      // This process's cache forgets the token now; other processes hear it from the database.
      if (revoked) {
        notifyUserChanged(auth, userId);
        await grants.forget(userId, tokenId);
        recordTokenEvent(userId, "token.revoke", token?.name ?? tokenId);
      }
      return revoked;
    },
  };
}
