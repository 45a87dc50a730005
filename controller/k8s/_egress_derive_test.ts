import { deepStrictEqual, ok } from "node:assert/strict";
import { deriveEgressConfig, natPods, ownersOf, readyCondition } from "./_egress_derive.ts";
import type { KubeObject } from "./objects.ts";

const nat = (spec: Record<string, unknown> = {}): KubeObject => ({
  metadata: { namespace: "egress", name: "internet", generation: 3 },
  spec: {
    destinations: ["0.0.0.0/0"],
    addresses: ["203.0.113.10", "203.0.113.11"],
    gateways: ["10.8.0.100", "10.8.0.101"],
    sources: [{ prefix: "10.8.0.0/26" }],
    ...spec,
  },
});

const pod = (name: string, ip: string | undefined, extra: Record<string, unknown> = {}) => ({
  metadata: {
    namespace: (extra.namespace as string) ?? "egress",
    name,
    labels: { "holdfast.io/egress": (extra.egress as string) ?? "internet" },
    ...(extra.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
  },
  status: { ...(ip ? { podIP: ip } : {}), phase: (extra.phase as string) ?? "Running" },
});

Deno.test("egress derive: peers are the labelled pods with an IP that have not ended, terminating ones included", () => {
  const pods = [
    pod("nat-b", "10.8.0.22", { deleting: true }),
    pod("nat-a", "10.8.0.21", { phase: "Pending" }),
    pod("nat-c", undefined),
    pod("nat-d", "10.8.0.24", { phase: "Failed" }),
    pod("nat-e", "10.8.0.25", { namespace: "other" }),
    pod("nat-f", "10.8.0.26", { egress: "other" }),
  ];
  deepStrictEqual(natPods(nat(), pods).map((p) => p.metadata?.name), ["nat-a", "nat-b"]);
  const d = deriveEgressConfig(nat(), pods);
  ok("config" in d, JSON.stringify(d));
  deepStrictEqual(d.config.name, "egress/internet");
  deepStrictEqual(d.config.addresses[1], { address: "203.0.113.11", gateway: "10.8.0.101" });
  deepStrictEqual(d.config.sources, [{ prefix: "10.8.0.0/26", address: "203.0.113.10" }]);
});

Deno.test("egress derive: problems name the spec field", () => {
  const pods = [pod("nat-a", "10.8.0.21")];
  const problem = (spec: Record<string, unknown>) => {
    const d = deriveEgressConfig(nat(spec), pods);
    return "problem" in d ? d.problem : "";
  };
  ok(problem({ gateways: undefined }).startsWith('field "spec.gateways": required'));
  ok(problem({ gateways: ["10.8.0.100"] }).includes("expected 2"));
  ok(
    problem({ gateways: ["10.8.0.100", "10.8.0.100"] }).startsWith('field "spec.gateways[1]"'),
  );
  ok(problem({ sources: undefined }).startsWith('field "spec.sources"'));
  deepStrictEqual(
    problem({ sources: [{ prefix: "10.9.0.0/24", address: "203.0.113.99" }] }),
    'field "spec.sources[0].address": expected one of spec.addresses, got "203.0.113.99"',
  );
  ok(problem({ snatPorts: "9-2" }).startsWith('field "spec.snatPorts"'));
  const none = deriveEgressConfig(nat(), []);
  deepStrictEqual("problem" in none && none.reason, "NoNATPods");
});

Deno.test("egress derive: owners from leases (holder POD/BOOT) and the Ready condition", () => {
  const d = deriveEgressConfig(nat(), [pod("nat-a", "10.8.0.21"), pod("nat-b", "10.8.0.22")]);
  ok("config" in d);
  const one = ownersOf(
    d.config,
    new Map([["203.0.113.10", { holder: "nat-b/1a2b3c4d", epoch: 7, ttlMs: 200 }]]),
  );
  deepStrictEqual(one, [{ address: "203.0.113.10", pod: "nat-b", epoch: 7 }]);
  const r1 = readyCondition(nat(), d, one);
  deepStrictEqual([r1.status, r1.reason, r1.observedGeneration], ["False", "AddressesUnowned", 3]);
  deepStrictEqual(r1.message, "no NAT pod owns 203.0.113.11 yet");
  const both = [...one, { address: "203.0.113.11", pod: "nat-a", epoch: 2 }];
  deepStrictEqual(readyCondition(nat(), d, both).status, "True");
  deepStrictEqual(readyCondition(nat(), d, undefined).status, "Unknown");
});
