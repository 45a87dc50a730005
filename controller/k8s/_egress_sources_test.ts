import { deepStrictEqual, ok } from "node:assert/strict";
import { deriveEgressConfig } from "./_egress_derive.ts";
import { podAddresses, readSources, SourceSpecError, usesSelectors } from "./_egress_sources.ts";
import type { KubeObject } from "./objects.ts";

const nat = (sources: unknown[]): KubeObject => ({
  metadata: { namespace: "shop", name: "out", generation: 1 },
  spec: {
    destinations: ["0.0.0.0/0"],
    addresses: ["203.0.113.10", "203.0.113.11"],
    gateways: ["10.8.0.100", "10.8.0.101"],
    sources,
  },
});

function pod(
  ns: string,
  name: string,
  ips: string[],
  labels: Record<string, string> = {},
  extra: Record<string, unknown> = {},
): KubeObject {
  return {
    metadata: { namespace: ns, name, labels },
    spec: { nodeName: "n1", ...(extra.hostNetwork ? { hostNetwork: true } : {}) },
    status: {
      phase: (extra.phase as string) ?? "Running",
      podIP: ips[0],
      podIPs: ips.map((ip) => ({ ip })),
    },
  };
}

const NATS = [pod("shop", "nat-a", ["10.8.0.21"], { "holdfast.io/egress": "out" })];
const NAMESPACES = [
  { metadata: { name: "shop", labels: { team: "a" } } },
  { metadata: { name: "bank", labels: { team: "b" } } },
];

Deno.test("egress sources: selectors pick pods (both families) as a NetworkPolicy peer would", () => {
  const pods = [
    pod("shop", "web-1", ["10.244.1.5", "fd00:10:244:1::5"], { app: "web" }),
    pod("shop", "db-1", ["10.244.1.6"], { app: "db" }),
    pod("bank", "web-2", ["10.244.2.5"], { app: "web" }),
    pod("bank", "v6-only", ["fd00:10:244:2::9"], { app: "web" }),
    pod("shop", "done", ["10.244.1.7"], { app: "web" }, { phase: "Succeeded" }),
    pod("shop", "host", ["192.168.1.10"], { app: "web" }, { hostNetwork: true }),
    ...NATS,
  ];
  const d = deriveEgressConfig(
    nat([
      { prefix: "192.168.50.0/24" },
      { podSelector: { matchLabels: { app: "web" } } }, // own namespace only
      { namespaceSelector: { matchLabels: { team: "b" } }, address: "203.0.113.10" },
    ]),
    NATS,
    { pods, namespaces: NAMESPACES },
  );
  ok("config" in d, JSON.stringify(d));
  deepStrictEqual(d.config.sources, [
    { prefix: "192.168.50.0/24", address: "203.0.113.10" },
    { prefix: "10.244.1.5/32", address: "203.0.113.11" },
    { prefix: "10.244.2.5/32", address: "203.0.113.10" },
  ]);
  deepStrictEqual(d.clients, [
    {
      pod: "shop/web-1",
      node: "n1",
      ips: ["10.244.1.5", "fd00:10:244:1::5"],
      address: "203.0.113.11",
    },
    { pod: "bank/v6-only", node: "n1", ips: ["fd00:10:244:2::9"], address: "203.0.113.10" },
    { pod: "bank/web-2", node: "n1", ips: ["10.244.2.5"], address: "203.0.113.10" },
  ]);
  // Both selectors: pods matching in matching namespaces; a pod picked twice goes with the first.
  const both = deriveEgressConfig(
    nat([
      { podSelector: { matchLabels: { app: "web" } }, namespaceSelector: {} },
      { namespaceSelector: {} },
    ]),
    NATS,
    { pods, namespaces: NAMESPACES },
  );
  ok("config" in both);
  deepStrictEqual(both.clients.map((c) => `${c.pod}=${c.address}`), [
    "bank/v6-only=203.0.113.10",
    "bank/web-2=203.0.113.10",
    "shop/web-1=203.0.113.10",
    "shop/db-1=203.0.113.11",
  ]);
  // Nothing selected yet: a valid config with no sources.
  const none = deriveEgressConfig(nat([{ podSelector: { matchLabels: { app: "x" } } }]), NATS, {
    pods,
    namespaces: NAMESPACES,
  });
  ok("config" in none && none.config.sources.length === 0 && none.clients.length === 0);
  ok(usesSelectors(nat([{ namespaceSelector: {} }])));
  ok(!usesSelectors(nat([{ prefix: "10.0.0.0/8" }])));
  deepStrictEqual(podAddresses(pod("a", "b", ["fd00::1", "10.0.0.1"])), ["10.0.0.1", "fd00::1"]);
});

Deno.test("egress sources: bad entries are named by their spec field", () => {
  const problem = (sources: unknown[]) => {
    const d = deriveEgressConfig(nat(sources), NATS);
    return "problem" in d ? d.problem : "";
  };
  deepStrictEqual(
    problem([{ prefix: "10.0.0.0/8", podSelector: {} }]),
    'field "spec.sources[0]": either prefix or podSelector/namespaceSelector, not both (use two entries)',
  );
  deepStrictEqual(
    problem([{ prefix: "10.0.0.0/8" }, { address: "203.0.113.10" }]),
    'field "spec.sources[1]": expected prefix, podSelector or namespaceSelector',
  );
  ok(
    problem([{
      podSelector: { matchExpressions: [{ key: "app", operator: "Near", values: ["x"] }] },
    }]).startsWith('field "spec.sources[0].podSelector": Invalid label selector'),
  );
  deepStrictEqual(
    problem([{ namespaceSelector: {}, address: "203.0.113.99" }]),
    'field "spec.sources[0].address": expected one of spec.addresses, got "203.0.113.99"',
  );
  let threw = false;
  try {
    readSources(undefined);
  } catch (err) {
    threw = err instanceof SourceSpecError && err.field === "spec.sources";
  }
  ok(threw);
});
