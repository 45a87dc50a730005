/**
 * Conntrack events of one network namespace: a netlink socket joined to the NFNLGRP_CONNTRACK_*
 * multicast groups, read without blocking. A full receive queue makes the kernel drop events and
 * report ENOBUFS once: that is counted in `overruns`, and whoever follows the events must then
 * reread the table (the conntrack sync does a full resync).
 *
 * @module
 */

import {
  CtDecodeError,
  type CtEntry,
  IPCTNL_MSG_CT_DELETE,
  IPCTNL_MSG_CT_NEW,
  NLM_F_CREATE,
} from "./_ctnetlink.ts";
import { decodeEntry, splitMessages } from "./_ctnetlink_decode.ts";
import { E, MSG_DONTWAIT, NetlinkError, NetlinkSocket } from "./_netlink.ts";
import { natSrcFilter } from "./_event_filter.ts";

/** What happened to an entry. */
export type CtEventType = "new" | "update" | "destroy";

/** One conntrack event. */
export interface CtEvent {
  type: CtEventType;
  entry: CtEntry;
}

const GROUP_BIT: Record<CtEventType, number> = { new: 1, update: 2, destroy: 4 };
const RCVBUF = 32 * 1024 * 1024;

/** Options of {@linkcode ConntrackEvents.open}. */
export interface ConntrackEventsOptions {
  /** Network namespace (`/run/netns` name); default the caller's. */
  netns?: string;
  /** Event types to join (default all three). */
  types?: CtEventType[];
  /** Receive buffer in bytes (default 32 MiB, forced past rmem_max). */
  rcvbuf?: number;
}

/** A subscription to conntrack events; `read()` returns what is queued now. */
export class ConntrackEvents {
  readonly #sock: NetlinkSocket;
  readonly #buf = new Uint8Array(64 * 1024);
  readonly #view = new DataView(this.#buf.buffer);
  #overruns = 0;
  #malformed = 0;

  private constructor(sock: NetlinkSocket) {
    this.#sock = sock;
  }

  /**
   * Joins the event groups of `options.types` in `options.netns`.
   *
   * @example
   * ```ts ignore
   * const events = ConntrackEvents.open({ netns: "hf-1234-nat1", types: ["new", "destroy"] });
   * for (const { type, entry } of events.read()) console.log(type, entry.natSrc);
   * events.close();
   * ```
   */
  static open(options: ConntrackEventsOptions = {}): ConntrackEvents {
    const types = options.types ?? ["new", "update", "destroy"];
    let groups = 0;
    for (const t of types) {
      const bit = GROUP_BIT[t];
      if (bit === undefined) throw new TypeError(`Unknown conntrack event type "${t}"`);
      groups |= bit;
    }
    return new ConntrackEvents(NetlinkSocket.open({
      netns: options.netns,
      groups,
      rcvbuf: options.rcvbuf ?? RCVBUF,
    }));
  }

  /** Times the kernel dropped events because the queue was full (ENOBUFS). */
  get overruns(): number {
    return this.#overruns;
  }

  /** Messages skipped because they could not be decoded. */
  get malformed(): number {
    return this.#malformed;
  }

  /** Up to `max` events queued now (IPv4 TCP/UDP only), without blocking. */
  read(max = 4096): CtEvent[] {
    const out: CtEvent[] = [];
    for (let reads = 0; reads < max && out.length < max; reads++) {
      const n = this.#sock.recv(this.#buf, MSG_DONTWAIT);
      if (n === -E.EAGAIN) break;
      if (n === -E.ENOBUFS) {
        this.#overruns++;
        continue;
      }
      if (n === -E.EINTR) continue;
      if (n < 0) throw new NetlinkError(`Cannot read conntrack events in ${this.#sock.where}`, -n);
      if (n > this.#buf.length) {
        this.#malformed++;
        continue;
      }
      this.#decode(n, out);
    }
    return out;
  }

  #decode(n: number, out: CtEvent[]): void {
    try {
      for (const m of splitMessages(this.#view, n)) {
        let type: CtEventType;
        if (m.type === IPCTNL_MSG_CT_DELETE) type = "destroy";
        else if (m.type === IPCTNL_MSG_CT_NEW) type = m.flags & NLM_F_CREATE ? "new" : "update";
        else continue;
        const entry = decodeEntry(this.#view, m);
        if (entry) out.push({ type, entry });
      }
    } catch (e) {
      if (!(e instanceof CtDecodeError)) throw e;
      this.#malformed++;
    }
  }

  /**
   * Keeps only events of entries source-NAT'd to `addrs` (a kernel-side socket filter, so the
   * others never fill the queue); null lets every event through again.
   */
  filterNatSrc(addrs: ReadonlySet<number> | null): void {
    this.#sock.setFilter(addrs === null ? null : natSrcFilter(addrs));
  }

  /** Leaves the groups and closes the socket; safe to call twice. */
  close(): void {
    this.#sock.close();
  }
}
