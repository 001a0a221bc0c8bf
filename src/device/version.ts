/** The device program's version (kept equal to package.json's by a test; not read from it, so the bundle stays small). */
export const HOST_VERSION = "0.1.0";
export const HOST_AGENT = `tether-host/${HOST_VERSION}`;
