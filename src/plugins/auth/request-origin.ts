import { CLIENT_IP_HEADER } from "./internal-headers.js";

/**
 * Where an auth request came from, for the activity log: the client address the Fastify bridge put
 * in its internal header (never a client-sent copy) and the browser's user agent.
 */
export function requestOrigin(headers: Headers | undefined): { ipAddress: string | null; userAgent: string | null } {
  return { ipAddress: headers?.get(CLIENT_IP_HEADER) || null, userAgent: headers?.get("user-agent") || null };
}
