/**
 * Table printing shared by the row files, the `control-plane` command and the script tests'
 * `db/show` and `db/cmp`; ages (the frontends' `Since`) in the kubectl style.
 *
 * Columns are separated by at least two spaces, so a cell may contain single spaces.
 *
 * @module
 */

/** Formats a header and rows as aligned columns (two spaces between columns). */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n") + "\n";
}

/**
 * An age as an operator reads it, kubectl-style: `45s`, `3m20s`, `47m`, `5h12m`, `30h`, `3d`.
 *
 * @example
 * ```ts
 * import { formatAge } from "./print.ts";
 * if (formatAge(200_000) !== "3m20s") throw new Error("not kubectl-style");
 * ```
 */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000)), m = Math.floor(s / 60), h = Math.floor(m / 60);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (h < 3) return `${m}m`;
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** Splits formatted table text back into cells (for comparisons that ignore alignment). */
export function parseTable(text: string): string[][] {
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "").map((l) =>
    l.split(/\s{2,}/)
  );
}
