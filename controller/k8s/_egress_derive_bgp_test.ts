/** An EgressNAT's `spec.bgp` reaches the NAT pods' config as-is; a bad one names its spec field. */
import { deepStrictEqual, ok } from "node:assert/strict";
import { deriveEgressConfig } from "./_egress_derive.ts";
import type { KubeObject } from "./objects.ts";

const nat = (bgp: unknown): KubeObject => ({
  metadata: { namespace: "egress", name: "internet", generation: 1 },
  spec: {
    destinations: ["0.0.0.0/0"],
    addresses: ["203.0.113.10"],
    gateways: ["10.8.0.100"],
    sources: [{ prefix: "10.8.0.0/26" }],
    ...(bgp === undefined ? {} : { bgp }),
  },
});
const pods: KubeObject[] = [{
  metadata: { namespace: "egress", name: "nat-a", labels: { "holdfast.io/egress": "internet" } },
  status: { podIP: "10.8.0.21", phase: "Running" },
}];

Deno.test("egress derive: spec.bgp becomes the config's bgp section; absent stays absent", () => {
  const bgp = {
    localAsn: 65100,
    peers: [{ address: "203.0.113.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } }],
    communities: ["65000:100"],
  };
  const d = deriveEgressConfig(nat(bgp), pods);
  ok("config" in d, JSON.stringify(d));
  deepStrictEqual(d.config.bgp, bgp);
  const plain = deriveEgressConfig(nat(undefined), pods);
  ok("config" in plain && !("bgp" in plain.config), JSON.stringify(plain));
});

Deno.test("egress derive: a bad spec.bgp is InvalidSpec naming the field", () => {
  const d = deriveEgressConfig(
    nat({ localAsn: 65100, peers: [{ address: "x", asn: 65000 }] }),
    pods,
  );
  ok("problem" in d, JSON.stringify(d));
  ok(d.problem.startsWith('field "spec.bgp.peers[0].address"'), d.problem);
});
