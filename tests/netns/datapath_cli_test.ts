/**
 * The datapath's subcommands (`main.ts decap`, `main.ts xdp-pass`) run inside a namespace with
 * `ip netns exec` under the `agent` permission set (the one README gives operators), attach, and
 * exit with the programs still attached.
 */

import { strictEqual } from "node:assert/strict";
import { createTopology } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

rootTest("decap and xdp-pass subcommands attach and leave the programs running", async () => {
  await using topo = await createTopology({
    hosts: [{ name: "r" }, { name: "be", loopback: ["10.0.100.1/32", "10.0.100.2/32"] }],
    links: [{
      a: { host: "r", ifname: "l1", address: "10.9.0.1/24" },
      b: { host: "be", ifname: "eth0", address: "10.9.0.2/24" },
    }],
  });
  const hf = (host: string, args: string[]) =>
    topo.exec(host, [
      Deno.execPath(),
      "run",
      "-P=agent",
      "--no-prompt",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}main.ts`,
      ...args,
    ], { check: false });
  // LB IPs from lo without spawning `ip`: the agent set has no run permission at all.
  const decap = await hf("be", ["decap", "--iface", "eth0", "--mss", "1400"]);
  strictEqual(decap.code, 0, decap.stderr);
  const line = JSON.parse(decap.stdout.trim()) as { vips: string[]; mssMax: number };
  strictEqual(line.vips.join(","), "10.0.100.1,10.0.100.2", "LB IPs taken from lo");
  strictEqual(line.mssMax, 1400);
  const ingress = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "ingress"]);
  strictEqual(ingress.stdout.includes("hf_decap"), true, ingress.stdout);
  const egress = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "egress"]);
  strictEqual(egress.stdout.includes("hf_mss_clamp"), true, egress.stdout);
  // running it again replaces, not duplicates
  strictEqual((await hf("be", ["decap", "--iface", "eth0", "--vip", "10.0.100.1"])).code, 0);
  const again = await topo.exec("be", ["tc", "filter", "show", "dev", "eth0", "ingress"]);
  strictEqual((again.stdout.match(/hf_decap/g) ?? []).length, 2, again.stdout); // name + tag line

  strictEqual((await hf("r", ["xdp-pass", "--iface", "l1"])).code, 0);
  const link = await topo.exec("r", ["ip", "link", "show", "l1"]);
  strictEqual(
    link.stdout.includes("prog/xdp") && link.stdout.includes("hf_xdp_pass"),
    true,
    link.stdout,
  );

  for (const command of ["decap", "xdp-pass"]) {
    const help = await hf("r", [command, "--help"]);
    strictEqual(help.code, 0, `${command} --help`);
    strictEqual(help.stdout.startsWith(`usage: main.ts ${command} --iface IF`), true, help.stdout);
    const missing = await hf("r", [command]);
    strictEqual(missing.code, 2, `${command} without --iface is a usage error`);
    strictEqual(missing.stderr.trim().split("\n").length, 1, missing.stderr);
    strictEqual(missing.stderr.includes('"--iface"'), true, missing.stderr);
    const bad = await hf("r", [command, "--iface", "l1", "--ifname", "x"]);
    strictEqual(bad.code, 2, `${command} --ifname`);
    strictEqual(bad.stderr.includes('Unknown option "--ifname"'), true, bad.stderr);
  }
});
