// A store that restarted empty while none of this node's calls failed (a quick Redis restart
// between two calls, or a failover to an empty replica) must still be noticed: the agent checks
// the store's incarnation on a reconnect and on every sweep, and writes its flows back.
import { ok } from "node:assert/strict";
import { makeFlowKey } from "../../bpf/flow.ts";
import { captureLogs } from "../../../lib/log.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { flush } from "./_testing.ts";
import { started, testAgent, until } from "./_test_agents.ts";

const VIP = "10.0.100.1";
const SERVICES = {
  services: [{
    name: "default/web",
    frontends: [{ address: `${VIP}:80/TCP` }],
    backends: [{ address: "10.0.1.2:8080/TCP" }],
  }],
};

function learnOne(a: ReturnType<typeof testAgent>, client: string): void {
  const key = makeFlowKey({ saddr: client, daddr: VIP, sport: 40000, dport: 80, proto: 6 });
  const backend = parseIpv4("10.0.1.2");
  a.table.put(key, { backend, flags: 0, lastSeenNs: a.table.nowNs() });
  a.agent.learn({ key, backend, serviceId: 1, tsNs: 0 });
}

for (
  const [how, options] of [
    ["a reconnect", { sweepIntervalMs: 3_600_000 }], // no sweep in the test: the reconnect it is
    ["the next sweep", { sweepIntervalMs: 30 }],
  ] as const
) {
  Deno.test(`store restarted empty with no call failing: noticed on ${how}, flows written back`, async () => {
    using logs = captureLogs();
    const store = new MemoryFlowStore();
    const a = testAgent("lb-a", store, { vips: [VIP], services: SERVICES, ...options });
    const b = testAgent("lb-b", store, { vips: [VIP], services: SERVICES, ...options });
    await using _running = await started(a, b);
    learnOne(a, "10.0.0.1");
    await flush(a.agent);
    await until("b has it", () => b.table.size === 1);
    store.restart(); // no call saw it down
    if (how === "a reconnect") store.reconnected();
    await until("rewritten", () => store.count(VIP) === 1);
    ok(
      logs.records.some((r) => r.msg === "flow store lost its data" && r.node === "lb-a"),
      "the check is logged with the node",
    );
    ok(
      logs.records.some((r) => r.msg === "flow store restarted empty, rewriting local flows"),
      "the recovery rewrote the local flows",
    );
    await until("a back in sync", () => a.agent.storeUp && b.agent.storeUp);
    learnOne(a, "10.0.0.2"); // sharing goes on after the recovery
    await until("b got the next flow", () => b.table.size === 2);
  });
}

Deno.test("store reconnected with its data: no recovery, nothing rewritten", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = testAgent("lb-a", store, { vips: [VIP], services: SERVICES, sweepIntervalMs: 60_000 });
  await using _running = await started(a);
  learnOne(a, "10.0.0.1");
  await flush(a.agent);
  store.reconnected();
  await new Promise((r) => setTimeout(r, 50));
  ok(a.agent.storeUp, "still in sync");
  ok(!logs.records.some((r) => r.msg === "flow store lost its data"), "no false alarm");
});
