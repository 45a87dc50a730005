/**
 * The NAT pod's part of client steering (docs/egress.md "Steering client pods"): it accepts the
 * packets node agents encapsulate to it (`hf_steer_decap` on tc ingress of the internal
 * interface, node/egress_steer/datapath.ts), and it tells them at once when it assumes or
 * forfeits a floating address (one script: the owners hash and the owner-changes stream,
 * controller/egress/owners.ts). Neither may stop the NAT pod: a failure is logged and the pod
 * goes on serving clients that reach it otherwise (the L2 gateway).
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/metrics.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import {
  loadOwnerScript,
  type OwnerChange,
  publishOwnerChange,
} from "../../controller/egress/owners.ts";
import { SteerDatapath } from "../egress_steer/datapath.ts";

/** Publishes this pod's owner changes; in order, never blocking the caller. */
export class OwnerPublisher {
  #chain: Promise<void>;
  readonly #epochs = new Map<string, number>();

  constructor(
    readonly redis: RedisConnection,
    readonly egressName: string,
    readonly pod: string,
    readonly ip: string,
    readonly log: Logger,
  ) {
    this.#chain = loadOwnerScript(redis, egressName).catch(() => {});
  }

  /**
   * Queues one change (sent after the ones before it; a forfeit names the assumed epoch).
   * Resolves once it is in Redis or failed, at the latest after `boundMs` (default 20): an
   * assume waits that long at most so the change is on the wire before the address's own work
   * (`ip` processes, gratuitous ARP, the sync sender's dump) takes the event loop.
   */
  publish(
    event: OwnerChange["event"],
    address: string,
    epoch?: number,
    boundMs = 20,
  ): Promise<void> {
    if (epoch === undefined) epoch = this.#epochs.get(address) ?? 0;
    else this.#epochs.set(address, epoch);
    const c: OwnerChange = { event, address, pod: this.pod, ip: this.ip, epoch };
    this.#chain = this.#chain.then(async () => {
      // A few tries: a takeover is exactly when Redis may be busy; the next change resends all.
      for (let attempt = 0; attempt < 3; attempt++) {
        try {
          await publishOwnerChange(this.redis, this.egressName, c);
          return;
        } catch (err) {
          if (attempt === 2) this.log.warn("cannot publish owner change", { ...c, err });
          else await new Promise((r) => setTimeout(r, 50));
        }
      }
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      this.#chain,
      new Promise<void>((r) => timer = setTimeout(r, boundMs)),
    ]).finally(() => clearTimeout(timer));
  }

  /** Waits for the queued changes. */
  flush(): Promise<void> {
    return this.#chain;
  }
}

/** The interface holding `address` in this namespace (`ip -j -4 addr`), or null. */
async function interfaceHolding(address: string): Promise<string | null> {
  const out = await new Deno.Command("ip", {
    args: ["-j", "-4", "addr", "show"],
    stdout: "piped",
    stderr: "null",
  }).output();
  if (out.code !== 0) return null;
  const links = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    ifname: string;
    addr_info?: { local?: string }[];
  }[];
  return links.find((l) => l.addr_info?.some((a) => a.local === address))?.ifname ?? null;
}

/**
 * Attaches the decap program on tc ingress of the interface holding `self` (the pod's address,
 * where node agents send steered packets; `fallback` when none holds it), for inner packets from
 * `sources` (the prefixes its SNAT rules translate). Returns a stop function
 * (the program stays attached, as the SNAT rules stay: packets in flight still need it; the pod's
 * namespace goes with the pod), or null when the kernel refused (logged).
 */
export async function acceptSteered(
  self: string,
  sources: readonly string[],
  fallback: string,
  log: Logger,
  registry: Registry,
): Promise<(() => void) | null> {
  let dp: SteerDatapath | null = null;
  try {
    const ifname = await interfaceHolding(self) ?? fallback;
    dp = SteerDatapath.open(undefined, true);
    dp.setSelf(self);
    for (const s of sources) dp.addSource(s);
    const a = dp.attach(dp.decap, ifname);
    log.info("steered traffic accepted", { iface: ifname, address: self, prog_id: a.progId });
    const held = dp;
    let open = true;
    exportDecapMetrics(registry, () => open ? held.stats() : null);
    return () => {
      open = false;
      held[Symbol.dispose]();
    };
  } catch (err) {
    dp?.[Symbol.dispose]();
    log.warn("steered traffic not accepted", { address: self, err: String(err) });
    return null;
  }
}

/**
 * `holdfast_egress_steer_decap_attached` (1 while the decap program is loaded here) and
 * `holdfast_egress_steer_decap_packets_total{reason}` (decap, bad_inner, fragment, not_source),
 * read from the program's counters at scrape time.
 */
function exportDecapMetrics(
  registry: Registry,
  stats: () => Record<string, bigint> | null,
): void {
  const attached = registry.gauge(
    "holdfast_egress_steer_decap_attached",
    "1 while this NAT pod decapsulates steered packets",
  );
  const packets = registry.counter(
    "holdfast_egress_steer_decap_packets_total",
    "Steered packets this NAT pod's decap program acted on, by outcome",
    { labelNames: ["reason"] },
  );
  const last = new Map<string, bigint>();
  attached.onCollect(() => {
    const now = stats();
    attached.set(undefined, now ? 1 : 0);
    for (const reason of ["decap", "bad_inner", "fragment", "not_source"]) {
      const n = now?.[reason];
      if (n === undefined) continue;
      const prev = last.get(reason) ?? 0n;
      if (n > prev) packets.inc({ reason }, Number(n - prev));
      last.set(reason, n);
    }
  });
}
