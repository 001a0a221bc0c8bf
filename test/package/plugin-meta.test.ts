/**
 * Every Fastify plugin Tether ships declares the Fastify major it was written for (`fastify: "5.x"`),
 * so registering it on another major fails at start-up with a clear message instead of misbehaving.
 * The modules are found by their import of fastify-plugin, so a plugin added later is covered.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import t from "tap";

const SRC = path.resolve(import.meta.dirname, "../../src");
const PLUGIN_META = Symbol.for("plugin-meta");

const sources = (await readdir(SRC, { recursive: true })).filter((file) => file.endsWith(".ts"));
const pluginModules: string[] = [];
for (const file of sources) {
  if ((await readFile(path.join(SRC, file), "utf8")).includes('from "fastify-plugin"')) pluginModules.push(file);
}

t.ok(pluginModules.length >= 20, `found the plugin modules (${pluginModules.length})`);
for (const file of pluginModules) {
  const exports = (await import(pathToFileURL(path.join(SRC, file)).href)) as Record<string, unknown>;
  for (const [name, value] of Object.entries(exports)) {
    const meta = typeof value === "function" ? (value as unknown as Record<symbol, { name?: string; fastify?: string } | undefined>)[PLUGIN_META] : undefined;
    if (!meta) continue;
    t.equal(meta.fastify, "5.x", `${file}: ${name} (${meta.name ?? "unnamed"}) declares fastify 5.x`);
  }
}
