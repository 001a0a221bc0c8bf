import { Type } from "@sinclair/typebox";

/**
 * What a form template needs to render itself again: the values to keep (never a password), the
 * error to announce (`role="alert"`), and the field it is about (marked invalid and focused).
 */
export interface FormState {
  values: Record<string, string>;
  error?: string;
  errorField?: string;
}

export const EMAIL_MAX_LENGTH = 254;
export const PASSWORD_MAX_LENGTH = 128;
export const PASSWORD_MIN_LENGTH = 8;
export const NAME_MAX_LENGTH = 100;

/**
 * A form field (or query parameter) as the schema sees it: optional (a missing field gets a
 * friendly message from the handler, on the form itself) but always a string of bounded length.
 * A repeated field (an array), a JSON number or an oversized value fails the schema and gets a
 * rendered 400 page.
 */
export const optionalText = (maxLength: number) => Type.Optional(Type.String({ maxLength }));

export interface AuthFailure {
  status: number;
  code: string | undefined;
  message: string;
}

/**
 * Reads a refused better-auth call for display: its `message`, or `fallback` when it has none.
 * A 429 says how long to wait; a 5xx says nothing about internals.
 */
export async function readAuthFailure(response: Response, fallback: string): Promise<AuthFailure> {
  let body: { message?: unknown; code?: unknown } = {};
  try {
    body = (await response.json()) as typeof body;
  } catch {
    // No JSON body: the fallback text stands.
  }
  const code = typeof body.code === "string" ? body.code : undefined;
  if (response.status === 429) {
    const seconds = Number(response.headers.get("x-retry-after"));
    const wait = seconds > 0 ? `${seconds} seconds` : "a minute";
    return { status: 429, code: "TOO_MANY_ATTEMPTS", message: `Too many attempts. Wait ${wait}, then try again.` };
  }
  if (response.status >= 500) {
    return { status: 500, code, message: "Something went wrong on our side. Please try again." };
  }
  const message = typeof body.message === "string" && body.message.trim() !== "" ? body.message.trim() : fallback;
  return { status: response.status >= 400 ? response.status : 400, code, message };
}
