/**
 * The health checker of one LB node: a probe loop per (service, backend) at the service's
 * interval, at most `maxConcurrent` probes in flight, each result judged by the serving policy
 * module's `health_step` (looked up per probe, so a swapped module judges the next probe), and
 * every change of verdict handed to `onChange` (the Writer, flow purges) with a log line
 * (`backend 10.1.0.3:8080 unhealthy: 3 failed probes (connect refused)`) and metrics.
 *
 * A backend the checker has not judged yet (policy state New) keeps the state its source gave
 * it: a restarted agent or a reloaded config never empties a service while the first probes run.
 *
 * @module
 */
import { type HealthProbe, type HealthRecord, HealthState } from "../../../policy-as/host/abi.ts";
import { newHealthRecord } from "../../../policy-as/host/abi.ts";
import { sleep } from "../../../lib/backoff.ts";
import { log as rootLog, type Logger } from "../../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../../lib/metrics.ts";
import { probe as netProbe, type Prober, type ProbeResult } from "./probe.ts";
import { type HealthTarget, targetKey } from "./targets.ts";

/** The health step to apply (the serving policy module's, or the TypeScript reference). */
export type HealthStep = (rec: HealthRecord, probe: HealthProbe) => number;

/** A verdict change: the backend left (`quarantined`) or re-entered (`active`) the tables. */
export interface HealthChange {
  readonly target: HealthTarget;
  readonly verdict: "quarantined" | "active";
  /** Consecutive probes that led to it, and the last failure's reason. */
  readonly probes: number;
  readonly reason: string;
  /** When the deciding probe finished (the checker's clock). */
  readonly atMs: number;
}

/** Options of a {@link HealthChecker}. */
export interface HealthCheckerOptions {
  /** The health step for each probe; called per probe so a policy swap takes effect at once. */
  step: () => HealthStep;
  /** Applies a verdict change; awaited before the target's next probe. */
  onChange: (change: HealthChange) => Promise<void> | void;
  /** A target left the config while quarantined: its verdict must be withdrawn. */
  onRemove?: (target: HealthTarget) => Promise<void> | void;
  /** Probe function (default: TCP/HTTP over the network, `probe.ts`). */
  prober?: Prober;
  /** Probes in flight at once, over all targets (default 64). */
  maxConcurrent?: number;
  /** Clock, ms (default `Date.now`). */
  now?: () => number;
  logger?: Logger;
  registry?: Registry;
}

const STATE_NAMES = ["new", "active", "quarantined"] as const;

/** A probe result as a metric label (bounded set). */
function resultLabel(r: ProbeResult): string {
  if (r.ok) return "ok";
  if (r.reason.startsWith("status ")) return "bad_status";
  if (r.reason.startsWith("error")) return "error";
  return r.reason.replaceAll(" ", "_");
}

interface Loop {
  target: HealthTarget;
  rec: HealthRecord;
  stop: AbortController;
  done: Promise<void>;
  /** Probes in a row with the same outcome, and the last failure's reason. */
  run: number;
  lastOk: boolean | null;
  reason: string;
}

/** Probes backends and turns the policy's verdicts into changes. */
export class HealthChecker {
  readonly #o: Required<Omit<HealthCheckerOptions, "onRemove" | "logger" | "registry">>;
  readonly #onRemove: HealthCheckerOptions["onRemove"];
  readonly #loops = new Map<string, Loop>();
  readonly #log: Logger;
  readonly #probes;
  readonly #health;
  readonly #changes;
  #inFlight = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(options: HealthCheckerOptions) {
    this.#o = {
      step: options.step,
      onChange: options.onChange,
      prober: options.prober ?? netProbe,
      maxConcurrent: options.maxConcurrent ?? 64,
      now: options.now ?? Date.now,
    };
    this.#onRemove = options.onRemove;
    this.#log = (options.logger ?? rootLog).with({ component: "health" });
    const reg = options.registry ?? rootRegistry;
    this.#probes = reg.counter(
      "holdfast_health_probes_total",
      "Health probes this LB node ran, by result (ok, connect_refused, timeout, bad_status…).",
      { labelNames: ["result"] },
    );
    this.#health = reg.gauge(
      "holdfast_backend_health",
      "1 for the health state this LB node's policy holds for a backend of a service.",
      { labelNames: ["service", "backend", "state"] },
    );
    this.#changes = reg.counter(
      "holdfast_health_changes_total",
      "Backends taken out of (quarantined) or put back into (active) the Maglev tables.",
      { labelNames: ["verdict"] },
    );
  }

  /** The policy state of every probed backend, by `service|backend`. */
  states(): Map<string, (typeof STATE_NAMES)[number]> {
    return new Map([...this.#loops].map(([k, l]) => [k, STATE_NAMES[l.rec.state]!]));
  }

  /**
   * Probes exactly `targets` from now on: new ones start (state New), gone ones stop — a
   * quarantined one is handed to `onRemove`; a changed check restarts its loop, keeping its record.
   */
  async setTargets(targets: readonly HealthTarget[]): Promise<void> {
    const next = new Map(targets.map((t) => [targetKey(t), t]));
    for (const [key, loop] of [...this.#loops]) {
      const t = next.get(key);
      if (t && sameTarget(t, loop.target)) continue;
      this.#loops.delete(key);
      loop.stop.abort();
      await loop.done;
      if (t) {
        this.#start(t, loop.rec);
        continue;
      }
      this.#gauge(loop.target, -1);
      if (loop.rec.state === HealthState.Quarantined) await this.#onRemove?.(loop.target);
    }
    for (const [key, t] of next) if (!this.#loops.has(key)) this.#start(t, newHealthRecord());
  }

  /** Stops every loop (verdicts stay where they are). */
  async stop(): Promise<void> {
    const loops = [...this.#loops.values()];
    this.#loops.clear();
    for (const l of loops) l.stop.abort();
    await Promise.all(loops.map((l) => l.done));
  }

  #start(target: HealthTarget, rec: HealthRecord): void {
    const loop: Loop = {
      target,
      rec,
      stop: new AbortController(),
      done: Promise.resolve(),
      run: 0,
      lastOk: null,
      reason: "",
    };
    this.#gauge(target, rec.state);
    loop.done = this.#run(loop).catch((err) => {
      if (!loop.stop.signal.aborted) {
        this.#log.error("health loop failed", { backend: target.backend, err });
      }
    });
    this.#loops.set(targetKey(target), loop);
  }

  async #run(loop: Loop): Promise<void> {
    const { target } = loop;
    const signal = loop.stop.signal;
    // Spread the first probes over one interval so many backends do not probe in lockstep.
    await sleep(Math.floor(Math.random() * Math.min(target.check.intervalMs, 1000)), signal);
    let next = this.#o.now();
    for (let n = 0; !signal.aborted && n < Number.MAX_SAFE_INTEGER; n++) {
      const wait = next - this.#o.now();
      if (wait > 0) await sleep(wait, signal);
      next = Math.max(next + target.check.intervalMs, this.#o.now());
      await this.#acquire(signal);
      let result: ProbeResult;
      try {
        const to = { ip: target.ip, port: target.probePort };
        result = await this.#o.prober(to, target.check, signal);
      } finally {
        this.#release();
      }
      if (signal.aborted) return;
      await this.#judge(loop, result);
    }
  }

  async #judge(loop: Loop, result: ProbeResult): Promise<void> {
    const { target, rec } = loop;
    this.#probes.inc({ result: resultLabel(result) });
    loop.run = loop.lastOk === result.ok ? loop.run + 1 : 1;
    loop.lastOk = result.ok;
    if (!result.ok) loop.reason = result.reason;
    const before = rec.state;
    const nowMs = this.#o.now();
    const c = target.check;
    this.#o.step()(rec, {
      ok: result.ok,
      nowMs,
      params: {
        rise: c.rise,
        fall: c.fall,
        backoffBaseMs: c.backoffBaseMs,
        backoffMaxMs: c.backoffMaxMs,
      },
    });
    if (rec.state === before) return;
    this.#gauge(target, rec.state);
    const fields = {
      service: target.service,
      backend: target.backend,
      probes: loop.run,
      strikes: rec.strikes,
    };
    const name = `${target.ip}:${target.probePort}`;
    if (rec.state === HealthState.Quarantined) {
      const holdMs = Math.max(0, rec.holdUntilMs - nowMs);
      this.#log.warn(
        `backend ${name} unhealthy: ${loop.run} failed probes (${loop.reason})`,
        { ...fields, reason: loop.reason, hold_ms: holdMs },
      );
      this.#changes.inc({ verdict: "quarantined" });
      await this.#o.onChange({
        target,
        verdict: "quarantined",
        probes: loop.run,
        reason: loop.reason,
        atMs: nowMs,
      });
    } else if (rec.state === HealthState.Active) {
      this.#log.info(`backend ${name} healthy: ${loop.run} successful probes`, fields);
      if (before !== HealthState.Quarantined) return; // New → Active: it was serving already
      this.#changes.inc({ verdict: "active" });
      await this.#o.onChange({
        target,
        verdict: "active",
        probes: loop.run,
        reason: "ok",
        atMs: nowMs,
      });
    }
  }

  /** Sets the state gauge of `t` (-1: all zero, the target is gone). */
  #gauge(t: HealthTarget, state: number): void {
    STATE_NAMES.forEach((s, i) =>
      this.#health.set({ service: t.service, backend: t.backend, state: s }, i === state ? 1 : 0)
    );
  }

  #acquire(signal: AbortSignal): Promise<void> {
    if (this.#inFlight < this.#o.maxConcurrent) {
      this.#inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const go = () => {
        signal.removeEventListener("abort", onAbort);
        this.#inFlight++;
        resolve();
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(go);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(go);
    });
  }

  #release(): void {
    this.#inFlight--;
    this.#waiting.shift()?.();
  }
}

function sameTarget(a: HealthTarget, b: HealthTarget): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
