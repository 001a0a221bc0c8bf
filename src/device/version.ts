/** Set by `npm run build:host` (esbuild's `define`); absent when running from the sources or the npm package. */
declare const __TETHER_HOST_VERSION__: string | undefined;

/**
 * The device program's version (kept equal to package.json's by a test; not read from it, so the bundle stays
 * small). A build may be made as another version (the update tests build a "newer release" that way).
 */
export const HOST_VERSION: string = typeof __TETHER_HOST_VERSION__ === "string" ? __TETHER_HOST_VERSION__ : "0.1.0";
export const HOST_AGENT = `tether-host/${HOST_VERSION}`;
