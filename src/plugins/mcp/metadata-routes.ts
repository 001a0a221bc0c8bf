import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { jsonResponses } from "../../http/response-schemas.js";
import type { Auth } from "../auth/create-auth.js";
import { SCOPES } from "../session/scopes.js";

/** RFC 9728's protected-resource metadata, as far as this server fills it in. */
const ResourceMetadata = Type.Object({
  resource: Type.String(),
  authorization_servers: Type.Array(Type.String()),
  scopes_supported: Type.Array(Type.String()),
  bearer_methods_supported: Type.Array(Type.String()),
  resource_name: Type.String(),
});

export interface MetadataRoutesOptions {
  /** The /mcp endpoint's public URL (the OAuth "resource"). */
  resourceURL: string;
  /** The server's public base URL, no trailing slash. */
  baseURL: string;
  /** The authorization server's issuer when OAuth is on; undefined when only API tokens work. */
  issuer: string | undefined;
  auth: Auth;
}

/**
 * The discovery documents an MCP client reads before it authenticates: RFC 9728's protected-resource
 * metadata (at the root and at the resource's path), and with OAuth on, RFC 8414's authorization-server
 * metadata where clients look for it.
 */
export function metadataRoutes(fastify: FastifyInstance, { resourceURL, baseURL, issuer, auth }: MetadataRoutesOptions): void {
  const resourcePath = new URL(resourceURL).pathname;
  const metadata = {
    resource: resourceURL,
    authorization_servers: issuer ? [issuer] : [],
    scopes_supported: [SCOPES.hostCall, SCOPES.hostRead],
    bearer_methods_supported: ["header"],
    resource_name: "Tether",
  };
  const metadataSchema = { response: jsonResponses({ 200: ResourceMetadata }) };
  fastify.get("/.well-known/oauth-protected-resource", { schema: metadataSchema }, async () => metadata);
  fastify.get(`/.well-known/oauth-protected-resource${resourcePath}`, { schema: metadataSchema }, async () => metadata);
  if (!issuer) return;
  // RFC 8414's location for an issuer with a path (`<base>/api/auth`) lies outside better-auth's base
  // path; the provider plugin answers it when handed the request. A client that knows only the
  // origin (MCP 2025-03-26 discovery) looks at the root, so the same document is served there too.
  const issuerPath = new URL(issuer).pathname.replace(/\/$/, "");
  const metadataPath = `/.well-known/oauth-authorization-server${issuerPath}`;
  const serveMetadata = async (request: FastifyRequest, reply: FastifyReply) => {
    const query = request.url.includes("?") ? request.url.slice(request.url.indexOf("?")) : "";
    const response = await auth.handler(new Request(new URL(metadataPath + query, baseURL)));
    reply.code(response.status);
    for (const [name, value] of response.headers) reply.header(name, value);
    return reply.send(await response.text());
  };
  fastify.get(metadataPath, serveMetadata);
  if (issuerPath !== "") fastify.get("/.well-known/oauth-authorization-server", serveMetadata);
}
