import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { MemoryModelStore } from "./_memory_model_store.ts";
import { MODEL_YAML, startTestAgent, startTestController, waitUntil } from "./_testing.ts";
import { ModelPublisher } from "./publisher.ts";
import {
  encodeSettings,
  lbNodeBgpSettings,
  type ModelSettings,
  parseSettings,
  selectsNode,
} from "./settings.ts";

Deno.test("model settings: canonical JSON; a bad field is dropped and named; absent or empty lbNodes select every node", () => {
  deepStrictEqual(encodeSettings({}), "{}");
  deepStrictEqual(
    encodeSettings({ lbNodes: ["b", "a", "b"], encapPort: 7000 }),
    '{"encapPort":7000,"lbNodes":["a","b"]}',
  );
  deepStrictEqual(parseSettings(""), { settings: {}, problems: [] });
  deepStrictEqual(parseSettings('{"encapPort":7000,"lbNodes":["a"]}').settings, {
    encapPort: 7000,
    lbNodes: ["a"],
  });
  const bad = parseSettings('{"encapPort":70000,"lbNodes":["a"]}');
  deepStrictEqual(bad.settings, { lbNodes: ["a"] });
  deepStrictEqual(bad.problems, ["encapPort 70000 is not a port in 1..65535"]);
  deepStrictEqual(parseSettings('{"lbNodes":"a"}').settings, {});
  deepStrictEqual(parseSettings("[").settings, {});

  deepStrictEqual(selectsNode({}, "n1"), true, "no list: every node");
  deepStrictEqual(selectsNode({ lbNodes: [] }, "n1"), true, "empty list: every node, never none");
  deepStrictEqual(selectsNode({ lbNodes: ["n2"] }, "n1"), false);
  deepStrictEqual(selectsNode({ lbNodes: ["n1", "n2"] }, "n1"), true);
  deepStrictEqual(selectsNode({ lbNodes: ["n2"] }, undefined), true, "unknown node name: serves");
});

Deno.test("model settings: written once per change (rev++ and an op settings entry), not again by a restarted publisher", async () => {
  const store = new MemoryModelStore();
  using _logs = captureLogs();
  const pub = new ModelPublisher(store, { registry: new Registry() });
  deepStrictEqual(await pub.setSettings({ encapPort: 7000 }), false, "before the first full sync");
  await pub.replaceAll(new Map());
  deepStrictEqual(
    store.settings,
    '{"encapPort":7000}',
    "the full sync writes the pending settings",
  );
  deepStrictEqual(store.stream.at(-1), {
    id: store.stream.at(-1)!.id,
    rev: 1,
    epoch: store.epochToken,
    op: "settings",
    service: "",
    settings: '{"encapPort":7000}',
  });
  deepStrictEqual(await pub.setSettings({ encapPort: 7000 }), false, "same settings: no write");
  deepStrictEqual(await pub.setSettings({ encapPort: 7000, lbNodes: ["n1"] }), true);
  deepStrictEqual([store.rev, store.writes], [2, 2]);
  const again = new ModelPublisher(store, { registry: new Registry() });
  await again.setSettings({ lbNodes: ["n1"], encapPort: 7000 });
  await again.replaceAll(new Map());
  deepStrictEqual([store.rev, store.writes], [2, 2], "a restarted controller writes nothing");
});

Deno.test("model settings: an agent left out of lbNodes withdraws its frontends and takes them back when selected; a selected one keeps them", async () => {
  const store = new MemoryModelStore();
  using _logs = captureLogs();
  await using ctl = await startTestController(store, MODEL_YAML);
  ctl.pub.setSettings({ encapPort: 7000, lbNodes: ["lb1"] });
  await waitUntil(() => store.settings !== "", "settings published");
  const seen: [string, ModelSettings, boolean][] = [];
  const agentOf = (node: string) =>
    startTestAgent(store, {
      nodeName: node,
      onSettings: (s, serving) => void seen.push([node, s, serving]),
    });
  await using lb1 = await agentOf("lb1");
  await using lb2 = await agentOf("lb2");
  await lb1.source.ready();
  await lb2.source.ready();
  await waitUntil(() => lb1.maps.services.size === 2, "lb1 (selected) serves both frontends");
  await lb2.cp.reconciler.waitIdleWithin(2_000);
  deepStrictEqual(lb2.maps.services.size, 0, "lb2 (not selected) loaded no frontend");
  deepStrictEqual([lb2.source.serving, lb2.source.view?.services.length], [false, 2]);
  deepStrictEqual(seen.find(([n]) => n === "lb1"), [
    "lb1",
    { encapPort: 7000, lbNodes: ["lb1"] },
    true,
  ]);
  deepStrictEqual(seen.find(([n]) => n === "lb2"), [
    "lb2",
    { encapPort: 7000, lbNodes: ["lb1"] },
    false,
  ]);

  // lb2 selected instead: it takes the frontends back, lb1 withdraws them.
  ctl.pub.setSettings({ encapPort: 7000, lbNodes: ["lb2"] });
  await waitUntil(() => lb2.maps.services.size === 2, "lb2 serves");
  await waitUntil(() => lb1.maps.services.size === 0, "lb1 withdrew");
  // A service change while withdrawn reaches the view, not the maps.
  ctl.file.load(MODEL_YAML + "  - name: default/x\n    frontends: [10.0.100.7:80/TCP]\n");
  await waitUntil(() => lb2.maps.services.size === 3, "lb2 serves the new service");
  await waitUntil(() => lb1.source.view?.services.length === 3, "lb1 follows the model");
  deepStrictEqual(lb1.maps.services.size, 0);

  // An empty list (or none) never empties every node: both serve.
  ctl.pub.setSettings({ encapPort: 7000, lbNodes: [] });
  await waitUntil(() => lb1.maps.services.size === 3, "empty list: lb1 serves again");
  ctl.pub.setSettings({});
  await waitUntil(() => seen.at(-1)?.[1].encapPort === undefined, "settings without a port");
  deepStrictEqual([lb1.maps.services.size, lb2.maps.services.size], [3, 3]);
  deepStrictEqual([lb1.source.serving, lb2.source.serving], [true, true]);
});

Deno.test("model settings: an LB node's BGP settings: its address as router id, mode lb, the peers that list it or every node", () => {
  const bgp = {
    localAsn: 65100,
    prefixes: ["10.0.100.0/24"],
    communities: [],
    peers: [
      { address: "10.9.1.1", asn: 65000 },
      { address: "10.9.2.1", asn: 65000, nodes: ["n1"] },
      { address: "10.9.3.1", asn: 65000, nodes: [] },
      { address: "10.9.1.2", asn: 65000 }, // n2's own address: refused there
    ],
  };
  const text = encodeSettings({ bgp });
  deepStrictEqual(parseSettings(text).settings, { bgp });
  const n1 = lbNodeBgpSettings(bgp, "n1", "10.9.1.5");
  deepStrictEqual(n1.settings, {
    routerId: "10.9.1.5",
    localAsn: 65100,
    prefixes: ["10.0.100.0/24"],
    communities: [],
    announce: "lb",
    peers: [
      { address: "10.9.1.1", asn: 65000 },
      { address: "10.9.2.1", asn: 65000 },
      { address: "10.9.1.2", asn: 65000 },
    ],
  });
  const n2 = lbNodeBgpSettings(bgp, "n2", "10.9.1.2");
  deepStrictEqual(n2.settings.peers.map((p) => p.address), ["10.9.1.1"]);
  deepStrictEqual(n2.problems.map((p) => p.peer), ["10.9.1.2"]);
  deepStrictEqual(parseSettings('{"bgp":{"refused":"bad"}}').settings, { bgp: { refused: "bad" } });
  const bad = parseSettings('{"encapPort":7000,"bgp":3}');
  deepStrictEqual(bad.settings, { encapPort: 7000 });
  deepStrictEqual(bad.problems, ["bgp 3 is not a BGP section"]);
});
