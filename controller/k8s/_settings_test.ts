import { deepStrictEqual } from "node:assert/strict";
import { readConfig } from "./_config.ts";
import { deriveSettings } from "./_settings.ts";
import type { KubeObject } from "./objects.ts";

const config = (spec: Record<string, unknown>): KubeObject => ({
  metadata: { name: "default", generation: 3 },
  spec,
});
const node = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  metadata: { name, labels },
});
const NODES = [
  node("n3", { "holdfast.io/lb": "true" }),
  node("n1", { "holdfast.io/lb": "true" }),
  node("n2"),
];

Deno.test("settings derivation: encapPort and the names of the selected nodes, sorted", () => {
  const lb = { matchLabels: { "holdfast.io/lb": "true" } };
  deepStrictEqual(deriveSettings(config({ encapPort: 7000, lbNodeSelector: lb }), NODES), {
    settings: { encapPort: 7000, lbNodes: ["n1", "n3"] },
  });
  const notLb = { matchExpressions: [{ key: "holdfast.io/lb", operator: "DoesNotExist" }] };
  deepStrictEqual(deriveSettings(config({ lbNodeSelector: notLb }), NODES).settings, {
    lbNodes: ["n2"],
  });
  deepStrictEqual(deriveSettings(config({ lbNodeSelector: {} }), NODES).settings, {
    lbNodes: ["n1", "n2", "n3"],
  }, "an empty selector selects every node");
});

Deno.test("settings derivation: no config, no selector, a bad selector or one that selects nothing → no list (every node serves)", () => {
  deepStrictEqual(deriveSettings(undefined, NODES), { settings: {} });
  deepStrictEqual(deriveSettings(config({ encapPort: 6080 }), NODES), {
    settings: { encapPort: 6080 },
  });
  const none = deriveSettings(config({ lbNodeSelector: { matchLabels: { x: "y" } } }), NODES);
  deepStrictEqual(none.settings, {});
  deepStrictEqual(
    none.problem,
    'spec.lbNodeSelector "x=y" selects none of the 3 nodes; every node serves until it selects one',
  );
  const bad = deriveSettings(
    config({ lbNodeSelector: { matchExpressions: [{ key: "x", operator: "Near" }] } }),
    NODES,
  );
  deepStrictEqual(bad.settings, {});
  deepStrictEqual(bad.problem?.startsWith("spec.lbNodeSelector: "), true, bad.problem);
  deepStrictEqual(
    deriveSettings(config({ encapPort: 0 }), NODES).settings,
    {},
    "bad port left out",
  );
});

Deno.test("config Ready: Anycast says only the node agents follow it; a selector that selects no node is reported", () => {
  const anycast = readConfig([config({ mode: "Anycast" })]).ready!;
  deepStrictEqual([anycast.status, anycast.reason], ["False", "InvalidSpec"]);
  deepStrictEqual(
    anycast.message,
    "spec.mode: Anycast is followed by the node agents only (main.ts anycast --kube, docs/anycast.md); " +
      "the controller and the LB nodes still treat the Services as Stateful. Defaults are used for these fields",
  );
  const sel = { lbNodeSelector: { matchLabels: { "holdfast.io/lb": "true" } } };
  deepStrictEqual(readConfig([config(sel)], NODES).ready!.status, "True");
  const none = readConfig([config(sel)], [node("n2")]).ready!;
  deepStrictEqual(none.status, "False");
  deepStrictEqual(none.message.includes("selects none of the 1 nodes"), true, none.message);
});

const BGP = {
  localAsn: 65100,
  prefixes: ["10.0.100.0/24"],
  communities: ["65000:100"],
  peers: [
    { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
    { address: "10.9.1.300", asn: 65000 },
    {
      address: "10.9.2.1",
      asn: 65000,
      nodeSelector: { matchLabels: { "holdfast.io/lb": "true" } },
    },
    { address: "10.9.3.1", asn: 65000, nodeSelector: { matchLabels: { rack: "none" } } },
    {
      address: "10.9.4.1",
      asn: 65000,
      nodeSelector: { matchExpressions: [{ key: "x", operator: "Near" }] },
    },
  ],
};

Deno.test("settings derivation: spec.bgp reaches the model with refused peers left out and each nodeSelector resolved to node names", () => {
  deepStrictEqual(deriveSettings(config({ bgp: BGP }), NODES).settings, {
    bgp: {
      localAsn: 65100,
      prefixes: ["10.0.100.0/24"],
      communities: ["65000:100"],
      peers: [
        { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
        { address: "10.9.2.1", asn: 65000, nodes: ["n1", "n3"] },
        { address: "10.9.3.1", asn: 65000, nodes: [] },
      ],
    },
  });
  deepStrictEqual(deriveSettings(config({}), NODES).settings, {}, "no spec.bgp: no bgp (no bird)");
  const bad = deriveSettings(config({ bgp: { ...BGP, localAsn: 23456 } }), NODES).settings.bgp;
  deepStrictEqual(
    bad !== undefined && "refused" in bad && bad.refused.includes("spec.bgp.localAsn"),
    true,
    JSON.stringify(bad),
  );
});
