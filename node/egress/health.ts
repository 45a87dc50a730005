/**
 * BFD-like health of the NAT pods of one EgressNAT: every pod sends a UDP heartbeat to every
 * peer each `intervalMs` (default 100) and declares a peer down when `multiplier` (default 3)
 * intervals pass without one: detection within 300 ms by default. Heartbeats come from the
 * agent's own event loop, so a hung (SIGSTOPped) agent falls silent and is detected exactly like
 * a dead one. Each carries the sender's name, a sequence number (old or duplicated datagrams are
 * dropped), a boot id (a restarted peer is seen going down and up again), a draining flag
 * (planned handover: peers stop counting on a draining pod at once) and a ready flag (a pod in
 * BGP mode without an established session: peers leave it out of the assignment, `assign.ts`).
 *
 * The send schedule is anchored to `performance.now()` at start (tick k at start + k·interval),
 * so it does not drift; a late tick skips to the next slot instead of bunching up. Detection uses
 * one timer per peer, armed for the moment its last heartbeat gets too old. After a stall of
 * this process itself (it was stopped), peers get one more interval before being declared down:
 * their heartbeats are still queued in the socket.
 *
 * Malformed or foreign datagrams are counted (`holdfast_egress_heartbeats_ignored_total`) and
 * ignored. Metrics: `holdfast_egress_peer_up{peer}`, `holdfast_egress_heartbeats_total{dir}`,
 * `holdfast_egress_peer_down_total{peer}`. Log lines: "peer up", "peer down" (with how long
 * since the last heartbeat), "peer restarted", "peer draining", "peer ready" / "peer not ready".
 *
 * @module
 */

import dgram from "node:dgram";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import { decodeHeartbeat, encodeHeartbeat, type Heartbeat } from "./_health_wire.ts";
import { Ticker } from "./_health_ticker.ts";

/** Where a pod listens for heartbeats. */
export interface PeerAddress {
  /** Pod name (unique within the EgressNAT). */
  readonly name: string;
  /** IPv4 address or host name. */
  readonly host: string;
  /** UDP port. */
  readonly port: number;
}

/** Options of {@link PeerHealth}. */
export interface PeerHealthOptions {
  /** This pod's name. */
  readonly self: string;
  /** Where to listen for heartbeats. */
  readonly listen: { readonly host: string; readonly port: number };
  /** The other pods (an entry named `self` is skipped). */
  readonly peers: readonly PeerAddress[];
  /** Heartbeat interval, ms (default 100). */
  readonly intervalMs?: number;
  /** Intervals without a heartbeat before a peer is down (default 3). */
  readonly multiplier?: number;
  /** Whether this pod starts ready to be given floating addresses (default true; `setReady`). */
  readonly ready?: boolean;
  /** Logger (default the process logger). */
  readonly log?: Logger;
  /** Metrics registry (default the process registry). */
  readonly registry?: Registry;
}

/** What the ownership needs from the health view (an in-memory stand-in implements it in tests). */
export interface HealthView {
  /** Pods up now, self included, sorted. */
  live(): string[];
  /** Pods (self included) that announced they are draining and are still up. */
  draining(): string[];
  /**
   * Live pods (self included) that must not be given floating addresses now (BGP mode: no
   * session established), sorted.
   */
  unready(): string[];
  /**
   * Called when a peer goes up or down, or a live peer's draining or ready flag changes (`up`
   * true), or this pod's own ready flag changes (`peer` = self).
   */
  onChange(cb: (peer: string, up: boolean) => void): void;
  /** Announces (or withdraws) this pod's draining in its heartbeats. */
  setDraining(d: boolean): void;
  /** Announces whether this pod may be given floating addresses (in its heartbeats, at once). */
  setReady(r: boolean): void;
  /** How long a silent peer takes to be declared down, ms. */
  readonly detectMs: number;
}

interface PeerState {
  address: PeerAddress;
  up: boolean;
  boot: string;
  seq: number;
  draining: boolean;
  ready: boolean;
  lastHeardAt: number;
  changedAt: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** A peer not heard from yet: down until its first heartbeat. */
function unheardPeer(address: PeerAddress): PeerState {
  const times = { lastHeardAt: 0, changedAt: 0 };
  return { address, up: false, boot: "", seq: -1, draining: false, ready: true, ...times };
}

/** UDP heartbeats to and from the peers; see the module doc. */
export class PeerHealth implements HealthView {
  readonly self: string;
  readonly intervalMs: number;
  readonly multiplier: number;
  /** Random id of this start, carried in heartbeats. */
  readonly bootId: string = crypto.randomUUID();
  readonly #listen: { host: string; port: number };
  readonly #peers = new Map<string, PeerState>();
  readonly #callbacks: ((peer: string, up: boolean) => void)[] = [];
  readonly #log: Logger;
  readonly #m;
  #socket: dgram.Socket | null = null;
  #draining = false;
  #ready: boolean;
  #seq = 0;
  readonly #ticker: Ticker;
  #stopped = false;

  constructor(o: PeerHealthOptions) {
    this.self = o.self;
    this.intervalMs = o.intervalMs ?? 100;
    this.multiplier = o.multiplier ?? 3;
    if (!(this.intervalMs >= 1) || !Number.isInteger(this.multiplier) || this.multiplier < 1) {
      throw new RangeError(
        `Cannot check peer health: interval "${this.intervalMs}" ms and multiplier "${this.multiplier}" must be positive`,
      );
    }
    this.#listen = { ...o.listen };
    this.#ready = o.ready ?? true;
    for (const p of o.peers) {
      if (p.name === o.self) continue;
      if (this.#peers.has(p.name)) {
        throw new Error(`Cannot check peer health: peer "${p.name}" is listed twice`);
      }
      this.#peers.set(p.name, unheardPeer(p));
    }
    this.#log = (o.log ?? rootLog).with({ component: "egress-health", self: o.self });
    const reg = o.registry ?? rootRegistry;
    this.#m = {
      up: reg.gauge("holdfast_egress_peer_up", "1 while the peer's heartbeats arrive.", {
        labelNames: ["peer"],
      }),
      heartbeats: reg.counter(
        "holdfast_egress_heartbeats_total",
        "Heartbeats sent (tx) and accepted (rx).",
        {
          labelNames: ["dir"],
        },
      ),
      ignored: reg.counter(
        "holdfast_egress_heartbeats_ignored_total",
        "Datagrams on the heartbeat port that were not used: malformed, foreign, stale.",
        { labelNames: ["reason"] },
      ),
      down: reg.counter("holdfast_egress_peer_down_total", "Times a peer was declared down.", {
        labelNames: ["peer"],
      }),
    };
    for (const name of this.#peers.keys()) this.#m.up.set({ peer: name }, 0);
    this.#ticker = new Ticker(this.intervalMs, () => this.#send());
  }

  /** How long a silent peer takes to be declared down, ms (interval × multiplier). */
  get detectMs(): number {
    return this.intervalMs * this.multiplier;
  }

  /** The bound UDP port (after start; useful with port 0). */
  get port(): number {
    return this.#socket?.address().port ?? this.#listen.port;
  }

  /** Binds the socket and starts sending. */
  async start(): Promise<void> {
    if (this.#socket) return;
    const socket = dgram.createSocket({ type: "udp4" });
    socket.on("message", (msg: Uint8Array) => this.#receive(msg));
    socket.on("error", (err: Error) => this.#log.warn("heartbeat socket error", { err }));
    await new Promise<void>((resolve, reject) => {
      const fail = (err: Error) =>
        reject(
          new Error(
            `Cannot listen for heartbeats on "${this.#listen.host}:${this.#listen.port}": ${err.message}`,
            { cause: err },
          ),
        );
      socket.once("error", fail);
      socket.bind(this.#listen.port, this.#listen.host, () => {
        socket.off("error", fail);
        resolve();
      });
    });
    this.#socket = socket;
    this.#stopped = false;
    this.#log.info("heartbeats started", {
      listen: `${this.#listen.host}:${this.port}`,
      peers: [...this.#peers.keys()],
      interval_ms: this.intervalMs,
      multiplier: this.multiplier,
    });
    this.#ticker.start();
  }

  /** Stops sending and listening; peers see this pod go down. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#ticker.stop();
    for (const p of this.#peers.values()) clearTimeout(p.timer);
    const socket = this.#socket;
    this.#socket = null;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  live(): string[] {
    return [this.self, ...[...this.#peers.values()].filter((p) => p.up).map((p) => p.address.name)]
      .sort();
  }

  draining(): string[] {
    const out = [...this.#peers.values()].filter((p) => p.up && p.draining).map((p) =>
      p.address.name
    );
    if (this.#draining) out.push(this.self);
    return out.sort();
  }

  unready(): string[] {
    const out = [...this.#peers.values()].filter((p) => p.up && !p.ready).map((p) =>
      p.address.name
    );
    if (!this.#ready) out.push(this.self);
    return out.sort();
  }

  /**
   * Replaces the peer list while running (the controller's config in Redis changed): new peers
   * start as down until their heartbeats arrive, a removed peer that was up is declared down
   * first (the ownership hears it), a peer whose address changed keeps its state.
   */
  setPeers(peers: readonly PeerAddress[]): void {
    const wanted = new Map(peers.filter((p) => p.name !== this.self).map((p) => [p.name, p]));
    for (const [name, state] of this.#peers) {
      if (wanted.has(name)) continue;
      if (state.up) this.#markDown(state, performance.now(), "removed from the config");
      clearTimeout(state.timer);
      this.#peers.delete(name);
      this.#m.up.set({ peer: name }, 0);
    }
    for (const [name, address] of wanted) {
      const state = this.#peers.get(name);
      if (state) {
        state.address = address;
        continue;
      }
      this.#peers.set(name, unheardPeer(address));
      this.#m.up.set({ peer: name }, 0);
    }
    this.#log.info("peers set", { peers: [...this.#peers.keys()] });
  }

  /** Whether `peer` (or self) is up now. */
  isUp(peer: string): boolean {
    return peer === this.self || (this.#peers.get(peer)?.up ?? false);
  }

  onChange(cb: (peer: string, up: boolean) => void): void {
    this.#callbacks.push(cb);
  }

  setDraining(d: boolean): void {
    if (this.#draining === d) return;
    this.#draining = d;
    this.#log.info(d ? "draining announced" : "draining withdrawn", {});
    this.#send(); // at once: the standbys should not wait for the next tick
  }

  setReady(r: boolean): void {
    if (this.#ready === r) return;
    this.#ready = r;
    this.#send(); // at once: the peers recompute the assignment
    this.#emit(this.self, true);
  }

  /** Sends one heartbeat to every peer now. */
  #send(): void {
    const socket = this.#socket;
    if (!socket) return;
    const datagram = encodeHeartbeat({
      name: this.self,
      seq: this.#seq++,
      boot: this.bootId,
      draining: this.#draining,
      ready: this.#ready,
    });
    for (const p of this.#peers.values()) {
      socket.send(datagram, p.address.port, p.address.host, (err: Error | null) => {
        if (err) this.#m.ignored.inc({ reason: "send_error" });
      });
      this.#m.heartbeats.inc({ dir: "tx" });
    }
  }

  #receive(data: Uint8Array): void {
    const hb = decodeHeartbeat(data);
    if (!hb) return this.#m.ignored.inc({ reason: "malformed" });
    const peer = this.#peers.get(hb.name);
    if (!peer) return this.#m.ignored.inc({ reason: "foreign" });
    const now = performance.now();
    if (hb.boot !== peer.boot) {
      if (peer.up) {
        this.#log.info("peer restarted", { peer: hb.name });
        this.#markDown(peer, now, "restarted");
      }
      peer.boot = hb.boot;
      peer.seq = -1;
    }
    if (hb.seq <= peer.seq) return this.#m.ignored.inc({ reason: "stale" });
    peer.seq = hb.seq;
    peer.lastHeardAt = now;
    this.#m.heartbeats.inc({ dir: "rx" });
    const drainingChanged = peer.draining !== hb.draining;
    const readyChanged = peer.ready !== (hb.ready ?? true);
    peer.draining = hb.draining;
    peer.ready = hb.ready ?? true;
    if (!peer.up) {
      peer.up = true;
      const downMs = peer.changedAt ? Math.round(now - peer.changedAt) : undefined;
      peer.changedAt = now;
      this.#m.up.set({ peer: hb.name }, 1);
      const { draining, ready } = peer;
      this.#log.info("peer up", { peer: hb.name, down_ms: downMs, draining, ready });
      this.#armCheck(peer, this.detectMs);
      this.#emit(hb.name, true);
    } else if (drainingChanged) {
      this.#log.info(hb.draining ? "peer draining" : "peer no longer draining", { peer: hb.name });
      this.#emit(hb.name, true);
    } else if (readyChanged) {
      this.#log.info(peer.ready ? "peer ready" : "peer not ready", { peer: hb.name });
      this.#emit(hb.name, true);
    }
  }

  #armCheck(peer: PeerState, delayMs: number): void {
    clearTimeout(peer.timer);
    peer.timer = setTimeout(() => this.#check(peer), Math.max(1, Math.ceil(delayMs)));
  }

  #check(peer: PeerState): void {
    peer.timer = undefined;
    if (!peer.up || this.#stopped) return;
    const now = performance.now();
    const remaining = peer.lastHeardAt + this.detectMs - now;
    if (remaining > 0) return this.#armCheck(peer, remaining);
    const t = this.#ticker;
    if (now - t.lastTickAt > 2 * this.intervalMs || now - t.lateAt < this.intervalMs) {
      // This process was stalled itself: the peer's heartbeats may be waiting in the socket.
      return this.#armCheck(peer, this.intervalMs);
    }
    this.#markDown(peer, now, "silent");
  }

  #markDown(peer: PeerState, now: number, why: string): void {
    clearTimeout(peer.timer);
    peer.timer = undefined;
    peer.up = false;
    peer.changedAt = now;
    this.#m.up.set({ peer: peer.address.name }, 0);
    this.#m.down.inc({ peer: peer.address.name });
    this.#log.warn("peer down", {
      peer: peer.address.name,
      why,
      since_last_heartbeat_ms: Math.round(now - peer.lastHeardAt),
      detect_ms: this.detectMs,
    });
    this.#emit(peer.address.name, false);
  }

  #emit(peer: string, up: boolean): void {
    for (const cb of this.#callbacks) {
      try {
        cb(peer, up);
      } catch (err) {
        this.#log.error("peer change callback failed", { peer, up, err });
      }
    }
  }
}

export type { Heartbeat };
