/**
 * The one metric style of lib/metrics.ts, checked on every run so it cannot drift back: no
 * product file registers a metric at import time (a top-level `const x = registry.counter(…)`, or
 * a top-level object or call doing it). A part registers its metrics when it is constructed, on
 * the registry it is given (default the process-wide one).
 *
 * The check is line-based: a top-level statement starts on an unindented line and runs to the
 * next one; a statement that is not a function (`=>`, `function`, `class`) and calls
 * `….counter(`, `….gauge(` or `….histogram(` on a registry registers at import time.
 */
import { deepStrictEqual } from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);
const PRODUCT = ["lib", "controller", "policy-as", "node", "lab", "bench", "scripts"];
const REGISTERS = /[rR]egistry\)?\s*\.(counter|gauge|histogram)\(/;
/** A top-level declaration whose value is a function or class: its body runs later. */
const DEFERRED =
  /^(export\s+)?((async\s+)?function\b|class\b|(const|let)\s+\w+(\s*:[^=]+)?\s*=\s*(\([^)]*\)|\w+)(\s*:[^=]+)?\s*=>)/;

/** The first line (1-based) of each top-level statement of `text` that registers a metric. */
export function importTimeRegistrations(text: string): number[] {
  const lines = text.split("\n");
  const hits: number[] = [];
  let start = -1;
  let flagged = false;
  const close = () => {
    if (start >= 0 && flagged) hits.push(start + 1);
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*(\/\/|\/\*|\*)/.test(line)) {
      // A comment: an unindented one ends the statement before it.
      if (/^[/*]/.test(line)) {
        close();
        start = -1;
      }
      continue;
    }
    // An unindented line that does not close a bracket (`}`, `)`, `]`) starts a statement.
    if (/^[^\s})\]]/.test(line)) {
      close();
      start = i;
      flagged = false;
      if (DEFERRED.test(line) || /^import\b/.test(line)) {
        start = -1; // a function's body, or an import: nothing runs now
        continue;
      }
    }
    if (start >= 0 && REGISTERS.test(line)) flagged = true;
  }
  close();
  return hits;
}

async function* sources(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(new URL(dir, ROOT))) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory && !["build", "node_modules", "vectors", "assembly"].includes(e.name)) {
      yield* sources(path);
    } else if (e.isFile && e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) yield path;
  }
}

Deno.test("metrics style: the check finds import-time registrations and passes the one style", () => {
  const bad = [
    'import { registry } from "../../lib/metrics.ts";',
    "",
    'const relayed = registry.counter("a_total", "A.");',
    "const metrics = {",
    '  up: registry.gauge("b", "B."),',
    "};",
    'export const h = processRegistry.histogram("c", "C.");',
    "// registry.counter( in a comment is not a call",
    'registry.gauge("d", "D.").set(undefined, 1);',
  ].join("\n");
  deepStrictEqual(importTimeRegistrations(bad), [3, 4, 7, 9]);
  const good = [
    'import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";',
    "",
    "/** The part's metrics, on `registry`. */",
    "const partMetrics = (registry: Registry) => ({",
    '  up: registry.gauge("b", "B."),',
    "});",
    "const counter = (registry: Registry) =>",
    '  registry.counter("a_total", "A.");',
    "export function exportX(source: unknown, registry: Registry): void {",
    '  registry.gauge("x", "X.").onCollect(() => {});',
    "}",
    "export class Part {",
    "  constructor(o: { registry?: Registry }) {",
    '    (o.registry ?? processRegistry).counter("p_total", "P.");',
    "  }",
    "}",
    "/**",
    " * const learned = registry.counter(…) // in a doc comment",
    " */",
    "const LIMIT = 4;",
  ].join("\n");
  deepStrictEqual(importTimeRegistrations(good), []);
});

Deno.test("metrics style: no product file registers a metric at import time (lib/metrics.ts)", async () => {
  const wrong: string[] = [];
  for (const dir of PRODUCT) {
    try {
      for await (const path of sources(dir)) {
        const text = await Deno.readTextFile(new URL(path, ROOT));
        for (const line of importTimeRegistrations(text)) wrong.push(`${path}:${line}`);
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
  for (const path of ["main.ts"]) {
    const text = await Deno.readTextFile(new URL(path, ROOT));
    for (const line of importTimeRegistrations(text)) wrong.push(`${path}:${line}`);
  }
  deepStrictEqual(
    wrong,
    [],
    `these register metrics at import time; take \`registry?: Registry\` as an option and ` +
      `register when constructed (lib/metrics.ts):\n${wrong.join("\n")}`,
  );
});
