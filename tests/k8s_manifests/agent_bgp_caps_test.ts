/**
 * The LB-node agent's BGP (issue 12: `spec.bgp` through the model, or `--bgp-config`) runs with
 * the capabilities `k8s/agent.yaml` grants and needs NET_BIND_SERVICE for it: as uid 0 limited
 * by `setpriv --bounding-set` to that list (what a container runtime does with `drop: [ALL]`
 * plus `add`), in a test network namespace beside a router running bird, the agent's bird has
 * its session Established and the router has the LB IP's route. Without NET_BIND_SERVICE bird
 * cannot listen on TCP 179 ("bind: Permission denied") and no session comes up. (The datapath's
 * BPF, NET_ADMIN and PERFMON are proven in agent_caps_test.ts; NET_ADMIN also serves bird's BFD.)
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { one, readManifests } from "./_manifests.ts";
import { createTopology } from "../../lab/netns.ts";
import { RouterBird } from "../../lab/_anycast_router.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const ds = one(await readManifests(), "DaemonSet", "holdfast-agent");
const CAPS: string[] = ds.spec.template.spec.containers[0].securityContext.capabilities.add;
const BFD = { intervalMs: 100, multiplier: 3 };

const SERVICES = `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP", portName: http }]
    backends: [{ address: "10.0.1.1:8080/TCP", portName: http }]
`;

interface Outcome {
  ready: boolean;
  established: boolean;
  routed: boolean;
  birdLog: string;
}

/** Runs the agent (in-memory maps, BGP from a file) with `caps` only for a few seconds. */
async function tryCaps(caps: string[]): Promise<Outcome> {
  const topo = await createTopology({
    hosts: [{ name: "router" }, { name: "n1" }],
    links: [{
      a: { host: "router", ifname: "r-n1", address: "10.9.1.1/24" },
      b: { host: "n1", ifname: "eth0", address: "10.9.1.2/24" },
    }],
  });
  const dir = await Deno.makeTempDir({ prefix: "hf-agent-bgp-caps-" });
  try {
    const router = await RouterBird.start(topo, "router", dir, {
      routerId: "10.9.1.1",
      bfd: BFD,
      peers: [{ name: "n1", address: "10.9.1.2", asn: 65101 }],
    });
    await Deno.writeTextFile(
      `${dir}/bgp.json`,
      JSON.stringify({
        routerId: "10.9.1.2",
        localAsn: 65101,
        prefixes: ["10.0.100.0/24"],
        peers: [{ address: "10.9.1.1", asn: 65000, bfd: BFD }],
      }),
    );
    await Deno.writeTextFile(`${dir}/services.yaml`, SERVICES);
    const bounding = ["-all", ...caps.map((c) => `+${c.toLowerCase()}`)].join(",");
    const agent = topo.spawn("n1", [
      "setpriv",
      `--bounding-set=${bounding}`,
      "--inh-caps=-all",
      Deno.execPath(),
      "run",
      "-P=agent",
      "--no-prompt",
      "--quiet",
      "--config",
      CONFIG,
      MAIN,
      "agent",
      ...["--node-name", "n1", "--config", `${dir}/services.yaml`, "--datapath", "memory"],
      ...["--no-flow-sync", "--health", "off", "--listen", "none"],
      ...["--bgp-config", `${dir}/bgp.json`, "--bgp-dir", `${dir}/bird`],
    ]);
    let outcome: Outcome = { ready: false, established: false, routed: false, birdLog: "" };
    const deadline = Date.now() + 8_000;
    for (let i = 0; i < 80 && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const protocols = (await router.birdc("show", "protocols")).stdout;
      const routes = (await router.birdc("show", "route")).stdout;
      outcome = {
        ready: agent.lines.some((l) => l.includes('"msg":"ready"')),
        established: /hf_n1\s.*Established/.test(protocols),
        routed: routes.includes("10.0.100.1/32"),
        birdLog: await Deno.readTextFile(`${dir}/bird/bird.log`).catch(() => ""),
      };
      if (outcome.routed) break;
    }
    await agent.stop("SIGTERM", 3_000);
    const pid = (await Deno.readTextFile(`${dir}/bird/bird.pid`).catch(() => "")).trim();
    if (/^\d+$/.test(pid)) await topo.exec("n1", ["kill", "-KILL", pid], { check: false });
    return outcome;
  } finally {
    await topo.destroy();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

rootTest(
  "k8s/agent.yaml capabilities: the LB node's bird announces with them, and needs NET_BIND_SERVICE",
  async () => {
    assertEquals([...CAPS].sort(), ["BPF", "NET_ADMIN", "NET_BIND_SERVICE", "PERFMON"]);
    const all = await tryCaps(CAPS);
    assert(all.ready && all.established && all.routed, `with ${CAPS}: ${JSON.stringify(all)}`);
    const noBind = await tryCaps(CAPS.filter((c) => c !== "NET_BIND_SERVICE"));
    assert(noBind.ready, "the agent did not get ready without NET_BIND_SERVICE");
    assert(!noBind.established, "a session came up without NET_BIND_SERVICE");
    assert(noBind.birdLog.includes("bind: Permission denied"), noBind.birdLog);
  },
);
