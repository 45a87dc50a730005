import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { parseConfig } from "../lb/sources/file_source.ts";
import { captureLogs, log } from "../../lib/log.ts";
import type { PodFrontend } from "../bpf/node_structs.ts";
import { type LocalPod, planNode, servingKey } from "./plan.ts";
import { NodeBackends, type NodeMaps } from "./reconcile.ts";
import { parsePodsFile } from "./pods.ts";
import { localPodOf } from "./kube_pods.ts";
import { uplinksHolding } from "./uplink.ts";

const MODEL = parseConfig(`
services:
  - name: default/web
    frontends:
      - { address: 10.0.100.1:80/TCP, portName: http }
      - { address: 10.0.100.1:443/TCP, portName: https }
      - { address: "[2001:db8:100::1]:80/TCP", portName: http }
    backends:
      - { address: 10.2.0.5:8080/TCP, portName: http }
      - { address: 10.2.0.5:8443/TCP, portName: https }
      - { address: 10.3.0.9:8080/TCP, portName: http }
      - { address: "[2001:db8:2::5]:8080/TCP", portName: http }
  - name: default/dns
    frontends:
      - { address: 10.0.100.2:53/UDP }
    backends:
      - { address: 10.2.0.6:5353/UDP }
`);
const PODS: LocalPod[] = [
  { name: "default/web-1", ips: ["10.2.0.5", "2001:db8:2:0::5"] },
  { name: "default/dns-1", ips: ["10.2.0.6"] },
];

/** An in-memory NodeMaps. */
class MemoryNodeMaps implements NodeMaps {
  readonly entries = new Map<string, PodFrontend>();
  flowPods = new Set<string>();
  setFrontend(f: PodFrontend) {
    this.entries.set(servingKey(f), f);
  }
  deleteFrontend(f: Omit<PodFrontend, "targetPort">) {
    return this.entries.delete(servingKey(f));
  }
  frontends() {
    return [...this.entries.values()];
  }
  pruneFlows(keep: ReadonlySet<string>) {
    const gone = [...this.flowPods].filter((p) => !keep.has(p));
    for (const p of gone) this.flowPods.delete(p);
    return gone.length;
  }
}

Deno.test("planNode: local pods' frontends by port name, protocol and family", () => {
  const { serving, conflicts } = planNode(MODEL, PODS);
  deepStrictEqual(
    serving.map((s) => `${s.pod} ${servingKey(s.frontend)} → ${s.frontend.targetPort}`).sort(),
    [
      "default/dns-1 10.2.0.6 10.0.100.2:53/UDP → 5353",
      "default/web-1 10.2.0.5 10.0.100.1:443/TCP → 8443",
      "default/web-1 10.2.0.5 10.0.100.1:80/TCP → 8080",
      "default/web-1 2001:db8:2::5 [2001:db8:100::1]:80/TCP → 8080",
    ],
  );
  deepStrictEqual(conflicts, []);
});

Deno.test("planNode: two services giving one (pod, frontend) two target ports: a conflict", () => {
  const model = parseConfig(`
services:
  - name: default/a
    frontends: [{ address: 10.0.100.1:80/TCP }]
    backends: [{ address: 10.2.0.5:8080/TCP }]
  - name: default/b
    frontends: [{ address: 10.0.100.1:80/TCP }]
    backends: [{ address: 10.2.0.5:9090/TCP }]
`);
  const { serving, conflicts } = planNode(model, PODS);
  strictEqual(serving.length, 1);
  strictEqual(serving[0]!.frontend.targetPort, 8080);
  deepStrictEqual(conflicts[0]!.services, ["default/a", "default/b"]);
});

Deno.test("NodeBackends: nothing before model and pods; then adds, removes, prunes, logs", () => {
  using logs = captureLogs();
  const maps = new MemoryNodeMaps();
  // Left by a previous agent: a pod that is gone since, and its flows.
  maps.setFrontend({ pod: "10.2.0.99", vip: "10.0.100.1", port: 80, proto: 6, targetPort: 80 });
  maps.flowPods = new Set(["10.2.0.99", "10.2.0.5"]);
  const nb = new NodeBackends(maps, log);
  strictEqual(nb.setModel(MODEL), null, "no pods yet: nothing written");
  strictEqual(maps.entries.size, 1);
  deepStrictEqual(nb.setPods(PODS), { added: 4, removed: 1, flowsPruned: 1 });
  strictEqual(nb.applied, true);
  strictEqual(maps.entries.size, 4);
  const lines = logs.records.map((r) => r.msg);
  strictEqual(lines.includes("pod web-1 10.2.0.5 serves 10.0.100.1:80/TCP → :8080"), true);
  strictEqual(
    lines.includes("pod (unknown pod) 10.2.0.99 no longer serves 10.0.100.1:80/TCP: removed"),
    true,
  );
  // web-1 deleted: its entries (both families) go, and its flows.
  maps.flowPods.add("10.2.0.5");
  deepStrictEqual(nb.setPods([PODS[1]!]), { added: 0, removed: 3, flowsPruned: 1 });
  deepStrictEqual([...maps.entries.keys()], ["10.2.0.6 10.0.100.2:53/UDP"]);
  strictEqual(
    logs.records.some((r) =>
      r.msg === "pod web-1 10.2.0.5 no longer serves 10.0.100.1:443/TCP: removed"
    ),
    true,
  );
  // The same state again writes nothing.
  deepStrictEqual(nb.setPods([PODS[1]!]), { added: 0, removed: 0, flowsPruned: 0 });
});

Deno.test("parsePodsFile: bad entries named and skipped, the rest kept", () => {
  const bad: string[] = [];
  const pods = parsePodsFile(
    `pods:
  - { name: web-1, ips: [10.2.0.5] }
  - { name: web-2, ips: [not-an-ip] }
  - { ips: [10.2.0.7] }
`,
    (i, name, why) => bad.push(`${i} ${name} ${why}`),
  );
  deepStrictEqual(pods, [{ name: "default/web-1", ips: ["10.2.0.5"] }]);
  deepStrictEqual(bad, [
    '1 web-2 "not-an-ip" is not an IP address',
    "2 undefined name is not a non-empty string",
  ]);
});

Deno.test("localPodOf: addresses of running pods; host-network and finished pods left out", () => {
  const pod = (spec: object, status: object) => ({
    metadata: { namespace: "shop", name: "web-1" },
    spec,
    status,
  });
  deepStrictEqual(
    localPodOf(pod({}, { phase: "Running", podIPs: [{ ip: "10.2.0.5" }, { ip: "2001:db8::5" }] })),
    { name: "shop/web-1", ips: ["10.2.0.5", "2001:db8::5"] },
  );
  deepStrictEqual(localPodOf(pod({}, { podIP: "10.2.0.5" }))?.ips, ["10.2.0.5"]);
  strictEqual(localPodOf(pod({ hostNetwork: true }, { podIP: "10.9.0.1" })), null);
  strictEqual(localPodOf(pod({}, { phase: "Succeeded", podIP: "10.2.0.5" })), null);
  strictEqual(localPodOf(pod({}, { phase: "Pending" })), null);
});

Deno.test("uplinksHolding: the interfaces holding the node's addresses, either family", () => {
  const ifs = [
    { name: "lo", family: "IPv4", address: "127.0.0.1" },
    { name: "eth0", family: "IPv4", address: "10.12.1.2" },
    { name: "eth0", family: "IPv6", address: "2001:db8:12::2" },
    { name: "eth1", family: "IPv6", address: "2001:db8:13::2" },
  ] as Deno.NetworkInterfaceInfo[];
  deepStrictEqual(uplinksHolding(["10.12.1.2", "2001:db8:12:0::2"], ifs), ["eth0"]);
  deepStrictEqual(uplinksHolding(["10.12.1.2", "2001:db8:13::2"], ifs), ["eth0", "eth1"]);
  throws(() => uplinksHolding(["10.9.9.9"], ifs), /10\.9\.9\.9/);
});
