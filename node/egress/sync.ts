/**
 * Conntrack sync between NAT pods (conntrackd's FT-FW idea over our own TCP stream).
 *
 * {@linkcode SyncSender} runs on every NAT pod and sends the entries of the floating addresses it
 * owns: it follows its namespace's conntrack events (new, update, destroy) and streams the ones
 * whose translated source is an owned address to every standby peer, batched in length-prefixed
 * binary frames (`_sync_wire.ts`). A full resync (dump of the owned addresses' entries) goes to
 * every peer every `resyncMs` (data packets make no events, so this is also what refreshes the
 * replicas' timeouts), to a peer when it (re)connects, after an event overrun, and when an
 * address becomes owned. `flush()` waits until every connected peer has applied everything sent
 * so far: a planned handover calls it before releasing an address.
 *
 * {@linkcode SyncReceiver} runs on every NAT pod and injects what owners send into its own
 * conntrack table in the failover form (see node/conntrack), removes destroyed entries, and at the
 * end of each resync removes the entries of the resynced addresses that the owner no longer has.
 *
 * @module
 */

import type { Conntrack, ConntrackEvents, CtEntry } from "../conntrack/mod.ts";
import { formatIpv4 } from "../../lib/ipv4.ts";
import { loopTurn } from "../../lib/backoff.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import { type SyncMetrics, syncMetrics } from "./_sync_metrics.ts";
import { PeerLink, type SyncPeer } from "./_sync_peer.ts";
import { SyncLinger } from "./_sync_linger.ts";
import {
  encodeBegin,
  encodeEnd,
  encodeEntries,
  ENTRIES_PER_TURN,
  FRAME,
  RECORDS_PER_FRAME,
} from "./_sync_wire.ts";

export { SyncReceiver, type SyncReceiverOptions } from "./_sync_receiver.ts";
export type { SyncPeer } from "./_sync_peer.ts";

/** Options of {@linkcode SyncSender}. */
export interface SyncSenderOptions {
  /** Conntrack socket of this pod's namespace (dumps); a Conntrack, or a stand-in in tests. */
  ct: Pick<Conntrack, "dumpChunks">;
  /**
   * Conntrack events of this pod's namespace; a ConntrackEvents (its kernel-side filter is set
   * to the owned addresses), or a stand-in in tests.
   */
  events:
    & Pick<ConntrackEvents, "read" | "overruns">
    & Partial<Pick<ConntrackEvents, "filterNatSrc">>;
  /** The standby peers to stream to now (called often; changes connect/disconnect links). */
  peers: () => SyncPeer[];
  /** Full resync period (default 5,000 ms). */
  resyncMs?: number;
  /** This pod's name in HELLO frames (default the host name). */
  self?: string;
  /** Bytes queued per peer before it is dropped and resynced (default 64 MiB). */
  maxQueueBytes?: number;
  /** How long flush() waits for the peers' ACKs (default 5,000 ms). */
  flushTimeoutMs?: number;
  log?: Logger;
  registry?: Registry;
}

const TICK_MS = 10;
const PEERS_EVERY_MS = 200;
const SUMMARY_EVERY_MS = 10_000;
/** Events read per 10 ms tick (a few ms of decoding; more wait for the next tick). */
const EVENT_READS_PER_TICK = 4 * ENTRIES_PER_TURN;

/** Streams the owned addresses' conntrack entries to the standby peers. */
export class SyncSender {
  readonly #o: SyncSenderOptions;
  readonly #log: Logger;
  readonly #m: SyncMetrics;
  readonly #links = new Map<string, PeerLink>();
  #owned: ReadonlySet<number> = new Set();
  readonly #linger = new SyncLinger();
  #timer: ReturnType<typeof setInterval> | undefined;
  #pendingResync: string | null = null;
  #nextResyncAt = 0;
  #nextPeersAt = 0;
  #nextSummaryAt = 0;
  #overruns = 0;
  #generation = 0;
  #resyncing: Promise<void> | null = null;
  #stopped = false;
  #lastError = "";
  #wantAll: string | null = null;
  readonly #wantLinks = new Map<PeerLink, string>();
  #sent = { upsert: 0, remove: 0, resyncs: 0 };

  constructor(options: SyncSenderOptions) {
    this.#o = options;
    this.#log = (options.log ?? rootLog).with({ component: "egress-sync" });
    this.#m = syncMetrics(options.registry);
    this.#overruns = options.events.overruns;
    this.#filterEvents();
  }

  /**
   * Lets only the owned and lingering addresses' events into the queue; on failure, every event
   * (logged).
   */
  #filterEvents(): void {
    try {
      this.#o.events.filterNatSrc?.(new Set([...this.#owned, ...this.#linger.addresses()]));
    } catch (e) {
      this.#log.warn("conntrack event filter not set: following every event", { error: e });
      try {
        this.#o.events.filterNatSrc?.(null);
      } catch { /* the socket is gone: reads will say so */ }
    }
  }

  /** The floating addresses (u32) owned now; newly owned ones are resynced to the peers. */
  setOwned(addrs: ReadonlySet<number>): void {
    const added = [...addrs].filter((a) => !this.#owned.has(a));
    this.#owned = new Set(addrs);
    for (const a of addrs) this.#linger.drop(a);
    this.#filterEvents();
    if (added.length > 0) this.#pendingResync ??= `owned ${added.map(formatIpv4).join(",")}`;
  }

  /**
   * After a planned handover of `addr` (u32): its events are still streamed for `ms`, as long as
   * neighbours may still send new connections here (`_sync_linger.ts`).
   */
  keepStreaming(addr: number, ms: number): void {
    if (this.#owned.has(addr)) return;
    this.#linger.keep(addr, ms);
    this.#filterEvents();
  }

  /** The handed-over addresses whose events are still streamed (the receiver skips them). */
  lingering(): ReadonlySet<number> {
    return this.#linger.addressSet();
  }

  /**
   * Resolves once no handed-over address lingers (bounded by `maxMs`) and what was streamed for
   * them is acknowledged (a flush; its failure is logged): a draining pod exits after this.
   */
  async lingerDone(maxMs = 5_000): Promise<void> {
    const deadline = Date.now() + maxMs;
    for (let i = 0; i < 10_000 && !this.#linger.empty && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    await this.flush().catch((e) =>
      this.#log.warn("sync flush after handover failed", { error: e })
    );
  }

  /** Starts following events and connecting to the peers. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#stopped = false;
    const now = Date.now();
    this.#nextResyncAt = now + (this.#o.resyncMs ?? 5_000);
    this.#nextSummaryAt = now + SUMMARY_EVERY_MS;
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
  }

  /** Stops the timer and every peer link. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#stopped = true;
    await this.#resyncing;
    const links = [...this.#links.values()];
    this.#links.clear();
    await Promise.all(links.map((l) => l.stop()));
    this.#m.peers.set(undefined, 0);
  }

  /** A full resync to every connected peer now; resolves when it has been queued to them. */
  resync(): Promise<void> {
    this.#refreshPeers();
    return this.#requestResync("all", "requested");
  }

  /**
   * Resolves once every peer has applied everything sent so far (events queued in the kernel are
   * read and sent first). A peer still connecting is waited for, and gets its connect-time
   * resync first: a planned handover right after a standby restarted must not find it empty.
   * Rejects, naming them, when peers are not connected or do not acknowledge within
   * `flushTimeoutMs`; a peer that goes down meanwhile is no longer waited for (logged).
   */
  async flush(): Promise<void> {
    const timeoutMs = this.#o.flushTimeoutMs ?? 5_000;
    const deadline = Date.now() + timeoutMs;
    this.#refreshPeers();
    const all = [...this.#links.values()];
    for (let i = 0; i < 100_000 && all.some((l) => !l.connected) && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const unreached = all.filter((l) => !l.connected).map((l) => l.peer.name);
    if (this.#resyncing) await this.#resyncing;
    this.#pollEvents();
    const links = all.filter((l) => l.connected);
    const left = Math.max(1, deadline - Date.now());
    const results = await Promise.all(links.map((l) => l.acked(left)));
    const missing = links.filter((l, i) => !results[i] && l.connected).map((l) => l.peer.name);
    const gone = links.filter((l, i) => !results[i] && !l.connected).map((l) => l.peer.name);
    if (gone.length > 0) {
      this.#log.warn("sync flush: peers went down before acknowledging", { peers: gone });
    }
    if (missing.length + unreached.length > 0) {
      throw new Error(
        `Cannot flush conntrack sync within ${timeoutMs} ms: ${
          [
            ...unreached.map((p) => `"${p}" not connected`),
            ...missing.map((p) => `"${p}" did not acknowledge`),
          ].join(", ")
        }`,
      );
    }
  }

  #tick(): void {
    try {
      const now = Date.now();
      if (now >= this.#nextPeersAt) {
        this.#nextPeersAt = now + PEERS_EVERY_MS;
        this.#refreshPeers();
      }
      this.#pollEvents();
      if (this.#linger.expire(now)) this.#filterEvents();
      if (!this.#resyncing && (this.#pendingResync !== null || now >= this.#nextResyncAt)) {
        this.#requestResync("all", this.#pendingResync ?? "periodic");
      }
      if (now >= this.#nextSummaryAt) this.#summary(now);
      this.#lastError = "";
    } catch (e) {
      // Once per distinct failure, not every 10 ms tick.
      const text = (e as Error).message;
      if (text !== this.#lastError) this.#log.error("sync sender tick failed", { error: e });
      this.#lastError = text;
    }
  }

  #refreshPeers(): void {
    const wanted = new Map(this.#o.peers().map((p) => [p.name, p]));
    for (const [name, link] of this.#links) {
      const p = wanted.get(name);
      if (p && p.host === link.peer.host && p.port === link.peer.port) continue;
      this.#links.delete(name);
      link.stop().catch(() => {});
      this.#log.info("sync peer removed", { peer: name });
    }
    for (const [name, peer] of wanted) {
      if (this.#links.has(name)) continue;
      const link = new PeerLink(peer, {
        self: this.#o.self ?? Deno.hostname(),
        maxQueueBytes: this.#o.maxQueueBytes ?? 64 * 1024 * 1024,
        log: this.#log,
        onConnect: (l) => void this.#requestResync([l], "peer connected"),
        onOverflow: (_l, dropped) => this.#m.dropped.inc(undefined, dropped),
      });
      this.#links.set(name, link);
      link.start();
    }
    this.#m.peers.set(undefined, [...this.#links.values()].filter((l) => l.connected).length);
  }

  /** Reads queued events and streams the owned addresses' ones, in order. */
  #pollEvents(): void {
    const events = this.#o.events;
    let run: CtEntry[] = [];
    let runType: typeof FRAME.UPSERT | typeof FRAME.REMOVE = FRAME.UPSERT;
    for (let reads = 0; reads < EVENT_READS_PER_TICK;) {
      const batch = events.read(ENTRIES_PER_TURN);
      reads += ENTRIES_PER_TURN;
      for (const { type, entry } of batch) {
        if (!entry.natSrc) continue;
        if (!this.#owned.has(entry.natSrc.addr) && !this.#linger.forward(type, entry)) continue;
        const t = type === "destroy" ? FRAME.REMOVE : FRAME.UPSERT;
        if (t !== runType || run.length >= RECORDS_PER_FRAME) {
          this.#broadcast(runType, run);
          run = [];
          runType = t;
        }
        run.push(entry);
      }
      if (batch.length < ENTRIES_PER_TURN) break;
    }
    this.#broadcast(runType, run);
    if (events.overruns !== this.#overruns) {
      this.#m.overruns.inc(undefined, events.overruns - this.#overruns);
      this.#log.warn("conntrack events overrun: resyncing", { overruns: events.overruns });
      this.#overruns = events.overruns;
      this.#pendingResync = "event overrun";
    }
  }

  #broadcast(type: typeof FRAME.UPSERT | typeof FRAME.REMOVE, entries: CtEntry[]): void {
    if (entries.length === 0) return;
    const frame = encodeEntries(type, entries);
    const op = type === FRAME.UPSERT ? "upsert" : "remove";
    for (const link of this.#links.values()) {
      if (link.send(frame, entries.length)) {
        this.#m.entries.inc({ direction: "sent", op }, entries.length);
        this.#sent[op] += entries.length;
      }
    }
  }

  /** Asks for a resync of `links` (or every link); runs them one at a time, in the background. */
  #requestResync(links: PeerLink[] | "all", reason: string): Promise<void> {
    if (links === "all") this.#wantAll ??= reason;
    else for (const l of links) this.#wantLinks.set(l, reason);
    this.#resyncing ??= this.#runResyncs().finally(() => (this.#resyncing = null));
    return this.#resyncing;
  }

  async #runResyncs(): Promise<void> {
    for (
      let round = 0;
      round < 1_000 && !this.#stopped && (this.#wantAll !== null || this.#wantLinks.size > 0);
      round++
    ) {
      let links: PeerLink[], reason: string;
      if (this.#wantAll !== null) {
        reason = this.#wantAll;
        links = [...this.#links.values()];
        this.#wantAll = null;
        this.#pendingResync = null;
        this.#nextResyncAt = Date.now() + (this.#o.resyncMs ?? 5_000);
      } else {
        reason = [...new Set(this.#wantLinks.values())].join(", ");
        links = [...this.#wantLinks.keys()];
      }
      this.#wantLinks.clear();
      try {
        await this.#resyncOnce(links, reason);
      } catch (e) {
        this.#log.error("sync resync failed", { reason, error: e });
      }
    }
  }

  /**
   * Streams the owned addresses' entries to `links` between BEGIN and END, a frame per dump chunk
   * of `ENTRIES_PER_TURN` as the kernel produces them, with a turn of the event loop between two
   * chunks: the lease renewals and the fence run on time however large the table (issue 29).
   */
  async #resyncOnce(links: PeerLink[], reason: string): Promise<void> {
    const up = links.filter((l) => l.connected);
    if (up.length === 0) return;
    this.#pollEvents(); // events already queued go first: the dump below is newer than all of them
    const t0 = performance.now();
    const owned = [...this.#owned];
    const generation = this.#generation = (this.#generation + 1) >>> 0;
    const reached = new Set(up.filter((l) => l.send(encodeBegin(generation), 0)));
    let count = 0;
    if (owned.length > 0) {
      for (const chunk of this.#o.ct.dumpChunks({ natSrcAddrs: this.#owned }, ENTRIES_PER_TURN)) {
        count += chunk.length;
        const frame = encodeEntries(FRAME.UPSERT, chunk);
        for (const l of reached) if (!l.send(frame, chunk.length)) reached.delete(l);
        await loopTurn();
        if (this.#stopped) break;
      }
    }
    const end = encodeEnd(generation, owned);
    for (const l of reached) if (!l.send(end, 0)) reached.delete(l);
    this.#m.resyncs.inc();
    this.#m.entries.inc({ direction: "sent", op: "upsert" }, count * reached.size);
    this.#sent.resyncs++;
    this.#sent.upsert += count * reached.size;
    const fields = {
      reason,
      entries: count,
      addresses: owned.map(formatIpv4),
      peers: [...reached].map((l) => l.peer.name),
      ms: Math.round((performance.now() - t0) * 10) / 10,
    };
    if (reason === "periodic") this.#log.debug("sync resync", fields);
    else this.#log.info("sync resync", fields);
  }

  #summary(now: number): void {
    this.#nextSummaryAt = now + SUMMARY_EVERY_MS;
    const s = this.#sent;
    if (s.upsert + s.remove === 0) return;
    this.#log.info("sync entries sent", {
      upserts: s.upsert,
      removes: s.remove,
      resyncs: s.resyncs,
      peers: [...this.#links.values()].filter((l) => l.connected).map((l) => l.peer.name),
      interval_ms: SUMMARY_EVERY_MS,
    });
    this.#sent = { upsert: 0, remove: 0, resyncs: 0 };
  }
}
