import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import QRCode from "qrcode";
import { redirectTo } from "../../http/error-handler.js";
import { optionalText, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, readAuthFailure } from "../forms.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";

const SECURITY_PATH = "/settings/security";
const PasswordBody = Type.Object({
  currentPassword: optionalText(PASSWORD_MAX_LENGTH),
  newPassword: optionalText(PASSWORD_MAX_LENGTH),
  signOutOthers: optionalText(10),
});
const PasswordOnlyBody = Type.Object({ password: optionalText(PASSWORD_MAX_LENGTH) });
const CodeBody = Type.Object({ code: optionalText(20) });
const PasskeyParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const SecurityQuery = Type.Object({ notice: optionalText(30) });

/** Status texts after a redirect: fixed words, never reflected input. */
const NOTICES = new Map([
  ["password", "Your password has been changed."],
  ["password-others", "Your password has been changed and every other session was signed out."],
  ["two-factor-on", "Two-factor authentication is on. Keep your backup codes somewhere safe."],
  ["two-factor-off", "Two-factor authentication is off."],
  ["passkey-added", "Passkey added. You can sign in with it now."],
  ["passkey-removed", "Passkey removed."],
]);

/** Which section a form error belongs to, so the page shows it there. */
type Section = "password" | "two-factor" | "passkeys";
interface SectionError {
  section: Section;
  message: string;
}

/**
 * `/settings/security`: password change, two-factor (TOTP and backup codes) and passkeys. Every form
 * posts here and is carried out by better-auth over its own HTTP path (`tetherCallAuth`: its checks,
 * hooks and rate limits apply, its cookies are forwarded). Without JavaScript each answer is a page;
 * with htmx the panel is swapped. Adding a passkey needs WebAuthn, so that button is for JavaScript only.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const db = fastify.tetherDb;
  const passkeysEnabled = fastify.tetherPasskeysEnabled();

  const showSecurity = async (request: FastifyRequest, reply: FastifyReply, extras: { error?: SectionError; notice?: string } = {}) => {
    const user = signedInUser(request);
    const [account, passkeys] = await Promise.all([
      db.selectFrom("user").select("twoFactorEnabled").where("id", "=", user.id).executeTakeFirst(),
      passkeysEnabled
        ? db.selectFrom("passkey").select(["id", "name", "createdAt", "deviceType"]).where("userId", "=", user.id).orderBy("createdAt", "desc").execute()
        : Promise.resolve([]),
    ]);
    const data = {
      title: "Security",
      twoFactorEnabled: account?.twoFactorEnabled === true,
      passkeysEnabled,
      passkeys,
      minPasswordLength: PASSWORD_MIN_LENGTH,
      ...extras,
    };
    return reply.tetherRender(wantsFragment(request) ? "settings/security-panel" : "settings/security", data);
  };

  /** A refusal shown in its section: 400 for a form problem, better-auth's status otherwise. */
  const refuse = (request: FastifyRequest, reply: FastifyReply, section: Section, message: string, status = 400) =>
    showSecurity(request, reply.code(status), { error: { section, message } });

  fastify.get(SECURITY_PATH, { schema: { querystring: SecurityQuery } }, async (request, reply) =>
    showSecurity(request, reply, { notice: NOTICES.get(request.query.notice ?? "") }),
  );

  fastify.post(`${SECURITY_PATH}/password`, { schema: { body: PasswordBody } }, async (request, reply) => {
    const { currentPassword = "", newPassword = "" } = request.body;
    const signOutOthers = request.body.signOutOthers === "on";
    if (currentPassword === "") return refuse(request, reply, "password", "Enter your current password.");
    if (newPassword.length < PASSWORD_MIN_LENGTH)
      return refuse(request, reply, "password", `Choose a new password of at least ${PASSWORD_MIN_LENGTH} characters.`);
    const response = await fastify.tetherCallAuth(request, reply, {
      method: "POST",
      path: "/change-password",
      body: { currentPassword, newPassword, revokeOtherSessions: signOutOthers },
    });
    if (!response.ok) {
      const failure = await readAuthFailure(response, "The password could not be changed");
      const message = failure.code === "INVALID_PASSWORD" ? "Your current password is not correct." : failure.message;
      return refuse(request, reply, "password", message, failure.status);
    }
    return redirectTo(request, reply, `${SECURITY_PATH}?notice=${signOutOthers ? "password-others" : "password"}`);
  });

  twoFactorRoutes(fastify, refuse);
  if (passkeysEnabled) passkeyRemoval(fastify, refuse);
};

/** Turning two-factor authentication on (a new secret, then a code proving the app has it) and off. */
function twoFactorRoutes(instance: FastifyInstance, refuse: Refuse): void {
  const fastify = instance.withTypeProvider<TypeBoxTypeProvider>();
  /**
   * Turning two-factor on or off needs the password; better-auth checks it. An empty field is
   * answered here without a call (a 400 Response, as better-auth would give for a wrong password).
   */
  const withPassword = async (request: FastifyRequest<{ Body: { password?: string } }>, reply: FastifyReply, path: string, verb: string) => {
    const password = request.body.password ?? "";
    if (password === "")
      return Response.json({ code: "PASSWORD_REQUIRED", message: `Enter your password to ${verb} two-factor authentication.` }, { status: 400 });
    return fastify.tetherCallAuth(request, reply, { method: "POST", path, body: { password } });
  };
  const refusePassword = async (request: FastifyRequest, reply: FastifyReply, response: Response, verb: string) => {
    const failure = await readAuthFailure(response, `Two-factor authentication could not be ${verb === "turn on" ? "turned on" : "turned off"}`);
    const message = failure.code === "INVALID_PASSWORD" ? "Your password is not correct." : failure.message;
    return refuse(request, reply, "two-factor", message, failure.status);
  };

  // Step 1: the password, then a new TOTP secret (QR code and key) and backup codes, shown once.
  fastify.post(`${SECURITY_PATH}/two-factor/enable`, { schema: { body: PasswordOnlyBody } }, async (request, reply) => {
    const response = await withPassword(request, reply, "/two-factor/enable", "turn on");
    if (!response.ok) return refusePassword(request, reply, response, "turn on");
    const { totpURI, backupCodes } = (await response.json()) as { totpURI: string; backupCodes: string[] };
    return showSetup(request, reply, { totpURI, backupCodes });
  });

  const showSetup = async (request: FastifyRequest, reply: FastifyReply, setup: { totpURI?: string; backupCodes?: string[]; error?: string }) => {
    const qrSvg = setup.totpURI ? await QRCode.toString(setup.totpURI, { type: "svg", margin: 1, errorCorrectionLevel: "M" }) : undefined;
    const secret = setup.totpURI ? (new URL(setup.totpURI).searchParams.get("secret") ?? undefined) : undefined;
    const data = { title: "Turn on two-factor", qrSvg, secret, backupCodes: setup.backupCodes, error: setup.error };
    return reply.tetherRender(wantsFragment(request) ? "settings/two-factor-setup-panel" : "settings/two-factor-setup", data);
  };

  // Step 2: a code from the app proves it has the secret; only then is two-factor on.
  fastify.post(`${SECURITY_PATH}/two-factor/confirm`, { schema: { body: CodeBody } }, async (request, reply) => {
    const code = (request.body.code ?? "").replace(/\s+/g, "");
    if (!/^\d{6}$/.test(code)) return showSetup(request, reply.code(400), { error: "Enter the 6-digit code your app shows." });
    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/two-factor/verify-totp", body: { code } });
    if (!response.ok) {
      const failure = await readAuthFailure(response, "The code could not be checked");
      const message = failure.code === "INVALID_CODE" ? "That code is not correct. Enter the code your app shows now." : failure.message;
      return showSetup(request, reply.code(failure.status), { error: message });
    }
    return redirectTo(request, reply, `${SECURITY_PATH}?notice=two-factor-on`);
  });

  fastify.post(`${SECURITY_PATH}/two-factor/disable`, { schema: { body: PasswordOnlyBody } }, async (request, reply) => {
    const response = await withPassword(request, reply, "/two-factor/disable", "turn off");
    if (!response.ok) return refusePassword(request, reply, response, "turn off");
    return redirectTo(request, reply, `${SECURITY_PATH}?notice=two-factor-off`);
  });
}

/** Removing a passkey (adding one is WebAuthn: the browser talks to better-auth's own routes). */
function passkeyRemoval(fastify: FastifyInstance, refuse: Refuse): void {
  fastify
    .withTypeProvider<TypeBoxTypeProvider>()
    .post(`${SECURITY_PATH}/passkeys/:id/delete`, { schema: { params: PasskeyParams } }, async (request, reply) => {
      const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/passkey/delete-passkey", body: { id: request.params.id } });
      if (!response.ok) {
        const failure = await readAuthFailure(response, "The passkey could not be removed");
        return refuse(request, reply, "passkeys", failure.message, failure.status);
      }
      return redirectTo(request, reply, `${SECURITY_PATH}?notice=passkey-removed`);
    });
}

/** Shows the security page again with a refusal in one section. */
type Refuse = (request: FastifyRequest, reply: FastifyReply, section: Section, message: string, status?: number) => Promise<unknown>;

export const securityPages = fp(routes, {
  name: "tether-security-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-db", "tether-session", "tether-page-render", "@fastify/formbody"],
});
