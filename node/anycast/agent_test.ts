import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry, registry } from "../../lib/metrics.ts";
import { AnycastAgent } from "./agent.ts";
import { MemoryLoopback } from "./loopback.ts";
import { desiredAddresses } from "./model.ts";
import { AnycastStateError, parseAnycastState } from "./state_file.ts";

const state = (pods: string) =>
  parseAnycastState(`
services:
  - { name: default/web, addresses: [10.0.100.10], ports: [80/TCP], selector: { app: web } }
  - { name: default/web-tls, addresses: [10.0.100.10], ports: [443/TCP], selector: { app: tls } }
  - name: default/api
    addresses: [10.0.100.11]
    selector: { app: api }
    podSelector: { matchExpressions: [{ key: track, operator: NotIn, values: [canary] }] }
  - { name: default/db, mode: stateful, addresses: [10.0.100.12], selector: { app: db } }
  - { name: other/web, addresses: [10.0.100.13], selector: { app: web } }
  - { name: default/headless, addresses: [10.0.100.14] }
pods: ${pods}
`);

const pod = (name: string, labels: Record<string, string>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ name, node: "n1", labels, ready: true, ...extra });

Deno.test("anycast: an address is held exactly while a ready, non-terminating local pod matches", () => {
  const held = (
    pods: string[],
  ) => [
    ...desiredAddresses("n1", state(`[${pods.join()}]`).services, state(`[${pods.join()}]`).pods)
      .keys(),
  ];
  deepStrictEqual(held([pod("default/web-1", { app: "web" })]), ["10.0.100.10"], "ready pod");
  deepStrictEqual(
    held([pod("default/web-1", { app: "web" }, { terminating: true })]),
    [],
    "terminating",
  );
  deepStrictEqual(held([pod("default/web-1", { app: "web" }, { ready: false })]), [], "not ready");
  deepStrictEqual(held([pod("default/web-1", { app: "web" }, { node: "n2" })]), [], "other node");
  // Namespaces: other/web selects only pods of namespace "other".
  deepStrictEqual(held([pod("other/web-1", { app: "web" })]), ["10.0.100.13"], "namespace");
  // Full selector semantics: NotIn excludes the canary, keeps a pod without the key.
  deepStrictEqual(held([pod("default/api-1", { app: "api", track: "canary" })]), [], "NotIn");
  deepStrictEqual(held([pod("default/api-1", { app: "api" })]), ["10.0.100.11"], "NotIn, no key");
  // Stateful services and services without a selector are never held.
  deepStrictEqual(held([pod("default/db-1", { app: "db" })]), [], "stateful");
  deepStrictEqual(held([pod("default/x", {})]), [], "no selector selects nothing");
});

Deno.test("anycast: a shared address is held while any of its services has a local ready pod", () => {
  const s = state(
    `[${pod("default/tls-1", { app: "tls" })}, ${
      pod("default/web-1", { app: "web" }, { terminating: true })
    }]`,
  );
  const d = desiredAddresses("n1", s.services, s.pods);
  deepStrictEqual(d.get("10.0.100.10"), { services: ["default/web-tls"], pods: ["default/tls-1"] });
});

Deno.test("anycast agent: assumes and forfeits on lo, logging address, services and pods", async () => {
  using logs = captureLogs();
  const lo = new MemoryLoopback();
  lo.addresses.add("127.0.0.9"); // not ours: never touched
  lo.addresses.add("10.0.200.5"); // in an owned prefix, left over from a crash: removed
  const agent = new AnycastAgent("n1", lo, { prefixes: ["10.0.200.0/24"] });
  await agent.update(state(`[${pod("default/web-1", { app: "web" })}]`));
  deepStrictEqual([...lo.addresses].sort(), ["10.0.100.10", "127.0.0.9"]);
  const held = 'holdfast_anycast_address{address="10.0.100.10"}';
  deepStrictEqual(registry.expose().includes(`${held} 1`), true, "held address is 1 in /metrics");
  await agent.update(state(`[${pod("default/web-1", { app: "web" }, { terminating: true })}]`));
  deepStrictEqual([...lo.addresses], ["127.0.0.9"]);
  deepStrictEqual(registry.expose().includes(`${held} 0`), true, "forfeited: 0 in /metrics");
  const lines = logs.records.filter((r) => /^(assuming|forfeiting) address/.test(r.msg));
  deepStrictEqual(lines.map((r) => [r.msg, r.pods, r.services, r.reason]), [
    ["forfeiting address 10.0.200.5", [], [], "not wanted by any local ready pod (left over)"],
    ["assuming address 10.0.100.10", ["default/web-1"], ["default/web"], undefined],
    [
      "forfeiting address 10.0.100.10",
      ["default/web-1"],
      ["default/web"],
      "default/web-1 terminating",
    ],
  ]);
});

Deno.test("anycast agent: its metrics go to the registry it is given (lib/metrics.ts style)", async () => {
  using _logs = captureLogs();
  const own = new Registry();
  const agent = new AnycastAgent("n1", new MemoryLoopback(), { registry: own });
  await agent.update(state(`[${pod("default/web-1", { app: "web" })}]`));
  deepStrictEqual(own.gauge("holdfast_anycast_addresses_held", "").get(), 1);
  deepStrictEqual(
    own.counter("holdfast_anycast_changes_total", "", { labelNames: ["action"] }).get({
      action: "assume",
    }),
    1,
  );
  await agent.forfeitAll();
  deepStrictEqual(own.gauge("holdfast_anycast_addresses_held", "").get(), 0);
});

Deno.test("anycast agent: a failing lo is retried until it converges; forfeitAll withdraws all", async () => {
  using _logs = captureLogs();
  const lo = new MemoryLoopback();
  lo.failNext = 2;
  const agent = new AnycastAgent("n1", lo);
  await agent.update(
    state(`[${pod("default/web-1", { app: "web" })}, ${pod("default/api-1", { app: "api" })}]`),
  );
  deepStrictEqual([...lo.addresses].sort(), ["10.0.100.10", "10.0.100.11"]);
  await agent.forfeitAll();
  deepStrictEqual([...lo.addresses], []);
  deepStrictEqual(agent.held.size, 0);
});

Deno.test("anycast state file: a bad entry refuses the file, naming the path", () => {
  for (
    const [text, path] of [
      ["services: [{ name: web, addresses: [] }]", "$.services[0].name"],
      ["services: [{ name: a/b, addresses: [10.0.100.300] }]", "$.services[0].addresses[0]"],
      ["services: [{ name: a/b, mode: bgp }]", "$.services[0].mode"],
      [
        "services: [{ name: a/b, podSelector: { matchExpressions: [{ key: k, operator: Is }] } }]",
        "$.services[0].podSelector",
      ],
      ["pods: [{ name: a/b, node: n1, ready: yes }]", "$.pods[0].ready"],
      ["pods: [{ name: a/b }]", "$.pods[0].node"],
    ]
  ) {
    try {
      parseAnycastState(text!);
      throw new Error(`accepted ${text}`);
    } catch (e) {
      if (!(e instanceof AnycastStateError) || !e.message.includes(path!)) throw e;
    }
  }
});

Deno.test("anycast agent: resync puts back an address removed behind its back", async () => {
  using _logs = captureLogs();
  const lo = new MemoryLoopback();
  const agent = new AnycastAgent("n1", lo);
  await agent.update(state(`[${pod("default/web-1", { app: "web" })}]`));
  lo.addresses.delete("10.0.100.10");
  await agent.resync();
  deepStrictEqual([...lo.addresses], ["10.0.100.10"]);
});

Deno.test("anycast agent: IPv6 LB IPs are held in RFC 5952 form; a stray /128 in an owned IPv6 prefix goes", async () => {
  using _logs = captureLogs();
  const lo = new MemoryLoopback();
  lo.addresses.add("2001:db8:200::5"); // in an owned prefix, left over from a crash: removed
  lo.addresses.add("2001:db8:300::5"); // not ours: never touched
  const s = parseAnycastState(`
services:
  - { name: default/web6, addresses: ["2001:DB8:100:0::10", 10.0.100.10], selector: { app: web } }
pods: [${pod("default/web-1", { app: "web" })}]
`);
  const agent = new AnycastAgent("n1", lo, { prefixes: ["2001:db8:200::/64", "10.0.200.0/24"] });
  await agent.update(s);
  deepStrictEqual([...lo.addresses].sort(), ["10.0.100.10", "2001:db8:100::10", "2001:db8:300::5"]);
});

Deno.test("anycast agent: an address lo refuses is named; the others are held all the same", async () => {
  using logs = captureLogs();
  class Refusing extends MemoryLoopback {
    override add(address: string): Promise<void> {
      if (address === "10.0.100.10") return Promise.reject(new Error(`refused "${address}"`));
      return super.add(address);
    }
  }
  const lo = new Refusing();
  const agent = new AnycastAgent("n1", lo, { maxRetries: 1 });
  await agent.update(
    state(`[${pod("default/web-1", { app: "web" })}, ${pod("default/api-1", { app: "api" })}]`),
  );
  deepStrictEqual([...lo.addresses], ["10.0.100.11"]);
  deepStrictEqual([...agent.held.keys()], ["10.0.100.11"]);
  const named = logs.records.filter((r) => r.msg === "cannot change address; the others go on");
  deepStrictEqual(named.map((r) => r.address), ["10.0.100.10", "10.0.100.10"]);
});
