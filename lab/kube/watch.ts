/**
 * Watch streams: one JSON event per line (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) from a
 * resourceVersion on, as the real server sends them. An unset or `0` resourceVersion first
 * sends every matching object as ADDED; one older than the history gets an in-stream ERROR
 * event carrying a 410 Expired Status; an object that starts or stops matching the selectors is
 * ADDED or DELETED. Bookmarks when asked for, `sendInitialEvents` with the
 * `k8s.io/initial-events-end` bookmark, and a bounded lifetime (`timeoutSeconds`).
 *
 * @module
 */
import type { Obj, ResourceType } from "./resources.ts";
import { readAs, storageKey } from "./resources.ts";
import type { Store, StoreEvent } from "./store.ts";
import type { Matcher } from "./selectors.ts";
import { statusObject } from "./status.ts";

/** Options of {@linkcode watchStream}. */
export interface WatchOptions {
  readonly type: ResourceType;
  /** Namespace, or undefined for all. */
  readonly namespace?: string;
  /** Label and field selectors together. */
  readonly match: Matcher;
  /** `resourceVersion` query value (already checked to be empty or an integer). */
  readonly resourceVersion?: string;
  /** Stream lifetime in milliseconds. */
  readonly timeoutMs: number;
  /** Send BOOKMARK events every `bookmarkIntervalMs`. */
  readonly bookmarks: boolean;
  readonly bookmarkIntervalMs: number;
  /** `sendInitialEvents=true`: ADDED for every object, then the initial-events-end bookmark. */
  readonly sendInitialEvents?: boolean;
  /** How an object is written into an event (apiVersion, Table rows). */
  readonly encode: (obj: Obj) => unknown;
  /** Ends the watch (the client sees the stream end and re-watches). */
  readonly signal?: AbortSignal;
  /** Events a slow reader may leave unread before the server ends its watch (default 10,000). */
  readonly maxBacklog?: number;
}

type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

function inScope(opts: WatchOptions, obj: Obj | undefined): boolean {
  if (!obj) return false;
  const ns = (obj.metadata as Obj).namespace ?? "";
  return (opts.namespace === undefined || ns === opts.namespace) && opts.match(obj);
}

/** What the watcher sees of a store event, after namespace and selectors (undefined: nothing). */
export function translate(
  opts: WatchOptions,
  e: StoreEvent,
): { type: WatchEventType; object: Obj } | undefined {
  const now = inScope(opts, e.object);
  const before = inScope(opts, e.previous);
  if (e.type === "ADDED") return now ? { type: "ADDED", object: e.object } : undefined;
  if (e.type === "DELETED") return before ? { type: "DELETED", object: e.object } : undefined;
  if (now && before) return { type: "MODIFIED", object: e.object };
  if (now) return { type: "ADDED", object: e.object };
  if (before) return { type: "DELETED", object: e.object };
  return undefined;
}

/** The watch as a byte stream (newline-delimited JSON). */
export function watchStream(store: Store, opts: WatchOptions): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const key = storageKey(opts.type);
  const maxBacklog = opts.maxBacklog ?? 10_000;
  let stop = () => {};
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let closed = false;
      const timers: ReturnType<typeof setTimeout>[] = [];
      let unsubscribe = () => {};
      stop = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        for (const t of timers) clearTimeout(t), clearInterval(t);
      };
      const send = (type: string, object: unknown) => {
        if (closed) return;
        controller.enqueue(encoder.encode(JSON.stringify({ type, object }) + "\n"));
        if ((controller.desiredSize ?? 0) < -maxBacklog) end();
      };
      const end = () => {
        if (closed) return;
        stop();
        controller.close();
      };
      const deliver = (e: StoreEvent) => {
        if (e.resource !== key) return;
        const shown = {
          ...e,
          object: readAs(opts.type, e.object),
          previous: e.previous && readAs(opts.type, e.previous),
        };
        const seen = translate(opts, shown);
        if (seen) send(seen.type, opts.encode(seen.object));
      };
      const bookmark = (annotations?: Record<string, string>) =>
        send("BOOKMARK", {
          kind: opts.type.kind,
          apiVersion: opts.type.group
            ? `${opts.type.group}/${opts.type.version}`
            : opts.type.version,
          metadata: {
            resourceVersion: String(store.resourceVersion),
            ...(annotations ? { annotations } : {}),
          },
        });

      const rv = opts.resourceVersion ?? "";
      if (rv === "" || rv === "0" || opts.sendInitialEvents) {
        for (const obj of store.list(key, opts.namespace)) {
          if (opts.match(obj)) send("ADDED", opts.encode(obj));
        }
        if (opts.sendInitialEvents) bookmark({ "k8s.io/initial-events-end": "true" });
      } else {
        const past = store.eventsSince(Number(rv));
        if (!past) {
          send(
            "ERROR",
            statusObject(
              410,
              "Expired",
              `too old resource version: ${rv} (${store.compactedResourceVersion})`,
            ),
          );
          end();
          return;
        }
        for (const e of past) deliver(e);
      }
      unsubscribe = store.subscribe(deliver);
      timers.push(setTimeout(end, opts.timeoutMs));
      if (opts.signal?.aborted) end();
      opts.signal?.addEventListener("abort", end, { once: true });
      if (opts.bookmarks) timers.push(setInterval(() => bookmark(), opts.bookmarkIntervalMs));
    },
    cancel() {
      stop();
    },
  });
}
