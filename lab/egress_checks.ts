/**
 * Checks of the egress lab's NAT pods from outside (issue 29): whether each agent's metrics agree
 * with themselves and with the kernel (`holdfast_egress_owner{address}` against
 * `holdfast_egress_owned_addresses` and the /32s on its interface), and whether every standby's
 * conntrack holds the owner's established flows with the same NAT port — what a takeover needs.
 *
 * @module
 */
import { Conntrack } from "../node/conntrack/mod.ts";
import { formatIpv4, parseIpv4 } from "../lib/ipv4.ts";
import { type EgressLab, floatingAddress } from "./egress.ts";

const FETCH_METRICS = "const r = await fetch('http://127.0.0.1:9470/metrics');" +
  "console.log(await r.text());";

/** NAT pod `name`'s /metrics text (a lab created with `metrics: true`). */
export async function agentMetrics(lab: EgressLab, name: string): Promise<string> {
  const r = await lab.topo.exec(name, [Deno.execPath(), "eval", FETCH_METRICS], {
    timeoutMs: 30_000,
  });
  return r.stdout;
}

/** What an agent's metrics say it owns. */
export function ownerView(metrics: string): { owner: string[]; ownedAddresses: number } {
  const owner = [...metrics.matchAll(/^holdfast_egress_owner\{address="([^"]+)"\} 1$/gm)]
    .map((m) => m[1]!).sort();
  const m = /^holdfast_egress_owned_addresses (\d+)$/m.exec(metrics);
  return { owner, ownedAddresses: m ? Number(m[1]) : -1 };
}

/**
 * Established TCP flows NATed to floating address k in pod `name`'s conntrack:
 * `src:sport>dst:dport` → NAT port.
 */
export function natFlows(lab: EgressLab, name: string, k: number): Map<string, number> {
  return natFlowsIn(lab.topo.ns(name), floatingAddress(k));
}

/** Established TCP flows NATed to `address` in namespace `ns`: `src:sport>dst:dport` → NAT port. */
export function natFlowsIn(ns: string, address: string): Map<string, number> {
  const ct = Conntrack.open({ netns: ns });
  try {
    const out = new Map<string, number>();
    for (const e of ct.dump({ natSrcAddrs: new Set([parseIpv4(address)]) })) {
      if (e.orig.proto !== 6 || e.tcpState !== 3 || !e.natSrc) continue;
      const o = e.orig;
      out.set(`${formatIpv4(o.src)}:${o.sport}>${formatIpv4(o.dst)}:${o.dport}`, e.natSrc.port);
    }
    return out;
  } finally {
    ct.close();
  }
}

/**
 * What disagrees now over floating addresses 0..count−1 among the pods that run an agent: an
 * agent whose owner gauge, owned-addresses gauge and /32s differ, or a standby that misses an
 * established flow of the owner or holds it with another NAT port. Empty when all agree.
 */
export async function agreementProblems(lab: EgressLab, count: number): Promise<string[]> {
  const running = [...lab.pods.values()].filter((p) => p.agent).map((p) => p.name);
  const problems: string[] = [];
  const holders = await Promise.all(Array.from({ length: count }, (_, k) => lab.holders(k)));
  for (const name of running) {
    const view = ownerView(await agentMetrics(lab, name));
    const held = holders.flatMap((h, k) => h.includes(name) ? [floatingAddress(k)] : []).sort();
    if (view.owner.length !== view.ownedAddresses || view.owner.join() !== held.join()) {
      problems.push(
        `${name}: holdfast_egress_owner=1 for ${JSON.stringify(view.owner)}, ` +
          `owned_addresses ${view.ownedAddresses}, /32s ${JSON.stringify(held)}`,
      );
    }
  }
  for (let k = 0; k < count; k++) {
    if (holders[k]!.length !== 1) {
      problems.push(`${floatingAddress(k)} held by ${JSON.stringify(holders[k])}`);
      continue;
    }
    problems.push(...standbyGaps(lab, holders[k]![0]!, k, running));
  }
  return problems;
}

/** Each standby among `running` that misses an established flow of `owner` on address k, or
 * holds one with another NAT port. */
function standbyGaps(lab: EgressLab, owner: string, k: number, running: string[]): string[] {
  const problems: string[] = [];
  const flows = natFlows(lab, owner, k);
  for (const standby of running.filter((n) => n !== owner)) {
    const have = natFlows(lab, standby, k);
    const missing = [...flows.keys()].filter((f) => !have.has(f)).length;
    const differ = [...flows].filter(([f, port]) => have.has(f) && have.get(f) !== port).length;
    if (missing + differ > 0) {
      problems.push(
        `${standby} (standby of ${floatingAddress(k)}): misses ${missing} and holds ${differ} ` +
          `with another NAT port of the owner ${owner}'s ${flows.size} established flows`,
      );
    }
  }
  return problems;
}

/**
 * Waits until floating address k has one holder with at least `flows` established flows and every
 * other pod running an agent holds all of them with the same NAT port: what a takeover of k needs
 * (the sync streamed them). Polls every 100 ms; throws naming what is missing after `timeoutMs`.
 */
export async function waitForStandbyFlows(
  lab: EgressLab,
  k: number,
  flows: number,
  timeoutMs = 15_000,
): Promise<void> {
  const running = [...lab.pods.values()].filter((p) => p.agent).map((p) => p.name);
  const deadline = Date.now() + timeoutMs;
  let why: string[] = [];
  for (let i = 0; i < 1_000; i++) {
    const holders = await lab.holders(k);
    const owner = holders.length === 1 ? holders[0]! : undefined;
    const have = owner ? natFlows(lab, owner, k).size : 0;
    if (!owner) why = [`${floatingAddress(k)} held by ${JSON.stringify(holders)}`];
    else if (have < flows) why = [`${owner} has ${have} of ${flows} established flows`];
    else why = standbyGaps(lab, owner, k, running);
    if (why.length === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (why.length > 0) {
    throw new Error(`The standbys of ${floatingAddress(k)} are not ready: ${why.join("; ")}`);
  }
}

/**
 * Polls {@linkcode agreementProblems} until none or `timeoutMs`; returns the last ones. A round
 * starts a process in each pod to read its metrics (seconds on a loaded machine), so the default
 * deadline leaves room for several.
 */
export async function waitForAgreement(
  lab: EgressLab,
  count: number,
  timeoutMs = 30_000,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let problems: string[] = [];
  for (let i = 0; i < 1_000; i++) {
    problems = await agreementProblems(lab, count);
    if (problems.length === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return problems;
}
