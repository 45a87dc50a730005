/**
 * `main.ts decap --iface IF [--netns NS] [--vip IP[,IP…]] [--encap-port 6080] [--mss 1432]
 * [--object-dir DIR]`: sets up the backend side in the current (or given) network namespace —
 * decap on tc ingress and MSS clamp on tc egress of IF — and exits. The programs keep running
 * (tc holds them and their maps). LB IPs default to the IPv4 addresses on `lo` other than
 * 127.0.0.0/8. Re-run to change them; it replaces the programs atomically.
 *
 * @module
 */

import { intFlag, parseFlags } from "./cli_args.ts";
import { DecapDatapath } from "./datapath.ts";
import { log } from "../../lib/log.ts";

const USAGE =
  "usage: decap --iface IF [--netns NS] [--vip IP[,IP...]] [--encap-port PORT] [--mss N (0 = off)] [--object-dir DIR]";

async function loopbackVips(netns: string | undefined): Promise<string[]> {
  const args = [...(netns ? ["-n", netns] : []), "-j", "-4", "addr", "show", "dev", "lo"];
  const r = await new Deno.Command("ip", { args, stdout: "piped", stderr: "piped" }).output();
  if (!r.success) {
    throw new Error(`Cannot list addresses on lo: ${new TextDecoder().decode(r.stderr).trim()}`);
  }
  const links = JSON.parse(new TextDecoder().decode(r.stdout)) as Array<
    { addr_info?: Array<{ local: string }> }
  >;
  return links.flatMap((l) => (l.addr_info ?? []).map((a) => a.local)).filter((a) =>
    !a.startsWith("127.")
  );
}

/** Entry point of the `decap` subcommand; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let flags: Map<string, string>;
  try {
    flags = parseFlags(args, ["iface", "netns", "vip", "encap-port", "mss", "object-dir"]);
    if (!flags.get("iface")) throw new TypeError("Cannot set up decap: --iface is required");
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const iface = flags.get("iface")!;
  const netns = flags.get("netns");
  try {
    const vips = flags.get("vip")?.split(",").filter(Boolean) ?? await loopbackVips(netns);
    const encapPort = intFlag(flags, "encap-port", 6080);
    const mssMax = intFlag(flags, "mss", 1432);
    using dp = await DecapDatapath.open({ objectDir: flags.get("object-dir") });
    dp.configure({ encapPort, mssMax });
    for (const vip of vips) dp.addLocalVip(vip);
    dp.attach(iface, { netns });
    log.info("decap attached", { component: "bpf", iface, netns, vips, encapPort, mssMax });
    return 0;
  } catch (e) {
    log.error("decap setup failed", { component: "bpf", iface, error: (e as Error).message });
    return 1;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
