import { deepStrictEqual, ok } from "node:assert/strict";
import type { FlowSyncAgentOptions } from "./sync_agent.ts";
import { type AnyFlowEvent, type FlowEvent, makeFlowKey } from "../../bpf/flow.ts";
import { StoreUnavailableError } from "./store.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { flush, sweep, tick } from "./_testing.ts";
import { purgeBackendFlows } from "./purge.ts";
import { captureLogs } from "../../../lib/log.ts";
import { flowAddress, flowField } from "./field.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";
import { started, type TestAgent, testAgent, TestClock, until } from "./_test_agents.ts";

const VIP = "10.0.100.1";

function event(client: string, sport: number, backend: string, vip = VIP): FlowEvent {
  return {
    key: makeFlowKey({ saddr: client, daddr: vip, sport, dport: 80, proto: 6 }),
    backend: parseIpv4(backend),
    serviceId: 1,
    tsNs: 0,
  };
}

const VIP2 = "10.0.100.2";
const VIP6 = "2001:db8:100::1";

/**
 * The services config the agents check flows from the store against: both IPv4 LB IPs on
 * 80/TCP, and `[VIP6]:80/TCP` served by the backends of {@link V6}.
 */
function services(backends = range("10.0.1.", 20).concat(range("10.0.2.", 20))) {
  return {
    services: [
      ...[VIP, VIP2].map((vip, i) => ({
        name: `default/web${i}`,
        frontends: [{ address: `${vip}:80/TCP` }],
        backends: backends.map((b) => ({ address: `${b}:8080/TCP` })),
      })),
      {
        name: "default/web6",
        frontends: [{ address: `[${VIP6}]:80/TCP` }],
        backends: Array.from(
          { length: 20 },
          (_, i) => ({ address: `[${V6.backend(i + 1)}]:8080/TCP` }),
        ),
      },
    ],
  };
}

/** The addresses of a scenario run for one family (the shared scenarios run for both). */
interface Family {
  readonly name: string;
  /** The followed LB IP. */
  readonly vip: string;
  /** An LB IP of this family nobody follows. */
  readonly other: string;
  /** Client n's address. */
  client(n: number): string;
  /** Backend n's address (1–20 serve the LB IP). */
  backend(n: number): string;
}

const V4: Family = {
  name: "IPv4",
  vip: VIP,
  other: "10.0.200.1",
  client: (n) => `10.0.0.${n}`,
  backend: (n) => `10.0.1.${n}`,
};

const V6: Family = {
  name: "IPv6",
  vip: VIP6,
  other: "2001:db8:200::1",
  client: (n) => `2001:db8::${n.toString(16)}`,
  backend: (n) => `2001:db8:1::${n.toString(16)}`,
};

/** The frontend `f`'s LB IP port 80 as a config writes it. */
function frontend(f: Family): string {
  return f === V6 ? `[${f.vip}]:80/TCP` : `${f.vip}:80/TCP`;
}

/** A new-flow event of family `f`: client n → the LB IP (or `vip`) port 80, to backend b. */
function eventOf(f: Family, client: number, sport: number, backend: number, vip = f.vip) {
  const key = { saddr: flowAddress(f.client(client)), daddr: flowAddress(vip), sport, dport: 80 };
  return {
    key: { ...key, proto: 6 },
    backend: flowAddress(f.backend(backend)),
    serviceId: 1,
    tsNs: 0,
  } as AnyFlowEvent;
}

function range(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
}

function agent(
  name: string,
  store: MemoryFlowStore,
  options: Partial<FlowSyncAgentOptions> & { clock?: TestClock } = {},
  family = V4,
): TestAgent {
  return testAgent(name, store, { vips: [family.vip], services: services(), ...options });
}

for (const f of [V4, V6]) {
  Deno.test(`${f.name}: a flow learned by one agent is stored and installed by its peer, not by itself`, async () => {
    using logs = captureLogs();
    const store = new MemoryFlowStore();
    const a = agent("lb-a", store, {}, f);
    const b = agent("lb-b", store, {}, f);
    await using _running = await started(a, b);
    const ev = eventOf(f, 1, 40000, 2);
    a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: a.table.nowNs() });
    a.agent.learn(ev);
    a.agent.learn(eventOf(f, 9, 1, 2, f.other)); // not ours: ignored
    await until("peer install", () => b.table.get(ev.key) !== undefined);
    deepStrictEqual(b.table.get(ev.key), { backend: ev.backend, flags: 1, lastSeenNs: 0 }, "peer");
    deepStrictEqual(a.table.get(ev.key)?.flags, 0, "learner keeps its own entry");
    deepStrictEqual(store.stored(f.vip, flowField(ev.key))?.backend, ev.backend, "stored");
    deepStrictEqual(store.count(f.other), 0, "other LB IP");
    const msgs = logs.records.map((r) => `${r.node} ${r.msg}`);
    ok(msgs.includes("lb-a flow learned"), msgs.join("; "));
    ok(msgs.includes("lb-b flow installed from peer"), msgs.join("; "));
    ok(!msgs.includes("lb-a flow installed from peer"), "own addition skipped");
    ok(
      a.registry.expose().includes(`holdfast_flows_learned_total{vip="${f.vip}"} 1`),
      "metric",
    );
  });
}

Deno.test("start restores every stored flow before ready, waiting while the store is down", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  const flows = Array.from({ length: 2500 }, (_, i) => ({
    field: flowField(
      makeFlowKey({ saddr: 0x0b000000 + i, daddr: VIP, sport: 1000, dport: 80, proto: 6 }),
    ),
    backend: parseIpv4("10.0.1.3"),
  }));
  await store.learn(VIP, flows, { node: "lb-a", nowMs: Date.now(), idleTimeoutMs: 60_000 });
  store.available = false;
  const b = agent("lb-b", store);
  let ready = false;
  const started = b.agent.start().then(() => ready = true);
  await new Promise((r) => setTimeout(r, 150));
  ok(!ready && b.table.size === 0, "not ready while the store is down");
  store.available = true;
  await started;
  try {
    deepStrictEqual(b.table.size, 2500, "all restored at ready");
    ok(b.agent.ready, "ready");
  } finally {
    await b.agent.stop();
  }
});

Deno.test("two agents learning one flow at once converge on the stored backend", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  const b = agent("lb-b", store);
  await a.agent.start();
  await b.agent.start();
  try {
    const first = event("10.0.0.7", 5000, "10.0.1.2");
    const second = { ...first, backend: parseIpv4("10.0.1.9") };
    a.table.put(first.key, { backend: first.backend, flags: 0, lastSeenNs: 1 });
    b.table.put(second.key, { backend: second.backend, flags: 0, lastSeenNs: 1 });
    a.agent.learn(first);
    await flush(a.agent);
    b.agent.learn(second);
    await flush(b.agent);
    // Last writer wins, in the store and in every map.
    deepStrictEqual(store.stored(VIP, flowField(first.key))?.backend, second.backend, "stored");
    await until("a converged", () => a.table.get(first.key)?.backend === second.backend);
    await until("b converged", () => b.table.get(first.key)?.backend === second.backend);
    ok(
      logs.records.some((r) => r.msg === "flow installed from peer" && r.node === "lb-a"),
      "log",
    );
  } finally {
    await a.agent.stop();
    await b.agent.stop();
  }
});

for (const f of [V4, V6]) {
  Deno.test(`${f.name}: purging a backend removes its flows from every map and keeps the others`, async () => {
    using logs = captureLogs();
    const store = new MemoryFlowStore();
    const a = agent("lb-a", store, {}, f);
    const b = agent("lb-b", store, {}, f);
    await using _running = await started(a, b);
    const gone = eventOf(f, 1, 1, 2);
    const stays = eventOf(f, 2, 2, 3);
    for (const ev of [gone, stays]) {
      a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: 1 });
      a.agent.learn(ev);
    }
    await flush(a.agent);
    await until("b has both", () => b.table.size === 2);
    deepStrictEqual(await purgeBackendFlows(frontend(f), f.backend(2), { store }), 1, "purged");
    await until("purge applied", () => a.table.size === 1 && b.table.size === 1);
    ok(a.table.get(stays.key) && b.table.get(stays.key), "other flow stays");
    ok(logs.records.some((r) => r.msg === "flows purged"), "controller logged");
    ok(
      logs.records.some((r) => r.msg === "flow purged" && r.node === "lb-b"),
      "agent logged",
    );
  });
}

Deno.test("a reload removing a backend drops its flows from this map, stored or not", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  await a.agent.start();
  try {
    // Learned before the reload, never written (no flush): the store cannot purge it.
    const gone = event("10.0.0.1", 1, "10.0.1.2");
    const stays = event("10.0.0.2", 2, "10.0.1.3");
    for (const ev of [gone, stays]) {
      a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: 1 });
    }
    const other = event("10.0.0.3", 3, "10.0.1.2", "10.9.9.9"); // an LB IP not followed
    a.table.put(other.key, { backend: other.backend, flags: 0, lastSeenNs: 1 });
    const removed = a.agent.setServices(
      services(range("10.0.1.", 20).filter((b) => b !== "10.0.1.2")),
    );
    deepStrictEqual(removed, 1, "removed");
    // A reload that only adds a backend does not walk or change the map.
    deepStrictEqual(a.agent.setServices(services(range("10.0.1.", 30))), 0, "added only");
    ok(!a.table.get(gone.key), "flow to the removed backend gone");
    ok(a.table.get(stays.key) && a.table.get(other.key), "others stay");
    ok(logs.records.some((r) => r.msg === "flow purged" && r.backend === "10.0.1.2"), "logged");
  } finally {
    await a.agent.stop();
  }
});

for (const f of [V4, V6]) {
  Deno.test(`${f.name}: idle flows expire in the store and in every map; active ones are refreshed`, async () => {
    using logs = captureLogs();
    // Time is the test's: sweeps are stepped by hand on one clock (a sweep timer an hour away
    // never fires), so no verdict depends on how busy the machine is. Idle 4 h, a step of 1 h
    // (beyond the store's expiry lock, 0.9 × the sweep interval).
    const clock = new TestClock();
    const store = new MemoryFlowStore({ clockMs: clock.nowMs });
    const HOUR = 3_600_000;
    const opts = { idleTimeoutMs: 4 * HOUR, sweepIntervalMs: HOUR, clock };
    const a = agent("lb-a", store, opts, f);
    const b = agent("lb-b", store, opts, f);
    await using _running = await started(a, b);
    const idle = eventOf(f, 1, 1, 2);
    const live = eventOf(f, 2, 2, 2);
    for (const ev of [idle, live]) {
      a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: a.table.nowNs() });
      a.agent.learn(ev);
    }
    await flush(a.agent);
    await until("b has both", () => b.table.size === 2);
    for (let hour = 1; hour <= 3; hour++) {
      clock.advance(HOUR);
      a.table.touch(live.key); // traffic on the live flow only
      await tick(a.agent);
      await tick(b.agent);
      ok(store.stored(f.vip, flowField(idle.key)) !== undefined, `idle kept at ${hour} h`);
    }
    clock.advance(HOUR); // 4 h: the idle flow has had no packet for the idle timeout
    await tick(a.agent);
    await tick(b.agent);
    deepStrictEqual(store.stored(f.vip, flowField(idle.key)), undefined, "idle gone from store");
    ok(store.stored(f.vip, flowField(live.key)) !== undefined, "live kept in store");
    await until("idle flow gone everywhere", () => a.table.size === 1 && b.table.size === 1);
    ok(b.table.get(live.key) && a.table.get(live.key), "live flow stays");
    ok(logs.records.some((r) => r.msg === "flow expired" && r.node === "lb-b"), "logged");
  });
}

Deno.test("activity reported every idle/4 (several sweeps) still keeps an active flow", async () => {
  using _logs = captureLogs();
  // Stepped by hand on one clock, in minutes: sweeps every 20 min, the map read (activity
  // reported) every 5 sweeps = 100 min = idle / 4 (idle 400 min).
  const clock = new TestClock();
  const store = new MemoryFlowStore({ clockMs: clock.nowMs });
  const MIN = 60_000;
  const opts = { idleTimeoutMs: 400 * MIN, sweepIntervalMs: 20 * MIN, clock };
  const a = agent("lb-a", store, opts);
  const b = agent("lb-b", store, opts);
  await using _running = await started(a, b);
  const idle = event("10.0.0.1", 1, "10.0.1.2");
  const live = event("10.0.0.2", 2, "10.0.1.2");
  for (const ev of [idle, live]) {
    a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: a.table.nowNs() });
    a.agent.learn(ev);
  }
  await flush(a.agent);
  await until("b has both", () => b.table.size === 2);
  // 50 sweeps (1,000 min, 2.5 idle timeouts), a packet on the live flow every 40 min. b (not a)
  // may be the node that expires: it only knows what a reported.
  for (let step = 1; step <= 50; step++) {
    clock.advance(20 * MIN);
    if (step % 2 === 0) a.table.touch(live.key);
    await tick(a.agent);
    await tick(b.agent);
    ok(
      store.stored(VIP, flowField(live.key)) !== undefined,
      `live flow kept (${step * 20} min)`,
    );
  }
  deepStrictEqual(store.stored(VIP, flowField(idle.key)), undefined, "idle gone from store");
  await until("idle flow gone everywhere", () => a.table.size === 1 && b.table.size === 1);
  ok(a.table.get(live.key) && b.table.get(live.key), "live flow stays");
});

for (const f of [V4, V6]) {
  Deno.test(`${f.name}: store outage: forwarding state untouched, flows queue bounded, flush on return`, async () => {
    using logs = captureLogs();
    const store = new MemoryFlowStore();
    const a = agent("lb-a", store, { queueCapacity: 100 }, f);
    await using _running = await started(a);
    store.available = false;
    const events = Array.from({ length: 150 }, (_, i) => eventOf(f, 1, 1000 + i, 2));
    // learn never waits on the store: it returns nothing to wait for, and all 150 are accounted
    // for (queued or dropped) before this test yields once, so no store call can have run.
    for (const ev of events) {
      const returned: unknown = a.agent.learn(ev);
      ok(returned === undefined, "learn does not wait on the store");
    }
    deepStrictEqual([a.agent.queued, a.agent.dropped], [100, 50], "bounded, overflow counted");
    await until("outage noticed", () => !a.agent.storeUp);
    deepStrictEqual([a.agent.queued, a.agent.dropped], [100, 50], "bounded, overflow counted");
    ok(
      logs.records.some((r) => r.msg === "flow queue overflow, oldest flows dropped"),
      "logged",
    );
    store.available = true;
    await until("flushed", () => store.count(f.vip) === 100 && a.agent.queued === 0);
    ok(a.registry.expose().includes("holdfast_flow_queue_dropped_total 50"), "metric");
  });
}

Deno.test("store restarted empty: agents rewrite their flows and peers stay complete", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  const b = agent("lb-b", store);
  await a.agent.start();
  await b.agent.start();
  try {
    const ev = event("10.0.0.1", 1, "10.0.1.2");
    a.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: 1 });
    a.agent.learn(ev);
    await flush(a.agent);
    await until("b has it", () => b.table.size === 1);
    store.available = false;
    await until("outage noticed", () => !a.agent.storeUp && !b.agent.storeUp);
    const during = event("10.0.0.2", 2, "10.0.1.3");
    a.table.put(during.key, { backend: during.backend, flags: 0, lastSeenNs: 1 });
    a.agent.learn(during);
    store.restart();
    store.available = true;
    await until("rewritten", () => store.count(VIP) === 2);
    await until("b got the flow learned during the outage", () => b.table.size === 2);
    ok(
      logs.records.some((r) => r.msg === "flow store restarted empty, rewriting local flows"),
      "log",
    );
  } finally {
    await a.agent.stop();
    await b.agent.stop();
  }
});

Deno.test("restart with a pinned map: stale peer flows go, flows learned meanwhile are written", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const kept = event("10.0.0.1", 1, "10.0.1.2");
  const learnedWhileAway = event("10.0.0.2", 2, "10.0.1.2");
  const purgedWhileAway = event("10.0.0.3", 3, "10.0.1.3");
  await store.learn(VIP, [{ field: flowField(kept.key), backend: kept.backend }], {
    node: "lb-b",
    nowMs: Date.now(),
    idleTimeoutMs: 60_000,
  });
  const a = agent("lb-a", store);
  a.table.put(kept.key, { backend: kept.backend, flags: 1, lastSeenNs: 42 });
  a.table.put(learnedWhileAway.key, { backend: learnedWhileAway.backend, flags: 0, lastSeenNs: 7 });
  a.table.put(purgedWhileAway.key, { backend: purgedWhileAway.backend, flags: 1, lastSeenNs: 0 });
  await a.agent.start();
  try {
    deepStrictEqual(a.table.get(kept.key)?.lastSeenNs, 42, "kept entry untouched");
    deepStrictEqual(a.table.get(purgedWhileAway.key), undefined, "stale peer flow removed");
    deepStrictEqual(
      store.stored(VIP, flowField(learnedWhileAway.key))?.backend,
      learnedWhileAway.backend,
      "written",
    );
    ok(logs.records.some((r) => r.msg === "flow removed, no longer stored"), "logged");
  } finally {
    await a.agent.stop();
  }
  // An empty store (lost its data while everything restarted): nothing is removed, all written.
  const empty = new MemoryFlowStore();
  const b = agent("lb-b", empty);
  b.table.put(purgedWhileAway.key, { backend: purgedWhileAway.backend, flags: 1, lastSeenNs: 0 });
  await b.agent.start();
  try {
    ok(b.table.get(purgedWhileAway.key), "kept when the store is empty");
    deepStrictEqual(empty.count(VIP), 1, "written back");
  } finally {
    await b.agent.stop();
  }
});

/** One node's view of a shared store that can be cut off on its own (a partition). */
function partitionable(store: MemoryFlowStore): { store: MemoryFlowStore; cut: boolean } {
  const state = { cut: false, store: undefined as unknown as MemoryFlowStore };
  state.store = new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (state.cut && prop !== "close") {
          throw new StoreUnavailableError("Cannot reach flow store: partitioned");
        }
        return v.apply(target, args);
      };
    },
  });
  return state;
}

Deno.test("a node cut off from the store catches up on additions and removals it missed", async () => {
  using _logs = captureLogs();
  const shared = new MemoryFlowStore();
  const view = partitionable(shared);
  const a = agent("lb-a", shared);
  const b = agent("lb-b", view.store);
  await a.agent.start();
  await b.agent.start();
  try {
    const early = event("10.0.0.1", 1, "10.0.1.2");
    datapath(a, early);
    await until("b has early", () => b.table.size === 1);
    view.cut = true;
    await until("b notices", () => !b.agent.storeUp);
    const late = event("10.0.0.2", 2, "10.0.1.3");
    datapath(a, late);
    await flush(a.agent);
    await purgeBackendFlows(`${VIP}:80/TCP`, "10.0.1.2", { store: shared }); // removes "early"
    const mine = event("10.0.0.3", 3, "10.0.1.3");
    datapath(b, mine); // learned on b while cut off
    view.cut = false;
    await until(
      "b caught up",
      () => b.table.get(late.key) !== undefined && b.table.get(early.key) === undefined,
    );
    await until("b's flow stored", () => shared.stored(VIP, flowField(mine.key)) !== undefined);
    await until("a got b's flow", () => a.table.get(mine.key) !== undefined);
  } finally {
    await a.agent.stop();
    await b.agent.stop();
  }
});

function datapath(n: TestAgent, ev: FlowEvent): void {
  n.table.put(ev.key, { backend: ev.backend, flags: 0, lastSeenNs: n.table.nowNs() });
  n.agent.learn(ev);
}

Deno.test("an LB IP added at run time is restored, then followed, learned and touched", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const a = agent("lb-a", store);
  const peer = agent("lb-p", store, { vips: [VIP, VIP2] });
  await a.agent.start();
  await peer.agent.start();
  try {
    // Stored before lb-a follows VIP2.
    const old = event("10.0.0.1", 1000, "10.0.2.1", VIP2);
    datapath(peer, old);
    await flush(peer.agent);
    // The datapath created a VIP2 flow before the agent followed it: ignored, counted, kept.
    const early = event("10.0.0.2", 2000, "10.0.2.2", VIP2);
    datapath(a, early);
    ok(a.registry.expose().includes("holdfast_flow_events_ignored_total 1"), "ignored");
    deepStrictEqual(a.table.get(old.key), undefined, "not followed yet");

    await Promise.all([a.agent.setVips([VIP, VIP2]), a.agent.setVips([VIP2, VIP])]);
    deepStrictEqual(a.agent.vips.sort(), [VIP, VIP2], "followed");
    deepStrictEqual(
      a.table.get(old.key),
      { backend: old.backend, flags: 1, lastSeenNs: 0 },
      "restored",
    );
    deepStrictEqual(
      store.stored(VIP2, flowField(early.key))?.backend,
      early.backend,
      "early written",
    );
    const following = logs.records.filter((r) => r.msg === "following LB IP" && r.node === "lb-a");
    deepStrictEqual(following.map((r) => [r.vip, r.restored]), [[VIP2, true]], "logged once");

    // Followed from now on: peers' additions installed, own learns stored, activity touched.
    const next = event("10.0.0.3", 3000, "10.0.2.3", VIP2);
    datapath(peer, next);
    await until("peer flow installed", () => a.table.get(next.key)?.backend === next.backend);
    const own = event("10.0.0.4", 4000, "10.0.2.4", VIP2);
    datapath(a, own);
    await flush(a.agent);
    await until("own flow at peer", () => peer.table.get(own.key)?.backend === own.backend);
    await sweep(a.agent);
    ok(store.lastSeen(VIP2, flowField(own.key)) !== undefined, "touched");
    ok(
      a.registry.expose().includes('holdfast_flows_learned_total{vip="10.0.100.2"} 1'),
      "learned metric",
    );
  } finally {
    await a.agent.stop();
    await peer.agent.stop();
  }
});

Deno.test("a removed LB IP is no longer followed; its map entries idle out locally", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  // The maps' clock is the test's (sweeps by hand; the timer an hour away): "young" and "idle"
  // do not depend on how long the steps below take on a busy machine.
  const clock = new TestClock();
  const opts = { idleTimeoutMs: 100, sweepIntervalMs: 3_600_000, clock };
  const a = agent("lb-a", store, { ...opts, vips: [VIP, VIP2] });
  const peer = agent("lb-p", store, { ...opts, vips: [VIP, VIP2] });
  await a.agent.start();
  await peer.agent.start();
  try {
    const kept = event("10.0.0.1", 1000, "10.0.2.1", VIP2);
    datapath(peer, kept);
    await until("installed", () => a.table.get(kept.key) !== undefined);

    await a.agent.setVips([VIP]);
    await a.agent.setVips([VIP]); // idempotent
    deepStrictEqual(a.agent.vips, [VIP], "followed");
    const stopped = logs.records.filter((r) => r.msg === "stopped following LB IP");
    deepStrictEqual(stopped.map((r) => r.vip), [VIP2], "logged once");

    const later = event("10.0.0.2", 2000, "10.0.2.2", VIP2);
    datapath(peer, later);
    const onVip = event("10.0.0.3", 3000, "10.0.1.3");
    datapath(peer, onVip);
    await until("VIP still followed", () => a.table.get(onVip.key) !== undefined);
    deepStrictEqual(a.table.get(later.key), undefined, "VIP2 addition not installed");
    const mine = event("10.0.0.4", 4000, "10.0.2.4", VIP2);
    datapath(a, mine);
    await flush(a.agent);
    deepStrictEqual(store.stored(VIP2, flowField(mine.key)), undefined, "VIP2 learn not stored");

    // Kept in the map (a reverted change keeps connections) until idle for the idle timeout.
    await sweep(a.agent);
    ok(a.table.get(kept.key) !== undefined, "kept while young");
    clock.advance(150);
    a.table.touch(mine.key); // active: stays
    await sweep(a.agent);
    deepStrictEqual(a.table.get(kept.key), undefined, "idled out");
    ok(a.table.get(mine.key) !== undefined, "active entry stays");
    ok(store.stored(VIP2, flowField(kept.key)) !== undefined, "store untouched");
    ok(
      a.registry.expose().includes(
        'holdfast_flows_removed_total{vip="10.0.100.2",reason="unfollowed"} 1',
      ),
      a.registry.expose(),
    );

    // Followed again: restored (the stored flow is back), entries the store lacks written.
    await a.agent.setVips([VIP, VIP2]);
    deepStrictEqual(a.table.get(later.key)?.backend, later.backend, "re-followed: restored");
    deepStrictEqual(store.stored(VIP2, flowField(mine.key))?.backend, mine.backend, "written");
  } finally {
    await a.agent.stop();
    await peer.agent.stop();
  }
});

Deno.test("setVips before start is restored by start; while the store is down, by recovery", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  const peer = agent("lb-p", store, { vips: [VIP, VIP2] });
  await peer.agent.start();
  const a = agent("lb-a", store, { vips: [] });
  try {
    const f1 = event("10.0.0.1", 1000, "10.0.2.1", VIP2);
    datapath(peer, f1);
    await flush(peer.agent);
    await a.agent.setVips([VIP2]);
    await a.agent.start();
    deepStrictEqual(a.table.get(f1.key)?.backend, f1.backend, "restored by start");

    store.available = false;
    await sweep(a.agent); // notices the outage
    await until("down", () => !a.agent.storeUp);
    await a.agent.setVips([VIP2, VIP]);
    store.available = true;
    const f2 = event("10.0.0.2", 2000, "10.0.1.2");
    datapath(peer, f2);
    await flush(peer.agent);
    await until("recovered and restored VIP", () => a.table.get(f2.key) !== undefined);
    const f3 = event("10.0.0.3", 3000, "10.0.1.3");
    datapath(peer, f3);
    await until("VIP followed", () => a.table.get(f3.key) !== undefined);
  } finally {
    await a.agent.stop();
    await peer.agent.stop();
  }
});
