/**
 * Polls `check` until it holds, or throws `timed out waiting for <what>` after `timeoutMs`: tests assert
 * eventual state, never timing. A check that throws counts as "not yet" (a server still starting
 * refuses connections), and the last such error is named in the timeout's message. `what` may be a
 * function, read when the wait times out (a process's output as it was then, not when the wait began).
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what: string | (() => string) = "condition",
  everyMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`timed out waiting for ${typeof what === "function" ? what() : what}${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
