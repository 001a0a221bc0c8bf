import t from "tap";
import { signedStateKey, signState, verifyState } from "../../src/crypto/signed-state.js";
import { signedIn } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { TEST_SECRET } from "../helpers/app.js";
import { readJson } from "../helpers/client.js";
import { approvalWorld } from "./helpers.js";
import { connectV2, rawWriteFileCall } from "./v2.js";

/** Approval inside one tool call at 2026-07-28: input_required with a URL elicitation, a signed requestState. */
const { url, owner, deviceId, token } = await approvalWorld(t);
const URL_ELICITATION = { elicitation: { url: {} } };

/** One raw 2026-07-28 tools/call from a client that declares URL-mode elicitation. */
const call = (bearer: string, params: Record<string, unknown>) => rawWriteFileCall(url, bearer, { device: deviceId, path: "a.txt", content: "x" }, params);

t.test("the SDK v2 client: input_required, the owner approves at the URL, the retry gets the applied result", async (t) => {
  const client = await connectV2(t, url, token, "2026-07-28", URL_ELICITATION);
  const asked: string[] = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    const params = request.params as { mode?: string; url?: string };
    asked.push(params.url ?? "");
    const proposalId = decodeURIComponent(new URL(params.url!).pathname.split("/").pop()!);
    // The owner decides in the browser, signed in: the client only says it is done.
    t.match(await readJson(await owner.post("/api/host/approve", { proposalId })), { status: "applied" });
    return { action: "accept" };
  });
  const result = await client.callTool({ name: "write_file", arguments: { device: deviceId, path: "a.txt", content: "x" } });
  t.equal(asked.length, 1);
  t.match(asked[0], new RegExp(`^${url}/devices/proposals/`));
  t.notOk(result.isError);
  t.match(result.structuredContent, { status: "applied", result: /"written": "a.txt"/ });
});

t.test("raw: pending asks again, rejected is a refusal; forged, altered and other-account states are refused", async (t) => {
  const first = await call(token, {});
  t.equal(first.result.resultType, "input_required");
  const state = first.result.requestState as string;
  t.match(first.result.inputRequests.approval, { method: "elicitation/create", params: { mode: "url", url: /\/devices\/proposals\// } });

  const again = await call(token, { requestState: state, inputResponses: { approval: { action: "accept" } } });
  t.equal(again.result.resultType, "input_required", "still pending: accept from the client approves nothing");

  const altered = state.replace(/^./, (c) => (c === "e" ? "f" : "e"));
  t.equal((await call(token, { requestState: altered })).error.code, -32602);
  const forged = signState(
    signedStateKey("another-secret-0123456789abcdef0123456789", "mcp-approval"),
    JSON.parse(Buffer.from(state.split(".")[0]!, "base64url").toString()),
    new Date(Date.now() + 60_000),
  );
  t.equal((await call(token, { requestState: forged })).error.code, -32602);

  const stranger = await signedIn(url);
  const strangerToken = await mintToken(stranger, { name: "other", scopes: ["host:call"] });
  t.equal((await call(strangerToken, { requestState: state })).error.code, -32602, "another account's credential");
  const sameUserOtherToken = await mintToken(owner, { name: "other", scopes: ["host:call"] });
  t.equal((await call(sameUserOtherToken, { requestState: state })).error.code, -32602, "another credential of the same user");

  const payload = JSON.parse(Buffer.from(state.split(".")[0]!, "base64url").toString()) as { p: string };
  t.equal((await owner.post("/api/host/reject", { proposalId: payload.p })).status, 200);
  const refused = await call(token, { requestState: state });
  t.equal(refused.result.isError, true);
  t.match(refused.result.structuredContent, { status: "rejected" });
});

t.test("an expired state is refused (the app secret's key, past its expiry)", async (t) => {
  const key = signedStateKey(TEST_SECRET, "mcp-approval");
  const expired = signState(key, { p: "x" }, new Date(Date.now() - 1000));
  t.match(verifyState(key, expired), { ok: false, reason: "expired" });
  t.equal((await call(token, { requestState: expired })).error.code, -32602);
  t.match(verifyState(signedStateKey(TEST_SECRET, "other-purpose"), signState(key, { p: "x" }, new Date(Date.now() + 60_000))), { ok: false, reason: "mac" });
});

t.test("a client without URL elicitation gets today's answer: the proposal id and the link", async (t) => {
  const client = await connectV2(t, url, token, "2026-07-28");
  const result = await client.callTool({ name: "write_file", arguments: { device: deviceId, path: "b.txt", content: "y" } });
  t.match(result.structuredContent, { status: "pending", proposalId: /./, approveAt: `${url}/devices` });
});
