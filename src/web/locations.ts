import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * A directory of the project, found from this module: `src/web` when run from source (tsx, tests),
 * `dist/src/web` when built. Templates and static files are read from the project, never copied.
 */
function projectDir(relative: string): string {
  for (const root of [path.resolve(here, "../.."), path.resolve(here, "../../..")]) {
    const candidate = path.join(root, relative);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`Tether pages: cannot find the ${relative} directory next to ${here}`);
}

/** Eta templates (`src/views`). */
export const VIEWS_DIR = projectDir("src/views");
/** Our own static files: the stylesheet, the small script, the icon (`public`). */
export const PUBLIC_DIR = projectDir("public");
