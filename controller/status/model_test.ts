import { deepStrictEqual, ok } from "node:assert/strict";
import { parsePromText } from "../../lib/prom_text.ts";
import { metricsUrl, readStatus } from "./collect.ts";
import type { Scrape } from "./model.ts";
import { MemoryStatusStore, type NodeMetrics, nodeMetricsText } from "./_testing.ts";
import { renderStatusText, textTable } from "./text.ts";
import { flowValueBackend } from "./redis_status_store.ts";

const WEB = {
  service: {
    name: "default/web",
    frontends: [{ address: "10.0.100.1:80/TCP" }, { address: "10.0.100.1:443/TCP" }],
  },
  backends: [{ address: "10.1.0.1:8080/TCP" }, { address: "10.1.0.2:8080/TCP" }],
};
const DNS = {
  service: { name: "kube/dns", frontends: [{ address: "10.0.100.2:53/UDP" }] },
  backends: [{ address: "10.1.0.9:53/UDP", state: "terminating" as const }],
};

function scraper(nodes: Record<string, NodeMetrics | "down">) {
  return (url: string): Promise<Scrape> => {
    const m = nodes[url];
    if (m === undefined || m === "down") {
      return Promise.resolve({ url, samples: null, error: "connection refused" });
    }
    return Promise.resolve({ url, samples: parsePromText(nodeMetricsText(m)) });
  };
}

Deno.test("status: LB addresses with the nodes serving them and their flows", async () => {
  const store = new MemoryStatusStore({
    flows: [{ lbIp: "10.0.100.1", total: 7, byBackend: { "10.1.0.1": 4, "10.1.0.2": 3 } }],
  });
  store.setEntries([WEB, DNS], "ab".repeat(32));
  const scrape = scraper({
    "http://a/metrics": {
      role: "lb",
      node: "lb1",
      lbIps: { "10.0.100.1": 1, "10.0.100.2": 1 },
      build: { version: "0.1.0", commit: "cbf7d7b5a0296f83d03c4f84b2bbca662937f4d3" },
    },
    "http://b/metrics": { role: "lb", node: "lb2", lbIps: { "10.0.100.1": 1, "10.0.100.2": 0 } },
    "http://c/metrics": "down",
  });
  const s = await readStatus(store, ["http://a/metrics", "http://b/metrics", "http://c/metrics"], {
    scrape,
    now: () => 1000,
  });
  deepStrictEqual(s.redis, { up: true });
  deepStrictEqual(s.model, { epoch: "e1", rev: 2, services: 2 });
  deepStrictEqual(s.addresses, [
    {
      address: "10.0.100.1",
      frontends: ["10.0.100.1:443/TCP default/web", "10.0.100.1:80/TCP default/web"],
      nodes: ["lb1", "lb2"],
      flows: 7,
    },
    { address: "10.0.100.2", frontends: ["10.0.100.2:53/UDP kube/dns"], nodes: ["lb1"], flows: 0 },
  ]);
  deepStrictEqual(s.backends.map((b) => [b.address, b.state, b.flows]), [
    ["10.1.0.1:8080/TCP", "active", 4],
    ["10.1.0.2:8080/TCP", "active", 3],
    ["10.1.0.9:53/UDP", "terminating", 0],
  ]);
  deepStrictEqual(s.nodes.map((n) => [n.node, n.role, n.up]), [
    ["lb1", "lb", true],
    ["lb2", "lb", true],
    ["c", "unknown", false],
  ]);
  deepStrictEqual(s.nodes[2]!.error, "connection refused");
  // Which release each node runs (mixed during a roll); none exposed: "".
  deepStrictEqual(s.nodes.map((n) => n.version), ["0.1.0 cbf7d7b5a029", "", ""]);
  deepStrictEqual(s.policy.model, "ab".repeat(32));
});

Deno.test("status: health from the nodes' metrics, else from their last reports", async () => {
  const store = new MemoryStatusStore({
    reports: [
      { node: "lb3", service: "default/web", backend: "10.1.0.2:9000", state: "unhealthy" },
      { node: "lb3", service: "default/web", backend: "10.1.0.1:9000", state: "unhealthy" },
      { node: "lb3", service: "default/web", backend: "10.1.0.1:9000", state: "healthy" },
    ],
  });
  store.setEntries([WEB]);
  const scrape = scraper({
    "http://a/metrics": {
      role: "lb",
      node: "lb1",
      health: {
        "default/web|10.1.0.1:8080/TCP": "active",
        "default/web|10.1.0.2:8080/TCP": "quarantined",
      },
    },
  });
  const s = await readStatus(store, ["http://a/metrics"], { scrape });
  deepStrictEqual(s.backends.map((b) => [b.address, b.health, b.healthBy]), [
    ["10.1.0.1:8080/TCP", "healthy", { lb3: "healthy", lb1: "healthy" }],
    ["10.1.0.2:8080/TCP", "quarantined", { lb3: "quarantined", lb1: "quarantined" }],
  ]);
});

Deno.test("status: policy per node, egress owners, anycast nodes per address", async () => {
  const store = new MemoryStatusStore();
  store.setEgress([
    { egress: "ns/b", address: "198.18.0.2", holder: null, epoch: null, ttlMs: null },
    { egress: "ns/a", address: "198.18.0.1", holder: "nat1/x", epoch: 7, ttlMs: 900 },
  ]);
  const scrape = scraper({
    "http://a/metrics": { role: "lb", node: "lb1", policy: "cd".repeat(32) },
    "http://b/metrics": { role: "anycast", node: "n1", anycast: { "10.0.200.1": 1 } },
    "http://c/metrics": {
      role: "anycast",
      node: "n2",
      anycast: { "10.0.200.1": 1, "10.0.200.2": 0 },
    },
  });
  const s = await readStatus(store, ["http://a/metrics", "http://b/metrics", "http://c/metrics"], {
    scrape,
  });
  deepStrictEqual(s.policy.nodes, [{ node: "lb1", digest: "cd".repeat(32) }]);
  deepStrictEqual(s.policy.abi, 1);
  deepStrictEqual(s.egress.map((e) => [e.egress, e.holder, e.epoch]), [
    ["ns/a", "nat1/x", 7],
    ["ns/b", null, null],
  ]);
  deepStrictEqual(s.anycast, [{ address: "10.0.200.1", nodes: ["n1", "n2"] }]);
});

Deno.test("status: Redis down or absent is shown, the nodes still are", async () => {
  const store = new MemoryStatusStore();
  store.down = true;
  const scrape = scraper({
    "http://a/metrics": { role: "lb", node: "lb1", lbIps: { "10.0.100.5": 1 } },
  });
  const s = await readStatus(store, ["http://a/metrics"], { scrape });
  deepStrictEqual(s.redis, { up: false, error: "connection refused" });
  deepStrictEqual(s.addresses.map((a) => [a.address, a.nodes]), [["10.0.100.5", ["lb1"]]]);
  const none = await readStatus(null, [], { scrape });
  deepStrictEqual(none.redis, { up: false, error: "no --redis given" });
});

Deno.test("status: a bad model entry is left out, the rest shown", async () => {
  const store = new MemoryStatusStore();
  store.setEntries([WEB]);
  const entries = new Map(store.state.model.entries).set("bad/x", "{not json");
  store.state = { ...store.state, model: { ...store.state.model, entries } };
  const s = await readStatus(store, []);
  deepStrictEqual(s.model.services, 1);
});

Deno.test("status: text tables align; metrics URLs; flow values", async () => {
  deepStrictEqual(textTable(["A", "BB"], [["xxx", "1"], ["y", "22"]]), "A    BB\nxxx  1\ny    22");
  deepStrictEqual(metricsUrl("127.0.0.1:9470"), "http://127.0.0.1:9470/metrics");
  deepStrictEqual(metricsUrl("http://h:1/x"), "http://h:1/x");
  let threw = false;
  try {
    metricsUrl("ftp://h");
  } catch (e) {
    threw = /Cannot use agent "ftp:\/\/h"/.test((e as Error).message);
  }
  ok(threw, "ftp:// is refused");
  deepStrictEqual(flowValueBackend("0a010001:1700000000000"), "10.1.0.1");
  deepStrictEqual(flowValueBackend(`20010db8${"0".repeat(23)}1:5`), "2001:db8::1");
  deepStrictEqual(flowValueBackend("zz:1"), undefined);
  const store = new MemoryStatusStore();
  store.setEntries([WEB]);
  const text = renderStatusText(await readStatus(store, []));
  ok(text.includes("10.0.100.1  -                 0      10.0.100.1:443/TCP"), text);
});
