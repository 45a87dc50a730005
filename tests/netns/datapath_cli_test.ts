/**
 * The datapath's subcommands (`main.ts decap`, `main.ts xdp-pass`) run inside a namespace with
 * `ip netns exec`, attach, and exit with the programs still attached.
 */

import { strictEqual } from "node:assert/strict";
import { createTopology, rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

rootTest("decap and xdp-pass subcommands attach and leave the programs running", async () => {
  await using topo = await createTopology({
    hosts: [{ name: "r" }, { name: "be", loopback: ["10.0.100.1/32", "10.0.100.2/32"] }],
    links: [{
      a: { host: "r", ifname: "l1", address: "10.9.0.1/24" },
      b: { host: "be", ifname: "eth0", address: "10.9.0.2/24" },
    }],
  });
  const deno = (host: string, file: string, args: string[]) =>
    topo.exec(host, [
      Deno.execPath(),
      "run",
      "-P=netns",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}${file}`,
      ...args,
    ]);
  const decap = await deno("be", "node/bpf/decap_main.ts", ["--iface", "eth0", "--mss", "1400"]);
  const line = JSON.parse(decap.stdout.trim()) as { vips: string[]; mssMax: number };
  strictEqual(line.vips.join(","), "10.0.100.1,10.0.100.2", "LB IPs taken from lo");
  strictEqual(line.mssMax, 1400);
  const ingress = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "ingress"]);
  strictEqual(ingress.stdout.includes("hf_decap"), true, ingress.stdout);
  const egress = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "egress"]);
  strictEqual(egress.stdout.includes("hf_mss_clamp"), true, egress.stdout);
  // running it again replaces, not duplicates
  await deno("be", "node/bpf/decap_main.ts", ["--iface", "eth0"]);
  const again = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "ingress"]);
  strictEqual((again.stdout.match(/hf_decap/g) ?? []).length, 2, again.stdout); // name + tag line

  await deno("r", "node/bpf/xdp_pass_main.ts", ["--iface", "l1"]);
  const link = await topo.exec("r", ["ip", "link", "show", "l1"]);
  strictEqual(
    link.stdout.includes("prog/xdp") && link.stdout.includes("hf_xdp_pass"),
    true,
    link.stdout,
  );

  const bad = await topo.exec("r", [
    Deno.execPath(),
    "run",
    "-P=netns",
    "--quiet",
    "--config",
    `${ROOT}deno.json`,
    `${ROOT}node/bpf/xdp_pass_main.ts`,
  ], { check: false });
  strictEqual(bad.code, 2, "missing --iface is a usage error");
});
