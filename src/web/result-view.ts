/**
 * A tool's result as people read it on /devices: a listing as a table whose folders list themselves and
 * whose files open in read_file, a file's lines numbered with "show more" when cut, a search grouped by
 * file, labelled values for stat and hash_file. The raw JSON stays beside it. Only the shapes of
 * Tether's built-in tools are known here; any other result is shown as JSON alone.
 */

export type ResultView = (
  | { kind: "listing"; path: string; rows: Array<{ name: string; type: string; size?: number; modified?: string; href?: string }>; note?: string }
  | { kind: "file"; path: string; lines: Array<{ number: number; text: string }>; more?: string; note?: string }
  | {
      kind: "matches";
      files: Array<{ path: string; href: string; lines: Array<{ number: number; before: string; match: string; after: string; context: boolean }> }>;
      note?: string;
    }
  | { kind: "values"; rows: Array<{ label: string; value: string }> }
) & {
  /** A blob handle in the result (a file too large to show, or binary): its signed download URL (docs/blobs.md). */
  download?: { href: string; size: number };
};

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);
const text = (value: unknown) => (typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value));

/** The address that runs a read tool with these arguments (see the GET tool route). */
export function runHref(deviceId: string, tool: string, args: Record<string, string | number>): string {
  const query = new URLSearchParams(Object.entries(args).map(([key, value]) => [`arg.${key}`, String(value)]));
  return `/devices/${encodeURIComponent(deviceId)}/tools/${encodeURIComponent(tool)}?${query}#tool-panel`;
}

const join = (base: string, rel: string) => (base.endsWith("/") ? base + rel : `${base}/${rel}`);

/** `input`: the arguments the tool ran with ("show more" keeps the range a person asked for). */
export function resultView(deviceId: string, tool: string, result: unknown, input?: unknown): ResultView | undefined {
  if (!isObject(result)) return undefined;
  if (tool === "list_directory" && Array.isArray(result.entries)) {
    const base = text(result.path);
    const rows = result.entries.filter(isObject).map((entry) => {
      const path = join(base, text(entry.path));
      const type = text(entry.type);
      const href =
        type === "directory" ? runHref(deviceId, "list_directory", { path }) : type === "file" ? runHref(deviceId, "read_file", { path }) : undefined;
      return {
        name: text(entry.path) || text(entry.name),
        type,
        ...(typeof entry.size === "number" ? { size: entry.size } : {}),
        ...(entry.modified ? { modified: text(entry.modified) } : {}),
        ...(href ? { href } : {}),
      };
    });
    return {
      kind: "listing",
      path: base,
      rows,
      ...(result.truncated ? { note: `${text(result.omitted)} more entries were left out (the limit is ${text(result.limit)}).` } : {}),
    };
  }
  const download = blobDownload(result);
  if (tool === "read_file" && result.binary === true) {
    const rows = ["path", "size", "type", "mime", "sha256", "modified"]
      .filter((key) => result[key] !== undefined)
      .map((key) => ({ label: key === "sha256" ? "SHA-256" : key.replace(/^./, (c) => c.toUpperCase()), value: text(result[key]) }));
    return { kind: "values", rows, ...(download ? { download } : {}) };
  }
  if (tool === "read_file" && typeof result.content === "string") {
    const start = typeof result.startLine === "number" ? result.startLine : 1;
    const lines = result.content
      .replace(/\n$/, "")
      .split("\n")
      .map((line, index) => ({ number: start + index, text: line }));
    // The next lines up to the end line that was asked for, if one was (the result's endLine is where it was cut).
    const endLine: Record<string, number> = isObject(input) && typeof input.endLine === "number" ? { endLine: input.endLine } : {};
    const more =
      result.truncated && typeof result.nextStartLine === "number"
        ? runHref(deviceId, "read_file", { path: text(result.path), startLine: result.nextStartLine, ...endLine })
        : undefined;
    return {
      kind: "file",
      path: text(result.path),
      lines,
      ...(more ? { more, note: `Cut at ${result.limit ? text(result.limit) : "the size limit"}; ${text(result.omittedBytes)} bytes more.` } : {}),
      ...(download ? { download } : {}),
    };
  }
  if (tool === "grep" && Array.isArray(result.matches)) return grepView(deviceId, result);
  if (tool === "stat" || tool === "hash_file" || tool === "disk_usage") {
    const rows = Object.entries(result)
      .filter(([, value]) => value === null || typeof value !== "object")
      .map(([key, value]) => ({ label: key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/^./, (c) => c.toUpperCase()), value: text(value) }));
    return { kind: "values", rows };
  }
  return undefined;
}

function blobDownload(result: Json): { href: string; size: number } | undefined {
  const blob = result.blob;
  if (!isObject(blob) || typeof blob.url !== "string" || !/^https?:\/\//.test(blob.url)) return undefined;
  return { href: blob.url, size: typeof blob.size === "number" ? blob.size : 0 };
}

function grepView(deviceId: string, result: Json): ResultView {
  const byFile = new Map<string, Array<{ number: number; before: string; match: string; after: string; context: boolean }>>();
  for (const match of (result.matches as unknown[]).filter(isObject)) {
    const file = text(match.path);
    const number = typeof match.line === "number" ? match.line : 0;
    const line = text(match.text);
    const lines = byFile.get(file) ?? [];
    const before = Array.isArray(match.before) ? match.before.map(text) : [];
    for (const [index, context] of before.entries())
      lines.push({ number: number - before.length + index, before: context, match: "", after: "", context: true });
    // The match is marked exactly (column and matchLength). A device older than matchLength gives the start
    // only: then the run of non-space characters from there is marked, the best guess.
    const at = typeof match.column === "number" ? match.column - (typeof match.textStartColumn === "number" ? match.textStartColumn : 1) : -1;
    const length = at < 0 ? 0 : typeof match.matchLength === "number" ? match.matchLength : Math.max(1, (/^\S+/.exec(line.slice(at))?.[0] ?? "").length);
    lines.push(
      at >= 0 && at < line.length
        ? { number, before: line.slice(0, at), match: line.slice(at, at + length), after: line.slice(at + length), context: false }
        : { number, before: line, match: "", after: "", context: false },
    );
    for (const [index, context] of (Array.isArray(match.after) ? match.after.map(text) : []).entries())
      lines.push({ number: number + 1 + index, before: context, match: "", after: "", context: true });
    byFile.set(file, lines);
  }
  const base = text(result.path);
  return {
    kind: "matches",
    files: [...byFile].map(([file, lines]) => ({
      path: file,
      href: runHref(deviceId, "read_file", { path: file.startsWith("/") || !base ? file : join(base, file) }),
      lines,
    })),
    ...(result.truncated ? { note: "More matches were left out; narrow the search." } : {}),
  };
}
