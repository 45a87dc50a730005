/**
 * Reads the Prometheus text exposition format (version 0.0.4, what {@linkcode Registry.expose}
 * in `metrics.ts` writes): one sample per line, `name{label="value",…} value`. Comments, blank
 * lines and lines that are not a sample are skipped; label values are unescaped (`\\`, `\"`,
 * `\n`).
 *
 * @example
 * ```ts
 * import { parsePromText, sampleValue } from "./prom_text.ts";
 * const samples = parsePromText('# HELP x A gauge.\nx{address="10.0.0.1"} 1\ny 2.5\n');
 * if (sampleValue(samples, "x", { address: "10.0.0.1" }) !== 1) throw new Error("x");
 * if (sampleValue(samples, "y") !== 2.5) throw new Error("y");
 * ```
 *
 * @module
 */

/** One sample: metric name, labels and value. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/;
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c);
}

function parseValue(text: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  return Number(text);
}

/** The samples of exposition `text`, in order. */
export function parsePromText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = SAMPLE_RE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL_RE)) labels[l[1]!] = unescape(l[2]!);
    const value = parseValue(m[3]!);
    if (!Number.isNaN(value) || m[3] === "NaN") out.push({ name: m[1]!, labels, value });
  }
  return out;
}

/** Samples named `name` whose labels include `match`. */
export function samplesOf(
  samples: readonly Sample[],
  name: string,
  match: Readonly<Record<string, string>> = {},
): Sample[] {
  return samples.filter((s) =>
    s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)
  );
}

/** The value of the first sample named `name` with labels including `match`, or undefined. */
export function sampleValue(
  samples: readonly Sample[],
  name: string,
  match: Readonly<Record<string, string>> = {},
): number | undefined {
  return samplesOf(samples, name, match)[0]?.value;
}
