/**
 * Tiny `--flag value` parser shared by the datapath's subcommands.
 *
 * @module
 */

/** Parses `--name value` pairs (and bare `--flag` as "true"); throws on unknown names. */
export function parseFlags(args: readonly string[], known: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith("--")) throw new TypeError(`Cannot parse argument "${a}": expected --flag`);
    const [name, inline] = a.slice(2).split("=", 2) as [string, string | undefined];
    if (!known.includes(name)) {
      throw new TypeError(
        `Cannot parse argument "--${name}": known flags are ${
          known.map((k) => `--${k}`).join(", ")
        }`,
      );
    }
    const next = args[i + 1];
    if (inline !== undefined) out.set(name, inline);
    else if (next !== undefined && !next.startsWith("--")) {
      out.set(name, next);
      i++;
    } else out.set(name, "true");
  }
  return out;
}

/** A flag as a port/number in range, or the default. */
export function intFlag(
  flags: Map<string, string>,
  name: string,
  def: number,
  max = 65535,
): number {
  const v = flags.get(name);
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > max) {
    throw new RangeError(`Cannot use --${name} "${v}": expected an integer 0..${max}`);
  }
  return n;
}
