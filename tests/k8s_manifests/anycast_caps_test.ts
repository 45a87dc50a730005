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
import { withBgpCapsRig } from "./_bgp_caps_rig.ts";

const ds = one(await readManifests(), "DaemonSet", "holdfast-anycast");
const CAPS: string[] = ds.spec.template.spec.containers[0].securityContext.capabilities.add;

/** Runs the anycast agent with `caps` only for a few seconds; what it achieved. */
function tryCaps(caps: string[]) {
  return withBgpCapsRig("hf-anycast-caps-", async (rig) => {
    await Deno.writeTextFile(
      `${rig.dir}/state.json`,
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
    let onLo = false;
    const view = await rig.run(caps, "anycast", [
      ...["anycast", "--node", "n1", "--state", `${rig.dir}/state.json`],
      ...["--bgp-config", `${rig.dir}/bgp.json`, "--bird-dir", `${rig.dir}/bird`],
      ...["--withdraw-wait-ms", "0"],
    ], {
      route: "10.0.100.10/32",
      deadlineMs: 6_000,
      settled: async (v) => {
        const lo = await rig.topo.exec("n1", ["ip", "-o", "addr", "show", "dev", "lo"], {
          check: false,
        });
        onLo = lo.stdout.includes("10.0.100.10/32");
        return onLo && v.routed;
      },
    });
    return { ...view, onLo };
  });
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
