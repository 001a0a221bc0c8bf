import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type, type Static } from "@sinclair/typebox";
import fp from "fastify-plugin";
import { unauthorized } from "../../http/errors.js";
import { DateTime, jsonResponses, Nullable } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";
import { ACTIVITY_EVENT_NAMES, type ActivityEntry } from "./events.js";
import { ActivityCursor, ActivityLimit, listActivity, type ActivityPage, type ActivityQuery } from "./repository.js";
import type { ActivityWriter } from "./writer.js";
import { SCOPES } from "../session/scopes.js";

export interface ActivityPluginOptions {
  writer: ActivityWriter;
}

export interface ActivityService {
  /** Queues an entry for the log (off the request path). */
  record(entry: ActivityEntry): void;
  list(query: ActivityQuery): Promise<ActivityPage>;
  /** Writes what is queued (tests; the app does it on close). */
  flush(): Promise<void>;
}

declare module "fastify" {
  interface FastifyInstance {
    tetherActivity: ActivityService;
  }
}

const limitOf = (limit: string | undefined) => (limit === undefined ? undefined : Number(limit));
const EventName = Type.Union(ACTIVITY_EVENT_NAMES.map((name) => Type.Literal(name)));
const OwnQuery = Type.Object(
  { before: Type.Optional(ActivityCursor), limit: Type.Optional(ActivityLimit), event: Type.Optional(EventName) },
  { additionalProperties: false },
);
const AdminQuery = Type.Object(
  {
    before: Type.Optional(ActivityCursor),
    limit: Type.Optional(ActivityLimit),
    event: Type.Optional(EventName),
    userId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    outcome: Type.Optional(Type.Union([Type.Literal("ok"), Type.Literal("error")])),
  },
  { additionalProperties: false },
);
export const ActivityEntrySchema = Type.Object({
  id: Type.String(),
  at: DateTime,
  event: Type.String(),
  label: Type.String(),
  actor: Type.String(),
  outcome: Type.String(),
  errorCode: Nullable(Type.String()),
  ipAddress: Nullable(Type.String()),
  userAgent: Nullable(Type.String()),
  detail: Nullable(Type.Record(Type.String(), Type.Unknown())),
  user: Nullable(Type.Object({ id: Type.String(), name: Type.String(), email: Type.String() })),
  device: Nullable(Type.Object({ id: Type.String(), name: Type.String() })),
  tool: Nullable(Type.String()),
  credential: Nullable(Type.String()),
  /** That credential's name (an API token's, an OAuth client's); null when there is none, or it was deleted. */
  credentialName: Nullable(Type.String()),
});
const ActivityPageSchema = Type.Object({ entries: Type.Array(ActivityEntrySchema), nextCursor: Nullable(Type.String()) });
export type ActivityPageJson = Static<typeof ActivityPageSchema>;

/**
 * The activity log: `fastify.tetherActivity` for the code that records and reads it, and its JSON
 * API: `GET /api/activity` (the caller's own events) and `GET /api/admin/activity` (everyone's, site
 * admins only, with filters). Both are newest first, paginated by `before=<nextCursor>`.
 */
const plugin: FastifyPluginAsyncTypebox<ActivityPluginOptions> = async (fastify, options) => {
  const { writer } = options;
  const db = fastify.tetherDb;
  fastify.decorate("tetherActivity", {
    record: (entry) => writer.record(entry),
    list: (query) => listActivity(db, query),
    flush: () => writer.flush(),
  } satisfies ActivityService);
  fastify.addHook("onClose", async () => writer.flush());

  await fastify.register(activityApi);
};

/** The JSON API, in a context of its own (its strict validator stays here). */
const activityApi: FastifyPluginAsyncTypebox = async (api) => {
  const db = api.tetherDb;
  api.setValidatorCompiler(strictValidatorCompiler);
  const response = jsonResponses({ 200: ActivityPageSchema });

  api.get("/api/activity", { schema: { querystring: OwnQuery, response } }, async (request) => {
    const session = await request.getSession({ requiredScope: SCOPES.activity });
    if (!session) throw unauthorized();
    return listActivity(db, { ...request.query, limit: limitOf(request.query.limit), userId: session.user.id });
  });

  api.get("/api/admin/activity", { schema: { querystring: AdminQuery, response } }, async (request) => {
    await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
    return listActivity(db, { ...request.query, limit: limitOf(request.query.limit) });
  });
};

export const activityPlugin = fp(plugin, {
  name: "tether-activity",
  fastify: "5.x",
  dependencies: ["tether-db", "tether-session", "tether-errors"],
});
