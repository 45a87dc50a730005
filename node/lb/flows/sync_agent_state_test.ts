import { ok } from "node:assert/strict";
import { FlowSyncAgent } from "./sync_agent.ts";
import { makeFlowKey } from "../../bpf/flow.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { MemoryFlowTable } from "./table.ts";
import { flush, sweep } from "./_testing.ts";
import { captureLogs } from "../../../lib/log.ts";
import { Registry } from "../../../lib/metrics.ts";
import { flowField } from "./field.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";

const VIP = "10.0.100.1";

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const web = (backends: string[]) => ({
  services: [{
    name: "default/web",
    frontends: [{ address: `${VIP}:80/TCP` }],
    backends: backends.map((b) => ({ address: `${b}:8080/TCP` })),
  }],
});

function make(name: string, store: MemoryFlowStore, services = web(["10.0.1.2"])) {
  const table = new MemoryFlowTable();
  const registry = new Registry();
  const agent = new FlowSyncAgent(table, store, {
    node: name,
    vips: [VIP],
    services,
    readBlockMs: 20,
    registry,
  });
  return { agent, table, registry };
}

Deno.test("flow agent state: each transition is logged and exported, through an outage and stop", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = make("lb-a", store);
  const state = (): string => a.agent.state; // re-read: calls change it
  const gauge = (state: string) =>
    a.registry.expose().includes(`holdfast_flow_agent_state{state="${state}"} 1`);
  ok(state() === "stopped" && gauge("stopped"), "starts stopped");
  await a.agent.start();
  ok(state() === "ready" && gauge("ready") && !gauge("stopped"), "ready after start");
  store.available = false;
  await sweep(a.agent); // a failing store call
  ok(state() === "store-down" && a.agent.ready && !a.agent.storeUp, "store-down");
  ok(gauge("store-down") && a.registry.expose().includes("holdfast_flow_store_up 0"), "gauge");
  store.available = true;
  await until("recovered", () => state() === "ready");
  await a.agent.stop();
  ok(state() === "stopped" && gauge("stopped"), "stopped");
  const moves = logs.records.filter((r) => r.msg === "flow agent state" && r.node === "lb-a")
    .map((r) => `${r.from}>${r.to}`);
  const want = [
    "stopped>restoring",
    "restoring>ready",
    "ready>store-down",
    "store-down>recovering",
    "recovering>ready",
    "ready>stopping",
    "stopping>stopped",
  ];
  ok(moves.join() === want.join(), `transitions: ${moves.join()}`);
  ok(
    logs.records.some((r) => r.msg === "flow agent state" && r.to === "store-down" && r.reason),
    "reason logged",
  );
  let threw = false;
  await a.agent.start().then(() => a.agent.stop(), () => threw = true);
  ok(!threw, "restartable after stop");
});

Deno.test("flow agent: a stop during a start that cannot restore ends the start", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  store.available = false;
  const a = make("lb-a", store);
  const started = a.agent.start();
  await until("restoring", () => a.agent.state === "restoring");
  await a.agent.stop();
  const state: string = a.agent.state;
  let err: Error | undefined;
  await started.catch((e) => err = e);
  ok(err?.message.includes("stopped before restoring"), `start: ${err?.message}`);
  ok(state === "stopped", state);
});

Deno.test("trust boundary: a peer's flow to a backend not serving its frontend is not installed", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = make("lb-a", store);
  const peer = make("lb-p", store, web(["10.0.1.2", "10.0.1.66"]));
  await a.agent.start();
  await peer.agent.start();
  try {
    const key = (sport: number, dport = 80) =>
      makeFlowKey({ saddr: "10.0.0.1", daddr: VIP, sport, dport, proto: 6 });
    const learn = (k: ReturnType<typeof key>, backend: string) =>
      peer.agent.learn({ key: k, backend: parseIpv4(backend), serviceId: 1, tsNs: 0 });
    learn(key(1), "10.0.1.66"); // a's config does not have this backend
    learn(key(2, 81), "10.0.1.2"); // nor this frontend (port 81)
    learn(key(3), "10.0.1.2");
    await flush(peer.agent);
    await until("valid flow installed", () => a.table.get(key(3)) !== undefined);
    ok(a.table.size === 1, `installed ${a.table.size}, want only the valid flow`);
    const metrics = a.registry.expose();
    ok(
      metrics.includes(
        `holdfast_flows_rejected_total{vip="${VIP}",reason="backend_not_serving"} 1`,
      ) &&
        metrics.includes(`holdfast_flows_rejected_total{vip="${VIP}",reason="unknown_frontend"} 1`),
      metrics,
    );
    const line = logs.records.find((r) =>
      r.msg === "flow rejected: backend not serving this frontend" && r.node === "lb-a"
    );
    ok(line?.backend === "10.0.1.66" && line.frontend === `${VIP}:80/TCP`, "log line");

    // The config changes: the backend serves now; a restore (LB IP followed again) installs it.
    a.agent.setServices(web(["10.0.1.2", "10.0.1.66"]));
    await a.agent.setVips([]);
    await a.agent.setVips([VIP]);
    ok(a.table.get(key(1))?.backend === parseIpv4("10.0.1.66"), "admitted after setServices");
    ok(store.stored(VIP, flowField(key(2, 81))) !== undefined, "the store keeps what it has");
  } finally {
    await a.agent.stop();
    await peer.agent.stop();
  }
});
