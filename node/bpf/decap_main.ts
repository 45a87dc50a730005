/**
 * `main.ts decap --iface IF [--netns NS] [--vip IP[,IP…]] [--encap-port 6080] [--mss 1432]
 * [--object-dir DIR]`: sets up the backend side in the current (or given) network namespace —
 * decap on tc ingress and MSS clamp on tc egress of IF — and exits. The programs keep running
 * (tc holds them and their maps). LB IPs default to the IPv4 addresses on `lo` other than
 * 127.0.0.0/8, read with `Deno.networkInterfaces()` (the `sys` permission; no `ip` process, so
 * the `agent` permission set is enough). Re-run to change them; it replaces the programs
 * atomically.
 *
 * @module
 */

import { ATTACH_OPTIONS, attachAndReport } from "./_attach_main.ts";
import { DecapDatapath } from "./decap_datapath.ts";
import { inNetns } from "./netns.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { intOption, listOption, readCommandLine, stringOption } from "../../lib/args.ts";

const USAGE = `usage: main.ts decap --iface IF [--netns NS] [--vip IP[,IP...]] [--encap-port PORT]
                     [--mss N (0 = off)] [--object-dir DIR]
  Attaches decapsulation (tc ingress) and MSS clamping (tc egress) to IF and exits.
  LB IPs: --vip, else the IPv4 addresses on lo outside 127.0.0.0/8.`;

const SPEC = {
  command: "decap",
  usage: USAGE,
  options: {
    ...ATTACH_OPTIONS,
    vip: { type: "string", multiple: true },
    "encap-port": { type: "string" },
    mss: { type: "string" },
  },
} as const;

/** The IPv4 addresses on `lo` outside 127.0.0.0/8, in namespace `netns` (or the current one). */
export function loopbackVips(netns: string | undefined): string[] {
  return inNetns(netns, () => Deno.networkInterfaces())
    .filter((i) => i.name === "lo" && i.family === "IPv4" && !i.address.startsWith("127."))
    .map((i) => i.address);
}

/** Entry point of the `decap` subcommand; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, SPEC, ({ values }) => {
    const vips = listOption(values, "vip");
    for (const vip of vips) parseIpv4(vip);
    return {
      iface: stringOption(values, "iface", { required: true }),
      netns: stringOption(values, "netns"),
      vips,
      encapPort: intOption(values, "encap-port", { default: 6080, max: 65535 }),
      mssMax: intOption(values, "mss", { default: 1432, max: 65535 }),
      objectDir: stringOption(values, "object-dir"),
    };
  });
  if ("exit" in read) return read.exit;
  const { iface, netns, encapPort, mssMax, objectDir } = read.options;
  return await attachAndReport("decap", { iface, netns, encapPort, mssMax }, async () => {
    const vips = read.options.vips.length > 0 ? read.options.vips : loopbackVips(netns);
    using dp = await DecapDatapath.open({ objectDir });
    dp.configure({ encapPort, mssMax });
    for (const vip of vips) dp.addLocalVip(vip);
    dp.attach(iface, { netns });
    return { vips };
  });
}

if (import.meta.main) Deno.exit(await main(Deno.args));
