/** Origins: parsing one, and the one list of origins Tether trusts (better-auth and the origin guard share it). */

/** The origin of an http(s) URL, or undefined when it is not one. */
export function originOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/** The trusted origins: the auth base URL's origin first, then the further ones (`TRUSTED_ORIGINS`), once each. */
export function trustedOriginList(baseURL: string, further: readonly string[] = []): string[] {
  return [...new Set([baseURL, ...further].map((value) => originOf(value) ?? value))];
}
