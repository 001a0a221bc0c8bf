import t from "tap";
import { startTestApp } from "../helpers/app.js";

// Errors Fastify raises before routing still answer { code, message }, never sniffed as HTML.
t.test("a malformed URL and an over-long path parameter get the app's error shape", async (t) => {
  const { url } = await startTestApp(t);
  const badEncoding = await fetch(`${url}/api/tokens/%E0%A4%A`, { method: "DELETE" });
  t.equal(badEncoding.status, 400);
  t.match(await badEncoding.json(), { code: "BAD_URL", message: String });
  t.equal(badEncoding.headers.get("x-content-type-options"), "nosniff");

  const longParam = await fetch(`${url}/api/tokens/${"a".repeat(500)}`, { method: "DELETE" });
  t.ok(longParam.status >= 400 && longParam.status < 500, `a 4xx (${longParam.status})`);
  t.match(await longParam.json(), { code: String, message: String });
});
