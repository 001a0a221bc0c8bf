import type { IncomingHttpHeaders } from "node:http";

/** A Fetch `Headers` copy of a Node request's headers (better-auth takes Web requests), minus `omit`. */
export function toWebHeaders(incoming: IncomingHttpHeaders, omit: readonly string[] = []): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || omit.includes(name)) continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return headers;
}
