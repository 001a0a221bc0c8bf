import type { Kysely } from "kysely";
import fp from "fastify-plugin";
import type { NotificationSource } from "./notifications.js";
import type { Database } from "./schema.js";

declare module "fastify" {
  interface FastifyInstance {
    tetherDb: Kysely<Database>;
    /** LISTEN on the database, when the app provides it (enables the session cache). */
    tetherDbListen: NotificationSource | null;
  }
}

export interface DbPluginOptions {
  db: Kysely<Database>;
  listen?: NotificationSource;
}

/** Shares the app's one Kysely instance. The app owns it (and closes it); plugins only borrow it. */
export const dbPlugin = fp<DbPluginOptions>(
  async (fastify, options) => {
    fastify.decorate("tetherDb", options.db);
    fastify.decorate("tetherDbListen", options.listen ?? null);
  },
  { name: "tether-db", fastify: "5.x" },
);
