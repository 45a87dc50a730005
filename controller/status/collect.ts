/**
 * One status reading: the stored state from a {@linkcode StatusStore} and every node's
 * `/metrics`, in parallel, each with a timeout; what cannot be read is shown as down with the
 * reason, never thrown.
 *
 * @module
 */

import { parsePromText } from "../../lib/prom_text.ts";
import { buildStatus, type Scrape, type StatusSnapshot, type StatusStore } from "./model.ts";

/** How long one read (Redis, or one node's `/metrics`) may take (default). */
export const READ_TIMEOUT_MS = 2_000;

/**
 * The `/metrics` URL of `text`: `http://host:port` (path `/metrics` added), a full URL, or
 * `host:port`. Throws a `TypeError` naming it when it is none of them.
 */
export function metricsUrl(text: string): string {
  const withScheme = /^[a-z]+:\/\//i.test(text) ? text : `http://${text}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    throw new TypeError(`Cannot use agent "${text}": expected http://HOST:PORT[/metrics]`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`Cannot use agent "${text}": expected an http or https URL`);
  }
  if (u.pathname === "/" || u.pathname === "") u.pathname = "/metrics";
  return u.toString();
}

/** Fetches and parses one node's `/metrics`; a failure is in `error`. */
export async function scrapeMetrics(url: string, timeoutMs = READ_TIMEOUT_MS): Promise<Scrape> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok) return { url, samples: null, error: `HTTP ${res.status}` };
    return { url, samples: parsePromText(text) };
  } catch (err) {
    return { url, samples: null, error: err instanceof Error ? err.message : String(err) };
  }
}

/** Options of {@linkcode readStatus}. */
export interface ReadStatusOptions {
  /** Scrapes one URL (default {@linkcode scrapeMetrics}). */
  readonly scrape?: (url: string) => Promise<Scrape>;
  readonly timeoutMs?: number;
  readonly now?: () => number;
}

/** The status now from `store` (null: no Redis given) and the nodes at `agents` (URLs). */
export async function readStatus(
  store: StatusStore | null,
  agents: readonly string[],
  options: ReadStatusOptions = {},
): Promise<StatusSnapshot> {
  const timeoutMs = options.timeoutMs ?? READ_TIMEOUT_MS;
  const scrape = options.scrape ?? ((url: string) => scrapeMetrics(url, timeoutMs));
  const stored = (async () => {
    if (store === null) return { state: null, error: "no --redis given" };
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
      });
      return { state: await Promise.race([store.read(), timeout]), error: "" };
    } catch (err) {
      return { state: null, error: err instanceof Error ? err.message : String(err) };
    } finally {
      clearTimeout(timer);
    }
  })();
  const [s, scrapes] = await Promise.all([stored, Promise.all(agents.map((u) => scrape(u)))]);
  return buildStatus(s.state, scrapes, {
    now: (options.now ?? Date.now)(),
    ...(s.error ? { redisError: s.error } : {}),
  });
}
