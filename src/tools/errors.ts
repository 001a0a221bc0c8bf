/**
 * Typed tool errors. Codes are part of the wire contract (the server and scripts branch on them), so they only
 * ever get added, never renamed. Messages are for humans and the model; `details` is JSON for programs.
 */
export const TOOL_ERROR_CODES = [
  "INVALID_INPUT",
  "INVALID_PATH",
  "INVALID_MODE",
  "INVALID_DEFINITION",
  "INVALID_ROOT",
  "UNKNOWN_TOOL",
  "OUTSIDE_ROOTS",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "NOT_A_DIRECTORY",
  "IS_A_DIRECTORY",
  "SPECIAL_FILE",
  "SYMLINK_LOOP",
  "PATH_CHANGED",
  "PERMISSION_DENIED",
  "DIRECTORY_NOT_EMPTY",
  "FILE_TOO_LARGE",
  "BINARY_FILE",
  "FIND_NOT_FOUND",
  "FIND_AMBIGUOUS",
  "EDITS_OVERLAP",
  "FILE_CHANGED",
  "REFUSED",
  "OPENER_NOT_FOUND",
  "OPENER_FAILED",
  "COMMAND_NOT_FOUND",
  "TIMEOUT",
  "ABORTED",
  "IO_ERROR",
  "PLAN_INVALID",
  "INTERNAL",
] as const;

export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];

export class ToolError extends Error {
  readonly code: ToolErrorCode;
  readonly details?: unknown;

  constructor(code: ToolErrorCode, message: string, details?: unknown) {
    super(message);
    this.name = "ToolError";
    this.code = code;
    if (details !== undefined) this.details = details;
  }

  /** The JSON shape that crosses the network. */
  toJSON(): { code: ToolErrorCode; message: string; details?: unknown } {
    return this.details === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, details: this.details };
  }
}

export function isToolError(error: unknown): error is ToolError {
  return error instanceof ToolError;
}

/** The errnos each code stands for, with what the path "is" or "has" for each. */
const CODE_OF_ERRNO: Partial<Record<ToolErrorCode, Record<string, string>>> = {
  NOT_FOUND: { ENOENT: "does not exist" },
  ALREADY_EXISTS: { EEXIST: "already exists" },
  NOT_A_DIRECTORY: { ENOTDIR: "is not a directory (or a component of it is not)" },
  IS_A_DIRECTORY: { EISDIR: "is a directory" },
  DIRECTORY_NOT_EMPTY: { ENOTEMPTY: "is a directory that is not empty" },
  PERMISSION_DENIED: { EACCES: "permission denied", EPERM: "operation not permitted", EROFS: "is on a read-only file system" },
  SYMLINK_LOOP: { ELOOP: "has too many levels of symbolic links" },
  SPECIAL_FILE: { ENXIO: "is a socket or device" },
  INVALID_PATH: { ENAMETOOLONG: "is too long" },
  FILE_TOO_LARGE: { EFBIG: "is too large" },
};
const ERRNO_CODES: Record<string, [ToolErrorCode, string]> = Object.fromEntries(
  Object.entries(CODE_OF_ERRNO).flatMap(([code, errnos]) => Object.entries(errnos).map(([errno, says]) => [errno, [code as ToolErrorCode, says]])),
);

/**
 * Maps a Node fs error to a ToolError. `shownPath` is what the caller asked for (never a path we only met while
 * resolving), so messages cannot leak the layout outside the roots.
 */
export function fromFsError(error: unknown, shownPath: string, action = "access"): ToolError {
  if (error instanceof ToolError) return error;
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  const known = errno ? ERRNO_CODES[errno] : undefined;
  if (known) return new ToolError(known[0], `Cannot ${action} ${JSON.stringify(shownPath)}: it ${known[1]}`, { path: shownPath, errno });
  if (errno === "ENOSPC" || errno === "EDQUOT") {
    return new ToolError("IO_ERROR", `Cannot ${action} ${JSON.stringify(shownPath)}: no space left on the device`, { path: shownPath, errno });
  }
  if (errno === "ABORT_ERR" || (error as Error | undefined)?.name === "AbortError") return abortedError();
  const message = error instanceof Error ? error.message : String(error);
  return new ToolError("IO_ERROR", `Cannot ${action} ${JSON.stringify(shownPath)}: ${message}`, { path: shownPath, errno });
}

export function abortedError(): ToolError {
  return new ToolError("ABORTED", "The tool call was cancelled");
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortedError();
}
