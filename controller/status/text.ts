/**
 * The status as aligned plain-text tables, for `main.ts status` in a terminal.
 *
 * @module
 */

import type { StatusSnapshot } from "./model.ts";

/** `rows` under `headers`, each column as wide as its widest cell, two spaces apart. */
export function textTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

function section(title: string, headers: string[], rows: string[][], empty: string): string {
  return `${title}\n${rows.length ? textTable(headers, rows) : `  (${empty})`}`;
}

const short = (d: string) => d === "" ? "none" : d.slice(0, 16);

/** The whole snapshot as text sections. */
export function renderStatusText(s: StatusSnapshot): string {
  const head = [
    `Holdfast status at ${new Date(s.at).toISOString()}`,
    `Redis: ${s.redis.up ? "up" : `down (${s.redis.error ?? "?"})`}` +
    (s.redis.up ? `  model rev ${s.model.rev}, ${s.model.services} services` : ""),
  ].join("\n");
  return [
    head,
    section(
      "LB addresses",
      ["ADDRESS", "LB NODES SERVING", "FLOWS", "FRONTENDS"],
      s.addresses.map((a) => [
        a.address,
        a.nodes.join(",") || "-",
        String(a.flows),
        a.frontends.join("; "),
      ]),
      "none",
    ),
    section(
      "Backends",
      ["SERVICE", "BACKEND", "MODEL", "HEALTH", "FLOWS", "BY NODE"],
      s.backends.map((b) => [
        b.service,
        b.address,
        b.state,
        b.health,
        String(b.flows),
        Object.entries(b.healthBy).map(([n, v]) => `${n}:${v}`).join(","),
      ]),
      "none",
    ),
    section(
      "Policy module",
      ["WHERE", "DIGEST"],
      [
        [`model (ABI ${s.policy.abi})`, short(s.policy.model)],
        ...s.policy.nodes.map((p) => [p.node, short(p.digest)]),
      ],
      "none",
    ),
    section(
      "Egress owners",
      ["EGRESSNAT", "ADDRESS", "OWNER", "EPOCH", "LEASE LEFT"],
      s.egress.map((e) => [
        e.egress,
        e.address,
        e.holder ?? "nobody",
        e.epoch === null ? "-" : String(e.epoch),
        e.ttlMs === null ? "-" : `${(e.ttlMs / 1000).toFixed(1)}s`,
      ]),
      "none",
    ),
    section(
      "Anycast",
      ["ADDRESS", "NODES"],
      s.anycast.map((a) => [a.address, a.nodes.join(",")]),
      "no anycast addresses held, or no anycast node given",
    ),
    section(
      "Nodes",
      ["NODE", "ROLE", "STATE", "LB IPS", "VERSION", "METRICS"],
      s.nodes.map((n) => [
        n.node,
        n.role,
        n.up ? "up" : `down: ${n.error ?? ""}`,
        n.lbIps.join(",") || "-",
        n.version || "-",
        n.url,
      ]),
      "no --agents given",
    ),
  ].join("\n\n") + "\n";
}
