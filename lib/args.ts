/**
 * Command-line parsing for every Holdfast entry point, on `node:util` `parseArgs`: one place for
 * strict unknown-flag errors, `--help`, and typed readers that name the bad argument.
 *
 * The house rules, kept by {@link readCommandLine} (and {@link readCommandLineOrExit} for
 * top-level scripts): `--help` or `-h` prints the command's usage to stdout (exit 0); a bad
 * command line prints one line to stderr naming the bad argument (exit 2).
 *
 * @example
 * ```ts
 * import { intOption, readCommandLine, stringOption } from "./args.ts";
 * const spec = {
 *   command: "decap",
 *   usage: "usage: decap --iface IF [--port N]",
 *   options: { iface: { type: "string" }, port: { type: "string" } },
 * } as const;
 * const read = readCommandLine(["--iface", "eth0", "--port=6080"], spec, ({ values }) => ({
 *   iface: stringOption(values, "iface", { required: true }),
 *   port: intOption(values, "port", { default: 1, max: 65535 }),
 * }));
 * if (!("options" in read) || read.options.port !== 6080) throw new Error("port");
 * ```
 *
 * @module
 */

import { parseArgs, type ParseArgsConfig } from "node:util";
import { log } from "./log.ts";

/** The options table of one command, as `node:util` `parseArgs` takes it. */
export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

/** A bad command line; the message names the argument and says what was expected. */
export class UsageError extends TypeError {
  /** `message` says what is wrong; `usage` (if any) is the command's usage text. */
  constructor(message: string, readonly usage?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** What {@link parseCommandLine} needs to know about a command. */
export interface CommandSpec<O extends OptionSpec> {
  /** The command's name, for error messages (`agent`, `decap`, …). */
  readonly command: string;
  /** Its options; `--help`/`-h` is added by {@link readCommandLine}. */
  readonly options: O;
  /** Whether positional arguments are allowed (default false). */
  readonly positionals?: boolean;
  /** Usage text: printed by `--help`, attached to errors. */
  readonly usage?: string;
  /**
   * Deprecated spellings (old name → the option it stands for, and how its value reads there):
   * accepted, rewritten to the new name, and logged once per process (lib/flags.ts makes these).
   */
  readonly aliases?: Readonly<Record<string, DeprecatedAlias>>;
  /** Values of absent options, as they would be written on the command line (lib/flags.ts). */
  readonly defaults?: Readonly<Record<string, string>>;
}

/** An old option name kept for one release. */
export interface DeprecatedAlias {
  /** The option's name now. */
  readonly to: string;
  /** The value under the new name (default: the same text); throws {@link UsageError}. */
  readonly map?: (value: string) => string;
}

/** Parsed values (strings, booleans or their arrays) and positionals. */
export interface CommandLine {
  readonly values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  readonly positionals: string[];
}

/**
 * Parses `args` strictly: an unknown flag, a missing value or an unexpected positional throws a
 * {@link UsageError} naming it (`Cannot parse decap arguments: Unknown option "--ifac"`).
 */
export function parseCommandLine<O extends OptionSpec>(
  args: readonly string[],
  spec: CommandSpec<O>,
): CommandLine {
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: spec.options,
      strict: true,
      allowPositionals: spec.positionals ?? false,
    });
    return { values: applyTable(values as CommandLine["values"], spec), positionals };
  } catch (err) {
    if (err instanceof UsageError) {
      throw new UsageError(`Cannot parse ${spec.command} arguments: ${err.message}`, spec.usage, {
        cause: err,
      });
    }
    const reason = err instanceof Error
      ? err.message.replace(/(\.\s|\n).*$/s, "").replace(/'([^']*)'/g, '"$1"')
      : String(err);
    throw new UsageError(
      `Cannot parse ${spec.command} arguments: ${reason}`,
      spec.usage,
      { cause: err },
    );
  }
}

const warned = new Set<string>();

/**
 * Rewrites deprecated spellings to their new names (logging each once per process as a JSON
 * warning) and fills in the defaults of absent options, by `spec.aliases` and `spec.defaults`.
 * Idempotent: readers that take raw values (tests) may call it again.
 */
export function applyTable(
  values: CommandLine["values"],
  spec: Pick<CommandSpec<OptionSpec>, "command" | "aliases" | "defaults">,
): CommandLine["values"] {
  const out = { ...values };
  for (const [old, alias] of Object.entries(spec.aliases ?? {})) {
    const v = out[old];
    if (v === undefined) continue;
    if (out[alias.to] !== undefined) {
      throw new UsageError(`Cannot use --${old} with --${alias.to}: it is its old name`);
    }
    const map = (x: string | boolean) => typeof x === "string" && alias.map ? alias.map(x) : x;
    out[alias.to] = Array.isArray(v) ? v.map(map) : map(v);
    delete out[old];
    if (!warned.has(`${spec.command} ${old}`)) {
      warned.add(`${spec.command} ${old}`);
      log.warn("deprecated option: use the new name, the old one goes in the next release", {
        command: spec.command,
        option: `--${old}`,
        use: `--${alias.to}`,
      });
    }
  }
  for (const [name, v] of Object.entries(spec.defaults ?? {})) out[name] ??= v;
  return out;
}

const HELP = { help: { type: "boolean", short: "h" } } as const;

/**
 * Parses `args` and reads them into options with `read` (whose typed readers throw
 * {@link UsageError}), by the house rules: `--help`/`-h` prints `spec.usage` to stdout and
 * returns `{ exit: 0 }`; a usage error prints one line to stderr naming the bad argument and
 * returns `{ exit: 2 }`. Other errors from `read` propagate.
 */
export function readCommandLine<O extends OptionSpec, T>(
  args: readonly string[],
  spec: CommandSpec<O>,
  read: (line: CommandLine) => T,
): { options: T } | { exit: 0 | 2 } {
  try {
    const line = parseCommandLine(args, { ...spec, options: { ...spec.options, ...HELP } });
    if (line.values.help === true) {
      console.log(spec.usage ?? `usage: ${spec.command} [OPTIONS]`);
      return { exit: 0 };
    }
    return { options: read(line) };
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    const message = err.message.startsWith("Cannot parse ")
      ? err.message
      : `Cannot parse ${spec.command} arguments: ${err.message}`;
    console.error(`${message} (see "${spec.command} --help")`);
    return { exit: 2 };
  }
}

/**
 * {@link readCommandLine} for a top-level script (a benchmark, a developer tool): returns the
 * options, or exits the process with 0 after `--help` and 2 after a usage error.
 */
export function readCommandLineOrExit<O extends OptionSpec, T>(
  args: readonly string[],
  spec: CommandSpec<O>,
  read: (line: CommandLine) => T,
): T {
  const r = readCommandLine(args, spec, read);
  if ("exit" in r) Deno.exit(r.exit);
  return r.options;
}

/** A string option, or `def` when absent; throws when required and absent. */
export function stringOption(
  values: CommandLine["values"],
  name: string,
  options: { default: string; required?: boolean },
): string;
export function stringOption(
  values: CommandLine["values"],
  name: string,
  options: { default?: string; required: true },
): string;
export function stringOption(
  values: CommandLine["values"],
  name: string,
  options?: { default?: string; required?: boolean },
): string | undefined;
export function stringOption(
  values: CommandLine["values"],
  name: string,
  options: { default?: string; required?: boolean } = {},
): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return stringOption({ [name]: v.at(-1) }, name, options);
  if (typeof v === "string" && !(options.required && v === "")) return v;
  if (options.required && options.default === undefined) {
    throw new UsageError(`Missing required option "--${name}"`);
  }
  return options.default;
}

/** An integer option within `[min, max]` (defaults 0 and 2^53−1), or `default` when absent. */
export function intOption(
  values: CommandLine["values"],
  name: string,
  options: { default: number; min?: number; max?: number },
): number;
export function intOption(
  values: CommandLine["values"],
  name: string,
  options?: { default?: number; min?: number; max?: number },
): number | undefined;
export function intOption(
  values: CommandLine["values"],
  name: string,
  options: { default?: number; min?: number; max?: number } = {},
): number | undefined {
  return numeric(values, name, options, true);
}

/** A decimal number option within `[min, max]` (defaults 0 and 2^53−1), or `default`. */
export function numberOption(
  values: CommandLine["values"],
  name: string,
  options: { default: number; min?: number; max?: number },
): number {
  return numeric(values, name, options, false)!;
}

function numeric(
  values: CommandLine["values"],
  name: string,
  options: { default?: number; min?: number; max?: number },
  integer: boolean,
): number | undefined {
  const text = stringOption(values, name);
  if (text === undefined) return options.default;
  const min = options.min ?? 0, max = options.max ?? Number.MAX_SAFE_INTEGER;
  const n = (integer ? /^-?\d+$/ : /^-?(\d+\.?\d*|\.\d+)$/).test(text.trim()) ? Number(text) : NaN;
  if (!Number.isFinite(n) || (integer && !Number.isSafeInteger(n)) || n < min || n > max) {
    const kind = integer ? "an integer" : "a number";
    const range = options.max === undefined ? `>= ${min}` : `${min}..${max}`;
    throw new UsageError(
      `Cannot use --${name} "${text}": expected ${kind} ${range}`,
    );
  }
  return n;
}

/** One of `choices` (the first is the default when absent); throws naming the option. */
export function choiceOption<C extends string>(
  values: CommandLine["values"],
  name: string,
  choices: readonly [C, ...C[]],
): C {
  const v = stringOption(values, name, { default: choices[0] });
  if (!(choices as readonly string[]).includes(v)) {
    throw new UsageError(`Cannot use --${name} "${v}": expected ${choices.join(" or ")}`);
  }
  return v as C;
}

/** A comma-separated list option (repeatable too: `--vip a,b --vip c` → `[a, b, c]`). */
export function listOption(values: CommandLine["values"], name: string): string[] {
  const v = values[name];
  const all = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return all.flatMap((s) => String(s).split(",")).map((s) => s.trim()).filter((s) => s !== "");
}
