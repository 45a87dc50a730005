/**
 * Follows a file: calls back with its text at start and whenever it changes — on an inotify
 * event for its directory (so an atomic rename is seen in milliseconds), and on a slower poll
 * as a safety net. Unchanged text is not reported again.
 *
 * @module
 */

import { sleep } from "../../lib/backoff.ts";

/** Options of {@linkcode watchFile}. */
export interface WatchFileOptions {
  /** Stops the watch. */
  readonly signal: AbortSignal;
  /** Poll interval in ms (default 1,000). */
  readonly pollMs?: number;
  /** Called when reading fails (the file is missing mid-rename, unreadable). */
  readonly onError?: (error: unknown) => void;
}

function dirOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "." : slash === 0 ? "/" : path.slice(0, slash);
}

/**
 * Reads `path` now and on every change until `signal` aborts; `onText` runs one at a time.
 * Resolves after the first read (successful or not); the watch goes on in the background.
 */
export async function watchFile(
  path: string,
  onText: (text: string) => Promise<void> | void,
  options: WatchFileOptions,
): Promise<void> {
  let last: string | undefined;
  let chain = Promise.resolve();
  const check = () => {
    chain = chain.then(async () => {
      if (options.signal.aborted) return;
      let text: string;
      try {
        text = await Deno.readTextFile(path);
      } catch (e) {
        options.onError?.(e);
        return;
      }
      if (text === last) return;
      last = text;
      try {
        await onText(text);
      } catch (e) {
        options.onError?.(e);
      }
    });
    return chain;
  };
  await check();
  const watcher = Deno.watchFs(dirOf(path), { recursive: false });
  options.signal.addEventListener("abort", () => watcher.close(), { once: true });
  const name = path.slice(path.lastIndexOf("/") + 1);
  (async () => {
    try {
      for await (const event of watcher) {
        if (event.paths.some((p) => p.endsWith(`/${name}`) || p === name)) check();
      }
    } catch { /* closed */ }
  })();
  (async () => {
    const pollMs = options.pollMs ?? 1_000;
    // Bounded by the signal; the count is a backstop (a year of 1 s polls).
    for (let i = 0; i < 31_536_000 && !options.signal.aborted; i++) {
      await sleep(pollMs, options.signal).catch(() => {});
      check();
    }
  })();
}
