/**
 * `main.ts xdp-pass --iface IF [--netns NS] [--mode native|generic] [--object-dir DIR]`: attaches
 * the trivial native XDP program to IF and exits. Needed on the router-side veth peers of LB
 * nodes: XDP_TX over a veth is delivered only when the peer runs a native XDP program (FINDINGS).
 *
 * @module
 */

import { attachXdp } from "./attach.ts";
import { parseFlags } from "./cli_args.ts";
import { DEFAULT_OBJECT_DIR } from "./datapath.ts";
import { BpfObject } from "./object.ts";
import { log } from "../../lib/log.ts";

const USAGE = "usage: xdp-pass --iface IF [--netns NS] [--mode native|generic] [--object-dir DIR]";

/** Entry point of the `xdp-pass` subcommand; returns the exit code. */
export function main(args: string[]): Promise<number> {
  return Promise.resolve(run(args));
}

function run(args: string[]): number {
  let flags: Map<string, string>;
  try {
    flags = parseFlags(args, ["iface", "netns", "mode", "object-dir"]);
    if (!flags.get("iface")) throw new TypeError("Cannot attach xdp-pass: --iface is required");
    const mode = flags.get("mode") ?? "native";
    if (mode !== "native" && mode !== "generic") {
      throw new TypeError(`Cannot use --mode "${mode}": native or generic`);
    }
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const iface = flags.get("iface")!;
  const netns = flags.get("netns");
  const mode = (flags.get("mode") ?? "native") as "native" | "generic";
  try {
    using obj = BpfObject.open(`${flags.get("object-dir") ?? DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    attachXdp(obj.program("hf_xdp_pass"), iface, { netns, mode });
    log.info("xdp-pass attached", { component: "bpf", iface, netns, mode });
    return 0;
  } catch (e) {
    log.error("xdp-pass attach failed", { component: "bpf", iface, error: (e as Error).message });
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
