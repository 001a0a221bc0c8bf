import type { Kysely } from "kysely";
import fp from "fastify-plugin";
import type { NotificationSource } from "./notifications.js";
import type { Database } from "./schema.js";

declare module "fastify" {
  interface FastifyInstance {
    db: Kysely<Database>;
    /** LISTEN on the database, when the app provides it (enables the session cache). */
    dbListen: NotificationSource | null;
  }
}

export interface DbPluginOptions {
  db: Kysely<Database>;
  listen?: NotificationSource;
}

/** Shares the app's one Kysely instance. The app owns it (and closes it); plugins only borrow it. */
export const dbPlugin = fp<DbPluginOptions>(
  async (fastify, options) => {
    fastify.decorate("db", options.db);
    fastify.decorate("dbListen", options.listen ?? null);
  },
  { name: "tether-db" },
);
