import t from "tap";
import { inputGuardPlugin, MAX_JSON_DEPTH } from "../../src/http/input-guard.js";
import { testFetch } from "../helpers/inject.js";
import { alone } from "./bare.js";

t.test("inputGuardPlugin alone: deep JSON and unstorable text are refused before any handler", async (t) => {
  const seen: unknown[] = [];
  const { url } = await alone(t, inputGuardPlugin, {}, (app) => {
    app.post("/echo", async (request) => {
      seen.push(request.body);
      return { body: request.body };
    });
    app.get("/items/:name", async (request) => {
      seen.push(request.params);
      return { ok: true };
    });
  });
  const post = (body: string) => testFetch(`${url}/echo`, { method: "POST", headers: { "content-type": "application/json" }, body });

  const fine = await post(JSON.stringify({ name: "ok", nested: [[{ a: 1 }]] }));
  t.equal(fine.status, 200);
  t.same(await fine.json(), { body: { name: "ok", nested: [[{ a: 1 }]] } }, "ordinary JSON still parses");

  const deep = await post("[".repeat(MAX_JSON_DEPTH + 1) + "]".repeat(MAX_JSON_DEPTH + 1));
  t.equal(deep.status, 400);
  t.match(await deep.json(), { code: "JSON_TOO_DEEP" });

  const nul = await post(JSON.stringify({ name: "a\u0000b" }));
  t.equal(nul.status, 400);
  t.match(await nul.json(), { code: "INVALID_CHARACTERS", message: /body \(at "name"\)/ });

  const poisoned = await post('{"__proto__": {"admin": true}}');
  t.equal(poisoned.status, 400, "Fastify's prototype-poisoning check stays behind the depth scan");

  const param = await testFetch(`${url}/items/a%00b`);
  t.equal(param.status, 400);
  t.match(await param.json(), { code: "INVALID_CHARACTERS", message: /path/ });
  t.equal(seen.length, 1, "only the ordinary request reached a handler");
});
