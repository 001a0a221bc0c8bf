import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import { fileURLToPath } from "node:url";

/**
 * The ceiling any Node server has for the blobs section's first fetch on this machine: a bare `node:http`
 * relay (no Fastify, no authentication, no sha256, no store) that pipes one upload into one waiting
 * download, fed by a sender in its own process, read by the same client as the other rows. Tether's first
 * fetch does all it skips; if this relay is far from half of nginx, so is any server built on Node here.
 *
 * `tsx bench/node-relay.ts server <port> <bytes>` and `tsx bench/node-relay.ts sender <port> <bytes>`.
 */
const HERE = fileURLToPath(import.meta.url);

/** Starts the relay on `port`; resolves once it listens. */
export async function startRelay(port: number, bytes: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", HERE, "server", String(port), String(bytes)], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    child.stdout.once("data", resolve);
    child.once("exit", (code) => reject(new Error(`the relay exited (${code}) before listening`)));
  });
  return child;
}

/** Starts the sender: it uploads `bytes` to the relay, which passes them to the download already waiting. */
export function startSender(port: number, bytes: number): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", HERE, "sender", String(port), String(bytes)], { stdio: "inherit" });
}

function serve(port: number, bytes: number): void {
  let download: http.ServerResponse | undefined;
  let uploadWaiting: (() => void) | undefined;
  http
    .createServer((request, response) => {
      if (request.method === "GET") {
        response.writeHead(200, { "content-length": bytes, "content-type": "application/octet-stream" });
        download = response;
        uploadWaiting?.();
        return;
      }
      const relay = () => {
        request.pipe(download!);
        request.once("end", () => response.end());
      };
      if (download) relay();
      else uploadWaiting = relay;
    })
    .listen(port, "127.0.0.1", () => process.stdout.write("listening\n"));
}

function send(port: number, bytes: number): void {
  const block = randomBytes(1024 * 1024);
  const request = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", headers: { "content-length": bytes } });
  request.on("response", (response) => response.resume());
  let left = bytes;
  const write = () => {
    while (left > 0) {
      const chunk = left >= block.length ? block : block.subarray(0, left);
      left -= chunk.length;
      if (!request.write(chunk)) return void request.once("drain", write);
    }
    request.end();
  };
  write();
}

if (process.argv[1] === HERE) {
  const [mode, port, bytes] = process.argv.slice(2);
  if (mode === "server") serve(Number(port), Number(bytes));
  else if (mode === "sender") send(Number(port), Number(bytes));
}
