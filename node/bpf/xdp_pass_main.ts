/**
 * `main.ts xdp-pass --iface IF [--netns NS] [--mode native|generic] [--object-dir DIR]`: attaches
 * the trivial native XDP program to IF and exits. Needed on the router-side veth peers of LB
 * nodes: XDP_TX over a veth is delivered only when the peer runs a native XDP program (FINDINGS).
 *
 * @module
 */

import { ATTACH_OPTIONS, attachAndReport } from "./_attach_main.ts";
import { attachXdp } from "./attach.ts";
import { DEFAULT_OBJECT_DIR } from "./datapath.ts";
import { BpfObject } from "./object.ts";
import { choiceOption, readCommandLine, stringOption } from "../../lib/args.ts";

const USAGE =
  `usage: main.ts xdp-pass --iface IF [--netns NS] [--mode native|generic] [--object-dir DIR]
  Attaches a pass-through XDP program to IF (the veth peer of an interface that does XDP_TX).`;

/** The `xdp-pass` command for lib/args.ts: its name, usage and options. */
export const XDP_PASS_COMMAND = {
  command: "xdp-pass",
  usage: USAGE,
  options: { ...ATTACH_OPTIONS, mode: { type: "string" } },
} as const;

/** Entry point of the `xdp-pass` subcommand; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, XDP_PASS_COMMAND, ({ values }) => ({
    iface: stringOption(values, "iface", { required: true }),
    netns: stringOption(values, "netns"),
    mode: choiceOption(values, "mode", ["native", "generic"]),
    objectDir: stringOption(values, "object-dir", { default: DEFAULT_OBJECT_DIR }),
  }));
  if ("exit" in read) return read.exit;
  const { iface, netns, mode, objectDir } = read.options;
  return await attachAndReport("xdp-pass", { iface, netns, mode }, () => {
    using obj = BpfObject.open(`${objectDir}/xdp_pass.o`);
    attachXdp(obj.program("hf_xdp_pass"), iface, { netns, mode });
  });
}

if (import.meta.main) Deno.exit(await main(Deno.args));
