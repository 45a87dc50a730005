/**
 * Replacing the LB program under load (docs/operators.md "Upgrade"): frames lost and time per
 * swap, four ways side by side in one run on one rig (lab/swap_rig.ts: a generator thread sends
 * UDP over `--flows` five-tuples through a router to hf_lb on lb1 and on to hf_decap on be1):
 *
 * - `replace`: what an agent restart or upgrade does now — load the new object over the pins
 *   (every map reused), program it, `bpf_xdp_attach` with `XDP_FLAGS_REPLACE` and the old program
 *   as the expected one.
 * - `replace-unchecked`: what a restart did before — the same, but `bpf_xdp_attach` without the
 *   expected program (the kernel swaps the program the same way; no guard against a program
 *   another process attached meanwhile).
 * - `detach-attach`: the non-atomic way, as a restart that detaches its program on stop would —
 *   detach the old program, load and program the new one, attach it.
 * - `migrate`: the new object's flow map has another size (a layout change): a new map filled
 *   from the old (plus `--prefill` synthetic flows, so the fill has work), swapped atomically,
 *   late entries caught, the old map unpinned.
 * - `unpin-restart`: the same layout change the way it had to be done before migration: the pins
 *   removed, the new agent starts on empty maps (programmed, then attached atomically): the
 *   flows are gone and every established flow is decided again (`flows_kept`).
 *
 * Per swap: frames sent while the swap happens (`--window` batches before and after it), frames
 * decapsulated at be1, lost = sent − decapsulated once the counts settle; `flows_kept`: the
 * fraction of `--prefill` quiet established flows (no frame touches them, so only carrying them
 * keeps them) the flow map still holds after the swap. Times: `load_ms`
 * (open and load the object, maps reused or filled), `attach_ms` (the attach call). A control
 * window without a swap runs first (a rig that loses frames by itself is reported, not hidden).
 *
 * Run: `deno task bench:swap` (root). Flags: `--swaps=N` per mode (10), `--flows=F` (256),
 * `--prefill=P` quiet flows (100,000), `--window=W` batches (10), `--batch=B` frames per generator
 * call (512) and `--pause-us=U` between calls (0: as fast as one thread sends; the control window
 * shows what the rig loses by itself at that rate), `--quick`
 * (2 swaps per mode, 5,000 prefilled). The last line is one JSON object.
 *
 * @module
 */

import { intOption, readCommandLineOrExit } from "../lib/args.ts";
import { SwapRig, type Traffic } from "../lab/swap_rig.ts";
import { Datapath } from "../node/bpf/mod.ts";
import { median } from "./_stats.ts";

const OPTS = readCommandLineOrExit(Deno.args, {
  command: "bench:swap",
  usage:
    `usage: deno task bench:swap [--swaps=N (≤ 50)] [--flows=F (≤ 4096)] [--prefill=P (≤ 200000)]
                          [--window=W (≤ 1000)] [--batch=B (≤ 4096)] [--pause-us=U] [--quick]
  --quick: 2 swaps per mode, 5,000 prefilled flows (a smoke run of seconds)`,
  options: {
    swaps: { type: "string" },
    flows: { type: "string" },
    prefill: { type: "string" },
    window: { type: "string" },
    batch: { type: "string" },
    "pause-us": { type: "string" },
    quick: { type: "boolean" },
  },
}, ({ values }) => {
  const quick = values.quick === true;
  return {
    swaps: intOption(values, "swaps", { default: quick ? 2 : 10, min: 1, max: 50 }),
    flows: intOption(values, "flows", { default: 256, min: 1, max: 4096 }),
    prefill: intOption(values, "prefill", {
      default: quick ? 5000 : 100_000,
      min: 0,
      max: 200_000,
    }),
    window: intOption(values, "window", { default: 10, min: 1, max: 1000 }),
    batch: intOption(values, "batch", { default: 512, min: 1, max: 4096 }),
    pauseUs: intOption(values, "pause-us", { default: 0, min: 0, max: 100_000 }),
  };
});

const MODES = [
  "replace",
  "replace-unchecked",
  "detach-attach",
  "migrate",
  "unpin-restart",
] as const;
type Mode = typeof MODES[number];
/** The flow map sizes a migration alternates between (the other one than the map's). */
const SIZES = [262_144, 131_072] as const;

function log(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ level: "info", msg, ...fields }));
}

async function waitBatches(t: Traffic, n: number): Promise<void> {
  const from = t.batches();
  const end = Date.now() + 30_000;
  while (t.batches() < from + n) {
    if (Date.now() > end) throw new Error(`The generator sent no ${n} batches in 30 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Quiet flow `i`: an established flow no frame of the run touches (client port 0). */
const quietKey = (i: number) => ({
  saddr: 0x0b000000 + i,
  daddr: 0x0a006401,
  sport: 0,
  dport: 80,
  proto: 17,
});

/** Puts `n` quiet flows into the flow map (the migration's fill has work; kept flows counted). */
function prefill(rig: SwapRig, n: number): void {
  const flows = rig.lb.flowTable();
  for (let from = 0; from < n; from += 10_000) {
    const batch = [];
    for (let i = from; i < Math.min(n, from + 10_000); i++) {
      batch.push({ key: quietKey(i), value: { backend: 0x0a0c0102, flags: 0, lastSeenNs: 0 } });
    }
    flows.putBatch(batch);
  }
}

/** Fraction of the quiet flows (a sample of up to 1,000) the flow map holds. */
function quietKept(rig: SwapRig, n: number): number {
  if (n === 0) return 1;
  const flows = rig.lb.flowTable();
  const step = Math.max(1, Math.floor(n / 1000));
  let seen = 0, kept = 0;
  for (let i = 0; i < n; i += step, seen++) if (flows.get(quietKey(i))) kept++;
  return kept / seen;
}

interface Result {
  readonly mode: Mode | "control";
  readonly sent: number;
  readonly lost: number;
  readonly loadMs: number;
  readonly attachMs: number;
  readonly flowsKept: number;
  /** The generator's rate over the window. */
  readonly pps: number;
}

/** One swap of `mode` inside a window of traffic (`control`: none). */
async function once(rig: SwapRig, mode: Mode | "control"): Promise<Result> {
  prefill(rig, OPTS.prefill);
  const before = rig.delivered();
  const started = performance.now();
  const t = rig.traffic({ batch: OPTS.batch, pauseMs: OPTS.pauseUs / 1000 });
  let swap = { loadMs: 0, attachMs: 0 };
  try {
    await waitBatches(t, OPTS.window);
    if (mode === "replace") swap = await rig.swapLb();
    if (mode === "replace-unchecked") swap = await rig.swapLb({ unchecked: true });
    if (mode === "detach-attach") swap = await rig.swapLb({ detachFirst: true });
    if (mode === "migrate") {
      const size = rig.lb.maps.flows.maxEntries === SIZES[0] ? SIZES[1] : SIZES[0];
      const s = await rig.swapLb({ maxFlows: size });
      if (!s.migrated.has("hf_flows")) throw new Error(`hf_flows was not migrated to ${size}`);
      swap = s;
    }
    if (mode === "unpin-restart") {
      Datapath.unpin(rig.pinDir);
      swap = await rig.swapLb();
    }
    await waitBatches(t, OPTS.window);
  } finally {
    await t.stop().catch(() => {});
  }
  const sent = await t.stop();
  const seconds = (performance.now() - started) / 1000;
  const got = (await rig.settle(before + sent)) - before;
  const r = {
    mode,
    sent,
    lost: sent - got,
    loadMs: swap.loadMs,
    attachMs: swap.attachMs,
    flowsKept: quietKept(rig, OPTS.prefill),
    pps: sent / seconds,
  };
  log("swap", r);
  return r;
}

const round = (x: number, d = 2) => Number(x.toFixed(d));

async function bench(): Promise<void> {
  await using rig = await SwapRig.open({ flows: OPTS.flows, maxFlows: SIZES[0] });
  await once(rig, "control"); // warm-up: flows learned, caches filled; not counted
  const results: Result[] = [await once(rig, "control")];
  for (let i = 0; i < OPTS.swaps; i++) {
    for (const mode of MODES) results.push(await once(rig, mode));
  }
  const summary = Object.fromEntries(
    (["control", ...MODES] as const).map((mode) => {
      const rs = results.filter((r) => r.mode === mode);
      const sent = rs.reduce((s, r) => s + r.sent, 0);
      const lost = rs.reduce((s, r) => s + r.lost, 0);
      return [mode.replaceAll("-", "_"), {
        runs: rs.length,
        sent,
        lost,
        lost_per_swap: round(lost / rs.length, 1),
        load_ms_p50: round(median(rs.map((r) => r.loadMs))),
        attach_ms_p50: round(median(rs.map((r) => r.attachMs)), 3),
        flows_kept: round(Math.min(...rs.map((r) => r.flowsKept)), 3),
        pps_p50: Math.round(median(rs.map((r) => r.pps))),
      }];
    }),
  );
  const s = summary as Record<string, { lost: number; lost_per_swap: number }>;
  console.log(JSON.stringify({
    bench: "swap",
    method:
      "UDP live frames from a generator thread through hf_lb (XDP) to hf_decap (tc); each swap inside the traffic; lost = sent − decapsulated",
    flows: OPTS.flows,
    prefill: OPTS.prefill,
    batch: OPTS.batch,
    pause_us: OPTS.pauseUs,
    swaps_per_mode: OPTS.swaps,
    lost_replace: s.replace!.lost,
    lost_migrate: s.migrate!.lost,
    lost_per_swap_detach_attach: s.detach_attach!.lost_per_swap,
    ...summary,
    load1: Deno.loadavg()[0],
  }));
}

await bench();
