/**
 * What the attach-and-exit subcommands (`decap`, `xdp-pass`) share: their interface, namespace
 * and object-directory options, and how they report the outcome.
 *
 * @module
 */

import { log } from "../../lib/log.ts";
import type { FlagTable } from "../../lib/flags.ts";

/** `--iface IF [--netns NS] [--object-dir DIR]`: the flag-table rows (lib/flags.ts) they share. */
export const ATTACH_FLAGS = {
  iface: { arg: "IF", help: "the interface", required: true },
  netns: { arg: "NS", help: "the network namespace of IF", defaultText: "the current one" },
  "object-dir": { arg: "DIR", help: "where the BPF objects are" },
} as const satisfies FlagTable;

/**
 * Runs `attach` and logs `"<what> attached"` with `fields` and whatever `attach` returns, or
 * `"<what> failed"` with the error. Returns the exit code: 0, or 1 when `attach` threw.
 */
export async function attachAndReport(
  what: string,
  fields: { readonly iface: string } & Record<string, unknown>,
  attach: () => Promise<Record<string, unknown> | void> | Record<string, unknown> | void,
): Promise<number> {
  try {
    const more = await attach();
    log.info(`${what} attached`, { component: "bpf", ...fields, ...more });
    return 0;
  } catch (e) {
    const error = (e as Error).message;
    log.error(`${what} failed`, { component: "bpf", iface: fields.iface, error });
    return 1;
  }
}
