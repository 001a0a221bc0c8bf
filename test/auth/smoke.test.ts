import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";

t.test("sign up, then /api/me answers with the cookie session", async (t) => {
  const { url } = await startTestApp(t);
  const client = new TestClient(url);
  const id = await client.signUp(uniqueEmail());
  const me = await client.get("/api/me");
  t.equal(me.status, 200);
  t.match(await me.json(), { user: { id, isSiteAdmin: false }, via: "cookie" });
});
