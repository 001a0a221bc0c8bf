/**
 * `npm run bench`: every section from one run, each printed as ratios against a baseline measured in
 * the same run (these machines are noisy, so absolute numbers mean little on their own).
 * `npm run bench -- auth` runs one section (`auth`, `tools`, `host`, `mcp`, `noisy`, `blobs`).
 */
import { benchAuth } from "./auth.js";
import { benchBlobs } from "./blobs.js";
import { benchHost } from "./host.js";
import { benchMcp } from "./mcp.js";
import { benchNoisy } from "./noisy.js";
import { benchTools } from "./tools.js";

const sections: Record<string, () => Promise<void>> = {
  auth: benchAuth,
  tools: benchTools,
  host: benchHost,
  mcp: benchMcp,
  noisy: benchNoisy,
  blobs: benchBlobs,
};

const wanted = process.argv.slice(2);
for (const [name, run] of Object.entries(sections)) {
  if (wanted.length === 0 || wanted.includes(name)) await run();
}
