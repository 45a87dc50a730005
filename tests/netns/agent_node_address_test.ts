/**
 * `main.ts agent --node-address IP --netns NS`: the agent finds the interface holding IP inside
 * NS (what `k8s/agent.yaml` relies on: each node's interface has its own name), attaches XDP
 * there and names it in its ready line. An address no interface of NS holds (here the peer's) is
 * an error naming the address and the interfaces seen, and the agent exits non-zero without
 * attaching anything. The agent runs in the test's own namespace, as in agent_caps_test.ts
 * (`ip netns exec` would remount /sys without bpffs, which the `agent` set cannot mount).
 */
import { ok as assert, strictEqual } from "node:assert/strict";
import { createTopology, HostProcess, run } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

rootTest("agent --node-address attaches XDP to the interface holding the address", async () => {
  // The agent attaches in "lb", whose two interfaces both have addresses; "ag" is the peer.
  await using topo = await createTopology({
    hosts: [{ name: "lb" }, { name: "ag" }],
    links: [
      {
        a: { host: "lb", ifname: "hfn0", address: "10.9.7.2/24" },
        b: { host: "ag", ifname: "eth0", address: "10.9.7.1/24" },
      },
      {
        a: { host: "lb", ifname: "hfn1", address: "10.9.8.2/24" },
        b: { host: "ag", ifname: "eth1", address: "10.9.8.1/24" },
      },
    ],
  });
  const lb = topo.ns("lb");
  const pinDir = `/sys/fs/bpf/${lb}`;
  const dir = await Deno.makeTempDir({ prefix: "hf-nodeaddr-" });
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
    Deno.execPath(),
    ...["run", "-P=agent", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
    ...[`${ROOT}main.ts`, "agent", "--node-name", "lb1", "--config", config],
    ...["--datapath", "bpf", "--no-flow-sync", "--listen", "none", "--pin-dir", pinDir],
    ...["--netns", lb, "--node-address", address],
  ];
  const xdpIn = async (ifname: string) =>
    (await topo.exec("lb", ["ip", "-d", "link", "show", ifname])).stdout.includes("prog/xdp");
  let good: HostProcess | undefined;
  try {
    const bad = await run(agent("10.9.8.1"), { check: false, timeoutMs: 20_000 });
    assert(bad.code !== 0, `exit ${bad.code} for an address outside "${lb}": ${bad.stdout}`);
    const failed = `${bad.stdout}\n${bad.stderr}`.split("\n")
      .find((l) => l.includes('"msg":"agent failed"'));
    assert(failed, `an error line: ${bad.stdout} ${bad.stderr}`);
    const err: string = JSON.parse(failed).err;
    for (const part of ['"10.9.8.1"', `netns "${lb}"`, "hfn0 (10.9.7.2", "hfn1 (10.9.8.2"]) {
      assert(err.includes(part), `the error names ${part}: ${err}`);
    }
    assert(!(await xdpIn("hfn0")) && !(await xdpIn("hfn1")), "nothing attached after the error");

    const argv = agent("10.9.8.2");
    const [cmd, ...args] = argv;
    const child = new Deno.Command(cmd!, { args, stdout: "piped", stderr: "inherit" }).spawn();
    good = new HostProcess("test", argv, child, true);
    const ready = await good.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 20_000 });
    strictEqual(JSON.parse(ready).attached, "hfn1", ready);
    strictEqual(await xdpIn("hfn1"), true, "XDP attached to hfn1");
    strictEqual(await xdpIn("hfn0"), false, "nothing on hfn0");
    strictEqual((await good.stop()).code, 0, "SIGTERM stops the agent with exit 0");
  } finally {
    await good?.stop(); // idempotent: a no-op once stopped
    await Deno.remove(pinDir, { recursive: true }).catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
