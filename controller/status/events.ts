/**
 * The dashboard's timeline: events derived by diffing two successive status snapshots — an
 * egress address changing owner (failover), an LB node starting or stopping to serve an LB IP
 * (join, leave), a node's `/metrics` going down or coming back, a backend quarantined or healthy
 * again, the policy module's digest changing (swap), an anycast node taking or dropping an
 * address.
 *
 * @module
 */

import type { StatusSnapshot } from "./model.ts";

/** The kinds of timeline events. */
export type TimelineKind =
  | "failover"
  | "join"
  | "leave"
  | "quarantine"
  | "recover"
  | "swap"
  | "anycast";

/** One timeline event. */
export interface TimelineEvent {
  /** Unix ms of the snapshot that showed it. */
  readonly at: number;
  readonly kind: TimelineKind;
  /** One line for a person. */
  readonly text: string;
}

const short = (digest: string) => digest === "" ? "none" : digest.slice(0, 12);

/** What changed from `prev` to `next`, in a stable order. */
export function diffStatus(prev: StatusSnapshot, next: StatusSnapshot): TimelineEvent[] {
  const out: TimelineEvent[] = [];
  const add = (kind: TimelineKind, text: string) => out.push({ at: next.at, kind, text });

  // Egress owners (only when Redis was read both times: an outage is not a failover).
  if (prev.redis.up && next.redis.up) {
    const before = new Map(prev.egress.map((e) => [`${e.egress}|${e.address}`, e]));
    for (const e of next.egress) {
      const b = before.get(`${e.egress}|${e.address}`);
      if (!b || b.holder === e.holder) continue;
      const from = b.holder ?? "nobody", to = e.holder ?? "nobody";
      const epoch = e.epoch === null ? "" : ` (epoch ${e.epoch})`;
      add("failover", `egress ${e.address} (${e.egress}): ${from} → ${to}${epoch}`);
    }
  }

  // Nodes up/down, and LB nodes serving LB IPs.
  const nodesBefore = new Map(prev.nodes.map((n) => [n.url, n]));
  for (const n of next.nodes) {
    const b = nodesBefore.get(n.url);
    if (!b) continue;
    if (b.up && !n.up) add("leave", `${b.node} (${b.role}) stopped answering: ${n.error ?? ""}`);
    if (!b.up && n.up) add("join", `${n.node} (${n.role}) answers again`);
    const was = new Set(b.lbIps), now = new Set(n.lbIps);
    const joined = n.lbIps.filter((ip) => !was.has(ip));
    const left = b.lbIps.filter((ip) => !now.has(ip));
    if (joined.length && n.up) add("join", `${n.node} serves ${joined.join(", ")}`);
    if (left.length && n.up) add("leave", `${n.node} no longer serves ${left.join(", ")}`);
  }

  // Backends' health.
  const healthBefore = new Map(prev.backends.map((b) => [`${b.service}|${b.address}`, b.health]));
  for (const b of next.backends) {
    const h = healthBefore.get(`${b.service}|${b.address}`);
    if (h === undefined || h === b.health) continue;
    if (b.health === "quarantined") add("quarantine", `${b.service} ${b.address} quarantined`);
    else if (h === "quarantined") add("recover", `${b.service} ${b.address} is ${b.health} again`);
  }

  // Policy: the model's module, and each LB node's serving one.
  if (prev.redis.up && next.redis.up && prev.policy.model !== next.policy.model) {
    add("swap", `model policy ${short(prev.policy.model)} → ${short(next.policy.model)}`);
  }
  const servedBefore = new Map(prev.policy.nodes.map((p) => [p.node, p.digest]));
  for (const p of next.policy.nodes) {
    const d = servedBefore.get(p.node);
    if (d !== undefined && d !== p.digest) {
      add("swap", `${p.node} serves policy ${short(d)} → ${short(p.digest)}`);
    }
  }

  // Anycast nodes per address.
  const anyBefore = new Map(prev.anycast.map((a) => [a.address, new Set(a.nodes)]));
  const anyNow = new Map(next.anycast.map((a) => [a.address, new Set(a.nodes)]));
  for (const address of new Set([...anyBefore.keys(), ...anyNow.keys()])) {
    const b = anyBefore.get(address) ?? new Set(), n = anyNow.get(address) ?? new Set();
    for (const node of n) if (!b.has(node)) add("anycast", `${node} holds anycast ${address}`);
    for (const node of b) if (!n.has(node)) add("anycast", `${node} drained anycast ${address}`);
  }
  return out;
}
