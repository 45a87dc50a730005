/**
 * A tiny Prometheus registry: counters, gauges and histograms with labels, and the text
 * exposition format (version 0.0.4) for a `/metrics` endpoint.
 *
 * Registering a name twice with the same type returns the existing metric, so two instances of
 * a part share their series without coordination.
 *
 * **The one style** for a part of a daemon that has metrics:
 *
 * - it takes the registry as an option (`registry?: Registry`, default the process-wide
 *   {@link registry} that `/metrics` serves) and registers its metrics when it is constructed,
 *   never at import time — a test passes its own `new Registry()` and reads exactly that part's
 *   series (node/anycast/agent.ts, node/bgp/supervisor.ts, node/anycast/redirect_purge.ts);
 * - a value that already lives elsewhere (a hot path's plain counter field, a table's size, a BPF
 *   map) is not copied on every change but read at scrape time with {@link Gauge.onCollect}
 *   (node/lb/metrics.ts, node/bpf/metrics.ts: `exportXMetrics(source, registry)`).
 *
 * Every part of every daemon follows it (node/bgp/bird.ts, controller/k8s/ included:
 * `startController` passes its `registry` option to each part); tests/hygiene/metrics_style_test.ts
 * fails on a product file that registers a metric at import time.
 *
 * @example
 * ```ts
 * import { Registry } from "./metrics.ts";
 * const registry = new Registry();
 * const learned = registry.counter("holdfast_flows_learned_total", "Flows learned.", {
 *   labelNames: ["vip"],
 * });
 * learned.inc({ vip: "10.0.100.1" });
 * const text = registry.expose();
 * if (!text.includes('holdfast_flows_learned_total{vip="10.0.100.1"} 1')) throw new Error(text);
 * ```
 *
 * @module
 */

/** Label values of one series. */
export type Labels = Record<string, string | number>;

/** Options shared by every metric type. */
export interface MetricOptions {
  /** Label names every series of this metric must have (and no others). */
  labelNames?: readonly string[];
}

/** Options of a histogram. */
export interface HistogramOptions extends MetricOptions {
  /** Upper bounds of the buckets, ascending; `+Inf` is added. Default {@link DEFAULT_BUCKETS}. */
  buckets?: readonly number[];
}

/** Default histogram buckets, in seconds: 100 µs to 10 s. */
export const DEFAULT_BUCKETS: readonly number[] = [
  0.0001,
  0.00025,
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
];

type MetricType = "counter" | "gauge" | "histogram";

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

abstract class Metric {
  abstract readonly type: MetricType;
  readonly labelNames: readonly string[];

  constructor(readonly name: string, readonly help: string, options: MetricOptions) {
    if (!NAME_RE.test(name)) throw new TypeError(`Cannot register metric: bad name "${name}"`);
    this.labelNames = options.labelNames ?? [];
    for (const l of this.labelNames) {
      if (!LABEL_RE.test(l) || l === "le") {
        throw new TypeError(`Cannot register metric "${name}": bad label name "${l}"`);
      }
    }
  }

  /** The series key for `labels`, checking that exactly the declared label names are given. */
  protected key(labels: Labels | undefined): string {
    const given = labels ? Object.keys(labels) : [];
    if (
      given.length !== this.labelNames.length || given.some((l) => !this.labelNames.includes(l))
    ) {
      throw new TypeError(
        `Cannot record metric "${this.name}": labels ${JSON.stringify(given)} do not match ${
          JSON.stringify(this.labelNames)
        }`,
      );
    }
    return this.labelNames.map((l) => `${l}="${escapeLabel(String(labels![l]))}"`).join(",");
  }

  abstract lines(): string[];
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

function series(name: string, key: string, value: number): string {
  return `${name}${key ? `{${key}}` : ""} ${formatValue(value)}`;
}

/** A monotonically increasing count. */
export class Counter extends Metric {
  readonly type = "counter" as const;
  #values = new Map<string, number>();

  /** Adds `value` (default 1, must be ≥ 0) to the series with `labels`. */
  inc(labels?: Labels, value = 1): void {
    if (!(value >= 0)) {
      throw new RangeError(`Cannot increment counter "${this.name}" by ${value}: must be >= 0`);
    }
    const k = this.key(labels);
    this.#values.set(k, (this.#values.get(k) ?? 0) + value);
  }

  /** The current value of the series with `labels` (0 if never incremented). */
  get(labels?: Labels): number {
    return this.#values.get(this.key(labels)) ?? 0;
  }

  lines(): string[] {
    if (this.labelNames.length === 0 && this.#values.size === 0) return [series(this.name, "", 0)];
    return [...this.#values].map(([k, v]) => series(this.name, k, v));
  }
}

/** A value that goes up and down; optionally computed at scrape time. */
export class Gauge extends Metric {
  readonly type = "gauge" as const;
  #values = new Map<string, number>();
  #collect?: () => void;

  /** Sets the series with `labels` to `value`. */
  set(labels: Labels | undefined, value: number): void {
    this.#values.set(this.key(labels), value);
  }

  /** Adds `value` (default 1) to the series with `labels`. */
  inc(labels?: Labels, value = 1): void {
    const k = this.key(labels);
    this.#values.set(k, (this.#values.get(k) ?? 0) + value);
  }

  /** Subtracts `value` (default 1) from the series with `labels`. */
  dec(labels?: Labels, value = 1): void {
    this.inc(labels, -value);
  }

  /** The current value of the series with `labels` (0 if never set). */
  get(labels?: Labels): number {
    this.#collect?.();
    return this.#values.get(this.key(labels)) ?? 0;
  }

  /** Calls `fn` before every exposition, so it can `set` current values (e.g. a queue length). */
  onCollect(fn: () => void): void {
    this.#collect = fn;
  }

  lines(): string[] {
    this.#collect?.();
    if (this.labelNames.length === 0 && this.#values.size === 0) return [series(this.name, "", 0)];
    return [...this.#values].map(([k, v]) => series(this.name, k, v));
  }
}

interface HistogramSeries {
  counts: number[];
  sum: number;
  count: number;
}

/** Observations counted into cumulative buckets, with their sum and count. */
export class Histogram extends Metric {
  readonly type = "histogram" as const;
  readonly buckets: readonly number[];
  #series = new Map<string, HistogramSeries>();

  constructor(name: string, help: string, options: HistogramOptions) {
    super(name, help, options);
    this.buckets = options.buckets ?? DEFAULT_BUCKETS;
    for (let i = 1; i < this.buckets.length; i++) {
      if (!(this.buckets[i]! > this.buckets[i - 1]!)) {
        throw new TypeError(`Cannot register histogram "${name}": buckets must ascend`);
      }
    }
  }

  /** Records one observation `value` in the series with `labels`. */
  observe(labels: Labels | undefined, value: number): void {
    const k = this.key(labels);
    let s = this.#series.get(k);
    if (!s) {
      s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.#series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i]!++;
    s.sum += value;
    s.count++;
  }

  /** Observations so far in the series with `labels`: count and sum. */
  get(labels?: Labels): { count: number; sum: number } {
    const s = this.#series.get(this.key(labels));
    return { count: s?.count ?? 0, sum: s?.sum ?? 0 };
  }

  lines(): string[] {
    const out: string[] = [];
    for (const [k, s] of this.#series) {
      const prefix = k ? `${k},` : "";
      this.buckets.forEach((b, i) => {
        out.push(series(`${this.name}_bucket`, `${prefix}le="${formatValue(b)}"`, s.counts[i]!));
      });
      out.push(series(`${this.name}_bucket`, `${prefix}le="+Inf"`, s.count));
      out.push(series(`${this.name}_sum`, k, s.sum));
      out.push(series(`${this.name}_count`, k, s.count));
    }
    return out;
  }
}

/** A set of metrics exposed together. */
export class Registry {
  #metrics = new Map<string, Metric>();

  /** Registers (or returns the already registered) counter `name`. */
  counter(name: string, help: string, options: MetricOptions = {}): Counter {
    return this.#register(name, "counter", () => new Counter(name, help, options)) as Counter;
  }

  /** Registers (or returns the already registered) gauge `name`. */
  gauge(name: string, help: string, options: MetricOptions = {}): Gauge {
    return this.#register(name, "gauge", () => new Gauge(name, help, options)) as Gauge;
  }

  /** Registers (or returns the already registered) histogram `name`. */
  histogram(name: string, help: string, options: HistogramOptions = {}): Histogram {
    return this.#register(
      name,
      "histogram",
      () => new Histogram(name, help, options),
    ) as Histogram;
  }

  #register(name: string, type: MetricType, make: () => Metric): Metric {
    const existing = this.#metrics.get(name);
    if (existing) {
      if (existing.type !== type) {
        throw new TypeError(
          `Cannot register ${type} "${name}": already registered as a ${existing.type}`,
        );
      }
      return existing;
    }
    const metric = make();
    this.#metrics.set(name, metric);
    return metric;
  }

  /** The Prometheus text exposition (content type {@link CONTENT_TYPE}). */
  expose(): string {
    const out: string[] = [];
    for (const m of this.#metrics.values()) {
      out.push(`# HELP ${m.name} ${m.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`);
      out.push(`# TYPE ${m.name} ${m.type}`);
      out.push(...m.lines());
    }
    return out.join("\n") + "\n";
  }
}

/** Content type of {@link Registry.expose}'s output. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** The process-wide registry. */
export const registry: Registry = new Registry();

/**
 * Sets `holdfast_build_info{version,commit}` to 1 in `reg`: which release and commit this process
 * runs (`lib/version.ts`). `serveOps` calls it, so every daemon's `/metrics` has it.
 */
export function exportBuildInfo(
  info: { version: string; commit: string },
  reg: Registry = registry,
): void {
  reg.gauge(
    "holdfast_build_info",
    "1, labelled with the Holdfast release and git commit this process runs.",
    { labelNames: ["version", "commit"] },
  ).set({ version: info.version, commit: info.commit }, 1);
}

/**
 * Sets `holdfast_node_info{role,node}` to 1 in `reg`: which node, in which role (`lb`,
 * `anycast`, `egress`), serves this `/metrics` — what `main.ts status` names it by.
 */
export function exportNodeInfo(role: string, node: string, reg: Registry = registry): void {
  reg.gauge(
    "holdfast_node_info",
    "1, labelled with this process's role (lb, anycast, egress) and node or pod name.",
    { labelNames: ["role", "node"] },
  ).set({ role, node }, 1);
}
