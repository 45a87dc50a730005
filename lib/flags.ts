/**
 * One flag table per command: each option is declared once — name, kind, default, group, help,
 * old spellings — and {@link defineCommand} makes from it what lib/args.ts parses with (the
 * `node:util` options, the defaults of absent options, the deprecated aliases) and the `--help`
 * text. The groups every daemon shares (node identity, ops endpoint, Redis, BGP) are in
 * lib/flag_groups.ts, so they have the same names everywhere.
 *
 * @example
 * ```ts
 * import { defineCommand } from "./flags.ts";
 * import { parseCommandLine } from "./args.ts";
 * const spec = defineCommand({
 *   command: "decap",
 *   synopsis: "main.ts decap --iface IF [OPTIONS]",
 *   flags: {
 *     iface: { arg: "IF", help: "the interface", required: true },
 *     "encap-port": { arg: "PORT", help: "encapsulation UDP port", default: "6080" },
 *     mss: { arg: "N", help: "clamp", aliases: ["mss-max"] },
 *   },
 * });
 * const { values } = parseCommandLine(["--iface", "eth0", "--mss-max", "1400"], spec);
 * if (values["encap-port"] !== "6080" || values.mss !== "1400") throw new Error("table");
 * if (!spec.usage.includes("--mss-max")) throw new Error("usage names the alias");
 * ```
 *
 * @module
 */

import { type DeprecatedAlias, type OptionSpec, UsageError } from "./args.ts";

/** An old spelling of an option, kept for one release (parsing logs it once). */
export interface AliasDef {
  readonly name: string;
  /** Its value placeholder when it differs from the option's (`--ops-port N` for `--listen`). */
  readonly arg?: string;
  /** Its value under the new name (default: the same text); throws {@link UsageError}. */
  readonly map?: (value: string) => string;
}

/** One option of a command. */
export interface FlagDef {
  /** `string` (takes a value; the default) or `boolean` (a switch). */
  readonly type?: "string" | "boolean";
  /** Repeatable (`--vip a --vip b`). */
  readonly multiple?: boolean;
  /** The value's placeholder in the usage (`FILE`, `N`, `HOST:PORT`). */
  readonly arg?: string;
  /** What it does; may span lines. The default is appended by the usage. */
  readonly help: string;
  /** The value when absent, as written on the command line: readers see it, usage shows it. */
  readonly default?: string;
  /** A default the reader works out (shown in the usage only: `/run/holdfast/bird-NODE`). */
  readonly defaultText?: string;
  /** Shown as required in the usage (the reader enforces it, with its conditions). */
  readonly required?: boolean;
  /** The usage section it is listed under (shared groups: lib/flag_groups.ts). */
  readonly group?: string;
  /** Old spellings, accepted for one release; each use logs a JSON warning once. */
  readonly aliases?: readonly (string | AliasDef)[];
}

/** A command's options by name, in usage order. */
export type FlagTable = Readonly<Record<string, FlagDef>>;

/** What lib/args.ts parses with, made from a {@link FlagTable}. */
export interface TableCommand {
  readonly command: string;
  readonly usage: string;
  readonly options: OptionSpec;
  readonly aliases: Readonly<Record<string, DeprecatedAlias>>;
  readonly defaults: Readonly<Record<string, string>>;
  readonly positionals?: boolean;
  /** The table it was made from. */
  readonly flags: FlagTable;
}

/** What {@link defineCommand} takes. */
export interface CommandDef {
  /** The name in error messages (`agent`). */
  readonly command: string;
  /** After `usage: `; more forms on more lines. */
  readonly synopsis: string;
  /** A paragraph under the synopsis. */
  readonly about?: string;
  readonly flags: FlagTable;
  readonly positionals?: boolean;
  /** Lines after the options (notes, examples). */
  readonly notes?: string;
}

const COLUMN = 26;

/** Makes a command's options, defaults, aliases and usage from its flag table. */
export function defineCommand(def: CommandDef): TableCommand {
  const options: Record<string, OptionSpec[string]> = {};
  const aliases: Record<string, DeprecatedAlias> = {};
  const defaults: Record<string, string> = {};
  for (const [name, flag] of Object.entries(def.flags)) {
    const option = { type: flag.type ?? "string", ...(flag.multiple ? { multiple: true } : {}) };
    options[name] = option as OptionSpec[string];
    if (flag.default !== undefined) defaults[name] = flag.default;
    for (const a of flag.aliases ?? []) {
      const alias = typeof a === "string" ? { name: a } : a;
      if (Object.hasOwn(def.flags, alias.name)) {
        throw new TypeError(`${def.command}: alias --${alias.name} is an option too`);
      }
      options[alias.name] = option as OptionSpec[string];
      aliases[alias.name] = { to: name, ...(alias.map ? { map: alias.map } : {}) };
    }
  }
  return {
    command: def.command,
    usage: usageOf(def),
    options,
    aliases,
    defaults,
    flags: def.flags,
    ...(def.positionals ? { positionals: true } : {}),
  };
}

/** The `--help` text of a command: synopsis, about, options by group, deprecated names. */
export function usageOf(def: CommandDef): string {
  const lines = def.synopsis.split("\n").map((l, i) => (i === 0 ? "usage: " : "       ") + l);
  if (def.about) lines.push("", ...def.about.split("\n"));
  const groups = new Map<string, string[]>();
  const old: string[] = [];
  for (const [name, flag] of Object.entries(def.flags)) {
    const head = `  --${name}${flag.arg ? " " + flag.arg : ""}`;
    const extra = [
      flag.required ? "required" : "",
      flag.default !== undefined
        ? `default ${flag.default === "" ? '""' : flag.default}`
        : flag.defaultText
        ? `default ${flag.defaultText}`
        : "",
    ].filter((s) => s !== "").join("; ");
    const help = flag.help.split("\n");
    if (extra && help.at(-1)!.length + extra.length > 64) help.push(`(${extra})`);
    else if (extra) help[help.length - 1] += ` (${extra})`;
    const first = head.length < COLUMN - 1
      ? [head.padEnd(COLUMN) + help[0]]
      : [head, pad(help[0]!)];
    const group = groups.get(flag.group ?? "") ?? [];
    group.push(...first, ...help.slice(1).map(pad));
    groups.set(flag.group ?? "", group);
    for (const a of flag.aliases ?? []) {
      const alias = typeof a === "string" ? { name: a } : a;
      old.push(`--${alias.name}${alias.arg ? " " + alias.arg : ""} (now --${name})`);
    }
  }
  // Ungrouped options first (the command's own), then the shared groups.
  for (const [title, body] of [...groups].sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : 0))) {
    lines.push("", ...(title ? [`${title}:`] : []), ...body);
  }
  lines.push("", `  -h, --help`.padEnd(COLUMN) + "this text");
  if (old.length > 0) {
    lines.push("", "Old names, accepted for one release (each logs a warning once):");
    lines.push(...wrap(old.join(", "), 96).map((l) => "  " + l));
  }
  if (def.notes) lines.push("", ...def.notes.split("\n"));
  return lines.join("\n");
}

const pad = (line: string) => " ".repeat(COLUMN) + line;

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(line);
  return out;
}

/**
 * `HOST:PORT` (IPv6 hosts as the text before the last colon) → `{ hostname, port }`; the one
 * reader of every `--listen`, `--peer` and the like. Throws {@link UsageError} naming `flag`.
 */
export function parseHostPort(text: string, flag: string): { hostname: string; port: number } {
  const m = /^(.+):(\d{1,5})$/.exec(text);
  if (!m || Number(m[2]) > 65535) {
    throw new UsageError(`Cannot use --${flag} "${text}": expected HOST:PORT`);
  }
  return { hostname: m[1]!, port: Number(m[2]) };
}
