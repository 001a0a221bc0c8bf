/**
 * Typed errors that handlers throw; `error-handler.ts` is the one place that maps them to responses.
 * JSON APIs answer `{ code, message }`; pages render the same message.
 */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "HttpError";
  }
}

/** `requireSession` with no session: a thrown 302 to the login page, which the error handler sends as the redirect. */
export class LoginRequiredError extends Error {
  readonly statusCode = 302;
  readonly location = "/login";
  constructor() {
    super("Sign in required");
    this.name = "LoginRequiredError";
  }
}

/** `requireSiteAdmin` for an authenticated non-admin: 403 with body `Forbidden`. */
export class ForbiddenError extends Error {
  readonly statusCode = 403;
  constructor() {
    super("Forbidden");
    this.name = "ForbiddenError";
  }
}

export const badRequest = (code: string, message: string) => new HttpError(400, code, message);
export const unauthorized = (message = "Sign in or send a valid API token") => new HttpError(401, "UNAUTHENTICATED", message);
export const notFound = (message = "Not found") => new HttpError(404, "NOT_FOUND", message);
