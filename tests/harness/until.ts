/**
 * Polling for a condition in tests, bounded in time and count.
 *
 * @module
 */

/**
 * Polls `check` every `everyMs` (default 50 ms) until it holds; throws naming `what` after
 * `timeoutMs` (default 15 s).
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (let i = 0; i < 100_000 && Date.now() < end; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  if (await check()) return;
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}
