/**
 * IPv6 flows shared like IPv4 ones, with the in-memory table and store: the field and value
 * forms, learn → store → peer install, restore before ready, idle expiry, purge (a backend
 * removed, stored or not), the outage queue, an IPv4 backend behind an IPv6 frontend, and one
 * agent following IPv4 and IPv6 LB IPs at once.
 */

import { deepStrictEqual, ok } from "node:assert/strict";
import type { FlowSyncAgentOptions } from "./sync_agent.ts";
import { type AnyFlowEvent, describeFlow, FLOW_F_PEER, makeFlowKey } from "../../bpf/flow.ts";
import type { FlowKey6 } from "../../bpf/structs6.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { flush } from "./_testing.ts";
import { purgeBackendFlows, purgeRemovedBackends } from "./purge.ts";
import { captureLogs } from "../../../lib/log.ts";
import { flowField, parseFlowField } from "./field.ts";
import { decodeFlowValue, encodeFlowValue, vipKeys } from "./schema.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";
import { started, type TestAgent, testAgent, until } from "./_test_agents.ts";

const VIP6 = "2001:db8:100::1";
const VIP4 = "10.0.100.1";
const BE6 = ["2001:db8:2::3", "2001:db8:2::4"];
const BE4 = "10.0.1.2";

function key6(client: string, sport: number, dport = 80): FlowKey6 {
  return { saddr: client, daddr: VIP6, sport, dport, proto: 6 };
}

function event6(client: string, sport: number, backend: string | number): AnyFlowEvent {
  return { key: key6(client, sport), backend, serviceId: 1, tsNs: 0 };
}

/** A dual-stack service: `[VIP6]:80` and `VIP4:80`, IPv6 backends and one IPv4 backend. */
function services(v6 = BE6, v4 = [BE4]) {
  return {
    services: [{
      name: "default/web",
      frontends: [{ address: `[${VIP6}]:80/TCP` }, { address: `${VIP4}:80/TCP` }],
      backends: [
        ...v6.map((b) => ({ address: `[${b}]:8080/TCP` })),
        ...v4.map((b) => ({ address: `${b}:8080/TCP` })),
      ],
    }],
  };
}

function agent(
  name: string,
  store: MemoryFlowStore,
  options: Partial<FlowSyncAgentOptions> = {},
): TestAgent {
  return testAgent(name, store, { vips: [VIP6], services: services(), ...options });
}

/** Puts `ev`'s flow in `table` as the datapath does, and hands its event to `a`. */
function learnLocal(a: TestAgent, ev: AnyFlowEvent) {
  a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: a.table.nowNs() });
  a.agent.learn(ev);
}

Deno.test("IPv6 flow field and value forms; the IPv4 forms are unchanged", () => {
  const k = key6("2001:db8::5", 40000);
  const field = flowField(k);
  deepStrictEqual(field, "20010db8000000000000000000000005" + "9c40" + "0050" + "06", "field");
  deepStrictEqual(parseFlowField(field, VIP6), k, "round trip");
  deepStrictEqual(describeFlow(k), "[2001:db8::5]:40000->[2001:db8:100::1]:80/6", "log form");
  deepStrictEqual(
    encodeFlowValue("2001:db8:2::3", 1000),
    "20010db8000200000000000000000003:1000",
    "",
  );
  deepStrictEqual(
    decodeFlowValue("20010db8000200000000000000000003:1000").backend,
    "2001:db8:2::3",
  );
  deepStrictEqual(encodeFlowValue(parseIpv4(BE4), 1000), "0a000102:1000", "IPv4 backend");
  deepStrictEqual(
    decodeFlowValue("0a000102:0:1000"),
    { backend: 0x0a000102, learnedMs: 1000 },
    "old",
  );
  const k4 = makeFlowKey({ saddr: "10.0.0.1", daddr: VIP4, sport: 40000, dport: 80, proto: 6 });
  deepStrictEqual(flowField(k4), "0a0000019c40005006", "IPv4 field");
  deepStrictEqual(vipKeys(VIP6).flows, "hf:{2001:db8:100::1}:flows", "key name");
  let msg = "";
  try {
    parseFlowField("0a0000019c40005006", VIP6);
  } catch (err) {
    msg = (err as Error).message;
  }
  ok(msg.includes('"0a0000019c40005006"') && msg.includes(VIP6), `error: ${msg}`);
});

Deno.test("an IPv6 frontend's flow to an IPv4 backend is shared with its IPv4 backend", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  const b = agent("lb-b", store);
  await using _running = await started(a, b);
  const to4 = event6("2001:db8::6", 40001, parseIpv4(BE4));
  learnLocal(a, to4);
  await until("peer installs", () => b.table.size === 1);
  deepStrictEqual(b.table.get(to4.key), {
    backend: parseIpv4(BE4),
    flags: FLOW_F_PEER,
    lastSeenNs: 0,
  });
  deepStrictEqual(store.stored(VIP6, flowField(to4.key))?.backend, parseIpv4(BE4), "stored");
  const learned = logs.records.find((r) => r.msg === "flow learned");
  deepStrictEqual(learned?.flow, "[2001:db8::6]:40001->[2001:db8:100::1]:80/6", "readable");
  deepStrictEqual(learned?.backend, BE4, "backend named");
});

Deno.test("one agent follows IPv4 and IPv6 LB IPs: each family learned, installed, restored", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  const opts = { vips: [VIP4, VIP6] };
  const a = agent("lb-a", store, opts);
  const b = agent("lb-b", store, opts);
  await using _running = await started(a, b);
  deepStrictEqual(a.agent.vips, [VIP4, VIP6], "followed");
  const ev4: AnyFlowEvent = {
    key: makeFlowKey({ saddr: "10.0.0.1", daddr: VIP4, sport: 1, dport: 80, proto: 6 }),
    backend: parseIpv4(BE4),
    serviceId: 1,
    tsNs: 0,
  };
  const ev6 = event6("2001:db8::5", 2, BE6[1]!);
  learnLocal(a, ev4);
  learnLocal(a, ev6);
  await until("peer installs both", () => b.table.size === 2);
  deepStrictEqual([store.count(VIP4), store.count(VIP6)], [1, 1], "one per LB IP");
  // A third node joining restores both families before it is ready.
  const c = agent("lb-c", store, opts);
  await c.agent.start();
  try {
    deepStrictEqual(c.table.get(ev4.key)?.backend, ev4.backend, "IPv4 restored");
    deepStrictEqual(c.table.get(ev6.key)?.backend, ev6.backend, "IPv6 restored");
  } finally {
    await c.agent.stop();
  }
});

Deno.test("IPv6 restore before ready installs stored flows whose backend serves, rejects others", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const flows = [
    { field: flowField(key6("2001:db8::5", 1)), backend: BE6[0]! },
    { field: flowField(key6("2001:db8::6", 2)), backend: parseIpv4(BE4) },
    { field: flowField(key6("2001:db8::7", 3)), backend: "2001:db8:9::9" },
  ];
  await store.learn(VIP6, flows, { node: "lb-x", nowMs: Date.now(), idleTimeoutMs: 60_000 });
  const a = agent("lb-a", store);
  await using _running = await started(a);
  deepStrictEqual(a.table.size, 2, "installed");
  deepStrictEqual(a.table.get(key6("2001:db8::6", 2))?.backend, parseIpv4(BE4), "IPv4 backend");
  const restored = logs.records.find((r) => r.msg === "flows restored");
  deepStrictEqual([restored?.vip, restored?.installed, restored?.rejected], [VIP6, 2, 1], "log");
});

Deno.test("purging an IPv6 backend removes its IPv6 flows everywhere; a reload purges locally", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  const b = agent("lb-b", store);
  await using _running = await started(a, b);
  const gone = event6("2001:db8::5", 1, BE6[0]!);
  const stays = event6("2001:db8::6", 2, BE6[1]!);
  const to4 = event6("2001:db8::7", 3, parseIpv4(BE4));
  for (const ev of [gone, stays, to4]) learnLocal(a, ev);
  await flush(a.agent);
  await until("b has all", () => b.table.size === 3);
  const n = await purgeBackendFlows(`[${VIP6}]:80/TCP`, BE6[0]!, { store });
  deepStrictEqual(n, 1, "purged");
  await until("purge applied", () => a.table.size === 2 && b.table.size === 2);
  ok(!b.table.get(gone.key) && b.table.get(stays.key), "other flow stays");
  // A reload dropping the IPv4 backend: purged in the store, and from the map right away.
  const next = services(BE6, []);
  deepStrictEqual(a.agent.setServices(next), 1, "removed locally");
  deepStrictEqual(await purgeRemovedBackends(services(), next, { store }), 1, "purged in store");
  await until("b applied", () => b.table.size === 1);
  ok(
    logs.records.some((r) => r.msg === "flows purged" && r.frontend === `[${VIP6}]:80/TCP`),
    "log names the IPv6 frontend",
  );
});
