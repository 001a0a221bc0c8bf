/**
 * `tether/web`: Tether's server-rendered pages: Eta templates (`src/views`), enhanced by htmx served from our own
 * origin, every flow working without JavaScript. Register `pagesPlugin`, then `guardedPagesPlugin`:
 *
 *     await app.register(pagesPlugin);
 *     await app.register(guardedPagesPlugin, { pages: [homePage, tokenPages, adminPages, securityPages, sessionPages, activityPages, devicePages] });
 *
 * - `pagesPlugin`: security headers on every response, `/assets/*` (`fastify.tetherAssets`), `reply.tetherRender`,
 *   the error pages (`fastify.tetherErrorPages`), and the public pages (sign-in, sign-up, password reset, sign-out).
 * - `guardedPagesPlugin`: the signed-in area behind the route guard (see guard.ts).
 */
import fp from "fastify-plugin";
import { assetsPlugin } from "./assets.js";
import { errorPagesPlugin } from "./error-pages.js";
import { renderPlugin } from "./render.js";
import { authPages } from "./routes/auth-pages.js";
import { securityHeadersPlugin } from "./security-headers.js";

export { guardedPagesPlugin, signedInUser, type GuardedPagePlugin, type GuardedPagesOptions } from "./guard.js";
export { homePage } from "./routes/home-page.js";
export { tokenPages } from "./routes/token-pages.js";
export { adminPages } from "./routes/admin-pages.js";
export { devicePages } from "./routes/devices-dashboard.js";
export { deviceApprovalPage, type DeviceApprovalPageOptions } from "./routes/device-approval-page.js";
export { securityPages } from "./routes/security-pages.js";
export { sessionPages } from "./routes/session-pages.js";
export { activityPages } from "./routes/activity-pages.js";
export { wantsFragment } from "./render.js";
export type { AssetUrls } from "./assets.js";

export const pagesPlugin = fp(
  async (fastify) => {
    const https = new URL(fastify.tetherAuth.options.baseURL).protocol === "https:";
    await fastify.register(securityHeadersPlugin, { https });
    await fastify.register(assetsPlugin);
    await fastify.register(renderPlugin);
    await fastify.register(errorPagesPlugin, { baseURL: fastify.tetherAuth.options.baseURL });
    await fastify.register(authPages);
  },
  { name: "tether-pages", fastify: "5.x", dependencies: ["tether-errors", "tether-auth", "tether-session", "@fastify/formbody"] },
);
