import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { countPending } from "../../plugins/host/proposals.js";
import { listApiTokens } from "../../plugins/session/api-tokens.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";

/** Initials for the account badge: "Ada Lovelace" → "AL". */
export function initialsOf(name: string): string {
  return (
    name
      .split(/\s+/)
      .filter(Boolean)
      .slice(0, 2)
      .map((word) => word[0]!.toUpperCase())
      .join("") || "?"
  );
}

/** Recent activity entries home shows (the whole list is on /settings/activity). */
const RECENT_ACTIVITY = 5;

/**
 * `/home`: the dashboard (inside the guarded context). With the host plugin: the owner's devices, online or
 * not, the changes waiting for approval, and how to connect an agent over MCP; with the activity plugin, the
 * latest events. Without either, those cards are left out (an app may register these pages alone).
 */
const routes: FastifyPluginAsync = async (fastify) => {
  const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");
  const hasHost = fastify.hasDecorator("tetherHost");
  const hasActivity = fastify.hasDecorator("tetherActivity");

  fastify.get("/home", async (request, reply) => {
    const user = signedInUser(request);
    const [tokens, devices, pending, activity] = await Promise.all([
      listApiTokens(fastify.tetherDb, user.id),
      hasHost ? fastify.tetherHost.listDevices(user.id) : undefined,
      hasHost ? countPending(fastify.tetherDb, user.id).then((counts) => counts.user) : undefined,
      hasActivity ? fastify.tetherActivity.list({ userId: user.id, limit: RECENT_ACTIVITY }) : undefined,
    ]);
    const userCount = user.isSiteAdmin
      ? Number(
          (
            await fastify.tetherDb
              .selectFrom("user")
              .select((eb) => eb.fn.countAll().as("count"))
              .executeTakeFirstOrThrow()
          ).count,
        )
      : 0;
    return reply.tetherRender("home", {
      title: "Home",
      tokenCount: tokens.length,
      userCount,
      initials: initialsOf(user.name),
      devices,
      onlineCount: devices?.filter((device) => device.online).length ?? 0,
      pending,
      activity: activity?.entries,
      mcpEndpoint: `${baseURL}/mcp`,
    });
  });
};

export const homePage = fp(routes, {
  name: "tether-home-page",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-db", "tether-page-render"],
});

/**
 * The count of changes waiting for approval, for the navigation of every signed-in page (`it.navCounts`).
 * Registered inside the guarded context (the app lists it first among its pages); one count query per
 * page, none for an htmx request that swaps part of a page.
 */
export const navCounts = fp(
  async (fastify) => {
    if (!fastify.hasDecorator("tetherHost")) return;
    fastify.addHook("onRequest", async (request: FastifyRequest) => {
      if (!request.tetherUser || wantsFragment(request)) return;
      const { user } = await countPending(fastify.tetherDb, request.tetherUser.id);
      request.tetherNavCounts = { pendingChanges: user };
    });
  },
  { name: "tether-nav-counts", fastify: "5.x", dependencies: ["tether-db", "tether-page-render"] },
);
