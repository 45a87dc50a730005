/**
 * Lists: resourceVersion semantics (unset and `0` serve the newest state; `N` must not be newer
 * than the store; `resourceVersionMatch=Exact` only for the newest), label and field selectors,
 * and `limit`/`continue` pages served from a snapshot taken by the first page, so a paged list
 * is consistent; a continue token whose snapshot has expired is a 410 as on a real server.
 *
 * @module
 */
import type { Obj, ResourceType } from "./resources.ts";
import { readAs, storageKey } from "./resources.ts";
import type { Store } from "./store.ts";
import type { Matcher } from "./selectors.ts";
import { ApiError, badRequest, expired } from "./status.ts";

/** One page of a list and the list metadata to send with it. */
export interface ListPage {
  readonly items: Obj[];
  readonly metadata: Obj;
}

/** What a list request asks for. */
export interface ListQuery {
  readonly namespace?: string;
  readonly match: Matcher;
  readonly resourceVersion?: string | null;
  readonly resourceVersionMatch?: string | null;
  readonly limit?: string | null;
  readonly continueToken?: string | null;
}

interface Snapshot {
  readonly items: Obj[];
  readonly rv: number;
  readonly created: number;
}

const SNAPSHOT_TTL_MS = 5 * 60_000;
const MAX_SNAPSHOTS = 64;

/** Serves lists and keeps the snapshots that continue tokens point at. */
export class Lister {
  readonly #store: Store;
  readonly #snapshots = new Map<string, Snapshot>();

  constructor(store: Store) {
    this.#store = store;
  }

  /** Forgets every snapshot: outstanding continue tokens get 410. */
  expireSnapshots(): void {
    this.#snapshots.clear();
  }

  /** One page of the list `q` asks for. */
  list(type: ResourceType, q: ListQuery): ListPage {
    const rvText = q.resourceVersion ?? "";
    if (rvText !== "" && !/^\d+$/.test(rvText)) {
      throw badRequest(`invalid resourceVersion "${rvText}": not an integer`);
    }
    const rv = Number(rvText || "0");
    const current = this.#store.resourceVersion;
    const match = q.resourceVersionMatch ?? "";
    if (match !== "" && match !== "NotOlderThan" && match !== "Exact") {
      throw badRequest(`unsupported resourceVersionMatch "${match}" (NotOlderThan or Exact)`);
    }
    if (match !== "" && rvText === "") {
      throw badRequest("resourceVersionMatch is forbidden unless resourceVersion is provided");
    }
    if (rv > current) {
      throw new ApiError(504, "Timeout", `Too large resource version: ${rv}, current: ${current}`, {
        details: {
          causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
          retryAfterSeconds: 1,
        },
      });
    }
    if (match === "Exact" && rv !== current) {
      throw expired(
        `resourceVersion ${rv} is not available for an exact list: the Holdfast test API server serves only the newest state (${current})`,
      );
    }
    const limitText = q.limit ?? "";
    if (limitText !== "" && !/^\d+$/.test(limitText)) {
      throw badRequest(`invalid limit "${limitText}"`);
    }
    const limit = Number(limitText || "0");
    let items: Obj[];
    let offset = 0;
    let listRv = current;
    let id: string;
    if (q.continueToken) {
      const token = decodeToken(q.continueToken);
      const snap = this.#snapshots.get(token.id);
      if (!snap || Date.now() - snap.created > SNAPSHOT_TTL_MS) {
        throw expired(
          "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        );
      }
      ({ items, rv: listRv } = snap);
      offset = token.offset;
      id = token.id;
    } else {
      items = this.#store.list(storageKey(type), q.namespace).map((o) => readAs(type, o)).filter(
        q.match,
      );
      id = crypto.randomUUID();
    }
    const end = limit > 0 ? Math.min(items.length, offset + limit) : items.length;
    const metadata: Obj = { resourceVersion: String(listRv) };
    if (end < items.length) {
      this.#remember(id, { items, rv: listRv, created: Date.now() });
      metadata.continue = btoa(JSON.stringify({ id, offset: end }));
      metadata.remainingItemCount = items.length - end;
    }
    return { items: items.slice(offset, end), metadata };
  }

  #remember(id: string, snap: Snapshot): void {
    if (this.#snapshots.has(id)) return;
    this.#snapshots.set(id, snap);
    for (const [k, s] of this.#snapshots) {
      if (this.#snapshots.size <= MAX_SNAPSHOTS && Date.now() - s.created <= SNAPSHOT_TTL_MS) break;
      this.#snapshots.delete(k);
    }
  }
}

function decodeToken(text: string): { id: string; offset: number } {
  try {
    const t = JSON.parse(atob(text)) as { id?: unknown; offset?: unknown };
    if (typeof t.id === "string" && typeof t.offset === "number") {
      return { id: t.id, offset: t.offset };
    }
  } catch {
    // reported below
  }
  throw badRequest(`invalid continue token "${text}"`);
}
