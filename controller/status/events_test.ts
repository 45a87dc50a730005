import { deepStrictEqual } from "node:assert/strict";
import { parsePromText } from "../../lib/prom_text.ts";
import { readStatus } from "./collect.ts";
import { diffStatus } from "./events.ts";
import type { Scrape } from "./model.ts";
import { MemoryStatusStore, type NodeMetrics, nodeMetricsText } from "./_testing.ts";
import { dashboardHandler, type FeedMessage, StatusFeed } from "./dashboard.ts";

const WEB = {
  service: { name: "default/web", frontends: [{ address: "10.0.100.1:80/TCP" }] },
  backends: [{ address: "10.1.0.1:8080/TCP" }],
};

/** A world the test changes between readings: a store and each node's metrics. */
function world() {
  const store = new MemoryStatusStore();
  store.setEntries([WEB], "aa".repeat(32));
  store.setEgress([{
    egress: "ns/e",
    address: "198.18.0.1",
    holder: "nat1/b",
    epoch: 3,
    ttlMs: 1,
  }]);
  const nodes: Record<string, NodeMetrics | "down"> = {
    "http://lb1/metrics": {
      role: "lb",
      node: "lb1",
      lbIps: { "10.0.100.1": 1 },
      policy: "aa".repeat(32),
      health: { "default/web|10.1.0.1:8080/TCP": "active" },
    },
    "http://any1/metrics": { role: "anycast", node: "any1", anycast: { "10.0.200.1": 1 } },
  };
  const scrape = (url: string): Promise<Scrape> => {
    const m = nodes[url];
    return Promise.resolve(
      !m || m === "down"
        ? { url, samples: null, error: "refused" }
        : { url, samples: parsePromText(nodeMetricsText(m)) },
    );
  };
  let now = 0;
  const read = () => readStatus(store, Object.keys(nodes), { scrape, now: () => ++now });
  return { store, nodes, read };
}

Deno.test("events: nothing changed, nothing to tell", async () => {
  const w = world();
  deepStrictEqual(diffStatus(await w.read(), await w.read()), []);
});

Deno.test("events: failover, quarantine, swap, leave, anycast drain", async () => {
  const w = world();
  const before = await w.read();
  w.store.setEgress([{
    egress: "ns/e",
    address: "198.18.0.1",
    holder: "nat2/c",
    epoch: 4,
    ttlMs: 1,
  }]);
  w.store.setEntries([WEB], "bb".repeat(32));
  w.nodes["http://lb1/metrics"] = {
    role: "lb",
    node: "lb1",
    lbIps: { "10.0.100.1": 0 },
    policy: "bb".repeat(32),
    health: { "default/web|10.1.0.1:8080/TCP": "quarantined" },
  };
  w.nodes["http://any1/metrics"] = "down";
  const after = await w.read();
  deepStrictEqual(diffStatus(before, after).map((e) => [e.kind, e.text]), [
    ["failover", "egress 198.18.0.1 (ns/e): nat1/b → nat2/c (epoch 4)"],
    ["leave", "lb1 no longer serves 10.0.100.1"],
    ["leave", "any1 (anycast) stopped answering: refused"],
    ["quarantine", "default/web 10.1.0.1:8080/TCP quarantined"],
    ["swap", `model policy ${"a".repeat(12)} → ${"b".repeat(12)}`],
    ["swap", `lb1 serves policy ${"a".repeat(12)} → ${"b".repeat(12)}`],
    ["anycast", "any1 drained anycast 10.0.200.1"],
  ]);
  // And back: join, recover.
  w.nodes["http://lb1/metrics"] = {
    role: "lb",
    node: "lb1",
    lbIps: { "10.0.100.1": 1 },
    policy: "bb".repeat(32),
    health: { "default/web|10.1.0.1:8080/TCP": "active" },
  };
  const back = await w.read();
  deepStrictEqual(diffStatus(after, back).map((e) => e.kind), ["join", "recover"]);
});

Deno.test("events: a Redis outage is no failover or swap", async () => {
  const w = world();
  const before = await w.read();
  w.store.down = true;
  deepStrictEqual(diffStatus(before, await w.read()), []);
});

Deno.test("feed: subscribers get each snapshot and event; SSE replays the timeline", async () => {
  const w = world();
  const feed = new StatusFeed(w.read, { historySize: 5 });
  const got: FeedMessage[] = [];
  const unsubscribe = feed.subscribe((m) => got.push(m));
  await feed.tick();
  w.store.setEgress([{
    egress: "ns/e",
    address: "198.18.0.1",
    holder: "nat2/c",
    epoch: 4,
    ttlMs: 1,
  }]);
  await feed.tick();
  unsubscribe();
  deepStrictEqual(got.map((m) => m.type), ["snapshot", "snapshot", "timeline"]);
  deepStrictEqual(feed.history().map((e) => e.kind), ["failover"]);

  // The event stream: a retry hint, the latest snapshot, then the timeline so far.
  const handle = dashboardHandler(feed);
  const res = await handle(new Request("http://x/dashboard/events"))!;
  deepStrictEqual(res.headers.get("content-type"), "text/event-stream");
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (let i = 0; i < 10 && !text.includes("event: timeline"); i++) {
    text += (await reader.read()).value ?? "";
  }
  deepStrictEqual(text.match(/^event: \w+/gm), ["event: snapshot", "event: timeline"]);
  await feed.stop(); // ends the stream
  for (let i = 0; i < 10; i++) if ((await reader.read()).done) break;
  deepStrictEqual(handle(new Request("http://x/metrics")), null);
  const json = await (await handle(new Request("http://x/dashboard/status.json"))!).json();
  deepStrictEqual(json.egress[0].holder, "nat2/c");
});
