/**
 * Every route the app registers, as registered (method and URL pattern), collected by an `onRoute`
 * hook. Registered first, it sees the routes of every later plugin, including pages a consuming app
 * adds: the page-guard and fuzz tests walk it so that a route added tomorrow is covered without
 * anyone remembering to list it, and an operator can print it.
 */
import fp from "fastify-plugin";

export interface RouteSummary {
  method: string;
  /** The URL pattern, e.g. `/devices/:id/tools/:tool`. */
  url: string;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Every route registered so far (one entry per method), in registration order. */
    tetherRoutes: readonly RouteSummary[];
  }
}

export const routeInventoryPlugin = fp(
  async (fastify) => {
    const routes: RouteSummary[] = [];
    fastify.decorate("tetherRoutes", routes);
    fastify.addHook("onRoute", (route) => {
      for (const method of [route.method].flat()) routes.push({ method, url: route.url });
    });
  },
  { name: "tether-route-inventory", fastify: "5.x" },
);
