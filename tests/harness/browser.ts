/**
 * Headless Chromium for tests: Debian's `/usr/bin/chromium` driven by `npm:playwright-core`, with
 * the flags this machine needs and a fresh profile directory, removed on close.
 *
 * playwright-core asks at load whether it runs under WSL with an unguarded
 * `fs.existsSync("/proc/sys/fs/binfmt_misc/WSLInterop")`; Deno (2.9) grants reads under `/proc`
 * only with all permissions, so that call throws `NotCapable` under a permission set. The shim
 * below answers "absent" for a `/proc` path Deno refuses — what a non-WSL Linux would answer —
 * and changes nothing else; playwright-core's other `/proc` reads are inside try/catch already.
 *
 * @module
 */

import fs from "node:fs";
import type { BrowserContext } from "playwright-core";

/** The flags Chromium needs here (no sandbox, GPU, QUIC, first run or background network). */
export const CHROMIUM_ARGS: readonly string[] = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Debian's Chromium (scripts/packages.txt installs it). */
export const CHROMIUM_PATH = "/usr/bin/chromium";

let shimmed = false;
function shimProcExists(): void {
  if (shimmed) return;
  shimmed = true;
  const existsSync = fs.existsSync;
  fs.existsSync = ((path: fs.PathLike) => {
    try {
      return existsSync(path);
    } catch (err) {
      if (String(path).startsWith("/proc/") && err instanceof Deno.errors.NotCapable) return false;
      throw err;
    }
  }) as typeof fs.existsSync;
}

/** A running headless Chromium; `close()` ends it and removes its profile. */
export interface TestBrowser extends AsyncDisposable {
  /** The browser's (persistent) context: `context.newPage()`. */
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile (`--user-data-dir`); waits up to `timeoutMs`. */
export async function launchChromium(timeoutMs = 30_000): Promise<TestBrowser> {
  shimProcExists();
  const { chromium } = await import("playwright-core");
  const profile = await Deno.makeTempDir({ prefix: "hf-chromium-" });
  let context: BrowserContext;
  try {
    // The profile is passed as playwright wants it: it becomes --user-data-dir.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      args: [...CHROMIUM_ARGS],
      timeout: timeoutMs,
      viewport: { width: 1280, height: 800 },
    });
  } catch (err) {
    await Deno.remove(profile, { recursive: true }).catch(() => {});
    throw err;
  }
  const close = async () => {
    await context.close().catch(() => {});
    await Deno.remove(profile, { recursive: true }).catch(() => {});
  };
  return { context, close, [Symbol.asyncDispose]: close };
}
