import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Transform } from "node:stream";
import type { Test } from "tap";

/**
 * A release server of the test's own (not Tether): it serves `/downloads/<name>` from what the test offers,
 * faithfully or broken on purpose, so update tests can hand a device a truncated, altered or stalled download.
 */
export type Offered =
  | { bytes: Buffer | string }
  | {
      file: string;
      /** Send only this many bytes (and announce only them): a truncated file. */
      truncateTo?: number;
      /** Flip one bit of the byte at this offset: same size, another digest. */
      flipByteAt?: number;
      /** Announce the whole size, send this many bytes, then stall with the connection open. */
      stallAfter?: number;
    };

export interface ReleaseServer {
  url: string;
  /** What `/downloads/<name>` answers; anything else is 404. */
  offer(name: string, offered: Offered | undefined): void;
  /** The paths requested, in order. */
  requests: string[];
  /** Resolves once a stalled download has sent its bytes. */
  stalled(): Promise<void>;
  /** Ends every open connection at once (a network cut). */
  cut(): void;
}

export async function startReleaseServer(t: Test): Promise<ReleaseServer> {
  const offers = new Map<string, Offered>();
  const requests: string[] = [];
  const sockets = new Set<Socket>();
  let stalledNow: () => void = () => {};
  const stalled = new Promise<void>((resolve) => (stalledNow = resolve));

  const send = async (response: ServerResponse, offered: Offered) => {
    if ("bytes" in offered) {
      const body = Buffer.from(offered.bytes);
      response.writeHead(200, { "content-type": "application/octet-stream", "content-length": body.length });
      response.end(body);
      return;
    }
    const size = (await stat(offered.file)).size;
    const sent = offered.truncateTo ?? offered.stallAfter ?? size;
    response.writeHead(200, { "content-type": "application/octet-stream", "content-length": offered.stallAfter !== undefined ? size : sent });
    let position = 0;
    const flip = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        const at = offered.flipByteAt;
        if (at !== undefined && at >= position && at < position + chunk.length) chunk[at - position]! ^= 0x01;
        position += chunk.length;
        done(null, chunk);
      },
    });
    const source = createReadStream(offered.file, { start: 0, end: sent - 1 }).pipe(flip);
    if (offered.stallAfter === undefined) {
      source.pipe(response);
      return;
    }
    // Written, never ended: the client waits for bytes that never come.
    source.on("data", (chunk: Buffer) => response.write(chunk));
    source.on("end", () => stalledNow());
  };

  const server = createServer((request, response) => {
    requests.push(request.url ?? "");
    const name = decodeURIComponent((request.url ?? "").replace(/^\/downloads\//, ""));
    const offered = request.url?.startsWith("/downloads/") ? offers.get(name) : undefined;
    if (!offered) {
      response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ code: "NOT_FOUND", message: "no such download" }));
      return;
    }
    send(response, offered).catch(() => response.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    offer: (name, offered) => (offered ? offers.set(name, offered) : offers.delete(name)),
    requests,
    stalled: () => stalled,
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}
