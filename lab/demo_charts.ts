/**
 * The demo report's smaller charts (`demo_report.ts` draws the page): the distribution of each
 * connection's longest stall per mode, the packets each LB node carried between the steps, and
 * the takeover times of the egress and anycast chapters. Inline SVG only; each chart is empty
 * ("") when its chapter has no data (an interrupted or older run).
 *
 * @module
 */
import type { AnycastReport, EgressReport, ModeReport } from "./demo_report.ts";

/** Each mode's color (the baselines red). */
export const COLORS: Record<string, string> = {
  holdfast: "#1b7f3b",
  "maglev-only": "#b3261e",
  egress: "#1b7f3b",
  "egress-no-sync": "#b3261e",
  anycast: "#1b7f3b",
  "anycast-plain": "#b3261e",
};

/** `s` escaped for HTML text and attribute values. */
export const esc = (s: string): string =>
  s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

const svg = (id: string, w: number, h: number, label: string, body: string) =>
  `<svg id="${id}" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" font-size="11" ` +
  `font-family="sans-serif" role="img" aria-label="${esc(label)}">${body}</svg>`;

/** The stall buckets: upper bounds (ms) and labels. */
const STALL_BUCKETS: Array<[number, string]> = [
  [120, "< 0.12 s"],
  [150, "0.12–0.15 s"],
  [200, "0.15–0.2 s"],
  [500, "0.2–0.5 s"],
  [1_000, "0.5–1 s"],
  [5_000, "1–5 s"],
  [Infinity, "≥ 5 s"],
];

/**
 * How many surviving connections had their longest stall in each bucket, per mode (both
 * families): grouped vertical bars, one per mode in each bucket. "" when no mode has the stalls.
 */
export function stallChart(modes: readonly ModeReport[]): string {
  const withStalls = modes.filter((m) => m.families.some((f) => f.stallsMs !== undefined));
  if (withStalls.length === 0) return "";
  const counts = withStalls.map((m) => {
    const c = STALL_BUCKETS.map(() => 0);
    for (const ms of m.families.flatMap((f) => f.stallsMs ?? [])) {
      c[STALL_BUCKETS.findIndex(([max]) => ms < max)]!++;
    }
    return { mode: m.mode, c };
  });
  const W = 860, H = 240, L = 50, T = 16, B = 46;
  const maxY = Math.max(1, ...counts.flatMap((m) => m.c));
  const y = (v: number) => T + (1 - v / maxY) * (H - T - B);
  const slot = (W - L - 20) / STALL_BUCKETS.length;
  const barW = Math.min(40, (slot - 20) / counts.length);
  const parts: string[] = [];
  for (let k = 0; k <= 4; k++) {
    const v = Math.round((maxY * k) / 4);
    parts.push(
      `<line x1="${L}" x2="${W - 20}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>` +
        `<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`,
    );
  }
  for (const [b, [, label]] of STALL_BUCKETS.entries()) {
    const x0 = L + b * slot + (slot - barW * counts.length) / 2;
    parts.push(
      `<text x="${L + b * slot + slot / 2}" y="${H - B + 16}" text-anchor="middle">` +
        `${esc(label)}</text>`,
    );
    for (const [i, m] of counts.entries()) {
      const v = m.c[b]!;
      parts.push(
        `<rect class="stall" data-mode="${esc(m.mode)}" data-count="${v}" x="${x0 + i * barW}" ` +
          `y="${y(v)}" width="${barW - 2}" height="${y(0) - y(v)}" ` +
          `fill="${COLORS[m.mode] ?? "#333"}"><title>${esc(m.mode)}: ${v} connections, ` +
          `longest stall ${esc(label)}</title></rect>`,
      );
    }
  }
  parts.push(
    ...counts.map((m, i) =>
      `<rect x="${L + 10 + i * 150}" y="${H - 14}" width="12" height="12" ` +
      `fill="${COLORS[m.mode] ?? "#333"}"/><text x="${L + 26 + i * 150}" y="${H - 4}">` +
      `${esc(m.mode)}</text>`
    ),
  );
  return svg("stall-chart", W, H, "longest stall per connection", parts.join(""));
}

/** The LB nodes' colors, by name. */
const NODE_COLORS: Record<string, string> = {
  lb1: "#4e79a7",
  lb2: "#f28e2b",
  lb3: "#76b7b2",
  lb4: "#af7aa1",
};

/** One bar of the LB node chart: a mode's phase between two steps, packets per node. */
interface Phase {
  mode: string;
  label: string;
  packets: Record<string, number>;
  /** The phase's length between its readings, s (> 0). */
  seconds: number;
}

/** Each mode's phases (before step 1, after step k): packets each node forwarded in it. */
function phases(modes: readonly ModeReport[]): Phase[] {
  const out: Phase[] = [];
  for (const m of modes) {
    const reads = m.lbNodes ?? [];
    if (reads.length < 2) continue;
    // The last reading at or before t (the first one before any).
    const at = (t: number) => reads.findLast((r) => r.t <= t) ?? reads[0]!;
    const bounds = [-Infinity, ...m.steps.map((s) => s.t), Infinity];
    for (let k = 0; k + 1 < bounds.length; k++) {
      const [a, b] = [at(bounds[k]!), at(bounds[k + 1]!)];
      const packets: Record<string, number> = {};
      for (const [node, v] of Object.entries(b.forwarded)) {
        packets[node] = Math.max(0, v - (a.forwarded[node] ?? 0));
      }
      const label = `${m.mode} ${k === 0 ? "start" : `after ${k}`}`;
      out.push({ mode: m.mode, label, packets, seconds: Math.max(0.001, (b.t - a.t) / 1000) });
    }
  }
  return out;
}

/**
 * Which LB node carried what: per mode, a stacked bar per phase between the steps (packets each
 * node sent on to backends in it), and a table of each node's packets over the whole story.
 */
export function lbNodeSection(modes: readonly ModeReport[]): string {
  const rows = phases(modes);
  if (rows.length === 0) return "";
  const nodes = [...new Set(rows.flatMap((r) => Object.keys(r.packets)))].sort();
  const W = 860, rowH = 22, L = 170, R = 60;
  const total = (r: Phase) => Object.values(r.packets).reduce((a, v) => a + v, 0);
  const rate = (r: Phase, v: number) => Math.round(v / r.seconds);
  const max = Math.max(1, ...rows.map((r) => total(r) / r.seconds));
  const bars = rows.map((r, i) => {
    const y = 10 + i * rowH;
    let x = L;
    const segs = nodes.map((n) => {
      const v = r.packets[n] ?? 0;
      const w = ((W - L - R) * v) / r.seconds / max;
      const pct = total(r) ? Math.round((100 * v) / total(r)) : 0;
      const seg = `<rect class="lb" data-mode="${esc(r.mode)}" data-node="${esc(n)}" ` +
        `data-packets="${v}" x="${x}" y="${y}" width="${w}" height="16" ` +
        `fill="${NODE_COLORS[n] ?? "#999"}"><title>${esc(n)}: ${v} packets, ` +
        `${rate(r, v)}/s (${pct}%)</title></rect>`;
      x += w;
      return seg;
    }).join("");
    return `<text x="${L - 8}" y="${y + 12}" text-anchor="end">${esc(r.label)}</text>${segs}` +
      `<text x="${x + 6}" y="${y + 12}">${rate(r, total(r))}/s</text>`;
  }).join("");
  const H = 40 + rows.length * rowH;
  const legend = nodes.map((n, i) =>
    `<rect x="${L + i * 90}" y="${H - 16}" width="12" height="12" fill="${
      NODE_COLORS[n] ?? "#999"
    }"/><text x="${L + 16 + i * 90}" y="${H - 6}">${esc(n)}</text>`
  ).join("");
  const whole = modes.filter((m) => (m.lbNodes ?? []).length > 0).map((m) => ({
    mode: m.mode,
    last: m.lbNodes!.at(-1)!.forwarded,
  }));
  const table = nodes.map((n) =>
    `<tr class="lbnode" data-node="${esc(n)}"><td>${esc(n)}</td>${
      whole.map((m) => `<td>${m.last[n] ?? "–"}</td>`).join("")
    }</tr>`
  ).join("");
  return `<h2>Which LB node carried what</h2>
<p class="note">Packets a second each LB node sent on to a backend, between the steps (start: before
step 1; after k: from step k to the next), read every 500 ms from its pinned datapath counters. Every
connection sends at the same rate, so a node's share of a bar is about its share of the
connections; a node that died keeps what it had when last read.</p>
${svg("lb-chart", W, H, "packets per LB node between the steps", bars + legend)}
<table><tr><th>LB node</th>${
    whole.map((m) => `<th>${esc(m.mode)}: packets in all</th>`).join("")
  }</tr>${table}</table>`;
}

/**
 * Takeover times as horizontal bars: each egress run's death → address assumed, each anycast
 * run's drain → route withdrawn. "" when neither chapter has any.
 */
export function takeoverChart(
  egress: readonly EgressReport[],
  anycast: readonly AnycastReport[],
): string {
  const rows = [
    ...egress.map((e) => ({ mode: e.mode, label: `${e.mode}: address assumed`, ms: e.takeoverMs })),
    ...anycast.map((a) => ({ mode: a.mode, label: `${a.mode}: withdrawn`, ms: a.withdrawnMs })),
  ];
  if (rows.length === 0) return "";
  const W = 860, rowH = 24, L = 220, R = 120;
  const max = Math.max(1, ...rows.map((r) => r.ms ?? 0));
  const bars = rows.map((r, i) => {
    const y = 10 + i * rowH;
    const w = r.ms === null ? 0 : ((W - L - R) * r.ms) / max;
    return `<text x="${L - 8}" y="${y + 13}" text-anchor="end">${esc(r.label)}</text>` +
      `<rect class="takeover" data-mode="${esc(r.mode)}" data-ms="${r.ms ?? ""}" x="${L}" ` +
      `y="${y}" width="${w}" height="17" fill="${COLORS[r.mode] ?? "#333"}"/>` +
      `<text x="${L + w + 6}" y="${y + 13}">${
        r.ms === null ? "not measured" : `${r.ms} ms`
      }</text>`;
  }).join("");
  return `<h2>Takeover times</h2>
<p class="note">Egress: from the owning NAT pod's death to its standby's "address assumed". Anycast:
from n1's pod terminating to the router's route without n1.</p>
${svg("takeover-chart", W, 20 + rows.length * rowH, "takeover times", bars)}`;
}
