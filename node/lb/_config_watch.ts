/**
 * Watching the agent's services file (`--config`) for changes without waking the agent while
 * nothing changes: file events on the file's directory (inotify through `Deno.watchFs`; the
 * directory, since a Kubernetes ConfigMap volume and most editors replace the file by renaming
 * over it) and a slow poll as a safety net for filesystems without events. Without events (the
 * watch cannot be set up) it polls every `pollMs` (`--config-poll-ms`) as before.
 *
 * A 200 ms poll alone cost an idle agent ~2 ms of CPU per second (each poll is a timer wake-up
 * and a `stat` on the blocking thread pool: bench:agent-cost), as much as the rest of its idle
 * background together.
 *
 * @module
 */

import { dirname } from "node:path";
import type { Logger } from "../../lib/log.ts";

/** Period of the safety-net poll while file events are watched, ms. */
export const CONFIG_SAFETY_POLL_MS = 10_000;

/** Events this close together are one change (a write often raises several), ms. */
const DEBOUNCE_MS = 20;

/** Options of {@link watchConfigFile}. */
export interface ConfigWatchOptions {
  /** Poll period when file events cannot be watched, ms. */
  readonly pollMs: number;
  readonly log: Logger;
}

/**
 * Calls `check` whenever the file at `path` may have changed (it compares what it needs to, e.g.
 * the mtime), never two at a time: a change seen during a call runs one more call after it.
 * Returns a function that stops watching.
 *
 * @example
 * ```ts ignore
 * const stop = watchConfigFile("/etc/holdfast/services.yaml", reloadIfChanged, { pollMs: 200, log });
 * stop();
 * ```
 */
export function watchConfigFile(
  path: string,
  check: () => Promise<void>,
  options: ConfigWatchOptions,
): () => void {
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  const run = (): void => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = check()
      .catch((err) => options.log.warn("config check failed", { file: path, err }))
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          run();
        }
      });
  };
  let watcher: Deno.FsWatcher | null = null;
  try {
    watcher = Deno.watchFs(dirname(path), { recursive: false });
  } catch (err) {
    options.log.warn("cannot watch the config directory, polling it", {
      file: path,
      poll_ms: options.pollMs,
      err,
    });
  }
  let debounce: ReturnType<typeof setTimeout> | undefined;
  let poll = setInterval(
    run,
    watcher ? Math.max(options.pollMs, CONFIG_SAFETY_POLL_MS) : options.pollMs,
  );
  if (watcher) {
    const events = watcher;
    void (async () => {
      try {
        for await (const _ of events) {
          clearTimeout(debounce);
          debounce = setTimeout(run, DEBOUNCE_MS);
        }
      } catch (err) {
        if (!stopped) options.log.warn("config watch failed", { file: path, err });
      }
      if (stopped) return;
      // The watch ended by itself: back to polling at the configured period.
      options.log.warn("config watch ended, polling", { file: path, poll_ms: options.pollMs });
      clearInterval(poll);
      poll = setInterval(run, options.pollMs);
    })();
  }
  return () => {
    stopped = true;
    clearInterval(poll);
    clearTimeout(debounce);
    try {
      watcher?.close();
    } catch { /* already closed */ }
  };
}
