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
import { withBgpCapsRig } from "./_bgp_caps_rig.ts";

const ds = one(await readManifests(), "DaemonSet", "holdfast-agent");
const CAPS: string[] = ds.spec.template.spec.containers[0].securityContext.capabilities.add;

const SERVICES = `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP", portName: http }]
    backends: [{ address: "10.0.1.1:8080/TCP", portName: http }]
`;

/** Runs the agent (in-memory maps, BGP from a file) with `caps` only for a few seconds. */
function tryCaps(caps: string[]) {
  return withBgpCapsRig("hf-agent-bgp-caps-", async (rig) => {
    await Deno.writeTextFile(`${rig.dir}/services.yaml`, SERVICES);
    const view = await rig.run(caps, "agent", [
      "agent",
      ...["--node-name", "n1", "--config", `${rig.dir}/services.yaml`, "--datapath", "memory"],
      ...["--no-flow-sync", "--health", "off", "--listen", "none"],
      ...["--bgp-config", `${rig.dir}/bgp.json`, "--bgp-dir", `${rig.dir}/bird`],
    ], { route: "10.0.100.1/32", deadlineMs: 8_000, settled: (v) => Promise.resolve(v.routed) });
    return { ...view, ready: view.lines.some((l) => l.includes('"msg":"ready"')) };
  });
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
