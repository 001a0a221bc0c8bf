/** Set by `npm run build:host` (esbuild's `define`): the release public keys this executable trusts. */
declare const __TETHER_UPDATE_KEYS__: readonly string[] | undefined;

/**
 * The Ed25519 public keys (base64 SubjectPublicKeyInfo) a release manifest must be signed by for `tether-host
 * update` to install it. Built in, never configurable at run time: whoever could change them could install
 * anything. Empty when running from the sources or the npm package, which update through npm instead.
 */
export const UPDATE_KEYS: readonly string[] = typeof __TETHER_UPDATE_KEYS__ !== "undefined" ? __TETHER_UPDATE_KEYS__ : [];
