/**
 * The credential in an `Authorization: Bearer <value>` header, or undefined. The one parser: the
 * session plugin (API tokens), the device routes (device tokens) and /mcp all read bearers with it.
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}
