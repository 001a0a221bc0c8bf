import { createRequire } from "node:module";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { percentiles } from "./autocannon.js";

const require = createRequire(import.meta.url);
const SERVER = path.join(path.dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")), "dist/index.js");

export type Measured = ReturnType<typeof percentiles>;

/**
 * The MCP filesystem server answering `get_file_info` over stdio, through the MCP SDK's client: the
 * same question as Tether's `stat`, with no network and no second hop. One call at a time (latency,
 * in ms), then `concurrency` calls in flight (throughput).
 */
export async function benchMcpFilesystem(root: string, file: string, seconds: number, concurrency: number): Promise<{ one: Measured; many: Measured }> {
  const client = new Client({ name: "tether-bench", version: "1" });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER, root], stderr: "ignore" }));
  const once = async () => {
    const started = performance.now();
    await client.callTool({ name: "get_file_info", arguments: { path: file } });
    return performance.now() - started;
  };
  try {
    for (let i = 0; i < 200; i++) await once(); // warm-up
    const samples: number[] = [];
    let end = Date.now() + seconds * 1000;
    while (Date.now() < end) samples.push(await once());
    const one = percentiles(samples, seconds);
    const concurrent: number[] = [];
    end = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (Date.now() < end) concurrent.push(await once());
      }),
    );
    return { one, many: percentiles(concurrent, seconds) };
  } finally {
    await client.close();
  }
}
