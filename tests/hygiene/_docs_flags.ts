/**
 * What the docs say about Holdfast's command lines, read out of Markdown for
 * tests/hygiene/docs_flags_test.ts: which commands they run (`main.ts CMD`, `./hf CMD`,
 * `deno task NAME`) and which flags they give each.
 *
 * The rule, for Markdown:
 * - A **command line** is a code span, or one line of a fenced code block (a line ending in `\`
 *   goes on with the next; a `#` comment ends it). In it, each invocation (`main.ts agent`,
 *   `node/lb/main.ts`, `./hf bench NAME`, `./hf CMD`, `deno task NAME`, `./hf deno task NAME`)
 *   owns the `--flag`s after it, up to the next invocation or a `&&`, `||` or `;`.
 * - In prose, a code span that starts with `--flag` belongs to the last invocation named in a
 *   code span earlier on the same line (`` `main.ts status --redis URL`; `--json` prints … ``).
 * - A table row whose first cell is a `--flag` code span belongs to the one command named in the
 *   section's heading (a flag table of a command).
 *
 * Uppercase words (`NAME`, `COMMAND`) are placeholders, not names.
 *
 * @module
 */

/** One flag the docs give a command. */
export interface FlagMention {
  readonly file: string;
  readonly line: number;
  /** `main.ts agent`, `main.ts`, `task deploy`, `hf test`. */
  readonly command: string;
  /** Without the dashes and any `=value`. */
  readonly flag: string;
}

/** One name the docs use: a deno task, a `./hf` subcommand, a test group, a permission set. */
export interface NameMention {
  readonly file: string;
  readonly line: number;
  readonly kind:
    | "main.ts"
    | "main.ts policy"
    | "task"
    | "hf"
    | "hf test"
    | "chaos scenario"
    | "permission set";
  readonly name: string;
}

/** Everything {@link extractDocs} found. */
export interface DocMentions {
  readonly flags: FlagMention[];
  readonly names: NameMention[];
}

const INVOCATION = new RegExp(
  [
    String.raw`(?:\.\/hf\s+deno\s+task|deno\s+task)(?:\s+-q)?\s+(?<task>[A-Za-z][\w:-]*)`,
    String.raw`\.\/hf\s+bench(?:\s+(?<bench>[A-Za-z][\w-]*))?`,
    String.raw`\.\/hf\s+(?<hf>[a-z-]+)`,
    String.raw`(?<![\w/.-])main\.ts(?:\s+(?<cmd>[A-Za-z][\w-]*))?`,
    String.raw`(?<![\w.-])node\/agent\.ts`,
  ].join("|"),
  "g",
);
const FLAG = /(?<![\w-])--([a-z][a-z0-9-]*)/g;
const PERMISSION_SET = /(?<![\w-])-P=([a-z][a-z0-9-]*)/g;
const SEPARATOR = /&&|\|\||;/;
const POSITIONALS: Record<string, NameMention["kind"]> = {
  "hf test": "hf test",
  "hf chaos": "chaos scenario",
  "task chaos": "chaos scenario",
  "main.ts policy": "main.ts policy",
};
const isPlaceholder = (word: string) => /^[A-Z][A-Z_]*$/.test(word);

/** A piece of text that holds command lines, and the line its first character is on. */
interface Segment {
  readonly text: string;
  readonly line: number;
}

const lineAt = (seg: Segment, offset: number) =>
  seg.line + (seg.text.slice(0, offset).match(/\n/g)?.length ?? 0);

/** The command an invocation names (`main.ts agent`), or null for one whose flags are not ours. */
function commandOf(
  m: RegExpMatchArray,
  seg: Segment,
  file: string,
  names: NameMention[],
): string | null {
  const g = m.groups ?? {};
  const line = lineAt(seg, m.index!);
  const name = (kind: NameMention["kind"], n: string) => {
    if (!isPlaceholder(n)) names.push({ file, line, kind, name: n });
    return !isPlaceholder(n);
  };
  if (g.task !== undefined) return name("task", g.task) ? `task ${g.task}` : null;
  if (m[0].startsWith("./hf") && /^\.\/hf\s+bench/.test(m[0])) {
    name("hf", "bench");
    if (g.bench === undefined || isPlaceholder(g.bench)) return "hf bench";
    return name("task", `bench:${g.bench}`) ? `task bench:${g.bench}` : null;
  }
  if (g.hf !== undefined) {
    name("hf", g.hf);
    // `./hf deno ARGS` passes deno's own flags.
    return g.hf === "deno" ? null : `hf ${g.hf}`;
  }
  if (m[0].startsWith("node/lb/main.ts")) return "main.ts agent";
  if (g.cmd === undefined) return "main.ts";
  return name("main.ts", g.cmd) ? `main.ts ${g.cmd}` : null;
}

/** The invocations in one command line, each with its flags; returns the last command named. */
function scanSegment(
  seg: Segment,
  file: string,
  out: DocMentions,
): { command: string; line: number } | null {
  for (const p of seg.text.matchAll(PERMISSION_SET)) {
    out.names.push({ file, line: lineAt(seg, p.index!), kind: "permission set", name: p[1]! });
  }
  const found = [...seg.text.matchAll(INVOCATION)];
  let last: { command: string; line: number } | null = null;
  found.forEach((m, i) => {
    const command = commandOf(m, seg, file, out.names);
    const start = m.index! + m[0].length;
    let region = seg.text.slice(start, found[i + 1]?.index ?? seg.text.length);
    const stop = SEPARATOR.exec(region);
    if (stop) region = region.slice(0, stop.index);
    if (command === null) return;
    // A bare `main.ts` in prose is often a file (controller/k8s/main.ts), not the command.
    if (command !== "main.ts") last = { command, line: lineAt(seg, seg.text.length) };
    // The words of some commands are names: test groups, chaos scenarios, policy's subcommand.
    const kind = POSITIONALS[command];
    if (kind !== undefined) {
      const words = [...region.matchAll(/(?<=^|\s)([a-z0-9][a-z0-9-]*)(?=\s|$)/g)];
      for (const w of kind === "main.ts policy" ? words.slice(0, 1) : words) {
        out.names.push({ file, line: lineAt(seg, start + w.index!), kind, name: w[1]! });
      }
    }
    for (const f of region.matchAll(FLAG)) {
      out.flags.push({ file, line: lineAt(seg, start + f.index!), command, flag: f[1]! });
    }
  });
  return last;
}

/** The command lines of one fenced block's lines (from `first`, 1-based). */
function fenceSegments(lines: readonly string[], first: number): Segment[] {
  const segs: Segment[] = [];
  let text = "", line = 0;
  lines.forEach((raw, i) => {
    const l = raw.replace(/(^|\s)#.*$/, "");
    if (text === "") line = first + i;
    text += (text === "" ? "" : "\n") + l;
    if (!/\\\s*$/.test(l)) {
      segs.push({ text, line });
      text = "";
    }
  });
  if (text !== "") segs.push({ text, line });
  return segs;
}

/** The commands a heading names (`## The dashboard and \`main.ts status\``). */
function headingCommands(heading: string, file: string): string[] {
  const scratch: DocMentions = { flags: [], names: [] };
  const commands = new Set<string>();
  for (const span of heading.matchAll(/`([^`]+)`/g)) {
    const found = scanSegment({ text: span[1]!, line: 0 }, file, scratch);
    if (found) commands.add(found.command);
  }
  return [...commands];
}

/** Reads the command lines of a Markdown file (path `file`, for the mentions). */
export function extractDocs(file: string, text: string): DocMentions {
  const out: DocMentions = { flags: [], names: [] };
  const lines = text.split("\n");
  let section: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const fence = /^\s*(```+|~~~+)\s*([\w-]*)/.exec(lines[i]!);
    if (fence) {
      let end = i + 1;
      while (end < lines.length && !lines[end]!.trim().startsWith(fence[1]!)) end++;
      // Code of other languages (YAML, TypeScript, JSON) is not a command line.
      if (["", "sh", "bash", "shell", "console", "text"].includes(fence[2]!)) {
        for (const seg of fenceSegments(lines.slice(i + 1, end), i + 2)) {
          scanSegment(seg, file, out);
        }
      }
      i = end + 1;
      continue;
    }
    if (lines[i]!.trim() === "") {
      i++;
      continue;
    }
    // A paragraph (or a table, a list): code spans may run over its lines.
    let end = i;
    while (end < lines.length && lines[end]!.trim() !== "" && !/^\s*(```|~~~)/.test(lines[end]!)) {
      end++;
    }
    const para: Segment = { text: lines.slice(i, end).join("\n"), line: i + 1 };
    for (let l = i; l < end; l++) {
      if (/^#+\s/.test(lines[l]!)) section = headingCommands(lines[l]!, file);
    }
    let last: { command: string; line: number } | null = null;
    for (const span of para.text.matchAll(/`([^`]+)`/g)) {
      const inner: Segment = { text: span[1]!, line: lineAt(para, span.index! + 1) };
      const named = scanSegment(inner, file, out);
      if (named) {
        last = named;
        continue;
      }
      const flag = /^--([a-z][a-z0-9-]*)/.exec(span[1]!);
      if (!flag) continue;
      const line = inner.line;
      const row = lines[line - 1]!;
      const firstCell = /^\s*\|\s*`--/.test(row) && row.indexOf(span[0]) === row.search(/`--/);
      if (last !== null && last.line === line) {
        out.flags.push({ file, line, command: last.command, flag: flag[1]! });
      } else if (firstCell && section.length === 1) {
        out.flags.push({ file, line, command: section[0]!, flag: flag[1]! });
      }
    }
    i = end;
  }
  return out;
}
