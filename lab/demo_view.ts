/**
 * What a person sees of `./hf demo`: one line per step, saying what happens and why it would break
 * elsewhere, and a compact table of the connections of each mode (Holdfast and its baseline, per
 * chapter; `ended`: connections whose backend died, apart from `lost`) — redrawn in place on a
 * terminal, printed after each story otherwise, and replaced by the machine-readable JSON lines
 * with `--json`.
 *
 * @module
 */

/** How the demo writes: a live terminal, plain text (a pipe, a file), or JSON lines. */
export type ViewStyle = "tty" | "plain" | "json";

/** One row of the live table: a mode's connections right now. */
export interface ModeRow {
  mode: string;
  /** "waiting", "running" or "done". */
  state: string;
  connections: number;
  alive: number;
  /** Connections that ended with their backend (it died: no load balancer keeps those). */
  ended?: number;
  stalled: number;
  maxStallMs: number;
  /** The detail column: per-family "alive/connections" (`IPv4 40/40`), or an egress takeover. */
  families: string;
}

/** The table rows of `modes`, waiting until their chapter runs. */
export function waitingRows(modes: readonly string[]): ModeRow[] {
  return modes.map((mode) => ({
    mode,
    state: "waiting",
    connections: 0,
    alive: 0,
    stalled: 0,
    maxStallMs: 0,
    families: "",
  }));
}

const enc = new TextEncoder();

/** Column widths and headers of the table. */
const COLUMNS: Array<[string, number, (r: ModeRow) => string]> = [
  ["mode", 14, (r) => r.mode],
  ["state", 8, (r) => r.state],
  ["alive", 9, (r) => r.connections ? `${r.alive}/${r.connections}` : "-"],
  ["lost", 5, (r) => r.connections ? String(r.connections - r.alive - (r.ended ?? 0)) : "-"],
  ["ended", 6, (r) => r.connections && r.ended !== undefined ? String(r.ended) : "-"],
  ["stalled", 8, (r) => r.connections ? String(r.stalled) : "-"],
  ["longest stall", 14, (r) => r.connections ? `${r.maxStallMs} ms` : "-"],
  ["detail", 30, (r) => r.families || "-"],
];

/** The table as aligned text lines (header, rule, one line per row). */
export function tableLines(rows: readonly ModeRow[]): string[] {
  const line = (cells: string[]) =>
    cells.map((c, i) => c.padEnd(COLUMNS[i]![1])).join("  ").trimEnd();
  return [
    line(COLUMNS.map(([h]) => h)),
    line(COLUMNS.map(([, w]) => "-".repeat(w))),
    ...rows.map((r) => line(COLUMNS.map(([, , f]) => f(r)))),
  ];
}

/** Writes the demo's story and table in one of the {@link ViewStyle}s. */
export class DemoView {
  readonly style: ViewStyle;
  #rows: ModeRow[] = [];
  #drawn = 0;
  #write: (text: string) => void;

  constructor(style: ViewStyle, write?: (text: string) => void) {
    this.style = style;
    this.#write = write ?? ((text) => void Deno.stdout.writeSync(enc.encode(text)));
  }

  /** The style for this process: JSON when asked, a live table on a terminal, else plain. */
  static styleFor(json: boolean): ViewStyle {
    if (json) return "json";
    return Deno.stdout.isTerminal() ? "tty" : "plain";
  }

  /** A step or a fact: one line of text (a JSON line in `json` style, with `fields`). */
  say(msg: string, fields: Record<string, unknown> = {}): void {
    if (this.style === "json") {
      const line = { ts: new Date().toISOString(), level: "info", component: "demo", msg };
      this.#write(JSON.stringify({ ...line, ...fields }) + "\n");
      return;
    }
    this.#clearTable();
    const time = new Date().toISOString().slice(11, 19);
    this.#write(`${time}  ${msg}\n`);
    this.#drawTable();
  }

  /** A step of the story: what happens now, and why it would break a stateless design. */
  step(mode: string, what: string, why: string): void {
    if (this.style === "json") this.say(what, { mode, why });
    else this.say(`[${mode}] ${what}\n          ${why}`);
  }

  /** Replaces the table's rows; a terminal redraws at once, plain text waits for {@link flush}. */
  rows(rows: readonly ModeRow[]): void {
    this.#rows = rows.map((r) => ({ ...r }));
    if (this.style !== "tty") return;
    this.#clearTable();
    this.#drawTable();
  }

  /** Prints the table as it stands (plain text; a terminal shows it already). */
  flush(): void {
    if (this.style !== "plain" || this.#rows.length === 0) return;
    this.#write(tableLines(this.#rows).map((l) => `  ${l}`).join("\n") + "\n");
  }

  /** Leaves the live table on screen and stops redrawing it. */
  close(): void {
    this.#drawn = 0;
  }

  #clearTable(): void {
    if (this.style !== "tty" || this.#drawn === 0) return;
    // Up to the table's first line, then erase to the end of the screen.
    this.#write(`\x1b[${this.#drawn}F\x1b[J`);
    this.#drawn = 0;
  }

  #drawTable(): void {
    if (this.style !== "tty" || this.#rows.length === 0) return;
    const lines = tableLines(this.#rows);
    this.#write(lines.map((l) => `  ${l}`).join("\n") + "\n");
    this.#drawn = lines.length;
  }
}
