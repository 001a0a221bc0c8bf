import { sql } from "kysely";
import t from "tap";
import { dbPlugin } from "../../src/db/db-plugin.js";
import { testFetch } from "../helpers/inject.js";
import { alone, fileDatabase } from "./bare.js";

t.test("dbPlugin alone: fastify.tetherDb is the app's Kysely instance, borrowed not owned", async (t) => {
  const { db } = await fileDatabase();
  const { app, url } = await alone(t, dbPlugin, { db }, (app) => {
    app.get("/users", async () => {
      const row = await app.tetherDb
        .selectFrom("user")
        .select((eb) => eb.fn.countAll().as("count"))
        .executeTakeFirstOrThrow();
      return { count: Number(row.count) };
    });
  });
  t.equal(app.tetherDb, db);
  t.equal(app.tetherDbListen, null, "no LISTEN unless the app gives one (the session cache stays off)");
  t.same(await (await testFetch(`${url}/users`)).json(), { count: 0 });
  await app.close();
  t.same((await sql<{ one: number }>`select 1 as one`.execute(db)).rows, [{ one: 1 }], "closing the app leaves the database open for its owner");
});
