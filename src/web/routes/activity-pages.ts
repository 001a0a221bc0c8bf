import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import fp from "fastify-plugin";
import { ACTIVITY_EVENT_NAMES, ACTIVITY_EVENTS, isActivityEvent } from "../../plugins/activity/events.js";
import { ActivityCursor } from "../../plugins/activity/repository.js";
import { userAdmin } from "../../plugins/auth/user-admin.js";
import { SCOPES } from "../../plugins/session/scopes.js";
import { optionalText } from "../forms.js";
import { signedInUser } from "../guard.js";

const Before = Type.Optional(ActivityCursor);
const OwnQuery = Type.Object({ before: Before });
const AdminQuery = Type.Object({ before: Before, user: optionalText(254), event: optionalText(40), outcome: optionalText(10) });
const EVENT_CHOICES = ACTIVITY_EVENT_NAMES.map((name) => ({ value: name, label: ACTIVITY_EVENTS[name] }));

/** `/settings/activity`: the signed-in user's security events, newest first, a page at a time. */
const ownActivity: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get("/settings/activity", { schema: { querystring: OwnQuery } }, async (request, reply) => {
    const page = await fastify.tetherActivity.list({ userId: signedInUser(request).id, before: request.query.before });
    const older = page.nextCursor ? `/settings/activity?before=${page.nextCursor}` : undefined;
    return reply.tetherRender("settings/activity", { title: "Activity", page, older, newest: request.query.before ? "/settings/activity" : undefined });
  });
};

/**
 * `/admin/activity`: everyone's events for site admins, filtered by user (email), event and outcome.
 * Filters are a GET form, so every view is a link; unknown filter values are ignored, not errors.
 */
const adminActivity: FastifyPluginAsyncTypebox = async (fastify) => {
  const users = userAdmin(fastify.tetherAuth, fastify.tetherDb);
  fastify.addHook("onRequest", async (request) => {
    await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
  });

  fastify.get("/admin/activity", { schema: { querystring: AdminQuery } }, async (request, reply) => {
    const { before, user: email = "", event = "", outcome = "" } = request.query;
    const outcomeFilter = outcome === "ok" || outcome === "error" ? outcome : undefined;
    const filters = { user: email.trim(), event: isActivityEvent(event) ? event : "", outcome: outcomeFilter ?? "" };
    const subject = filters.user ? await users.findByEmail(filters.user) : undefined;
    const page =
      filters.user && !subject
        ? { entries: [], nextCursor: null }
        : await fastify.tetherActivity.list({
            ...(subject ? { userId: subject.id } : {}),
            ...(filters.event ? { event: filters.event } : {}),
            ...(outcomeFilter ? { outcome: outcomeFilter } : {}),
            before,
          });
    const query = (extra: Record<string, string>) =>
      `/admin/activity?${new URLSearchParams({ ...Object.fromEntries(Object.entries(filters).filter(([, v]) => v)), ...extra })}`;
    return reply.tetherRender("admin/activity", {
      title: "Activity",
      page,
      filters,
      eventChoices: EVENT_CHOICES,
      unknownUser: filters.user !== "" && !subject,
      older: page.nextCursor ? query({ before: page.nextCursor }) : undefined,
      newest: before ? query({}) : undefined,
    });
  });
};

export const activityPages = fp(
  async (fastify) => {
    await fastify.register(ownActivity);
    await fastify.register(adminActivity);
  },
  {
    name: "tether-activity-pages",
    fastify: "5.x",
    encapsulate: true,
    dependencies: ["tether-activity", "tether-auth", "tether-db", "tether-session", "tether-page-render"],
  },
);
