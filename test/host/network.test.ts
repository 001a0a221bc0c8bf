/**
 * The device's network settings (src/device/http.ts) against a real TLS server whose certificate
 * comes from a private CA made here with openssl: untrusted by default, trusted with TETHER_CA_FILE
 * or NODE_EXTRA_CA_CERTS, and through a proxy given in the environment (a CONNECT tunnel for https).
 */
import { execFile } from "node:child_process";
import { readFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:https";
import { connect } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { HostConfigError } from "../../src/device/config.js";
import { deviceRequest, networkDispatcher } from "../../src/device/http.js";

const run = promisify(execFile);

const work = await mkdtemp(path.join(os.tmpdir(), "tether-network-"));
t.teardown(() => rm(work, { recursive: true, force: true }));
const file = (name: string) => path.join(work, name);
// A private CA, and a certificate for localhost signed by it.
await run("openssl", [
  "req",
  "-x509",
  "-newkey",
  "rsa:2048",
  "-nodes",
  "-days",
  "2",
  "-subj",
  "/CN=Tether Test CA",
  "-keyout",
  file("ca.key"),
  "-out",
  file("ca.pem"),
]);
await run("openssl", ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", file("server.key"), "-out", file("server.csr")]);
await writeFile(file("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
await run("openssl", [
  "x509",
  "-req",
  "-in",
  file("server.csr"),
  "-CA",
  file("ca.pem"),
  "-CAkey",
  file("ca.key"),
  "-CAcreateserial",
  "-days",
  "2",
  "-extfile",
  file("ext.cnf"),
  "-out",
  file("server.pem"),
]);

const server = createServer({ key: await readFile(file("server.key")), cert: await readFile(file("server.pem")) }, (_request, response) =>
  response.end("tls ok"),
);
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
t.teardown(() => new Promise((resolve) => server.close(resolve)));
const url = `https://localhost:${(server.address() as { port: number }).port}/`;

/** A minimal CONNECT proxy that records what it tunnelled. */
const tunnelled: string[] = [];
const proxy = createHttpServer();
proxy.on("connect", (request, client) => {
  tunnelled.push(request.url ?? "");
  const [host, port] = (request.url ?? "").split(":");
  const upstream = connect(Number(port), host === "localhost" ? "127.0.0.1" : host!, () => {
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on("error", () => client.destroy());
  client.on("error", () => upstream.destroy());
});
await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
t.teardown(
  () =>
    new Promise((resolve) => {
      proxy.closeAllConnections();
      proxy.close(resolve);
    }),
);
const proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;

t.test("a private CA is refused by default, trusted through TETHER_CA_FILE or NODE_EXTRA_CA_CERTS", async (t) => {
  await t.rejects(deviceRequest(networkDispatcher({}))(url, { headers: {} }), "an unknown CA is not trusted");
  t.equal(await (await deviceRequest(networkDispatcher({ TETHER_CA_FILE: file("ca.pem") }))(url, { headers: {} })).text(), "tls ok");
  t.equal(await (await deviceRequest(networkDispatcher({ NODE_EXTRA_CA_CERTS: file("ca.pem") }))(url, { headers: {} })).text(), "tls ok");
  t.throws(() => networkDispatcher({ TETHER_CA_FILE: file("missing.pem") }), HostConfigError, "a missing CA file is a configuration error");
});

t.test("HTTPS_PROXY tunnels https requests through the proxy; NO_PROXY goes around it", async (t) => {
  tunnelled.length = 0;
  const viaProxy = deviceRequest(networkDispatcher({ TETHER_CA_FILE: file("ca.pem"), HTTPS_PROXY: proxyUrl }));
  t.equal(await (await viaProxy(url, { headers: {} })).text(), "tls ok");
  t.same(tunnelled, [new URL(url).host], "one CONNECT to the server");
  const bypass = deviceRequest(networkDispatcher({ TETHER_CA_FILE: file("ca.pem"), HTTPS_PROXY: proxyUrl, NO_PROXY: "localhost" }));
  t.equal(await (await bypass(url, { headers: {} })).text(), "tls ok");
  t.equal(tunnelled.length, 1, "NO_PROXY: no new tunnel");
});
