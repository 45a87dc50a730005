/**
 * The demo's report: `report.json` (everything measured) and `report.html`, one self-contained
 * page (inline SVG and CSS, no external resource) with a chart of connections alive over time per
 * mode with the steps marked, the losses and longest stalls per mode and family, the distribution
 * of each connection's longest stall, which LB node carried what between the steps, the egress and
 * anycast chapters with their takeover times, and the steps (the smaller charts:
 * `demo_charts.ts`). A chapter without data (an interrupted run) is left out.
 *
 * @module
 */
import { COLORS, esc, lbNodeSection, stallChart, takeoverChart } from "./demo_charts.ts";

/** One sample of a mode's client of one family. */
export interface Sample {
  /** ms since the mode's clients were connected (both modes share this axis). */
  t: number;
  family: 4 | 6;
  connections: number;
  alive: number;
  stalled: number;
  maxStallMs: number;
}

/** A step of a mode's story, at `t` ms since its clients were connected. */
export interface StepMark {
  t: number;
  what: string;
  why: string;
}

/** One story: Holdfast, or the baseline. */
export interface ModeReport {
  mode: string;
  samples: Sample[];
  steps: StepMark[];
  /**
   * Per family: connections, survived, ended with their backend (it died: not the load
   * balancer's loss), longest stall (ms).
   */
  families: Array<
    {
      family: 4 | 6;
      connections: number;
      survived: number;
      ended: number;
      maxStallMs: number;
      /** Each surviving connection's longest stall (ms), longest first; absent in old reports. */
      stallsMs?: number[];
    }
  >;
  /** Checks that each disturbance really happened. */
  checks: Array<{ what: string; ok: boolean }>;
  /**
   * Packets each LB node (`lb1`…) had sent on to backends by `t` (ms, as in {@linkcode Sample}),
   * read every 500 ms from its pinned counters; a node that died keeps its last reading.
   */
  lbNodes?: Array<{ t: number; forwarded: Record<string, number> }>;
}

/** One egress NAT failover (`demo_egress.ts`): with conntrack sync, or without. */
export interface EgressReport {
  mode: string;
  connections: number;
  survived: number;
  maxStallMs: number;
  /** From the owner's death to the standby's `address assumed`. */
  takeoverMs: number | null;
  /** The UDP stream went on from one source address and port. */
  udpKept: boolean;
  /** Source address:ports the server saw for the UDP stream. */
  udpSources: number;
}

/** One anycast drain (`demo_anycast.ts`): with flow redirection, or plain anycast. */
export interface AnycastReport {
  mode: string;
  connections: number;
  survived: number;
  maxStallMs: number;
  /** Established connections per node just before n1 drained. */
  owned: Record<string, number>;
  /** From n1's pod terminating to the router's route without n1. */
  withdrawnMs: number;
  /** When n1 drained, ms since the clients were connected. */
  drainAt: number;
  /** The client's progress (`t` as in {@linkcode Sample}). */
  samples: Array<Omit<Sample, "family">>;
}

/** The whole report. */
export interface DemoReport {
  started: string;
  finished: string;
  modes: ModeReport[];
  egress: EgressReport[];
  anycast: AnycastReport[];
}

/** Alive connections (both families summed) over time for each mode, steps as vertical marks. */
function aliveChart(modes: readonly ModeReport[]): string {
  const W = 860, H = 300, L = 50, R = 20, T = 20, B = 40;
  const maxT = Math.max(1, ...modes.flatMap((m) => m.samples.map((s) => s.t)));
  const series = modes.map((m) => {
    const byT = new Map<number, { alive: number; connections: number }>();
    for (const s of m.samples) {
      const k = Math.round(s.t / 250) * 250;
      const v = byT.get(k) ?? { alive: 0, connections: 0 };
      // One sample per family per sampling tick (500 ms): a bucket sums the families.
      byT.set(k, { alive: v.alive + s.alive, connections: v.connections + s.connections });
    }
    return { mode: m.mode, points: [...byT].sort(([a], [b]) => a - b) };
  });
  const maxY = Math.max(1, ...series.flatMap((s) => s.points.map(([, v]) => v.connections)));
  const x = (t: number) => L + (t / maxT) * (W - L - R);
  const y = (v: number) => T + (1 - v / maxY) * (H - T - B);
  const parts: string[] = [];
  for (let k = 0; k <= 4; k++) {
    const v = Math.round((maxY * k) / 4);
    parts.push(
      `<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>` +
        `<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`,
    );
  }
  for (let s = 0; s <= maxT / 1000; s += Math.max(1, Math.ceil(maxT / 10_000))) {
    parts.push(`<text x="${x(s * 1000)}" y="${H - B + 16}" text-anchor="middle">${s}s</text>`);
  }
  const steps = modes[0]?.steps ?? [];
  for (const [i, st] of steps.entries()) {
    parts.push(
      `<line class="step" x1="${x(st.t)}" x2="${x(st.t)}" y1="${T}" y2="${H - B}" ` +
        `stroke="#888" stroke-dasharray="4 3"><title>${esc(st.what)}</title></line>` +
        `<text x="${x(st.t) + 3}" y="${T + 12 + (i % 3) * 12}">${i + 1}</text>`,
    );
  }
  for (const s of series) {
    const d = s.points.map(([t, v], i) =>
      `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v.alive).toFixed(1)}`
    )
      .join(" ");
    parts.push(
      `<path class="series" data-mode="${esc(s.mode)}" d="${d}" fill="none" ` +
        `stroke="${COLORS[s.mode] ?? "#333"}" stroke-width="2"/>`,
    );
  }
  const legend = series.map((s, i) =>
    `<rect x="${L + 10 + i * 150}" y="${H - 14}" width="12" height="12" ` +
    `fill="${COLORS[s.mode] ?? "#333"}"/><text x="${L + 26 + i * 150}" y="${H - 4}">` +
    `${esc(s.mode)}</text>`
  ).join("");
  return `<svg id="alive-chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" ` +
    `font-size="11" font-family="sans-serif" role="img" aria-label="connections alive over time">` +
    `${parts.join("")}${legend}</svg>`;
}

/** A bar of the loss chart: one mode and family (or one egress run). */
interface LossRow {
  mode: string;
  label: string;
  connections: number;
  survived: number;
  /** Ended with their backend (grey), apart from the lost ones. */
  ended?: number;
  maxStallMs: number;
}

/** Survived, ended with their backend and lost per row, as horizontal bars. */
function lossChart(id: string, rows: readonly LossRow[]): string {
  const W = 860, rowH = 26, L = 170;
  const max = Math.max(1, ...rows.map((r) => r.connections));
  const bars = rows.map((r, i) => {
    const y = 10 + i * rowH;
    const ended = r.ended ?? 0;
    const wOk = ((W - L - 250) * r.survived) / max;
    const wEnded = ((W - L - 250) * ended) / max;
    const wLost = ((W - L - 250) * (r.connections - r.survived - ended)) / max;
    const endedBar = ended
      ? `<rect class="ended" x="${L + wOk}" y="${y}" width="${wEnded}" height="18" ` +
        `fill="#bbb"><title>ended with their backend</title></rect>`
      : "";
    return `<text x="${L - 8}" y="${y + 14}" text-anchor="end">${esc(r.label)}</text>` +
      `<rect x="${L}" y="${y}" width="${wOk}" height="18" fill="${COLORS[r.mode] ?? "#333"}"/>` +
      endedBar +
      `<rect x="${L + wOk + wEnded}" y="${y}" width="${wLost}" height="18" fill="#e8a09a"/>` +
      `<text x="${L + wOk + wEnded + wLost + 6}" y="${y + 14}">${r.survived}/${r.connections}` +
      `${ended ? ` (${ended} ended)` : ""} · longest stall ${r.maxStallMs} ms</text>`;
  }).join("");
  const H = 20 + rows.length * rowH;
  return `<svg id="${id}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-size="12" ` +
    `font-family="sans-serif" role="img" aria-label="connections survived per mode">${bars}</svg>`;
}

/** The egress chapter: connections through the NAT pod's death, and the takeover. */
function egressSection(runs: readonly EgressReport[]): string {
  if (runs.length === 0) return "";
  const rows = runs.map((r) =>
    `<tr class="egress" data-mode="${esc(r.mode)}"><td>${esc(r.mode)}</td>` +
    `<td class="survived">${r.survived}/${r.connections}</td><td>${r.takeoverMs ?? "?"} ms</td>` +
    `<td>${r.udpKept ? "kept its source" : `broken (${r.udpSources} sources)`}</td></tr>`
  ).join("");
  return `<h2>Egress NAT: the owning NAT pod dies</h2>
<p class="note">Long-lived TCP connections and a UDP stream from a pod through the NAT pod that holds
the floating address; it dies (links down, agent killed) and its standby takes the address. With
conntrack sync the standby already holds every translation.</p>
<table><tr><th>mode</th><th>TCP survived</th><th>takeover</th><th>UDP stream</th></tr>${rows}</table>
${lossChart("egress-chart", runs.map((r) => ({ ...r, label: r.mode })))}`;
}

/** The anycast chapter: connections through a node's drain, per node, and the withdrawal. */
function anycastSection(runs: readonly AnycastReport[]): string {
  if (runs.length === 0) return "";
  const rows = runs.map((r) =>
    `<tr class="anycast" data-mode="${esc(r.mode)}"><td>${esc(r.mode)}</td>` +
    `<td class="survived">${r.survived}/${r.connections}</td>` +
    `<td>${Object.entries(r.owned).map(([n, c]) => `${n} ${c}`).join(", ")}</td>` +
    `<td>${r.withdrawnMs} ms</td><td>${r.maxStallMs} ms</td></tr>`
  ).join("");
  return `<h2>Anycast: a node drains</h2>
<p class="note">Long-lived connections spread by the router over three anycast nodes; n1's pod starts
terminating, so n1 withdraws the address while its pod still serves. With flow redirection the other
nodes send n1's connections back to it; plain anycast hands them to nodes with no socket for them.</p>
<table><tr><th>mode</th><th>survived</th><th>connections per node before</th>
<th>withdrawn after</th><th>longest stall</th></tr>${rows}</table>
${lossChart("anycast-chart", runs.map((r) => ({ ...r, label: r.mode })))}`;
}

/** The report page. */
export function reportHtml(report: DemoReport): string {
  const steps = (report.modes[0]?.steps ?? []).map((s, i) =>
    `<tr><td>${i + 1}</td><td class="at">${(s.t / 1000).toFixed(1)} s</td><td>${esc(s.what)}</td>` +
    `<td>${esc(s.why)}</td></tr>`
  ).join("");
  const summary = report.modes.map((m) => {
    const c = m.families.reduce((a, f) => a + f.connections, 0);
    const s = m.families.reduce((a, f) => a + f.survived, 0);
    const e = m.families.reduce((a, f) => a + (f.ended ?? 0), 0);
    const stall = Math.max(0, ...m.families.map((f) => f.maxStallMs));
    const checks = m.checks.filter((k) => k.ok).length;
    return `<tr class="mode" data-mode="${esc(m.mode)}"><td>${esc(m.mode)}</td>` +
      `<td class="survived">${s}/${c}</td><td class="lost">${c - s - e}</td>` +
      `<td class="ended">${e}</td><td>${stall} ms</td>` +
      `<td>${checks}/${m.checks.length}</td></tr>`;
  }).join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Holdfast demo report</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 920px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
td, th { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; font-size: 13px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
.note { color: #555; font-size: 13px; }
td.at { white-space: nowrap; }
</style></head><body>
<h1>Holdfast demo: live connections through change</h1>
<p class="note">Run ${esc(report.started)} – ${esc(report.finished)}. The same story twice: with
Holdfast's shared flow state, and with Maglev only (what a stateless load balancer behind ECMP
does). A backend that dies takes its own connections with it in any design: those are counted
apart ("ended with their backend", grey), not as lost.</p>
<h2>Result</h2>
<table><tr><th>mode</th><th>survived</th><th>lost</th><th>ended with their backend</th>
<th>longest stall</th>
<th>changes seen to happen</th></tr>${summary}</table>
<h2>Connections alive over time</h2>
${aliveChart(report.modes)}
<p class="note">When be3 dies (step 5; the baseline's steps come at about the same times) a line
drops by the connections it held (grey below): they end with it in any design. Any other drop is a
connection the load balancer lost.</p>
<h2>Survived and lost, per family</h2>
${
    lossChart(
      "loss-chart",
      report.modes.flatMap((m) =>
        m.families.map((f) => ({ ...f, mode: m.mode, label: `${m.mode} IPv${f.family}` }))
      ),
    )
  }
${
    stallChart(report.modes) &&
    `<h2>Longest stall per connection</h2>
<p class="note">Each surviving connection's longest wait for an echo (both families; a message every
100 ms, so 0.1 s is no stall at all).</p>
${stallChart(report.modes)}`
  }
${lbNodeSection(report.modes)}
${egressSection(report.egress ?? [])}
${anycastSection(report.anycast ?? [])}
${takeoverChart(report.egress ?? [], report.anycast ?? [])}
<h2>The steps</h2>
<table><tr><th>#</th><th>at</th><th>what happens</th><th>why it would break elsewhere</th></tr>
${steps}</table>
</body></html>
`;
}

/** Writes `report.json` and `report.html` into `dir` (created); returns the HTML's path. */
export async function writeReport(dir: string, report: DemoReport): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(`${dir}/report.json`, JSON.stringify(report, null, 1) + "\n");
  await Deno.writeTextFile(`${dir}/report.html`, reportHtml(report));
  return `${dir}/report.html`;
}
