import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import {
  EMAIL_MAX_LENGTH,
  optionalText,
  NAME_MAX_LENGTH,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  readAuthFailure,
  type AuthFailure,
  type FormState,
} from "../forms.js";
import { wantsFragment } from "../render.js";
import { afterSignIn, RETURN_PARAM, RETURN_PATH_MAX_LENGTH, safeReturnPath } from "../return-path.js";
import { recoveryPage, RESET_DONE_PATH } from "./recovery-page.js";
import { TWO_FACTOR_LOGIN_PATH, twoFactorLogin } from "./two-factor-login.js";

/** The page to return to after signing in (return-path.ts decides whether it is followed). */
const Next = optionalText(RETURN_PATH_MAX_LENGTH);
const LoginBody = Type.Object({ email: optionalText(EMAIL_MAX_LENGTH), password: optionalText(PASSWORD_MAX_LENGTH), next: Next });
const SignupBody = Type.Object({
  name: optionalText(NAME_MAX_LENGTH),
  email: optionalText(EMAIL_MAX_LENGTH),
  password: optionalText(PASSWORD_MAX_LENGTH),
  next: Next,
});
const ForgotBody = Type.Object({ email: optionalText(EMAIL_MAX_LENGTH) });
const ResetBody = Type.Object({ token: optionalText(200), newPassword: optionalText(PASSWORD_MAX_LENGTH) });
const LoginQuery = Type.Object({ reset: optionalText(20), notice: optionalText(20), next: Next });
const SignupQuery = Type.Object({ next: Next });
const ForgotQuery = Type.Object({ email: optionalText(EMAIL_MAX_LENGTH) });
const ResetQuery = Type.Object({ token: optionalText(200), error: optionalText(100) });

/** Where signing out lands: the sign-in page, saying "You are signed out". */
export const SIGNED_OUT_PATH = "/login?notice=signed-out";

/** Where the app lands a signed-in user. */
export const HOME_PATH = "/home";

/** The return path a sign-in page was given: `?next=` on a GET, the hidden `next` field on a POST. */
function returnPathOf(request: FastifyRequest): unknown {
  const source = (request.method === "GET" ? request.query : request.body) as Record<string, unknown> | undefined;
  return source?.[RETURN_PARAM];
}

type AuthForm = "login" | "signup" | "forgot-password" | "reset-password";

/** Renders an auth page, or only its form for an htmx request (swapped in place of the form). */
function showForm(request: FastifyRequest, reply: FastifyReply, form: AuthForm, data: Record<string, unknown>) {
  return reply.tetherRender(wantsFragment(request) ? `auth/${form}-form` : `auth/${form}`, data);
}

/** The field a better-auth error code is about, so the form can mark and focus it. */
function fieldOf(code: string | undefined, fallback: string): string {
  if (!code || code === "INVALID_EMAIL_OR_PASSWORD") return fallback;
  if (code.includes("PASSWORD")) return "password";
  if (code.includes("EMAIL") || code.startsWith("USER_ALREADY_EXISTS")) return "email";
  return fallback;
}

function failedForm(values: Record<string, string>, failure: AuthFailure, fallbackField: string): FormState {
  return { values, error: failure.message, errorField: fieldOf(failure.code, fallbackField) };
}

/**
 * Sign-in and sign-up: only for visitors who are not signed in. The hook sends a signed-in visitor
 * home before anything renders, and before a second sign-in or sign-up could run.
 */
const guestOnlyPages: FastifyPluginAsyncTypebox = async (fastify) => {
  // Signed in already (in another tab, say): on to the page that asked, as a fresh sign-in would.
  fastify.addHook("onRequest", async (request, reply) => {
    if (await request.fetchSession()) return redirectTo(request, reply, afterSignIn(returnPathOf(request), HOME_PATH), request.method === "GET" ? 302 : 303);
  });

  const loginPage = (request: FastifyRequest, reply: FastifyReply, form: FormState, notice?: string) =>
    showForm(request, reply, "login", {
      title: "Sign in",
      form,
      notice,
      next: safeReturnPath(returnPathOf(request)),
      ssoEnabled: fastify.tetherEdgeSsoEnabled(),
      passkeysEnabled: fastify.tetherPasskeysEnabled(),
    });

  const LOGIN_NOTICES = new Map([
    ["done", "Your password has been changed. Sign in with your new password."],
    ["two-factor", "That sign-in expired. Enter your password again."],
    ["signed-out", "You are signed out. Sign in again to continue."],
  ]);

  fastify.get("/login", { schema: { querystring: LoginQuery } }, async (request, reply) => {
    const notice = LOGIN_NOTICES.get(request.query.reset ?? "") ?? LOGIN_NOTICES.get(request.query.notice ?? "");
    return loginPage(request, reply, { values: {} }, notice);
  });

  fastify.post("/login", { schema: { body: LoginBody } }, async (request, reply) => {
    const email = (request.body.email ?? "").trim();
    const password = request.body.password ?? "";
    const values = { email };
    if (email === "") return loginPage(request, reply.code(400), { values, error: "Enter your email address.", errorField: "email" });
    if (password === "") return loginPage(request, reply.code(400), { values, error: "Enter your password.", errorField: "password" });

    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/sign-in/email", body: { email, password } });
    if (response.ok) {
      // With two-factor on, the password is only the first step (better-auth set its challenge cookie).
      const signedIn = (await response.json()) as { twoFactorRedirect?: boolean };
      const next = safeReturnPath(request.body.next);
      if (signedIn.twoFactorRedirect)
        return redirectTo(request, reply, next ? `${TWO_FACTOR_LOGIN_PATH}?${RETURN_PARAM}=${encodeURIComponent(next)}` : TWO_FACTOR_LOGIN_PATH);
      return redirectTo(request, reply, next ?? HOME_PATH);
    }
    const failure = await readAuthFailure(response, "Login failed");
    return loginPage(request, reply.code(failure.status), failedForm(values, failure, "password"));
  });

  // Edge SSO (only when enabled): the proxy in front of us has authenticated the browser and asserts
  // who it is in headers, which `callAuth` forwards with the request to better-auth's `/edge/sign-in`.
  if (fastify.tetherEdgeSsoEnabled()) {
    fastify.post("/login/sso", async (request, reply) => {
      const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/edge/sign-in", body: {} });
      if (response.ok) return redirectTo(request, reply, HOME_PATH);
      const failure = await readAuthFailure(response, "Single sign-on failed");
      return reply.code(failure.status).tetherRender("auth/login", { title: "Sign in", form: { values: {} }, ssoError: failure.message, ssoEnabled: true });
    });
  }

  await fastify.register(twoFactorLogin, { homePath: HOME_PATH });

  const signupPage = (request: FastifyRequest, reply: FastifyReply, form: FormState) =>
    showForm(request, reply, "signup", {
      title: "Create your account",
      form,
      minPasswordLength: PASSWORD_MIN_LENGTH,
      next: safeReturnPath(returnPathOf(request)),
    });

  fastify.get("/signup", { schema: { querystring: SignupQuery } }, async (request, reply) => signupPage(request, reply, { values: {} }));

  fastify.post("/signup", { schema: { body: SignupBody } }, async (request, reply) => {
    const name = (request.body.name ?? "").trim();
    const email = (request.body.email ?? "").trim();
    const password = request.body.password ?? "";
    const values = { name, email };
    const refuse = (error: string, errorField: string) => signupPage(request, reply.code(400), { values, error, errorField });
    if (name === "") return refuse("Enter your name.", "name");
    if (email === "") return refuse("Enter your email address.", "email");
    if (password.length < PASSWORD_MIN_LENGTH) return refuse(`Choose a password of at least ${PASSWORD_MIN_LENGTH} characters.`, "password");

    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/sign-up/email", body: { name, email, password } });
    if (response.ok) return redirectTo(request, reply, afterSignIn(request.body.next, HOME_PATH));
    const failure = await readAuthFailure(response, "Sign-up failed");
    return signupPage(request, reply.code(failure.status), failedForm(values, failure, "email"));
  });
};

/**
 * The public pages: sign-in, sign-up, password reset and sign-out. Each form posts form-encoded data
 * here; the handler calls better-auth over its own HTTP path (`callAuth`: rate limits and checks
 * apply, its cookies are forwarded) and redirects (303, or `HX-Redirect` for htmx). A refusal renders
 * the form again with the message and the email kept.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const baseURL = fastify.tetherAuth.options.baseURL;
  const resetPageURL = new URL("/reset-password", baseURL).href;

  fastify.get("/", async (_request, reply) => reply.redirect(HOME_PATH, 302));

  await fastify.register(guestOnlyPages);

  fastify.post("/logout", async (request, reply) => {
    // better-auth deletes the session row and clears the cookie (forwarded by callAuth) whether or
    // not the session was still valid; the visitor lands on the sign-in page either way, which says so.
    await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/sign-out", body: {} });
    return redirectTo(request, reply.header("cache-control", "no-store"), SIGNED_OUT_PATH);
  });

  const forgotPage = (request: FastifyRequest, reply: FastifyReply, form: FormState, sentTo?: string) =>
    showForm(request, reply, "forgot-password", { title: "Reset your password", form, sentTo });

  fastify.get("/forgot-password", { schema: { querystring: ForgotQuery } }, async (request, reply) =>
    forgotPage(request, reply, { values: { email: (request.query.email ?? "").trim() } }),
  );

  fastify.post("/forgot-password", { schema: { body: ForgotBody } }, async (request, reply) => {
    const email = (request.body.email ?? "").trim();
    const values = { email };
    if (email === "") return forgotPage(request, reply.code(400), { values, error: "Enter your email address.", errorField: "email" });
    const response = await fastify.tetherCallAuth(request, reply, {
      method: "POST",
      path: "/request-password-reset",
      body: { email, redirectTo: resetPageURL },
    });
    if (!response.ok) {
      const failure = await readAuthFailure(response, "The reset link could not be sent");
      return forgotPage(request, reply.code(failure.status), failedForm(values, failure, "email"));
    }
    // The same answer whether or not the account exists: the page must not reveal who has one.
    return forgotPage(request, reply, { values: {} }, email);
  });

  const resetPage = (request: FastifyRequest, reply: FastifyReply, data: { form: FormState; token?: string; invalidLink?: boolean }) =>
    showForm(request, reply, "reset-password", { title: "Choose a new password", minPasswordLength: PASSWORD_MIN_LENGTH, ...data });

  // The emailed link goes through better-auth (`/api/auth/reset-password/<token>`), which checks the
  // token and redirects here with `?token=` (or `?error=INVALID_TOKEN`).
  fastify.get("/reset-password", { schema: { querystring: ResetQuery } }, async (request, reply) => {
    const { token, error } = request.query;
    if (error || !token) return resetPage(request, reply.code(400), { form: { values: {} }, invalidLink: true });
    return resetPage(request, reply, { form: { values: {} }, token });
  });

  await fastify.register(recoveryPage);

  fastify.post("/reset-password", { schema: { body: ResetBody } }, async (request, reply) => {
    const token = request.body.token ?? "";
    const newPassword = request.body.newPassword ?? "";
    if (token === "") return resetPage(request, reply.code(400), { form: { values: {} }, invalidLink: true });
    if (newPassword.length < PASSWORD_MIN_LENGTH) {
      const error = `Choose a password of at least ${PASSWORD_MIN_LENGTH} characters.`;
      return resetPage(request, reply.code(400), { form: { values: {}, error, errorField: "newPassword" }, token });
    }
    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/reset-password", body: { newPassword, token } });
    // The confirmation lists what the reset left working (better-auth set the recovery cookie it reads).
    if (response.ok) return redirectTo(request, reply, RESET_DONE_PATH);
    const failure = await readAuthFailure(response, "The password could not be changed");
    if (failure.code === "INVALID_TOKEN") return resetPage(request, reply.code(400), { form: { values: {} }, invalidLink: true });
    return resetPage(request, reply.code(failure.status), { form: { values: {}, error: failure.message, errorField: "newPassword" }, token });
  });
};

export const authPages = fp(routes, {
  name: "tether-auth-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-session", "tether-page-render", "@fastify/formbody"],
});
