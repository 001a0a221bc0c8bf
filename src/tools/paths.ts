/**
 * Pure, lexical path rules. Nothing here touches the disk; `scope.ts` does the resolving. The flavour is a
 * parameter so the Windows rules are tested on every platform.
 */
import { ToolError } from "./errors.js";

export type PathFlavor = "posix" | "win32";

export const MAX_PATH_LENGTH = 4096;

export function currentFlavor(): PathFlavor {
  return process.platform === "win32" ? "win32" : "posix";
}

export function separatorOf(flavor: PathFlavor): string {
  return flavor === "win32" ? "\\" : "/";
}

// CON, NUL, COM1... stay devices on Windows whatever extension or trailing dots and spaces follow them.
const WIN_DEVICE_NAME = /^(con|prn|aux|nul|clock\$|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?[. ]*$/i;

function invalid(input: string, why: string): ToolError {
  return new ToolError("INVALID_PATH", `Invalid path ${JSON.stringify(input.slice(0, 200))}: ${why}`, { path: input.slice(0, 200), reason: why });
}

/**
 * Rejects what no resolver should ever see: NUL bytes, UNC shares, the `\\?\` and `\\.\` namespaces (extended
 * length and devices), NT object paths, and on Windows drive-relative paths, alternate data streams and device
 * names. POSIX treats `//x` as implementation-defined, so it is refused there too rather than guessed at.
 */
export function checkPathSyntax(input: unknown, flavor: PathFlavor = currentFlavor()): asserts input is string {
  if (typeof input !== "string") throw new ToolError("INVALID_PATH", "A path must be a string");
  if (input.length === 0) throw invalid(input, "it is empty");
  if (input.length > MAX_PATH_LENGTH) throw invalid(input, `it is longer than ${MAX_PATH_LENGTH} characters`);
  if (input.includes("\0")) throw invalid(input, "it contains a NUL byte");
  const head = input.slice(0, 4);
  if (/^[\\/][\\/]/.test(head)) {
    if (/^[\\/][\\/][?.][\\/]/.test(head)) throw invalid(input, "extended-length and device namespace prefixes (\\\\?\\, \\\\.\\) are not allowed");
    throw invalid(input, "UNC and network paths (\\\\server\\share, //server/share) are not allowed");
  }
  if (/^\\\?\?\\/.test(head)) throw invalid(input, "NT object paths (\\??\\) are not allowed");
  if (flavor !== "win32") return;

  if (/^[a-zA-Z]:/.test(input)) {
    if (input.length === 2 || !/[\\/]/.test(input[2]!)) throw invalid(input, "drive-relative paths (C:foo) are not allowed; use C:\\foo");
  } else if (/^[\\/]/.test(input)) {
    throw invalid(input, "a rooted path needs a drive letter (C:\\...)");
  }
  const rest = /^[a-zA-Z]:/.test(input) ? input.slice(2) : input;
  if (rest.includes(":")) throw invalid(input, "':' is only allowed after a drive letter (alternate data streams are not allowed)");
  for (const part of rest.split(/[\\/]/)) {
    if (WIN_DEVICE_NAME.test(part)) throw invalid(input, `${JSON.stringify(part)} is a reserved device name`);
    // eslint-disable-next-line no-control-regex -- control characters are exactly what Windows refuses in a name
    if (/[<>"|?*\u0000-\u001f]/.test(part)) throw invalid(input, `${JSON.stringify(part)} contains a character Windows does not allow`);
  }
}

export interface SplitPath {
  /** `/` on POSIX, `C:\` on Windows. */
  root: string;
  parts: string[];
}

/** Splits an absolute path into its root and its components, dropping empty and `.` components (not `..`). */
export function splitAbsolute(absolute: string, flavor: PathFlavor = currentFlavor()): SplitPath {
  if (flavor === "win32") {
    const match = /^([a-zA-Z]):[\\/]/.exec(absolute);
    if (!match) throw new ToolError("INVALID_PATH", `Not an absolute path: ${JSON.stringify(absolute)}`);
    return {
      root: `${match[1]!.toUpperCase()}:\\`,
      parts: absolute
        .slice(3)
        .split(/[\\/]/)
        .filter((p) => p !== "" && p !== "."),
    };
  }
  if (!absolute.startsWith("/")) throw new ToolError("INVALID_PATH", `Not an absolute path: ${JSON.stringify(absolute)}`);
  return { root: "/", parts: absolute.split("/").filter((p) => p !== "" && p !== ".") };
}

export function joinAbsolute(split: SplitPath, flavor: PathFlavor = currentFlavor()): string {
  return split.root + split.parts.join(separatorOf(flavor));
}

/**
 * True when `candidate` is `root` or lies beneath it, comparing whole components: `/data/a` is not inside
 * `/data/ab`. Both must already be real, normalised paths.
 */
export function isWithin(root: string, candidate: string, flavor: PathFlavor = currentFlavor()): boolean {
  const r = splitAbsolute(root, flavor);
  const c = splitAbsolute(candidate, flavor);
  if (r.root !== c.root || c.parts.length < r.parts.length) return false;
  for (let i = 0; i < r.parts.length; i++) if (r.parts[i] !== c.parts[i]) return false;
  return true;
}

/** Components of `candidate` below `root` (which must contain it), joined with `/` for display and globbing. */
export function relativeWithin(root: string, candidate: string, flavor: PathFlavor = currentFlavor()): string {
  const r = splitAbsolute(root, flavor);
  const c = splitAbsolute(candidate, flavor);
  return c.parts.slice(r.parts.length).join("/");
}
