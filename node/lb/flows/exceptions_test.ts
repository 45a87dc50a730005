import { deepStrictEqual, ok } from "node:assert/strict";
import { type FlowEvent, type FlowKey, makeFlowKey } from "../../bpf/flow.ts";
import { MemoryLBMaps } from "../maps/memory.ts";
import { MaglevMirror } from "../_maglev_mirror.ts";
import { flowHashFiveTuple } from "../../../policy-as/host/flow_hash.ts";
import { formatIpv4, parseIpv4 } from "../../../lib/ipv4.ts";
import { captureLogs, log } from "../../../lib/log.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { flush } from "./_testing.ts";
import { started, type TestAgent, testAgent, until } from "./_test_agents.ts";
import { isException, tableVersion } from "./exceptions.ts";
import { encodeFlowValue, flowValueVersion } from "./schema.ts";
import { decodeFlowValue } from "./schema.ts";

const VIP = "10.0.100.1";
const SEED = 7;
const M = 13;
const BACKENDS = ["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"];
const SVC = { address: VIP, port: 80, protocol: "TCP" as const };

const services = {
  services: [{
    name: "default/web",
    frontends: [{ address: `${VIP}:80/TCP` }],
    backends: BACKENDS.map((b) => ({ address: `${b}:8080/TCP` })),
  }],
};

/** A table of M slots over backend IDs `ids` (slot i → ids[i % n]), rotated by `shift`. */
function table(ids: number[], shift = 0): Uint32Array {
  return Uint32Array.from({ length: M }, (_, i) => ids[(i + shift) % ids.length]!);
}

/** Programs `maps` as the reconciler would: backends, table, service. */
async function program(maps: MaglevMirror, t: Uint32Array): Promise<void> {
  for (const [i, b] of BACKENDS.entries()) {
    await maps.updateBackend(i + 1, { address: b, port: 8080 });
  }
  await maps.updateMaglev(1, t);
  await maps.updateService(SVC, {
    serviceId: 1,
    backendCount: BACKENDS.length,
    flowKeyMode: "five-tuple",
    maglevSize: M,
  });
}

function key(sport: number): FlowKey {
  return makeFlowKey({ saddr: "10.9.0.1", daddr: VIP, sport, dport: 80, proto: 6 });
}

/** The backend the datapath picks for `k` under `t` (the BPF program's rule, in TypeScript). */
function datapathPick(k: FlowKey, t: Uint32Array): number {
  return parseIpv4(BACKENDS[t[flowHashFiveTuple(k, SEED) % M]! - 1]!);
}

interface Node {
  t: TestAgent;
  mirror: MaglevMirror;
}

async function node(name: string, store: MemoryFlowStore, t0: Uint32Array): Promise<Node> {
  const mirror = new MaglevMirror(new MemoryLBMaps(), { seed: SEED, logger: log });
  await program(mirror, t0);
  const t = testAgent(name, store, {
    vips: [VIP],
    services,
    sharing: "exceptions",
    picker: mirror,
  });
  mirror.beforeTableChange = (changes) => t.agent.tableChanging(changes);
  return { t, mirror };
}

/** The datapath of `n` learning a new flow: picked by its current table, put in its map. */
function newFlow(n: Node, k: FlowKey, t: Uint32Array, backend = datapathPick(k, t)): FlowEvent {
  n.t.table.put(k, { backend, flags: 0, lastSeenNs: 1 });
  const ev = { key: k, backend, serviceId: 1, tsNs: 0 };
  n.t.agent.learn(ev);
  return ev;
}

/** What node `n` sends a packet of `k` to: its flow map, else its current Maglev table. */
function placed(n: Node, k: FlowKey): number | undefined {
  const held = n.t.table.get(k)?.backend as number | undefined;
  return held ?? (n.mirror.pick(k)?.backend as number | undefined);
}

Deno.test("exception rule: a flow is an exception when its backend is not the table's pick, or the pick is unknown", () => {
  ok(!isException({ backend: 5, version: 1 }, 5));
  ok(isException({ backend: 5, version: 1 }, 6));
  ok(isException(undefined, 5), "unknown pick: shared as in mode all");
  ok(!isException("2001:db8::1", "2001:db8::1"));
  const t = table([1, 2, 3, 4]);
  const names = (id: number) => BACKENDS[id - 1]!;
  deepStrictEqual(
    tableVersion(t, names),
    tableVersion(t.slice(), names),
    "same table, same version",
  );
  ok(
    tableVersion(t, names) !== tableVersion(table([1, 2, 3, 4], 1), names),
    "a moved slot changes it",
  );
  // The version in the v1 value's epoch slot: read back by the v1/v2 decoder (previous release).
  const v = encodeFlowValue(0x0a000102, 1700000000123, 123456);
  deepStrictEqual(v, "0a000102:123456:1700000000123");
  deepStrictEqual(decodeFlowValue(v), { backend: 0x0a000102, learnedMs: 1700000000123 });
  deepStrictEqual(flowValueVersion(v), 123456);
  deepStrictEqual(flowValueVersion("0a000102:1700000000123"), 0);
});

Deno.test("MaglevMirror picks what the datapath's Maglev rule picks", async () => {
  const mirror = new MaglevMirror(new MemoryLBMaps(), { seed: SEED, logger: log });
  const t = table([1, 2, 3, 4]);
  await program(mirror, t);
  for (let p = 1000; p < 1100; p++) {
    deepStrictEqual(mirror.pick(key(p))?.backend, datapathPick(key(p), t), `flow ${p}`);
  }
  const k6 = { saddr: "2001:db8::9", daddr: "2001:db8::1", sport: 1, dport: 80, proto: 6 };
  deepStrictEqual(mirror.pick(k6), undefined, "IPv6: unknown");
  deepStrictEqual(
    mirror.pick(makeFlowKey({ saddr: "10.9.0.1", daddr: VIP, sport: 1, dport: 81, proto: 6 })),
    undefined,
    "no such service",
  );
});

Deno.test("exceptions mode: flows stored, not announced; an exception reaches peers; a table change moves no flow on any node", async () => {
  using logs = captureLogs();
  const store = new MemoryFlowStore();
  const t1 = table([1, 2, 3, 4]);
  const a = await node("lb-a", store, t1);
  const b = await node("lb-b", store, t1);
  await using _run = await started(a.t, b.t);
  const flows: FlowEvent[] = [];
  for (let p = 2000; p < 2200; p++) flows.push(newFlow(a, key(p), t1));
  await flush(a.t.agent);
  deepStrictEqual(store.storedCount, 200, "every flow stored (durability)");
  deepStrictEqual(store.announcedCount, 0, "none announced: every node's table places them alike");
  deepStrictEqual(b.t.table.size, 0, "peer installed nothing");
  // Every flow lands on the same backend on b (ECMP moved it): b's table picks it.
  for (const f of flows) deepStrictEqual(placed(b, f.key), f.backend);

  // A flow whose backend differs from the table (a quarantined backend's, say): an exception.
  const odd = key(3000);
  const other = BACKENDS.map(parseIpv4).find((x) => x !== datapathPick(odd, t1))!;
  flows.push(newFlow(a, odd, t1, other));
  await flush(a.t.agent);
  deepStrictEqual(store.announcedCount, 1);
  await until("b installs the exception", () => b.t.table.get(odd)?.backend === other);

  // Backend 4 leaves the table (slots move). b switches first (pulls what a stored), then a
  // (publishes its moved flows); a flow new on a in between is placed by a's old table.
  const t2 = table([1, 2, 3]);
  await b.mirror.updateMaglev(1, t2);
  flows.push(newFlow(a, key(4000), t1));
  await a.mirror.updateMaglev(1, t2);
  await flush(a.t.agent);
  await until(
    "b holds every flow the new table moves",
    () => flows.every((f) => placed(b, f.key) === f.backend),
  );
  for (const f of flows) deepStrictEqual(placed(a, f.key), f.backend, describe(f));
  const moved = flows.filter((f) => datapathPick(f.key, t2) !== f.backend).length;
  ok(moved > 20, `slots moved: ${moved} flows are exceptions now`);
  ok(b.t.table.size <= moved, `b holds only exceptions (${b.t.table.size} of ${flows.length})`);

  // A joining node restores exceptions only and places every flow as a and b do.
  const c = await node("lb-c", store, t2);
  await using _c = await started(c.t);
  for (const f of flows) deepStrictEqual(placed(c, f.key), f.backend, describe(f));
  deepStrictEqual(c.t.table.size, moved, "c restored exactly the exceptions");
  ok(
    logs.records.some((l) => l.msg === "table change: flow exceptions exchanged"),
    "the handshake is logged",
  );
});

function describe(f: FlowEvent): string {
  return `flow sport ${f.key.sport} → ${formatIpv4(f.backend)}`;
}

Deno.test("exceptions mode: a node whose table lags holds the flows a switched node learns under the new table", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  const t1 = table([1, 2, 3, 4]);
  const t2 = table([1, 2, 3]);
  const a = await node("lb-a", store, t1);
  const b = await node("lb-b", store, t1);
  await using _run = await started(a.t, b.t);
  await a.mirror.updateMaglev(1, t2); // b has not got the change yet
  const flows: FlowEvent[] = [];
  for (let p = 5000; p < 5200; p++) flows.push(newFlow(a, key(p), t2));
  await flush(a.t.agent);
  const moved = flows.filter((f) => datapathPick(f.key, t1) !== f.backend);
  ok(moved.length > 20, `${moved.length} flows the lagging table places elsewhere`);
  ok(store.announcedCount >= moved.length, "announced while the previous table differs");
  await until(
    "b (still on the old table) holds them",
    () => flows.every((f) => placed(b, f.key) === f.backend),
  );
  await b.mirror.updateMaglev(1, t2);
  for (const f of flows) deepStrictEqual(placed(b, f.key), f.backend, describe(f));
});
