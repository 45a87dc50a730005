/**
 * Command-line parsing for every Holdfast entry point, on `node:util` `parseArgs`: one place for
 * strict unknown-flag errors, `--help`, and typed readers that name the bad argument.
 *
 * @example
 * ```ts
 * import { intOption, parseCommandLine } from "./args.ts";
 * const { values } = parseCommandLine(["--iface", "eth0", "--port=6080"], {
 *   command: "decap",
 *   options: { iface: { type: "string" }, port: { type: "string" } },
 * });
 * if (values.iface !== "eth0") throw new Error("iface");
 * if (intOption(values, "port", { default: 1, max: 65535 }) !== 6080) throw new Error("port");
 * ```
 *
 * @module
 */

import { parseArgs, type ParseArgsConfig } from "node:util";

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
  readonly options: O;
  /** Whether positional arguments are allowed (default false). */
  readonly positionals?: boolean;
  /** Usage text attached to errors. */
  readonly usage?: string;
}

/** Parsed values (strings, booleans or their arrays) and positionals. */
export interface CommandLine {
  readonly values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  readonly positionals: string[];
}

/**
 * Parses `args` strictly: an unknown flag, a missing value or an unexpected positional throws a
 * {@link UsageError} naming it (`Cannot parse decap arguments: unknown option "--ifac"`).
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
    return { values: values as CommandLine["values"], positionals };
  } catch (err) {
    const reason = err instanceof Error
      ? err.message.replace(/\. To specify.*$/s, "")
      : String(err);
    throw new UsageError(
      `Cannot parse ${spec.command} arguments: ${reason}`,
      spec.usage,
      { cause: err },
    );
  }
}

/** A string option, or `def` when absent; throws when required and absent. */
export function stringOption(
  values: CommandLine["values"],
  name: string,
  options: { default?: string; required?: boolean } = {},
): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return stringOption({ [name]: v.at(-1) }, name, options);
  if (typeof v === "string") return v;
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
  const text = stringOption(values, name);
  if (text === undefined) return options.default;
  const min = options.min ?? 0, max = options.max ?? Number.MAX_SAFE_INTEGER;
  const n = /^-?\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`Cannot use --${name} "${text}": expected an integer ${min}..${max}`);
  }
  return n;
}

/** A comma-separated list option (repeatable too: `--vip a,b --vip c` → `[a, b, c]`). */
export function listOption(values: CommandLine["values"], name: string): string[] {
  const v = values[name];
  const all = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return all.flatMap((s) => String(s).split(",")).map((s) => s.trim()).filter((s) => s !== "");
}
