/**
 * Every route the app registers, as registered (method and URL pattern), collected by an `onRoute`
 * hook. Registered first, it sees the routes of every later plugin, including pages a consuming app
 * adds: the page-guard and fuzz tests walk it so that a route added tomorrow is covered without
 * anyone remembering to list it, and an operator can print it. Each entry names the statuses its
 * response schema covers, so a test can hold every JSON route to having one, and the query parameters
 * its schema declares, so the fuzz test sends each of them extreme values.
 */
import fp from "fastify-plugin";

export interface RouteSummary {
  method: string;
  /** The URL pattern, e.g. `/devices/:id/tools/:tool`. */
  url: string;
  /** The keys of the route's response schema (`"200"`, `"4xx"`, …); empty when it declares none. */
  responseStatuses: readonly string[];
  /** The properties of the route's querystring schema; empty when it declares none. */
  queryParameters: readonly string[];
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
      const responseStatuses = Object.keys((route.schema?.response as Record<string, unknown> | undefined) ?? {});
      const queryParameters = Object.keys((route.schema?.querystring as { properties?: Record<string, unknown> } | undefined)?.properties ?? {});
      for (const method of [route.method].flat()) routes.push({ method, url: route.url, responseStatuses, queryParameters });
    });
  },
  { name: "tether-route-inventory", fastify: "5.x" },
);
