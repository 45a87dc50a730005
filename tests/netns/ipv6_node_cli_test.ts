/**
 * The IPv6 side of the node subcommands (docs/contracts.md "IPv6"), as an operator runs them:
 *
 * - `main.ts decap` in a backend namespace takes the global IPv6 addresses on `lo` as LB IPs
 *   (`hf_local_vips6`, read back from the attached program's map: tests/harness/tc_maps.ts)
 *   beside the IPv4 ones, never `::1`; `--vip` takes IPv6 too and refuses a link-local one with a
 *   usage line.
 * - `main.ts agent --node-address IP --src-addr6 auto` writes the attach interface's global IPv6
 *   address to the pinned `hf_config6` and names it in its ready line; an interface without one
 *   is an error naming it, and nothing is attached.
 *
 * The agent runs in the test's own namespace with `--netns`, as in agent_node_address_test.ts.
 */
import { ok as assert, strictEqual } from "node:assert/strict";
import { createTopology, HostProcess, run, type Topology } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";
import { openTcMap } from "../harness/tc_maps.ts";
import { formatIpv6 } from "../../lib/ipv6.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DENO_RUN = [
  Deno.execPath(),
  ...["run", "-P=agent", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
  `${ROOT}main.ts`,
];

/** The IPv6 LB IPs (`hf_local_vips6` keys) of the decap program on `host`'s eth0, sorted. */
async function localVips6(topo: Topology, host: string): Promise<string[]> {
  using map = await openTcMap(topo, host, "eth0", "hf_local_vips6");
  return map.entries().map(([key]) => formatIpv6(key)).sort();
}

rootTest("decap takes the global IPv6 addresses on lo as LB IPs, --vip takes IPv6", async () => {
  await using topo = await createTopology({
    hosts: [{ name: "r" }, {
      name: "be",
      loopback: ["10.0.100.1/32", "2001:db8:100::1/128", "2001:db8:100::2/128"],
    }],
    links: [{
      a: { host: "r", ifname: "l1", address: "10.9.0.1/24" },
      b: { host: "be", ifname: "eth0", address: "10.9.0.2/24" },
    }],
  });
  const decap = (args: string[]) =>
    topo.exec("be", [...DENO_RUN, "decap", "--iface", "eth0", ...args], { check: false });
  const first = await decap([]);
  strictEqual(first.code, 0, first.stderr);
  const line = JSON.parse(first.stdout.trim()) as { vips: string[]; vips6: string[] };
  strictEqual(line.vips.join(","), "10.0.100.1", "IPv4 LB IPs from lo, 127.0.0.1 left out");
  strictEqual(
    line.vips6.sort().join(","),
    "2001:db8:100::1,2001:db8:100::2",
    "IPv6 from lo, not ::1",
  );
  strictEqual(
    (await localVips6(topo, "be")).join(","),
    "2001:db8:100::1,2001:db8:100::2",
  );

  const named = await decap(["--vip", "10.0.100.1,2001:db8:100::7"]);
  strictEqual(named.code, 0, named.stderr);
  strictEqual(
    (await localVips6(topo, "be")).join(","),
    "2001:db8:100::7",
    "re-run with --vip: the new program holds exactly the named IPv6 LB IP",
  );
  const bad = await decap(["--vip", "fe80::1"]);
  strictEqual(bad.code, 2, "a link-local --vip is a usage error");
  strictEqual(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  assert(bad.stderr.includes('--vip "fe80::1"'), bad.stderr);
});

rootTest(
  "agent --src-addr6 auto writes the interface's global IPv6 address to hf_config6",
  async () => {
    await using topo = await createTopology({
      hosts: [{ name: "lb" }, { name: "ag" }],
      links: [{
        a: { host: "lb", ifname: "hfn0", address: "10.9.7.2/24" },
        b: { host: "ag", ifname: "eth0", address: "10.9.7.1/24" },
      }, {
        a: { host: "lb", ifname: "hfn1", address: "10.9.8.2/24" },
        b: { host: "ag", ifname: "eth1", address: "10.9.8.1/24" },
      }],
    });
    await topo.exec("lb", ["ip", "-6", "addr", "add", "2001:db8:7::2/64", "dev", "hfn0", "nodad"]);
    const lb = topo.ns("lb");
    const pinDir = `/sys/fs/bpf/${lb}`;
    const dir = await Deno.makeTempDir({ prefix: "hf-srcaddr6-" });
    const config = `${dir}/services.yaml`;
    await Deno.writeTextFile(
      config,
      `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP", portName: http }]
    backends: [{ address: "10.0.1.1:8080/TCP", portName: http }]
`,
    );
    const agent = (address: string) => [
      ...DENO_RUN,
      ...["agent", "--node-name", "lb1", "--config", config, "--datapath", "bpf"],
      ...["--no-flow-sync", "--listen", "none", "--pin-dir", pinDir, "--netns", lb],
      ...["--node-address", address, "--src-addr6", "auto"],
    ];
    let good: HostProcess | undefined;
    try {
      // hfn1 has only its link-local IPv6 address: no address to pick, nothing attached.
      const bad = await run(agent("10.9.8.2"), { check: false, timeoutMs: 20_000 });
      assert(bad.code !== 0, `exit ${bad.code} without a global IPv6 address: ${bad.stdout}`);
      assert(
        bad.stdout.includes('Cannot pick --src-addr6 auto on \\"hfn1\\"'),
        `the error names the interface: ${bad.stdout} ${bad.stderr}`,
      );
      const link = await topo.exec("lb", ["ip", "-d", "link", "show", "hfn1"]);
      strictEqual(link.stdout.includes("prog/xdp"), false, "nothing attached after the error");
      const [cmd, ...args] = agent("10.9.7.2");
      const child = new Deno.Command(cmd!, { args, stdout: "piped", stderr: "inherit" }).spawn();
      good = new HostProcess("test", [cmd!, ...args], child, true);
      const ready = await good.waitForLine((l) => l.includes('"msg":"ready"'), {
        timeoutMs: 20_000,
      });
      strictEqual(JSON.parse(ready).src_addr6, "2001:db8:7::2", ready);
      const out = await run(["bpftool", "-j", "map", "dump", "pinned", `${pinDir}/hf_config6`]);
      const [entry] = JSON.parse(out.stdout) as { value: string[] }[];
      const value = Uint8Array.from(entry!.value, (x) => parseInt(x, 16));
      strictEqual(formatIpv6(value), "2001:db8:7::2", "hf_config6 holds the node's IPv6 address");
      strictEqual((await good.stop()).code, 0, "SIGTERM stops the agent with exit 0");
    } finally {
      await good?.stop();
      await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  },
);
