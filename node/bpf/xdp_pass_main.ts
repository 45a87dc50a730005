/**
 * `main.ts xdp-pass --iface IF [--netns NS] [--mode native|generic] [--object-dir DIR]`: attaches
 * the trivial native XDP program to IF and exits. Needed on the router-side veth peers of LB
 * nodes: XDP_TX over a veth is delivered only when the peer runs a native XDP program (FINDINGS).
 *
 * @module
 */

import { ATTACH_FLAGS, attachAndReport } from "./_attach_main.ts";
import { defineCommand } from "../../lib/flags.ts";
import { attachXdp } from "./attach.ts";
import { DEFAULT_OBJECT_DIR } from "./datapath.ts";
import { BpfObject } from "./object.ts";
import { choiceOption, readCommandLine, stringOption } from "../../lib/args.ts";

/** The `xdp-pass` command for lib/args.ts: its flag table, options and usage. */
export const XDP_PASS_COMMAND = defineCommand({
  command: "xdp-pass",
  synopsis: "main.ts xdp-pass --iface IF [OPTIONS]",
  about:
    "Attaches a pass-through XDP program to IF (the veth peer of an interface that does XDP_TX).",
  flags: {
    ...ATTACH_FLAGS,
    "object-dir": { ...ATTACH_FLAGS["object-dir"], default: DEFAULT_OBJECT_DIR },
    mode: { arg: "native|generic", help: "the XDP attach mode", default: "native" },
  },
});

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
