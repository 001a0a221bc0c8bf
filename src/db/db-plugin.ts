import type { Kysely } from "kysely";
import fp from "fastify-plugin";
import type { Database } from "./schema.js";

declare module "fastify" {
  interface FastifyInstance {
    db: Kysely<Database>;
  }
}

export interface DbPluginOptions {
  db: Kysely<Database>;
}

/** Shares the app's one Kysely instance. The app owns it (and closes it); plugins only borrow it. */
export const dbPlugin = fp<DbPluginOptions>(
  async (fastify, options) => {
    fastify.decorate("db", options.db);
  },
  { name: "tether-db" },
);
