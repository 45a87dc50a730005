/**
 * Client steering on the node agent (`main.ts node --egress-steer`, docs/egress.md "Steering
 * client pods"): the selected client pods of every EgressNAT that run on this node get their
 * packets to the EgressNAT's destinations encapsulated to the NAT pod that owns their floating
 * address now, on a routed pod network with no shared L2 (bpf/egress_steer_tc.c).
 *
 * - One slot per floating address with local clients: `hf_steer_owner[slot]` is its owner, its
 *   EgressNAT's destinations are in `hf_steer_dst` under the slot. A client's entry in
 *   `hf_steer_src` goes in after them, then `hf_steer_encap` (tc ingress) and `hf_steer_clamp`
 *   (tc egress: SYN/ACKs' MSS) are attached on the interface the node routes the client's address
 *   to (its veth).
 * - An owner change (source.ts: the NAT pods' owner-changes stream) is one map write; changes
 *   with an older epoch than the one applied are ignored (a late message of a dead owner).
 *   A forfeit moves nothing: the old owner keeps translating (it lingers on a planned handover)
 *   until the successor's `assumed` arrives.
 * - Clients that go, or leave the selection, lose their entry (the filter stays, passing
 *   everything); an address without local clients frees its slot.
 * - Stop: `cleanup` detaches the programs this agent attached (the maps go with them). Without
 *   it (the default) everything stays as it is, as the node agent's other programs do, so a
 *   restarted agent's traffic never takes the unsteered path; the next agent replaces the
 *   programs atomically with a fresh object filled from Redis first.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import type { TcAttachment } from "../bpf/attach.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import type { OwnerChange, OwnerRecord } from "../../controller/egress/owners.ts";
import { STEER_SLOTS, SteerDatapath } from "./datapath.ts";
import type { SteerEgress, SteerSink } from "./source.ts";

/** Options of {@linkcode EgressSteer}. */
export interface EgressSteerOptions {
  /** This node's name (the clients' `node`). */
  readonly nodeName: string;
  /** Network namespace to work in (the lab); default the agent's own. */
  readonly netns?: string;
  readonly objectDir?: string;
  readonly log: Logger;
  readonly registry: Registry;
}

interface Slot {
  readonly slot: number;
  readonly egress: string;
  readonly address: string;
  destinations: readonly string[];
  owner: OwnerRecord | null;
}

interface Client {
  readonly pod: string;
  readonly key: string;
  readonly ifname: string;
}

/** The steering state of one node; a {@link SteerSink} for the source. */
export class EgressSteer implements SteerSink {
  readonly dp: SteerDatapath;
  readonly #o: EgressSteerOptions;
  readonly #slots = new Map<string, Slot>();
  readonly #free: number[] = Array.from({ length: STEER_SLOTS }, (_, i) => STEER_SLOTS - 1 - i);
  /** Owners by `egress|address` (also of addresses without local clients). */
  readonly #owners = new Map<string, OwnerRecord>();
  readonly #clients = new Map<string, Client>();
  readonly #attached = new Map<string, TcAttachment[]>();
  #egresses: readonly SteerEgress[] = [];
  #applying: Promise<void> = Promise.resolve();
  #stopped = false;
  readonly #m;

  constructor(o: EgressSteerOptions) {
    this.#o = o;
    this.dp = SteerDatapath.open(o.objectDir);
    const r = o.registry;
    this.#m = {
      clients: r.gauge("holdfast_egress_steer_clients", "Client pod addresses steered here"),
      changes: r.counter(
        "holdfast_egress_steer_owner_changes_total",
        "Owner changes applied (a floating address repointed to its new owner)",
        { labelNames: ["address"] },
      ),
      apply: r.histogram(
        "holdfast_egress_steer_apply_seconds",
        "Time to repoint one floating address's clients (the map write)",
        { buckets: [0.00001, 0.0001, 0.001, 0.01, 0.1] },
      ),
      lag: r.histogram(
        "holdfast_egress_steer_lag_seconds",
        "From the owner change's entry in Redis to its application here",
        { buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1] },
      ),
    };
    const packets = r.counter(
      "holdfast_egress_steer_packets_total",
      "Packets the steering programs acted on, by outcome (bpf/egress_steer_tc.c)",
      { labelNames: ["reason"] },
    );
    const last = new Map<string, bigint>();
    this.#m.clients.onCollect(() => {
      this.#m.clients.set(undefined, this.#clients.size);
      if (this.#stopped) return;
      for (const [reason, n] of Object.entries(this.dp.stats())) {
        const prev = last.get(reason) ?? 0n;
        if (n > prev) packets.inc({ reason }, Number(n - prev));
        last.set(reason, n);
      }
    });
  }

  /** Client addresses steered now → their floating address's owner pod (tests, status). */
  steered(): Map<string, { pod: string; owner: string | null }> {
    const out = new Map<string, { pod: string; owner: string | null }>();
    for (const [ip, c] of this.#clients) {
      out.set(ip, { pod: c.pod, owner: this.#slots.get(c.key)?.owner?.pod ?? null });
    }
    return out;
  }

  /** Resolves once the changes queued so far are in the kernel. */
  settled(): Promise<void> {
    return this.#applying;
  }

  egresses(list: readonly SteerEgress[]): void {
    this.#egresses = list;
    this.#applying = this.#applying.then(() => this.#apply()).catch((err) =>
      this.#o.log.error("egress steering not applied", { err: String(err) })
    );
  }

  owners(egress: string, owners: ReadonlyMap<string, OwnerRecord>): void {
    for (const [address, rec] of owners) {
      this.#owner(egress, { event: "assumed", address, ...rec }, null);
    }
  }

  change(egress: string, c: OwnerChange, lagMs: number): void {
    if (c.event === "forfeited") {
      this.#o.log.debug("owner forfeited", { egress, address: c.address, pod: c.pod });
      return;
    }
    this.#owner(egress, c, lagMs);
  }

  #owner(egress: string, c: OwnerChange, lagMs: number | null): void {
    const key = `${egress}|${c.address}`;
    const had = this.#owners.get(key);
    if (had && (c.epoch < had.epoch || (c.epoch === had.epoch && c.ip === had.ip))) return;
    const rec = { pod: c.pod, ip: c.ip, epoch: c.epoch };
    this.#owners.set(key, rec);
    const slot = this.#slots.get(key);
    if (!slot) return;
    const t0 = performance.now();
    this.dp.setOwner(slot.slot, isIpv4(rec.ip) ? rec.ip : null, rec.epoch);
    slot.owner = rec;
    const ms = performance.now() - t0;
    this.#m.changes.inc({ address: c.address });
    this.#m.apply.observe(undefined, ms / 1000);
    if (lagMs !== null) this.#m.lag.observe(undefined, Math.max(0, lagMs) / 1000);
    this.#o.log.info("egress steering to owner", {
      egress,
      address: c.address,
      pod: rec.pod,
      ip: rec.ip,
      epoch: rec.epoch,
      clients: [...this.#clients.values()].filter((x) => x.key === key).length,
      ...(lagMs !== null ? { lag_ms: lagMs } : {}),
    });
  }

  /** Makes slots, destinations, clients and attachments what the EgressNATs say. */
  async #apply(): Promise<void> {
    const want = new Map<string, { pod: string; key: string; egress: SteerEgress }>();
    for (const e of this.#egresses) {
      const addresses = new Set(e.config.addresses.map((a) => a.address));
      for (const c of e.clients) {
        if (c.node !== this.#o.nodeName || !addresses.has(c.address)) continue;
        for (const ip of c.ips.filter(isIpv4)) {
          if (!want.has(ip)) want.set(ip, { pod: c.pod, key: `${e.name}|${c.address}`, egress: e });
        }
      }
    }
    // Slots (owner and destinations) before clients point at them.
    const keys = new Set([...want.values()].map((w) => w.key));
    for (const w of want.values()) this.#slot(w.key, w.egress);
    for (const [ip, w] of want) {
      const had = this.#clients.get(ip);
      if (had?.key === w.key && had.pod === w.pod) continue;
      let ifname: string;
      try {
        ifname = await this.#interfaceOf(ip);
        // The entry before the program: a program that replaces a previous agent's (whose maps
        // steer this client) must never see the client missing.
        this.dp.setClient(ip, this.#slots.get(w.key)!.slot);
        if (!this.#attached.has(ifname)) {
          const netns = this.#o.netns;
          this.#attached.set(ifname, [
            this.dp.attach(this.dp.encap, ifname, netns),
            this.dp.attach(this.dp.clamp, ifname, netns, "egress"),
          ]);
        }
      } catch (err) {
        if (!had) this.dp.deleteClient(ip);
        this.#o.log.warn("cannot steer client", { pod: w.pod, ip, err: String(err) });
        continue;
      }
      this.#clients.set(ip, { pod: w.pod, key: w.key, ifname });
      const owner = this.#slots.get(w.key)!.owner;
      this.#o.log.info("egress client steered", {
        pod: w.pod,
        ip,
        iface: ifname,
        egress: w.egress.name,
        address: w.key.slice(w.key.indexOf("|") + 1),
        owner: owner?.pod ?? null,
        epoch: owner?.epoch ?? null,
      });
    }
    for (const [ip, c] of this.#clients) {
      if (want.has(ip)) continue;
      this.dp.deleteClient(ip);
      this.#clients.delete(ip);
      this.#o.log.info("egress client no longer steered", { pod: c.pod, ip });
    }
    for (const [key, s] of this.#slots) {
      if (keys.has(key)) continue;
      for (const d of s.destinations) this.dp.setDestination(s.slot, d, false);
      this.dp.setOwner(s.slot, null);
      this.#slots.delete(key);
      this.#free.push(s.slot);
    }
  }

  /** The slot of `key`, made (owner, destinations) or updated (destinations). */
  #slot(key: string, e: SteerEgress): Slot {
    let s = this.#slots.get(key);
    if (!s) {
      const n = this.#free.pop();
      if (n === undefined) throw new Error(`Cannot steer more than ${STEER_SLOTS} addresses`);
      const owner = this.#owners.get(key) ?? null;
      this.dp.setOwner(n, owner && isIpv4(owner.ip) ? owner.ip : null, owner?.epoch ?? 0);
      s = {
        slot: n,
        egress: e.name,
        address: key.slice(key.indexOf("|") + 1),
        destinations: [],
        owner,
      };
      this.#slots.set(key, s);
    }
    const next = e.config.destinations;
    for (const d of next) if (!s.destinations.includes(d)) this.dp.setDestination(s.slot, d, true);
    for (const d of s.destinations) if (!next.includes(d)) this.dp.setDestination(s.slot, d, false);
    s.destinations = [...next];
    return s;
  }

  /** The interface the node routes `ip` to (a pod's veth). */
  async #interfaceOf(ip: string): Promise<string> {
    const ns = this.#o.netns ? ["-n", this.#o.netns] : [];
    const out = await new Deno.Command("ip", {
      args: [...ns, "-j", "route", "get", ip],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const dev = out.code === 0 ? (JSON.parse(text) as { dev?: string }[])[0]?.dev : undefined;
    if (!dev) {
      const why = new TextDecoder().decode(out.stderr).trim() || text.trim();
      throw new Error(`Cannot find the interface the node routes ${ip} to: ${why}`);
    }
    return dev;
  }

  /** Stops: with `cleanup`, detaches the programs it attached; else leaves everything. */
  async stop(cleanup: boolean): Promise<void> {
    await this.#applying;
    if (cleanup) {
      for (const [ifname, list] of this.#attached) {
        for (const a of list) {
          try {
            a.detach();
          } catch (err) {
            this.#o.log.warn("cannot detach steering", { iface: ifname, err: String(err) });
          }
        }
      }
      this.#o.log.info("egress steering removed", { interfaces: [...this.#attached.keys()] });
    } else {
      this.#o.log.info("egress steering left in place", { clients: this.#clients.size });
    }
    this.#attached.clear();
    this.#stopped = true;
    this.dp[Symbol.dispose]();
  }
}
