/**
 * The dashboard: a page under `/dashboard` showing the status (`model.ts`), refreshed live, and
 * a timeline of failovers, joins, quarantines and swaps (`events.ts`), both over server-sent
 * events. Hand-written HTML, CSS and JavaScript in `assets/` (no library, no CDN): the page keeps
 * an `EventSource` on `/dashboard/events` and redraws its tables from each snapshot.
 *
 * - `GET /dashboard` — the page; `/dashboard/app.js`, `/dashboard/style.css` — its assets
 * - `GET /dashboard/status.json` — the latest snapshot
 * - `GET /dashboard/events` — SSE: `snapshot` (the whole picture, on connect and every poll) and
 *   `timeline` (one event; the recent ones are replayed on connect)
 *
 * Served by the controller's ops server (`main.ts controller`, beside `/metrics`), by
 * `main.ts status --serve PORT`, and by whoever calls {@linkcode startDashboard}.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import type { RedisStoreOptions } from "../../lib/redis_connection.ts";
import { readStatus, type ReadStatusOptions } from "./collect.ts";
import { diffStatus, type TimelineEvent } from "./events.ts";
import type { StatusSnapshot, StatusStore } from "./model.ts";
import { RedisStatusStore } from "./redis_status_store.ts";

/** A message to a subscriber of the feed. */
export type FeedMessage =
  | { readonly type: "snapshot"; readonly snapshot: StatusSnapshot }
  | { readonly type: "timeline"; readonly event: TimelineEvent };

/** Options of {@linkcode StatusFeed}. */
export interface StatusFeedOptions {
  /** Time between readings (default 1000 ms). */
  readonly intervalMs?: number;
  /** Timeline events kept for new subscribers (default 200). */
  readonly historySize?: number;
  /** Poll only while someone subscribes (default false: always, so the timeline is whole). */
  readonly lazy?: boolean;
  readonly logger?: Logger;
}

/** Reads the status periodically, diffs successive readings, and tells its subscribers. */
export class StatusFeed {
  readonly #read: () => Promise<StatusSnapshot>;
  readonly #o: Required<Omit<StatusFeedOptions, "logger">>;
  readonly #log: Logger;
  readonly #subscribers = new Set<(m: FeedMessage) => void>();
  readonly #history: TimelineEvent[] = [];
  readonly #stop = new AbortController();
  #latest: StatusSnapshot | null = null;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;

  constructor(read: () => Promise<StatusSnapshot>, options: StatusFeedOptions = {}) {
    this.#read = read;
    this.#o = {
      intervalMs: options.intervalMs ?? 1_000,
      historySize: options.historySize ?? 200,
      lazy: options.lazy ?? false,
    };
    this.#log = (options.logger ?? rootLog).with({ component: "dashboard" });
  }

  /** Aborted when the feed stops (event streams end with it). */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  /** The latest snapshot (null before the first reading). */
  get latest(): StatusSnapshot | null {
    return this.#latest;
  }

  /** The recent timeline, oldest first. */
  history(): readonly TimelineEvent[] {
    return [...this.#history];
  }

  /**
   * The status now: the latest reading while the feed polls, else (lazy, nobody subscribed, or
   * stopped) a fresh one.
   */
  async current(): Promise<StatusSnapshot> {
    const polling = this.#loop !== null && !this.#stop.signal.aborted &&
      (!this.#o.lazy || this.#subscribers.size > 0);
    return (polling ? this.#latest : null) ?? await this.tick();
  }

  /** Calls `fn` with every new snapshot and event; returns the unsubscribe. */
  subscribe(fn: (m: FeedMessage) => void): () => void {
    this.#subscribers.add(fn);
    this.#wake?.();
    return () => void this.#subscribers.delete(fn);
  }

  /** One reading now: diffs it with the last one, tells the subscribers; returns it. */
  async tick(): Promise<StatusSnapshot> {
    const next = await this.#read();
    const prev = this.#latest;
    this.#latest = next;
    const events = prev ? diffStatus(prev, next) : [];
    for (const event of events) {
      this.#history.push(event);
      this.#log.info("status event", { kind: event.kind, text: event.text });
    }
    this.#history.splice(0, Math.max(0, this.#history.length - this.#o.historySize));
    for (const fn of [...this.#subscribers]) {
      fn({ type: "snapshot", snapshot: next });
      for (const event of events) fn({ type: "timeline", event });
    }
    return next;
  }

  /** Starts polling (idempotent). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Stops polling and waits for the loop to end. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      if (!this.#o.lazy || this.#subscribers.size > 0) {
        await this.tick().catch((err) => this.#log.warn("status reading failed", { err }));
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.#o.intervalMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#wake = done;
      });
      this.#wake = null;
    }
  }
}

const ASSETS: Record<string, { file: string; type: string }> = {
  "/dashboard": { file: "dashboard.html", type: "text/html; charset=utf-8" },
  "/dashboard/": { file: "dashboard.html", type: "text/html; charset=utf-8" },
  "/dashboard/app.js": { file: "dashboard.js", type: "text/javascript; charset=utf-8" },
  "/dashboard/style.css": { file: "dashboard.css", type: "text/css; charset=utf-8" },
};

function sse(name: string, data: unknown): Uint8Array {
  return new TextEncoder().encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}

/**
 * The dashboard's routes over `feed`: a handler answering its paths and null for any other (so
 * an ops server can fall through to its own).
 */
export function dashboardHandler(
  feed: StatusFeed,
): (req: Request) => Promise<Response> | null {
  const cache = new Map<string, string>();
  return (req) => {
    const path = new URL(req.url).pathname;
    const asset = ASSETS[path];
    if (asset) {
      return (async () => {
        let text = cache.get(asset.file);
        if (text === undefined) {
          text = await Deno.readTextFile(new URL(`./assets/${asset.file}`, import.meta.url));
          cache.set(asset.file, text);
        }
        return new Response(text, { headers: { "content-type": asset.type } });
      })();
    }
    if (path === "/dashboard/status.json") {
      return (async () => {
        return Response.json(await feed.current());
      })();
    }
    if (path === "/dashboard/events") return Promise.resolve(events(feed));
    return null;
  };
}

function events(feed: StatusFeed): Response {
  let unsubscribe = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (m: FeedMessage) => {
        try {
          controller.enqueue(
            m.type === "snapshot" ? sse("snapshot", m.snapshot) : sse("timeline", m.event),
          );
        } catch {
          unsubscribe(); // the client went away
        }
      };
      controller.enqueue(new TextEncoder().encode("retry: 1000\n\n"));
      if (feed.latest) controller.enqueue(sse("snapshot", feed.latest));
      for (const event of feed.history()) controller.enqueue(sse("timeline", event));
      unsubscribe = feed.subscribe(send);
      const end = () => {
        unsubscribe();
        try {
          controller.close();
        } catch { /* already closed */ }
      };
      if (feed.signal.aborted) end();
      else feed.signal.addEventListener("abort", end, { once: true });
    },
    cancel() {
      unsubscribe();
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      "connection": "keep-alive",
    },
  });
}

/** Options of {@linkcode startDashboard}. */
export interface StartDashboardOptions extends StatusFeedOptions {
  /** Redis (URL or options); null or absent: none (only the nodes' /metrics). */
  readonly redis?: string | RedisStoreOptions | null;
  /** A store instead of `redis` (tests). */
  readonly store?: StatusStore;
  /** `/metrics` URLs of LB, anycast and egress nodes. */
  readonly agents?: readonly string[];
  /** Port (default 0: any free one). */
  readonly port?: number;
  /** Address to listen on (default 127.0.0.1). */
  readonly hostname?: string;
  /** Stops it when aborted. */
  readonly signal?: AbortSignal;
  readonly read?: ReadStatusOptions;
}

/** A running standalone dashboard. */
export interface RunningDashboard {
  /** `http://HOST:PORT/dashboard`. */
  readonly url: string;
  readonly feed: StatusFeed;
  /** Stops polling and serving, closes the Redis connection. */
  close(): Promise<void>;
}

/** Serves the dashboard on its own HTTP server (with `/` redirecting to `/dashboard`). */
export function startDashboard(options: StartDashboardOptions = {}): Promise<RunningDashboard> {
  const redis = typeof options.redis === "string" ? { url: options.redis } : options.redis;
  const store = options.store ?? (redis ? new RedisStatusStore(redis) : null);
  const agents = options.agents ?? [];
  const feed = new StatusFeed(() => readStatus(store, agents, options.read), options);
  const handle = dashboardHandler(feed);
  const listening = Promise.withResolvers<Deno.NetAddr>();
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    onListen: (addr) => listening.resolve(addr as Deno.NetAddr),
  }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/") return Response.redirect(new URL("/dashboard", req.url), 302);
    return handle(req) ?? new Response("not found\n", { status: 404 });
  });
  feed.start();
  let closed: Promise<void> | null = null;
  const close = () =>
    closed ??= (async () => {
      await feed.stop();
      await server.shutdown();
      await store?.close();
    })();
  options.signal?.addEventListener("abort", () => void close(), { once: true });
  return listening.promise.then((addr) => {
    const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    return { url: `http://${host}:${addr.port}/dashboard`, feed, close };
  });
}
