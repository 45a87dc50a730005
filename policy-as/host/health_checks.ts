/**
 * What a swapped-in health policy must do, checked by properties instead of golden records: a
 * module may judge differently from the reference (`health_ts.ts`) — slower to trust a backend,
 * longer holds — but it must honour the service's settings as minimums and must still act.
 *
 * Safety (any module, any probe sequence):
 * - `states`: only New 0, Active 1, Quarantined 2, and never New again once judged;
 * - `active-needs-ok-run`: a backend becomes Active only on a good probe that ends a run of at
 *   least `rise` good probes;
 * - `quarantine-needs-fail-run`: it is quarantined only on a failed probe that ends a run of at
 *   least `fall` failed ones;
 * - `quarantine-holds`: a quarantined backend is not Active again before `backoffBaseMs` (or
 *   `backoffMaxMs` when that is smaller) has passed since it was quarantined.
 *
 * Liveness, with {@link HEALTH_SLACK} = 4 (a module may be up to 4 times slower than the settings):
 * - `fails-quarantine`: a New or Active backend whose last `4 × fall` probes failed is Quarantined;
 * - `oks-activate`: a New backend whose last `4 × rise` probes were good is Active, and so is a
 *   quarantined one once those probes all came `4 × backoffMaxMs` or more after its quarantine.
 *
 * So "twice the rise" or "ignore the first failure" pass; "always Active", "never quarantine" or
 * "quarantine at the first failure" fail.
 *
 * @module
 */
import { type HealthParams, HealthState } from "./abi.ts";
import type { HealthVector } from "./vectors.ts";

/** How many times slower than the service's rise, fall and backoff a module may act. */
export const HEALTH_SLACK = 4;

/** One probe of a property sequence. */
export interface HealthProbeStep {
  ok: boolean;
  nowMs: number;
}

/** A probe sequence the health invariants are checked on (no expected records). */
export interface HealthPropertySequence {
  name: string;
  params: HealthParams;
  probes: HealthProbeStep[];
}

/** The first invariant a sequence of states breaks. */
export interface HealthViolation {
  /** Name of the invariant (module doc). */
  check: string;
  /** Index of the probe after which the state broke it. */
  step: number;
  message: string;
}

/** Settings the generated sequences use beside those of the golden vectors. */
const EXTRA_PARAMS: readonly HealthParams[] = [
  { rise: 1, fall: 1, backoffBaseMs: 100, backoffMaxMs: 400 },
  { rise: 3, fall: 2, backoffBaseMs: 200, backoffMaxMs: 1600 },
  { rise: 2, fall: 5, backoffBaseMs: 300, backoffMaxMs: 300 },
];
const SEQUENCES_PER_PARAMS = 2;
const RUNS_PER_SEQUENCE = 24;
const MIN_GAP_MS = 50;

/**
 * The probe sequences of the golden vectors, then pseudo-random ones (fixed seeds) for each of
 * their settings and a few more: alternating runs of good and failed probes 50–150 ms apart,
 * some long enough to trigger every liveness invariant.
 */
export function healthPropertySequences(golden: readonly HealthVector[]): HealthPropertySequence[] {
  const out: HealthPropertySequence[] = golden.map((v) => ({
    name: v.name,
    params: v.params,
    probes: v.steps.map((s) => ({ ok: s.ok, nowMs: s.now_ms })),
  }));
  const distinct = new Map<string, HealthParams>();
  for (const p of [...golden.map((v) => v.params), ...EXTRA_PARAMS]) {
    distinct.set(JSON.stringify(p), p);
  }
  let seed = 0x2545f491;
  const next = (bound: number) => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed % bound;
  };
  for (const params of distinct.values()) {
    const longOk = Math.ceil(HEALTH_SLACK * params.backoffMaxMs / MIN_GAP_MS) +
      HEALTH_SLACK * params.rise + 1;
    const longFail = HEALTH_SLACK * params.fall + 1;
    const short = 2 * Math.max(params.rise, params.fall) + 1;
    for (let s = 0; s < SEQUENCES_PER_PARAMS; s++) {
      const probes: HealthProbeStep[] = [];
      let nowMs = 0;
      let ok = next(2) === 0;
      for (let r = 0; r < RUNS_PER_SEQUENCE; r++, ok = !ok) {
        const long = next(4) === 0;
        const length = long ? (ok ? longOk : longFail) : 1 + next(short);
        for (let i = 0; i < length; i++) {
          probes.push({ ok, nowMs });
          nowMs += MIN_GAP_MS + next(101);
        }
      }
      const p = params;
      out.push({
        name: `generated ${s + 1} (rise ${p.rise}, fall ${p.fall}, backoff ` +
          `${p.backoffBaseMs}..${p.backoffMaxMs} ms)`,
        params,
        probes,
      });
    }
  }
  return out;
}

const NAMES = ["New", "Active", "Quarantined"];

/**
 * Checks the states a module returned after each probe of `seq` (`states[i]` after
 * `seq.probes[i]`, starting from New) against every invariant; returns the first violation.
 */
export function healthViolation(
  seq: HealthPropertySequence,
  states: readonly number[],
): HealthViolation | undefined {
  const rise = Math.max(1, seq.params.rise), fall = Math.max(1, seq.params.fall);
  const minHold = Math.min(seq.params.backoffBaseMs, seq.params.backoffMaxMs);
  let prev: number = HealthState.New;
  let okRun = 0, failRun = 0, quarantinedAt = -Infinity;
  for (const [i, probe] of seq.probes.entries()) {
    const state = states[i]!;
    okRun = probe.ok ? okRun + 1 : 0;
    failRun = probe.ok ? 0 : failRun + 1;
    const at = `${probe.ok ? "good" : "failed"} probe at ${probe.nowMs} ms`;
    const fail = (check: string, what: string): HealthViolation => ({
      check,
      step: i,
      message: `${what} (${at}, ${NAMES[prev] ?? prev} → ${NAMES[state] ?? state})`,
    });
    if (
      state !== HealthState.New && state !== HealthState.Active &&
      state !== HealthState.Quarantined
    ) {
      return fail("states", `state ${state} is not New, Active or Quarantined`);
    }
    if (state === HealthState.New && prev !== HealthState.New) {
      return fail("states", "a judged backend became New again");
    }
    if (state === HealthState.Active && prev !== HealthState.Active) {
      if (okRun < rise) {
        return fail(
          "active-needs-ok-run",
          `Active after ${okRun} good probes in a row, rise ${rise}`,
        );
      }
      if (prev === HealthState.Quarantined && probe.nowMs < quarantinedAt + minHold) {
        return fail(
          "quarantine-holds",
          `Active ${probe.nowMs - quarantinedAt} ms after its quarantine, hold ${minHold} ms`,
        );
      }
    }
    if (state === HealthState.Quarantined && prev !== HealthState.Quarantined) {
      if (failRun < fall) {
        return fail(
          "quarantine-needs-fail-run",
          `Quarantined after ${failRun} failed probes in a row, fall ${fall}`,
        );
      }
      quarantinedAt = probe.nowMs;
    }
    if (state !== HealthState.Quarantined && failRun >= HEALTH_SLACK * fall) {
      return fail("fails-quarantine", `still serving after ${failRun} failed probes, fall ${fall}`);
    }
    if (state !== HealthState.Active && okRun >= HEALTH_SLACK * rise) {
      const firstOfRun = seq.probes[i - HEALTH_SLACK * rise + 1]!.nowMs;
      const holdOver = quarantinedAt + HEALTH_SLACK * seq.params.backoffMaxMs;
      if (state === HealthState.New || firstOfRun >= holdOver) {
        return fail(
          "oks-activate",
          `not Active after ${okRun} good probes, rise ${rise}` +
            (state === HealthState.New
              ? ""
              : `, ${probe.nowMs - quarantinedAt} ms after quarantine`),
        );
      }
    }
    prev = state;
  }
  return undefined;
}
