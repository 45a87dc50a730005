/**
 * Table-row printing shared by row files, `db/show` and `db/cmp` in script tests.
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

/** Splits formatted table text back into cells (for comparisons that ignore alignment). */
export function parseTable(text: string): string[][] {
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "").map((l) =>
    l.split(/\s{2,}/)
  );
}
