/**
 * The egress NAT agent (`main.ts egress`): one per NAT pod, run inside the pod's network
 * namespace. It composes the parts in the order takeover needs them (FINDINGS: "inject before
 * moving routes"):
 *
 * 1. floating addresses left by an earlier run are dropped (a restarted pod owns nothing yet);
 * 2. the SNAT rules (nft.ts) on every pod from the start, then `ip_forward=1`,
 *    `nf_conntrack_tcp_loose=0` and `nf_conntrack_tcp_be_liberal=1`;
 * 3. the conntrack {@linkcode SyncReceiver} (standby side: injects what owners stream);
 * 4. {@linkcode PeerHealth} heartbeats with the other pods;
 * 5. the {@linkcode SyncSender} (owner side: streams entries of the owned addresses to live peers);
 * 6. {@linkcode EgressOwnership}: Redis lease per floating address; `assume` sends gratuitous ARP
 *    and adds the floating and gateway /32s (rules and injected entries are already there),
 *    `forfeit` removes them at once (fencing), `beforeHandover` flushes the sync stream.
 *
 * With `announce` `bgp` or `both` the pod's bird announces the owned addresses (`_bgp.ts`).
 * SIGTERM hands every owned address over (drain: no resets) and exits; SIGINT just stops
 * (`main.ts`, the command).
 * `--listen` (formerly `--metrics-addr`) serves /metrics, /healthz and /readyz (ready once
 * ownership runs).
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { Conntrack, ConntrackEvents } from "../conntrack/mod.ts";
import {
  type EgressConfig,
  type EgressPeer,
  type FloatingAddress,
  selfPeer,
} from "../../controller/egress/config.ts";
import { installEgressRules } from "./nft.ts";
import { addFloating, announceFloating, heldFloating, removeFloating } from "./addresses.ts";
import { setSysctls } from "./_command.ts";
import { PeerHealth } from "./health.ts";
import { EgressOwnership } from "./ownership.ts";
import { AddressHolder } from "./_address_holder.ts";
import { HANDOVER_LINGER_MS, plannedHandover } from "./_sync_linger.ts";
import { SyncReceiver, SyncSender } from "./sync.ts";
import { EgressBgp } from "./_bgp.ts";
import type { AnnounceMode } from "./egress_args.ts";
import { acceptSteered, OwnerPublisher } from "./_steer_side.ts";

/** Options of an {@link EgressAgent}. */
export interface EgressAgentOptions {
  /** This pod's name (one of `config.peers`). */
  readonly self: string;
  /** Redis URL of the leases. */
  readonly redisUrl: string;
  /** Stream conntrack entries to peers (false: the baseline). */
  readonly sync: boolean;
  /** Lease time to live (default: the ownership's). */
  readonly leaseTtlMs?: number;
  /**
   * How the owner draws the external side's traffic (docs/egress.md "BGP mode"): gratuitous ARP
   * on the external segment, a BGP announcement of the /32 (the config's `bgp` section), or
   * both. The internal gateway's gratuitous ARP is sent in every mode. Default `garp`.
   */
  readonly announce?: AnnounceMode;
  /** bird's directory in BGP mode (default `/run/holdfast/bird-egress-POD`). */
  readonly bgpDir?: string;
  readonly log?: Logger;
  readonly registry?: Registry;
}

/** One NAT pod: rules, heartbeats, sync, ownership and the floating addresses it holds. */
export class EgressAgent {
  readonly #config: EgressConfig;
  readonly #o: EgressAgentOptions;
  readonly #log: Logger;
  readonly #byAddress: Map<string, FloatingAddress>;
  /** The floating addresses held: one state machine and one writer per address. */
  readonly #holder: AddressHolder;
  readonly #stops: (() => Promise<void> | void)[] = [];
  #sender: SyncSender | null = null;
  #health: PeerHealth | null = null;
  /** The other NAT pods (replaced live by {@link setPeers}). */
  #others: EgressPeer[] = [];
  #ownership: EgressOwnership | null = null;
  #bgp: EgressBgp | null = null;
  #ready = false;
  readonly #metrics;

  /** An agent for `config`; nothing happens before {@link start}. */
  constructor(config: EgressConfig, options: EgressAgentOptions) {
    this.#config = config;
    this.#o = options;
    this.#log = options.log ?? rootLog.with({ component: "egress", pod: options.self });
    this.#byAddress = new Map(config.addresses.map((fa) => [fa.address, fa]));
    this.#holder = new AddressHolder(
      {
        add: (addr, epoch) => this.#add(addr, epoch),
        remove: (addr, why) => this.#remove(addr, why),
      },
      (owned, change) => {
        this.#sender?.setOwned(new Set([...owned].map(parseIpv4)));
        // Planned: neighbours still send new connections here until they follow the new owner.
        if (!change.wanted && plannedHandover(change.why)) {
          this.#sender?.keepStreaming(parseIpv4(change.address), HANDOVER_LINGER_MS);
        }
      },
    );
    const r = options.registry ?? processRegistry;
    this.#metrics = {
      owned: r.gauge("holdfast_egress_owned_addresses", "Floating addresses this NAT pod holds"),
      assumed: r.counter("holdfast_egress_assumed_total", "Floating addresses assumed", {
        labelNames: ["address"],
      }),
      forfeited: r.counter("holdfast_egress_forfeited_total", "Floating addresses given up", {
        labelNames: ["address"],
      }),
      assumeSeconds: r.histogram(
        "holdfast_egress_assume_seconds",
        "Time to add a floating address and its gateway and announce them",
        { buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1] },
      ),
    };
    this.#metrics.owned.onCollect(() => this.#metrics.owned.set(undefined, this.owned().length));
  }

  /** Whether ownership runs (the pod takes part in the egress NAT). */
  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Floating addresses held now: from the moment ownership assumes one to the moment it forfeits
   * it, as the sync sender streams them and `holdfast_egress_owner{address}` says.
   */
  owned(): string[] {
    return this.#holder.owned();
  }

  /** Starts everything in takeover order (see the module doc). */
  async start(): Promise<void> {
    const config = this.#config;
    const self = selfPeer(config, this.#o.self);
    this.#lockNamespace(config.ports.sync);
    for (const fa of heldFloating(config)) {
      await removeFloating(fa, config.interfaces);
      this.#log.info("address released at start", { address: fa.address, gateway: fa.gateway });
    }
    // The rules stay after a stop: until every neighbour has followed the new owner's
    // gratuitous ARP, packets of NATed flows may still reach this pod, and without a nat chain
    // the kernel would forward them untranslated, with the client's private source. The next
    // start replaces the table atomically; the pod's namespace goes with the pod.
    await installEgressRules(config);
    // tcp_loose=0: a mid-stream segment of an unknown flow is INVALID (dropped), never picked
    // up with a new mapping (FINDINGS). tcp_be_liberal=1: ctnetlink carries no TCP window
    // (td_end, td_maxwin), so a pod whose entry went stale while another pod forwarded the flow
    // (a resumed hung owner, a pod handed its address back) would call the next segments out of
    // window and drop them; liberal marks only out-of-window RSTs invalid (conntrackd's advice).
    await setSysctls({
      "net.ipv4.ip_forward": 1,
      "net.netfilter.nf_conntrack_tcp_loose": 0,
      "net.netfilter.nf_conntrack_tcp_be_liberal": 1,
    });
    this.#log.info("rules installed", {
      sources: config.sources.length,
      destinations: config.destinations,
      sync: this.#o.sync,
    });

    // Client steering (docs/egress.md): decap what node agents send here. Loading the program
    // blocks the event loop for a moment: before heartbeats and sync start.
    const accepted = await acceptSteered(
      self.address,
      config.sources.map((s) => s.prefix),
      config.interfaces.internal,
      this.#log,
      this.#o.registry ?? processRegistry,
    );
    if (accepted) this.#stops.push(accepted);

    const registry = this.#o.registry;
    this.#others = config.peers.filter((p) => p.name !== self.name);
    const others = this.#others;
    if (this.#o.sync) {
      const ct = Conntrack.open();
      const receiver = new SyncReceiver({
        ct,
        listen: { host: self.address, port: config.ports.sync },
        skip: () => this.#sender?.lingering(),
        log: this.#log,
        registry,
      });
      await receiver.start();
      this.#stops.push(async () => {
        await receiver.stop();
        ct.close();
      });
    }

    const health = new PeerHealth({
      self: self.name,
      listen: { host: self.address, port: config.ports.health },
      peers: others.map((p) => ({ name: p.name, host: p.address, port: config.ports.health })),
      intervalMs: config.healthCheck.intervalMs,
      multiplier: config.healthCheck.multiplier,
      // BGP mode: given no floating address before a session is up (`_bgp.ts`, `onReady`).
      ready: (this.#o.announce ?? "garp") === "garp",
      log: this.#log,
      registry,
    });
    await health.start();
    this.#health = health;
    this.#stops.push(() => health.stop());

    if (this.#o.sync) {
      const ct = Conntrack.open();
      const events = ConntrackEvents.open();
      const sender = new SyncSender({
        ct,
        events,
        self: self.name,
        peers: () => {
          const live = new Set(health.live());
          return this.#others.filter((p) => live.has(p.name)).map((p) => ({
            name: p.name,
            host: p.address,
            port: config.ports.sync,
          }));
        },
        log: this.#log,
        registry,
      });
      sender.start();
      this.#sender = sender;
      this.#stops.push(async () => {
        await sender.stop();
        events.close();
        ct.close();
      });
    }

    await this.#startBgp(self.address);
    const redis = new RedisConnection({ url: this.#o.redisUrl, logComponent: "egress-lease" });
    this.#stops.push(() => redis.close());
    // Client steering (docs/egress.md): tell node agents the owners.
    const owners = new OwnerPublisher(redis, config.name, self.name, self.address, this.#log);
    const ownership = new EgressOwnership({
      self: self.name,
      name: config.name,
      addresses: config.addresses.map((fa) => fa.address),
      health,
      redis,
      ...(this.#o.leaseTtlMs ? { ttlMs: this.#o.leaseTtlMs } : {}),
      assume: async (addr, epoch) => {
        await owners.publish("assumed", addr, epoch); // bounded: ≤ 20 ms
        return this.#holder.assume(addr, epoch);
      },
      forfeit: (addr, why) => {
        void owners.publish("forfeited", addr);
        return this.#holder.forfeit(addr, why);
      },
      mayAcquire: () => this.#bgp?.mayAcquire ?? true,
      beforeHandover: async () => {
        await this.#sender?.flush();
      },
      log: this.#log,
      registry,
    });
    this.#ownership = ownership;
    await ownership.start();
    this.#stops.push(() => ownership.stop());
    this.#ready = true;
    this.#log.info("ready", { peers: others.map((p) => p.name), addresses: config.addresses });
  }

  /**
   * New peers (the config in Redis changed): heartbeats and the sync sender follow at once; a
   * removed peer that was up is declared down, so the ownership reassigns its addresses.
   */
  setPeers(peers: readonly EgressPeer[]): void {
    this.#others = peers.filter((p) => p.name !== this.#o.self);
    this.#health?.setPeers(
      this.#others.map((p) => ({
        name: p.name,
        host: p.address,
        port: this.#config.ports.health,
      })),
    );
  }

  /**
   * One agent per pod: a listener on 127.0.0.1 (loopback is per network namespace) held for the
   * agent's life, taken before anything is touched, so a second agent started by mistake stops
   * at once instead of removing the first one's addresses as "left over".
   */
  #lockNamespace(port: number): void {
    let lock: Deno.Listener;
    try {
      lock = Deno.listen({ hostname: "127.0.0.1", port });
    } catch (err) {
      if (!(err instanceof Deno.errors.AddrInUse)) throw err;
      throw new Error(
        `Cannot start: another egress agent runs in this network namespace (127.0.0.1:${port} ` +
          "is taken)",
        { cause: err },
      );
    }
    this.#stops.push(() => lock.close());
  }

  /** The announce mode's side: GARP on the external segment, BGP, or both. */
  get #garpExternal(): boolean {
    return (this.#o.announce ?? "garp") !== "bgp";
  }

  /** BGP mode: the pod's bird, announcing nothing until ownership assumes (module `_bgp.ts`). */
  async #startBgp(routerId: string): Promise<void> {
    const mode = this.#o.announce ?? "garp";
    if (mode === "garp") return;
    const section = this.#config.bgp;
    if (!section) {
      throw new Error(`Cannot announce over BGP (--announce ${mode}): the config has no "bgp"`);
    }
    const bgp = await EgressBgp.start(section, {
      dir: this.#o.bgpDir ?? `/run/holdfast/bird-egress-${this.#o.self}`,
      routerId,
      floating: this.#config.addresses.map((fa) => fa.address),
      validUntil: (addr) => this.#ownership?.validUntil(addr),
      onReady: (ready) => this.#health?.setReady(ready),
      log: this.#log.with({ component: "egress-bgp" }),
    });
    this.#bgp = bgp;
    // Stopped after ownership (stops run in reverse): every forfeit has withdrawn by then.
    this.#stops.push(() => bgp.stop(500));
  }

  #floating(addr: string): FloatingAddress {
    const fa = this.#byAddress.get(addr);
    if (!fa) throw new Error(`Cannot hold "${addr}": not a floating address of the config`);
    return fa;
  }

  /** The holder's add: announce, add the /32s, announce again (the sync sender already knows). */
  async #add(addr: string, epoch: number): Promise<void> {
    const fa = this.#floating(addr);
    const t0 = performance.now();
    // Gratuitous ARP first: neighbours need only our MAC to send us the flows (client packets are
    // addressed to the destination, replies are de-NATed before routing), so the ~30 ms of an
    // `ip` process start stay off the takeover path. Once more after the addresses are up, for a
    // neighbour that asked in between.
    const garp = this.#garpExternal;
    announceFloating(fa, this.#config.interfaces, garp);
    await Promise.all([addFloating(fa, this.#config.interfaces), this.#bgp?.announce(addr)]);
    announceFloating(fa, this.#config.interfaces, garp);
    const ms = performance.now() - t0;
    this.#metrics.assumed.inc({ address: addr });
    this.#metrics.assumeSeconds.observe(undefined, ms / 1000);
    this.#log.info("floating address added", {
      address: addr,
      gateway: fa.gateway,
      epoch,
      ms: Math.round(ms * 10) / 10,
    });
  }

  /** The holder's remove. */
  async #remove(addr: string, why: string): Promise<void> {
    const fa = this.#floating(addr);
    // Both before the forfeit completes (and a planned handover releases the lease).
    await Promise.all([
      removeFloating(fa, this.#config.interfaces),
      this.#bgp?.withdraw(addr, why),
    ]);
    this.#metrics.forfeited.inc({ address: addr });
    this.#log.info("floating address removed", { address: addr, gateway: fa.gateway, why });
  }

  /** Planned handover: every owned address to its standby, after the sync stream is flushed. */
  async drain(): Promise<void> {
    const owned = this.owned();
    await this.#ownership?.drain();
    await this.#sender?.lingerDone();
    this.#log.info("drained", { handed_over: owned, still_owned: this.owned() });
  }

  /** Stops everything in reverse order; removes whatever addresses the kernel may still hold. */
  async stop(): Promise<void> {
    this.#ready = false;
    for (const stop of this.#stops.splice(0).reverse()) {
      try {
        await stop();
      } catch (err) {
        this.#log.warn("stop step failed", { err });
      }
    }
    for (const addr of this.#holder.notReleased()) {
      await this.#holder.forfeit(addr, "agent stopped").catch((err) =>
        this.#log.error("cannot remove floating address", { address: addr, err })
      );
    }
  }
}
