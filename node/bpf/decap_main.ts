/**
 * `main.ts decap --iface IF [--netns NS] [--vip IP[,IP…]] [--encap-port 6080] [--mss 1432]
 * [--object-dir DIR]`: sets up the backend side in the current (or given) network namespace —
 * decap on tc ingress and MSS clamp on tc egress of IF — and exits. The programs keep running
 * (tc holds them and their maps). LB IPs default to the addresses on `lo`: IPv4 other than
 * 127.0.0.0/8 (`hf_local_vips`) and global-scope IPv6 (not `::1`, not link-local:
 * `hf_local_vips6`, docs/contracts.md "IPv6"), read with `Deno.networkInterfaces()` (the `sys`
 * permission; no `ip` process, so the `agent` permission set is enough). `--vip` takes either
 * family. Re-run to change them; it replaces the programs atomically.
 *
 * @module
 */

import { ATTACH_FLAGS, attachAndReport } from "./_attach_main.ts";
import { defineCommand } from "../../lib/flags.ts";
import { DecapDatapath } from "./decap_datapath.ts";
import { inNetns } from "./netns.ts";
import { addLocalVip6 } from "./ipv6_maps.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { isGlobalUnicastIpv6, isIpv6 } from "../../lib/ipv6.ts";
import {
  intOption,
  listOption,
  readCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";

/** The `decap` command for lib/args.ts: its flag table, options and usage. */
export const DECAP_COMMAND = defineCommand({
  command: "decap",
  synopsis: "main.ts decap --iface IF [OPTIONS]",
  about: "Attaches decapsulation (tc ingress) and MSS clamping (tc egress) to IF and exits.",
  flags: {
    ...ATTACH_FLAGS,
    vip: {
      arg: "IP[,IP...]",
      multiple: true,
      help: "LB IPs (IPv4 or IPv6); re-run to change them",
      defaultText: "the addresses on lo: IPv4 outside 127.0.0.0/8 and\n" +
        "global-scope IPv6 (not ::1, not link-local)",
    },
    "encap-port": { arg: "PORT", help: "encapsulation UDP port", default: "6080" },
    mss: { arg: "N", help: "clamp the TCP MSS (0 = off)", default: "1432" },
  },
});
const USAGE = DECAP_COMMAND.usage;

/**
 * The LB IPs on `lo` in namespace `netns` (or the current one): IPv4 outside 127.0.0.0/8 and
 * global-scope IPv6 ({@link isGlobalUnicastIpv6}), each family in the order listed.
 */
export function loopbackVips(netns: string | undefined): string[] {
  const lo = inNetns(netns, () => Deno.networkInterfaces()).filter((i) => i.name === "lo");
  return [
    ...lo.filter((i) => i.family === "IPv4" && !i.address.startsWith("127.")),
    ...lo.filter((i) => i.family === "IPv6" && isGlobalUnicastIpv6(i.address)),
  ].map((i) => i.address);
}

/** `--vip` values: IPv4, or IPv6 of global scope; a usage error names the bad one. */
function checkVip(text: string): string {
  if (isIpv4(text)) return text;
  if (isIpv6(text) && isGlobalUnicastIpv6(text)) return text;
  throw new UsageError(
    `Cannot use --vip "${text}": not an IPv4 address nor a global unicast IPv6 address`,
    USAGE,
  );
}

/** Entry point of the `decap` subcommand; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, DECAP_COMMAND, ({ values }) => {
    const vips = listOption(values, "vip").map(checkVip);
    return {
      iface: stringOption(values, "iface", { required: true }),
      netns: stringOption(values, "netns"),
      vips,
      encapPort: intOption(values, "encap-port", { max: 65535 })!,
      mssMax: intOption(values, "mss", { max: 65535 })!,
      objectDir: stringOption(values, "object-dir"),
    };
  });
  if ("exit" in read) return read.exit;
  const { iface, netns, encapPort, mssMax, objectDir } = read.options;
  return await attachAndReport("decap", { iface, netns, encapPort, mssMax }, async () => {
    const all = read.options.vips.length > 0 ? read.options.vips : loopbackVips(netns);
    const vips = all.filter(isIpv4), vips6 = all.filter((a) => !isIpv4(a));
    using dp = await DecapDatapath.open({ objectDir });
    dp.configure({ encapPort, mssMax });
    for (const vip of vips) dp.addLocalVip(vip);
    for (const vip of vips6) addLocalVip6(dp.object, vip);
    dp.attach(iface, { netns });
    return { vips, vips6 };
  });
}

if (import.meta.main) Deno.exit(await main(Deno.args));
