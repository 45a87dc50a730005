/**
 * The egress lab in BGP mode: the NAT pods run `--announce bgp` (the config's `bgp` section: AS
 * 65100, the external server's namespace as their one peer, BFD 100 ms × 3), and `ext` — the
 * external server — is also the router: a bird2 (`RouterBird`, lab/_anycast_router.ts, `merge
 * paths yes`) that installs each floating /32 via its announcer's `ext0` address. Two announcers
 * of one address would show as a multipath route with both next hops; {@linkcode RouteHistory}
 * keeps every change of the route (`ip -o monitor route` in `ext`) to prove there never were.
 * Shared by tests/netns/egress_bgp_test.ts and bench/egress.ts.
 *
 * @module
 */

import { createEgressLab, type EgressLab, type EgressLabOptions, SERVER } from "./egress.ts";
import { routeGateways, ROUTER_ASN, RouterBird } from "./_anycast_router.ts";
import type { HostProcess } from "./host_process.ts";

/** The AS of the lab's NAT pods (the config's `bgp.localAsn`). */
export const NAT_ASN = 65100;

/** NAT pod i's address on the external segment (its BGP session's, the route's next hop). */
export function natExternal(i: number): string {
  return `198.18.0.${20 + i}`;
}

/** The pod a next hop belongs to (`198.18.0.21` → `nat1`). */
export function podOfHop(hop: string): string {
  return `nat${Number(hop.split(".")[3]) - 20}`;
}

/** One change of the router's route to a floating address. */
export interface RouteChange {
  /** performance.now() when the monitor line was read. */
  readonly at: number;
  /** The same moment, epoch ms (to compare with the agents' log times). */
  readonly wall: number;
  /** Next hops after the change (empty: no route). */
  readonly hops: string[];
}

/** Every change of the router's kernel route to one /32, from `ip -o monitor route`. */
export class RouteHistory {
  readonly changes: RouteChange[] = [];
  #seen: number;

  constructor(readonly prefix: string, readonly monitor: HostProcess, initial: string[]) {
    this.#seen = monitor.lineCount;
    this.changes.push({ at: performance.now(), wall: Date.now(), hops: initial.sort() });
  }

  #drain(): void {
    const offset = this.monitor.lineCount - this.monitor.lines.length;
    for (; this.#seen < this.monitor.lineCount; this.#seen++) {
      const line = this.monitor.lines[this.#seen - offset];
      const hops = line === undefined ? null : routeGateways(line, this.prefix);
      if (hops) this.changes.push({ at: performance.now(), wall: Date.now(), hops: hops.sort() });
    }
  }

  /** The next hops now (as far as the monitor has told). */
  get hops(): string[] {
    this.#drain();
    return [...this.changes.at(-1)!.hops];
  }

  /** Every state with more than one next hop seen so far (two announcers at once). */
  doubles(): RouteChange[] {
    this.#drain();
    return this.changes.filter((c) => c.hops.length > 1);
  }

  /** Resolves with performance.now() once the route's hops satisfy `want` (bounded). */
  async until(want: (hops: string[]) => boolean, timeoutMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (let i = 0; i < 100_000 && Date.now() < deadline; i++) {
      if (want(this.hops)) return this.changes.at(-1)!.at;
      await this.monitor.waitForLine(() => true, {
        fromLine: this.#seen,
        timeoutMs: Math.max(1, deadline - Date.now()),
      }).catch(() => {});
    }
    if (want(this.hops)) return this.changes.at(-1)!.at;
    throw new Error(
      `The router's route to ${this.prefix} did not become what was wanted in ${timeoutMs} ms; ` +
        `history ${JSON.stringify(this.changes.slice(-6).map((c) => c.hops))}`,
    );
  }
}

/** The egress lab with its router; dispose it to tear everything down. */
export class EgressBgpLab implements AsyncDisposable {
  #monitor: HostProcess | null = null;

  constructor(readonly lab: EgressLab, readonly router: RouterBird) {}

  /** Starts following the router's route to `address` (before a scenario's first change). */
  async watch(address: string): Promise<RouteHistory> {
    this.#monitor ??= this.lab.topo.spawn("ext", ["ip", "-o", "monitor", "route"]);
    // The monitor must be listening before the snapshot, or a change between them is lost.
    await new Promise((r) => setTimeout(r, 50));
    const history = new RouteHistory(address, this.#monitor, []);
    const now = await this.lab.topo.exec("ext", [
      "ip",
      "-4",
      "-o",
      "route",
      "show",
      `${address}/32`,
    ]);
    const hops = routeGateways(now.stdout, address) ?? [];
    history.changes[0] = { at: performance.now(), wall: Date.now(), hops: hops.sort() };
    return history;
  }

  /** A NAT pod's bird: `birdc -s DIR/bird.ctl ARGS…` in its namespace. */
  birdc(pod: string, ...args: string[]): Promise<{ stdout: string }> {
    const sock = `${this.lab.redis.dir}/${pod}/bird.ctl`;
    return this.lab.topo.exec(pod, ["birdc", "-s", sock, ...args], { check: false });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.lab[Symbol.asyncDispose]();
  }
}

/** Builds the egress lab in BGP mode and starts its router (NAT agents are started after). */
export async function createEgressBgpLab(
  options: Omit<EgressLabOptions, "bgp"> = {},
): Promise<EgressBgpLab> {
  const lab = await createEgressLab({ ...options, bgp: true });
  try {
    const peers = [...lab.pods.values()].map((p) => ({
      name: p.name,
      address: natExternal(p.index),
      asn: NAT_ASN,
    }));
    const dir = `${lab.redis.dir}/router`;
    await Deno.mkdir(dir, { recursive: true });
    const router = await RouterBird.start(lab.topo, "ext", dir, {
      routerId: SERVER,
      bfd: { intervalMs: 100, multiplier: 3 },
      peers,
    });
    return new EgressBgpLab(lab, router);
  } catch (err) {
    await lab[Symbol.asyncDispose]();
    throw err;
  }
}

export { ROUTER_ASN };
