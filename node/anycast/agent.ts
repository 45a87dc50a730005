/**
 * The anycast agent's reconciler: from the latest services and pods it computes the addresses
 * this node must hold ({@linkcode desiredAddresses}) and makes `lo` match — adding is
 * `assuming address …`, removing is `forfeiting address …`, each logged with the services and
 * pods behind it. Passes are serialized; a newer state supersedes a pending one; a failed
 * pass is retried with backoff until it converges or a newer state arrives.
 *
 * @module
 */

import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import { Backoff, sleep } from "../../lib/backoff.ts";
import { isIpv4, parseIpv4, parseIpv4Cidr } from "../../lib/ipv4.ts";
import { ipv6BigInt, parseIpv6Cidr } from "../../lib/ipv6.ts";
import type { Loopback } from "./loopback.ts";
import { desiredAddresses, type Holding, managedAddresses } from "./model.ts";
import type { AnycastState } from "./state_file.ts";

/** The agent's metrics, on `registry` (lib/metrics.ts: registered per instance). */
const anycastMetrics = (registry: Registry) => ({
  held: registry.gauge("holdfast_anycast_addresses_held", "Anycast addresses held on lo."),
  address: registry.gauge(
    "holdfast_anycast_address",
    "1 while this node holds the anycast address on lo, 0 once it forfeited it.",
    { labelNames: ["address"] },
  ),
  changes: registry.counter(
    "holdfast_anycast_changes_total",
    "Anycast addresses assumed and forfeited.",
    { labelNames: ["action"] },
  ),
  errors: registry.counter(
    "holdfast_anycast_reconcile_errors_total",
    "Failed passes making lo match the desired addresses (retried).",
  ),
});

/** Options of {@linkcode AnycastAgent}. */
export interface AnycastAgentOptions {
  /** Logger (default the root logger with `component: "anycast"`). */
  readonly log?: Logger;
  /**
   * Prefixes (CIDR, IPv4 or IPv6) the agent owns on `lo`: a /32 (/128) inside them that no
   * service wants is removed (left over from a crash). Addresses of known anycast services are
   * always owned.
   */
  readonly prefixes?: readonly string[];
  /** Retries of one failed state before waiting for the next (default 20). */
  readonly maxRetries?: number;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  readonly registry?: Registry;
}

/** A prefix as an inclusive range (IPv4 as `number`, IPv6 as `bigint`: never equal). */
type Prefix = { first: number | bigint; last: number | bigint };

function parsePrefix(cidr: string): Prefix {
  return cidr.includes(":") ? parseIpv6Cidr(cidr) : parseIpv4Cidr(cidr);
}

function inPrefixes(address: string, prefixes: readonly Prefix[]) {
  const a = isIpv4(address) ? parseIpv4(address) : ipv6BigInt(address);
  return prefixes.some((p) => typeof p.first === typeof a && a >= p.first && a <= p.last);
}

/** Makes `lo` hold exactly the addresses the node's ready pods call for. */
export class AnycastAgent {
  readonly #log: Logger;
  readonly #prefixes: Prefix[];
  readonly #maxRetries: number;
  readonly #metrics: ReturnType<typeof anycastMetrics>;
  #state: AnycastState = { services: [], pods: [] };
  #held = new Map<string, Holding>();
  readonly #everHeld = new Set<string>();
  #generation = 0;
  #pass: Promise<void> = Promise.resolve();
  #stopped = false;

  /** An agent for `node` acting on `loopback`. */
  constructor(
    readonly node: string,
    readonly loopback: Loopback,
    options: AnycastAgentOptions = {},
  ) {
    this.#log = options.log ?? rootLog.with({ component: "anycast", node });
    this.#prefixes = (options.prefixes ?? []).map(parsePrefix);
    this.#maxRetries = options.maxRetries ?? 20;
    this.#metrics = anycastMetrics(options.registry ?? processRegistry);
  }

  /** Addresses held now, with why. */
  get held(): ReadonlyMap<string, Holding> {
    return this.#held;
  }

  /** Takes a new state; resolves once a pass that saw it has finished (or was superseded). */
  update(state: AnycastState): Promise<void> {
    this.#state = state;
    const generation = ++this.#generation;
    this.#pass = this.#pass.then(() => this.#converge(generation));
    return this.#pass;
  }

  /**
   * Runs a pass on the current state again: repairs `lo` if something else changed it (an
   * address removed by hand comes back, a stray one in an owned prefix goes).
   */
  resync(): Promise<void> {
    return this.#stopped ? this.#pass : this.update(this.#state);
  }

  /** Forfeits every address (shutdown: withdraw before the node goes away) and stops. */
  async forfeitAll(reason = "agent stopping"): Promise<void> {
    this.#stopped = true;
    await this.#pass;
    for (const [address, holding] of [...this.#held]) {
      await this.loopback.remove(address).catch((e) =>
        this.#log.error("cannot forfeit address", { address, error: e })
      );
      this.#forfeited(address, holding, reason);
    }
  }

  async #converge(generation: number): Promise<void> {
    const backoff = new Backoff({ minMs: 20, maxMs: 2_000 });
    for (let attempt = 0; attempt <= this.#maxRetries; attempt++) {
      if (generation !== this.#generation || this.#stopped) return; // a newer state takes over
      try {
        await this.#reconcile();
        return;
      } catch (e) {
        this.#metrics.errors.inc();
        this.#log.error("anycast reconcile failed; retrying", { attempt, error: e });
        await sleep(backoff.next());
      }
    }
  }

  async #reconcile(): Promise<void> {
    const { services, pods } = this.#state;
    const desired = desiredAddresses(this.node, services, pods);
    const managed = managedAddresses(services);
    const onLo = await this.loopback.list();
    // Each address on its own: one that `ip` refuses is named, the others go on; the pass then
    // fails so it is retried.
    const failed: string[] = [];
    const each = async (address: string, step: () => Promise<void>) => {
      try {
        await step();
      } catch (error) {
        failed.push(address);
        this.#log.error("cannot change address; the others go on", { address, error });
      }
    };
    // Forfeits first: a terminating pod's address must go before anything else is done.
    for (const address of onLo) {
      if (desired.has(address)) continue;
      const owned = managed.has(address) || this.#held.has(address) ||
        inPrefixes(address, this.#prefixes);
      if (!owned) continue;
      await each(address, async () => {
        await this.loopback.remove(address);
        const before = this.#held.get(address) ?? { services: [], pods: [] };
        this.#forfeited(address, before, this.#why(before));
      });
    }
    for (const [address, holding] of desired) {
      if (!onLo.has(address)) {
        let added = false;
        await each(address, async () => {
          await this.loopback.add(address);
          added = true;
        });
        if (!added) continue;
        this.#metrics.changes.inc({ action: "assume" });
        this.#log.info(`assuming address ${address}`, {
          address,
          services: holding.services,
          pods: holding.pods,
        });
      }
      this.#held.set(address, holding);
    }
    for (const address of [...this.#held.keys()]) {
      if (!desired.has(address)) this.#held.delete(address);
    }
    this.#countHeld();
    if (failed.length > 0) throw new Error(`Cannot change addresses ${failed.join(", ")}`);
  }

  /** The held-addresses gauges: the count, and 1/0 per address this agent ever held. */
  #countHeld(): void {
    this.#metrics.held.set(undefined, this.#held.size);
    for (const address of this.#held.keys()) this.#everHeld.add(address);
    for (const address of this.#everHeld) {
      this.#metrics.address.set({ address }, this.#held.has(address) ? 1 : 0);
    }
  }

  #forfeited(address: string, before: Holding, reason: string): void {
    this.#held.delete(address);
    this.#metrics.changes.inc({ action: "forfeit" });
    this.#countHeld();
    this.#log.info(`forfeiting address ${address}`, {
      address,
      services: before.services,
      pods: before.pods,
      reason,
    });
  }

  /** Why the pods that held an address no longer do, e.g. `default/web-1 terminating`. */
  #why(before: Holding): string {
    if (before.pods.length === 0) return "not wanted by any local ready pod (left over)";
    const byName = new Map(this.#state.pods.map((p) => [p.name, p]));
    return before.pods.map((name) => {
      const p = byName.get(name);
      if (!p) return `${name} deleted`;
      if (p.terminating) return `${name} terminating`;
      if (!p.ready) return `${name} not ready`;
      if (p.node !== this.node) return `${name} moved to node ${p.node}`;
      return `${name} no longer selected`;
    }).join(", ");
  }
}
