import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { HttpError, notFound } from "../../http/errors.js";
import { API_TOKEN_LIMITS, type CreatedApiToken } from "../../plugins/session/api-tokens.js";
import { optionalText, type FormState } from "../forms.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";

const TOKENS_PATH = "/settings/tokens";
const { nameMaxLength: NAME_MAX_LENGTH, maxScopes: MAX_SCOPES } = API_TOKEN_LIMITS;
const scopePattern = new RegExp(API_TOKEN_LIMITS.scopePattern);
/** A token that is not (or no longer) one of the user's: revoked in another tab, or never theirs. */
const GONE = "This token does not exist any more. It may have been revoked in another window.";

/** Lifetimes offered by the form; "" is a token that never expires. */
export const EXPIRY_CHOICES = [
  { value: "30", label: "30 days" },
  { value: "90", label: "90 days" },
  { value: "365", label: "1 year" },
  { value: "", label: "Never" },
] as const;

const CreateTokenForm = Type.Object({ name: optionalText(500), expiresInDays: optionalText(10), scopes: optionalText(2000) });
const TokenParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
const TokensQuery = Type.Object({ notice: optionalText(20) });

interface PanelExtras {
  form?: FormState;
  created?: CreatedApiToken;
  notice?: string;
  focusNotice?: boolean;
}

type TokenInput = { name: string; scopes: string[]; expiresInDays: number | undefined; grants?: Record<string, string[]> };

/** A grant kind's field on the form (`grants.devices`): one value per ticked box. */
const grantField = (kind: string) => `grants.${kind}`;

/** The ticked ids of each grant kind; none ticked is no limit of that kind. */
function readGrants(body: Record<string, unknown>, kinds: readonly string[]): Record<string, string[]> | undefined {
  const grants: Record<string, string[]> = {};
  for (const kind of kinds) {
    const raw = body[grantField(kind)];
    const ids = (Array.isArray(raw) ? raw : [raw]).filter((id): id is string => typeof id === "string" && id !== "");
    if (ids.length > 0) grants[kind] = ids;
  }
  return Object.keys(grants).length > 0 ? grants : undefined;
}

/** Checks the create form; the first problem is returned with the field it is about. */
function readTokenForm(body: { name?: string; expiresInDays?: string; scopes?: string }): TokenInput | FormState {
  const values = { name: (body.name ?? "").trim(), expiresInDays: body.expiresInDays ?? "", scopes: (body.scopes ?? "").trim() };
  const refuse = (error: string, errorField: string): FormState => ({ values, error, errorField });
  if (values.name === "") return refuse("Give the token a name.", "name");
  if (values.name.length > NAME_MAX_LENGTH) return refuse(`Use a name of at most ${NAME_MAX_LENGTH} characters.`, "name");
  const choice = EXPIRY_CHOICES.find((c) => c.value === values.expiresInDays);
  if (!choice) return refuse("Choose one of the offered lifetimes.", "expiresInDays");
  const scopes = values.scopes === "" ? [] : values.scopes.split(/[\s,]+/).filter(Boolean);
  const badScope = scopes.find((scope) => !scopePattern.test(scope));
  if (badScope !== undefined) {
    return refuse(`“${badScope.slice(0, 64)}” is not a scope: use lowercase letters, digits and : _ . -`, "scopes");
  }
  if (scopes.length > MAX_SCOPES) return refuse(`A token can have at most ${MAX_SCOPES} scopes.`, "scopes");
  return { name: values.name, scopes, expiresInDays: choice.value === "" ? undefined : Number(choice.value) };
}

/** `/settings/tokens`: the signed-in user's API tokens (inside the guarded context). */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  /** The whole page, or only the panel for an htmx request. */
  const showTokens = async (request: FastifyRequest, reply: FastifyReply, extras: PanelExtras = {}) => {
    const userId = signedInUser(request).id;
    const kinds = fastify.tetherApiTokens.grants.kinds;
    const grantChoices = await Promise.all(
      kinds.map(async (kind) => ({
        name: kind.name,
        field: grantField(kind.name),
        label: kind.label,
        hint: kind.hint,
        goneLabel: kind.goneLabel,
        choices: await kind.choices(userId),
      })),
    );
    const data = {
      title: "API tokens",
      tokens: await fastify.tetherApiTokens.list(userId),
      grantChoices,
      expiryChoices: EXPIRY_CHOICES,
      form: { values: {} },
      ...extras,
    };
    return reply.tetherRender(wantsFragment(request) ? "settings/tokens-panel" : "settings/tokens", data);
  };

  const findOwnToken = async (request: FastifyRequest<{ Params: { id: string } }>) => {
    const token = (await fastify.tetherApiTokens.list(signedInUser(request).id)).find((t) => t.id === request.params.id);
    if (!token) throw notFound(GONE);
    return token;
  };

  fastify.get(TOKENS_PATH, { schema: { querystring: TokensQuery } }, async (request, reply) =>
    showTokens(request, reply, { notice: request.query.notice === "revoked" ? "Token revoked." : undefined }),
  );

  fastify.post(TOKENS_PATH, { schema: { body: CreateTokenForm } }, async (request, reply) => {
    const input = readTokenForm(request.body);
    if ("values" in input) return showTokens(request, reply.code(400), { form: input });
    const grants = readGrants(
      request.body,
      fastify.tetherApiTokens.grants.kinds.map((kind) => kind.name),
    );
    const created = await fastify.tetherApiTokens
      .create({ userId: signedInUser(request).id, ...input, ...(grants ? { grants } : {}) })
      .catch((error: unknown) => {
        // A device removed in another window since the form was shown: said on the form, not as an error page.
        if (error instanceof HttpError && error.statusCode === 400)
          return { values: request.body, error: error.message, errorField: "grants" } satisfies FormState;
        throw error;
      });
    if ("values" in created) return showTokens(request, reply.code(400), { form: created });
    // The value is in this response and nowhere else: it is never stored, and the page is no-store.
    return showTokens(request, reply, { created });
  });

  // Without JavaScript, "Revoke" opens this confirmation page; with htmx, hx-confirm asks instead.
  fastify.get(`${TOKENS_PATH}/:id/revoke`, { schema: { params: TokenParams } }, async (request, reply) =>
    reply.tetherRender("settings/revoke-token", { title: "Revoke token", token: await findOwnToken(request) }),
  );

  fastify.post(`${TOKENS_PATH}/:id/revoke`, { schema: { params: TokenParams } }, async (request, reply) => {
    const token = await findOwnToken(request);
    if (!(await fastify.tetherApiTokens.revoke(signedInUser(request).id, token.id))) throw notFound(GONE);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${TOKENS_PATH}?notice=revoked`);
    return showTokens(request, reply, { notice: `Token “${token.name}” revoked.`, focusNotice: true });
  });
};

export const tokenPages = fp(routes, {
  name: "tether-token-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-session", "tether-page-render", "@fastify/formbody"],
});
