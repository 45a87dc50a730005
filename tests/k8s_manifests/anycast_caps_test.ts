/**
 * The anycast agent runs with exactly the capabilities `k8s/anycast.yaml` grants (NET_ADMIN,
 * NET_BIND_SERVICE) and needs each: as uid 0 limited by `setpriv --bounding-set` to that list
 * (what a container runtime does with `drop: [ALL]` plus `add`), in a test network namespace
 * beside a router running bird, it puts the address on `lo` and its bird's session with the router
 * is Established with the route. Without NET_ADMIN `ip addr` is refused (and bird's BFD socket
 * options); without NET_BIND_SERVICE bird cannot listen on TCP 179 and no session comes up.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { one, readManifests } from "./_manifests.ts";
import { createTopology } from "../../lab/netns.ts";
import { RouterBird } from "../../lab/_anycast_router.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const ds = one(await readManifests(), "DaemonSet", "holdfast-anycast");
const CAPS: string[] = ds.spec.template.spec.containers[0].securityContext.capabilities.add;
const BFD = { intervalMs: 100, multiplier: 3 };

interface Outcome {
  onLo: boolean;
  established: boolean;
  routed: boolean;
  birdLog: string;
}

/** Runs the anycast agent with `caps` only for a few seconds; what it achieved. */
async function tryCaps(caps: string[]): Promise<Outcome> {
  const topo = await createTopology({
    hosts: [{ name: "router" }, { name: "n1" }],
    links: [{
      a: { host: "router", ifname: "r-n1", address: "10.9.1.1/24" },
      b: { host: "n1", ifname: "eth0", address: "10.9.1.2/24" },
    }],
  });
  const dir = await Deno.makeTempDir({ prefix: "hf-anycast-caps-" });
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
    await Deno.writeTextFile(
      `${dir}/state.json`,
      JSON.stringify({
        services: [{
          name: "default/web",
          addresses: ["10.0.100.10"],
          ports: ["80/TCP"],
          selector: { app: "web" },
        }],
        pods: [{ name: "default/web-1", node: "n1", labels: { app: "web" }, ready: true }],
      }),
    );
    const bounding = ["-all", ...caps.map((c) => `+${c.toLowerCase()}`)].join(",");
    const agent = topo.spawn("n1", [
      "setpriv",
      `--bounding-set=${bounding}`,
      "--inh-caps=-all",
      Deno.execPath(),
      "run",
      "-P=anycast",
      "--no-prompt",
      "--quiet",
      "--config",
      CONFIG,
      MAIN,
      "anycast",
      "--node",
      "n1",
      "--state",
      `${dir}/state.json`,
      "--bgp-config",
      `${dir}/bgp.json`,
      "--bird-dir",
      `${dir}/bird`,
      "--withdraw-wait-ms",
      "0",
    ]);
    let outcome: Outcome = { onLo: false, established: false, routed: false, birdLog: "" };
    const deadline = Date.now() + 6_000;
    for (let i = 0; i < 60 && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const lo = await topo.exec("n1", ["ip", "-o", "addr", "show", "dev", "lo"], { check: false });
      const protocols = (await router.birdc("show", "protocols")).stdout;
      const routes = (await router.birdc("show", "route")).stdout;
      outcome = {
        onLo: lo.stdout.includes("10.0.100.10/32"),
        established: /hf_n1\s.*Established/.test(protocols),
        routed: routes.includes("10.0.100.10/32"),
        birdLog: await Deno.readTextFile(`${dir}/bird/bird.log`).catch(() => ""),
      };
      if (outcome.onLo && outcome.routed) break;
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
  "k8s/anycast.yaml capabilities: enough to hold lo and announce, none to spare",
  async () => {
    assertEquals([...CAPS].sort(), ["NET_ADMIN", "NET_BIND_SERVICE"]);
    const all = await tryCaps(CAPS);
    assert(all.onLo && all.established && all.routed, `with ${CAPS}: ${JSON.stringify(all)}`);
    const noAdmin = await tryCaps(CAPS.filter((c) => c !== "NET_ADMIN"));
    assert(!noAdmin.onLo, "the address went on lo without NET_ADMIN");
    const noBind = await tryCaps(CAPS.filter((c) => c !== "NET_BIND_SERVICE"));
    assert(!noBind.established, "a session came up without NET_BIND_SERVICE");
    assert(noBind.birdLog.includes("bind: Permission denied"), noBind.birdLog);
  },
);
