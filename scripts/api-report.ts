/**
 * `npm run api-report`: the public API of every package entry (package.json `exports`), as API Extractor
 * reports in `etc/<entry>.api.md`. Run it after changing what an entry exports and commit the reports with
 * the change. `npm run api-report -- --check` (what CI runs) fails when an entry's API differs from its
 * checked-in report, so no export changes by accident (docs/versioning.md says what the contract is).
 *
 * It reads the declarations `npm run build` emits (dist/src/**\/*.d.ts); API Extractor is the standard tool
 * for this (it is what the TypeScript ecosystem's larger libraries check their surface with).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Extractor, ExtractorConfig, ExtractorLogLevel, type IConfigFile } from "@microsoft/api-extractor";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const check = process.argv.includes("--check");

execFileSync("npm", ["run", "-s", "build"], { cwd: ROOT, stdio: "inherit" });

const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  exports: Record<string, { types: string }>;
};
mkdirSync(path.join(ROOT, "etc"), { recursive: true });
let failed = 0;
for (const [key, entry] of Object.entries(manifest.exports)) {
  const name = key.replace(/^\.\//, "");
  const configObject: IConfigFile = {
    projectFolder: ROOT,
    mainEntryPointFilePath: path.join(ROOT, entry.types),
    compiler: { tsconfigFilePath: path.join(ROOT, "tsconfig.build.json") },
    apiReport: {
      enabled: true,
      reportFolder: path.join(ROOT, "etc"),
      reportTempFolder: path.join(ROOT, "dist", "api-report"),
      reportFileName: name,
    },
    docModel: { enabled: false },
    dtsRollup: { enabled: false },
    tsdocMetadata: { enabled: false },
    messages: {
      // Release tags (@public, @beta) are not how this project marks its API: the entries are.
      extractorMessageReporting: {
        "ae-missing-release-tag": { logLevel: ExtractorLogLevel.None },
        "ae-forgotten-export": { logLevel: ExtractorLogLevel.None },
      },
      tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
    },
  };
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: path.join(ROOT, "api-extractor.json"),
    packageJsonFullPath: path.join(ROOT, "package.json"),
  });
  const result = Extractor.invoke(config, { localBuild: !check, showVerboseMessages: false });
  if (!result.succeeded || (check && result.apiReportChanged)) {
    failed++;
    console.error(`api-report: tether/${name} differs from etc/${name}.api.md${check ? " (run npm run api-report and commit the report)" : ""}`);
  }
}
if (failed > 0) process.exit(1);
console.log(check ? "api-report: every entry matches its report" : "api-report: etc/*.api.md updated");
