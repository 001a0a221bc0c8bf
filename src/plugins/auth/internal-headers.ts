/**
 * Headers through which the Fastify bridge tells better-auth what only the socket knows. better-auth
 * sees a Web Request with no socket, so the bridge removes any client-sent copy of these and sets them
 * itself on every request: a client can never choose its rate-limit bucket or pose as the proxy.
 */
/** The client address as Fastify resolves it (`request.ip`, honouring `trustProxy`). */
export const CLIENT_IP_HEADER = "x-tether-client-ip";
/** The address of the directly connected peer (the reverse proxy, for edge SSO). */
export const PEER_IP_HEADER = "x-tether-peer-ip";

export const INTERNAL_HEADERS = [CLIENT_IP_HEADER, PEER_IP_HEADER] as const;
