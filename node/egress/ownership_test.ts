import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { MemoryLeaseStore } from "../../controller/egress/lease.ts";
import { EgressOwnership, type EgressOwnershipOptions } from "./ownership.ts";
import { CuttableLeases, FakeHealth, OwnershipRecorder, waitFor } from "./_ownership_testing.ts";

const A1 = "198.18.0.100";
const A2 = "198.18.0.101";

/**
 * Timing for tests that must not lose the address to a stall of this process: the holder keeps
 * it through 4 s without a renew (the defaults, ttl 250 / renew 50 / margin 50, give it up after
 * 200 ms, which a loaded machine can take from the event loop).
 */
const PATIENT = { ttlMs: 5_000, renewMs: 100, marginMs: 1_000 };

interface Pod {
  name: string;
  own: EgressOwnership;
  health: FakeHealth;
  leases: CuttableLeases;
  registry: Registry;
}

function pods(
  names: string[],
  rec: OwnershipRecorder,
  options: Partial<EgressOwnershipOptions> = {},
  store = new MemoryLeaseStore(),
): Pod[] {
  return names.map((name) => {
    const health = new FakeHealth(name, names.filter((n) => n !== name));
    const leases = new CuttableLeases(store);
    const registry = new Registry();
    const own = new EgressOwnership({
      self: name,
      name: "default/egress",
      addresses: [A1],
      health,
      leases,
      registry,
      ...rec.callbacks(name),
      ...options,
    });
    return { name, own, health, leases, registry };
  });
}

async function stopAll(all: Pod[]): Promise<void> {
  await Promise.all(all.map((p) => p.own.stop({ abandon: true })));
}

function ownerOf(all: Pod[], addr: string): Pod | undefined {
  return all.find((p) => p.own.owned().has(addr));
}

interface Pair {
  all: Pod[];
  owner: Pod;
  other: Pod;
  rec: OwnershipRecorder;
  logs: ReturnType<typeof captureLogs>;
}

/** Two pods with one address, started until one owns it; `fn` runs, then both stop. */
async function withPair(
  fn: (t: Pair) => Promise<void>,
  options: Partial<EgressOwnershipOptions> = {},
): Promise<void> {
  using logs = captureLogs();
  const rec = new OwnershipRecorder();
  const all = pods(["nat1", "nat2"], rec, options);
  try {
    for (const p of all) await p.own.start();
    await waitFor("an owner", () => rec.holders(A1).length === 1);
    const owner = ownerOf(all, A1)!;
    const other = all.find((p) => p !== owner)!;
    await fn({ all, owner, other, rec, logs });
  } finally {
    await stopAll(all);
  }
}

Deno.test("the assigned pod assumes the address with epoch 1; the other stands by", async () => {
  await withPair(async ({ owner, other, rec }) => {
    deepStrictEqual(owner.own.owned().get(A1), 1);
    deepStrictEqual(owner.own.standbyFor(A1), other.name);
    deepStrictEqual(other.own.states().get(A1), "standby");
    ok(owner.registry.expose().includes('holdfast_egress_owner{address="198.18.0.100"} 1'));
    const renewed = owner.leases.renewals;
    await waitFor("four renewals", () => owner.leases.renewals >= renewed + 4);
    deepStrictEqual(rec.holders(A1), [owner.name]); // renewals keep it
    deepStrictEqual(rec.intervals.length, 1);
  }, PATIENT);
});

Deno.test("owner dies: the standby assumes after the lease expired, with a new epoch", async () => {
  await withPair(async ({ owner, other, rec, logs }) => {
    const died = rec.last(A1)!.epoch;
    await owner.own.stop({ abandon: true });
    rec.end(owner.name, A1, "died");
    other.health.set(owner.name, false);
    // How fast: bench/egress takeover_ms_p50 and _max; here only what happens.
    await waitFor("the standby owns it", () => rec.holders(A1).length === 1);
    const took = rec.last(A1)!;
    deepStrictEqual(took.pod, other.name);
    ok(took.epoch > died, `epoch ${took.epoch} after ${died}`);
    deepStrictEqual(rec.overlaps(), []);
    const line = logs.records.find((r) => r.msg === "address assumed" && r.epoch === took.epoch);
    deepStrictEqual(line?.reason, "owner down");
  });
});

Deno.test("owner loses the lease store: it forfeits before the standby assumes", async () => {
  await withPair(async ({ owner, other, rec, logs }) => {
    const cutAt = logs.records.length;
    owner.leases.cut = true;
    await waitFor("the standby owns it", () => rec.holders(A1)[0] === other.name);
    deepStrictEqual(rec.overlaps(), []);
    const forfeit = logs.records.slice(cutAt).find((r) => r.msg === "address forfeited");
    deepStrictEqual(forfeit?.why, "lease not renewed in time");
    ok(owner.registry.expose().includes("holdfast_egress_lease_renew_failures_total"));
    // Back: the assigned owner asks for it and gets it by planned handover.
    owner.leases.cut = false;
    await waitFor("back to the owner", () => rec.holders(A1)[0] === owner.name);
    deepStrictEqual(rec.overlaps(), []);
  });
});

Deno.test("heartbeats cut both ways: the lease keeps the owner, nobody takes over", async () => {
  await withPair(async ({ owner, other, rec }) => {
    owner.health.set(other.name, false);
    other.health.set(owner.name, false);
    // The other pod, alone in its view, tries to take the address; the owner renews meanwhile.
    const [tried, renewed] = [other.leases.acquires, owner.leases.renewals];
    await waitFor(
      "refused acquires and renewals",
      () => other.leases.acquires >= tried + 4 && owner.leases.renewals >= renewed + 4,
    );
    deepStrictEqual(rec.intervals.length, 1);
    deepStrictEqual(rec.holders(A1), [owner.name]);
    deepStrictEqual(rec.overlaps(), []);
  }, PATIENT);
});

Deno.test("drain: flush, forfeit, release in that order; the standby takes over at once", async () => {
  const order: string[] = [];
  await withPair(async ({ owner, other, rec, logs }) => {
    await owner.own.drain();
    other.health.setPeerDraining(owner.name, true); // its heartbeat says so
    // The lease lives 60 s: within the wait only the handover (release) can move the address.
    await waitFor("the standby owns it", () => rec.holders(A1)[0] === other.name);
    deepStrictEqual(rec.overlaps(), []);
    const msgs = logs.records.filter((r) => r.component === "egress-ownership")
      .map((r) => r.msg);
    ok(msgs.indexOf("address forfeited") < msgs.indexOf("address released"), msgs.join());
    deepStrictEqual(order, [`flush ${A1}`]);
    const assumed = logs.records.filter((r) => r.msg === "address assumed").at(-1);
    deepStrictEqual(assumed?.reason, "handover");
    deepStrictEqual(owner.own.owned().size, 0);
  }, {
    ttlMs: 60_000,
    renewMs: 100,
    marginMs: 1_000,
    beforeHandover: (addr) => {
      order.push(`flush ${addr}`);
      return Promise.resolve();
    },
  });
});

Deno.test("a joining pod gets its share by planned handover, never a double owner", async () => {
  using _logs = captureLogs();
  const rec = new OwnershipRecorder();
  const all = pods(["nat1", "nat2"], rec, { addresses: [A1, A2], rebalanceDelayMs: 100 });
  try {
    const [a, b] = all as [Pod, Pod];
    a.health.set(b.name, false);
    await a.own.start();
    await waitFor("nat1 owns both", () => a.own.owned().size === 2);
    a.health.set(b.name, true);
    await b.own.start();
    deepStrictEqual(a.own.settled(), false); // nat2 is assigned an address nat1 still holds
    await waitFor("one each", () => a.own.owned().size === 1 && b.own.owned().size === 1);
    deepStrictEqual([a.own.settled(), b.own.settled()], [true, true]);
    deepStrictEqual(rec.overlaps(), []);
  } finally {
    await stopAll(all);
  }
});

Deno.test("an empty lease store (Redis lost its data): the new owner waits one ttl before use", async () => {
  using logs = captureLogs();
  const rec = new OwnershipRecorder();
  const store = new MemoryLeaseStore();
  store.freshOnFirstUse = true;
  const all = pods(["nat1"], rec, {}, store);
  try {
    await all[0]!.own.start();
    await waitFor(
      "waiting",
      () => logs.records.some((r) => r.msg === "lease store was empty: waiting"),
    );
    deepStrictEqual(all[0]!.own.states().get(A1), "owner");
    deepStrictEqual(all[0]!.own.owned().size, 0);
    await waitFor("in use", () => rec.holders(A1).length === 1);
    // From the two log lines' own times (a poll's time would shrink the gap under load).
    const at = (msg: string) => Date.parse(String(logs.records.find((r) => r.msg === msg)?.ts));
    const waited = at("address assumed") - at("lease store was empty: waiting");
    ok(waited > 200, `used ${waited} ms after the empty store was seen (ttl 250 ms)`);
  } finally {
    await stopAll(all);
  }
});

Deno.test("a re-assume during a pending forfeit waits for it: owner and owned agree (issue 29)", async () => {
  using _logs = captureLogs();
  const leases = new CuttableLeases(new MemoryLeaseStore());
  const registry = new Registry();
  // The agent's bookkeeping as it was: added before the address is up, dropped after removal.
  const owned = new Set<string>();
  const gates: { op: string; open: () => void }[] = [];
  const gate = (op: string) => {
    const { promise, resolve } = Promise.withResolvers<void>();
    gates.push({ op, open: resolve });
    return promise;
  };
  const own = new EgressOwnership({
    self: "nat1",
    name: "default/egress",
    addresses: [A1],
    health: new FakeHealth("nat1", []),
    leases,
    registry,
    ...PATIENT, // only the cut forfeits; a stall of this process must not
    assume: async (addr) => {
      owned.add(addr);
      await gate(`add ${addr}`);
    },
    forfeit: async (addr) => {
      await gate(`remove ${addr}`);
      owned.delete(addr);
    },
  });
  const ownerGauge = () =>
    registry.expose().includes(`holdfast_egress_owner{address="${A1}"} 1`) ? 1 : 0;
  try {
    await own.start();
    await waitFor("the first add", () => gates.length === 1);
    gates.shift()!.open();
    await waitFor("owned", () => owned.has(A1));
    leases.cut = true; // renewals fail: the fence forfeits, the removal hangs on its gate
    await waitFor("the forfeit's removal", () => gates[0]?.op === `remove ${A1}`);
    leases.cut = false; // the next step re-acquires (the same holder) and assumes again
    await waitFor("re-acquired", () => own.owned().has(A1));
    // The assume waits for the forfeit before it: nothing else started meanwhile.
    deepStrictEqual(gates.map((g) => g.op), [`remove ${A1}`]);
    deepStrictEqual(ownerGauge(), 0);
    gates.shift()!.open(); // the removal ends (before: it wiped the re-assume's entry)
    await waitFor("the re-add", () => gates.length === 1);
    deepStrictEqual(gates[0]!.op, `add ${A1}`);
    deepStrictEqual([ownerGauge(), owned.has(A1)], [1, true]);
    gates.shift()!.open();
    const renewed = leases.renewals;
    await waitFor("a few renewals", () => leases.renewals >= renewed + 3); // nothing changes
    deepStrictEqual([ownerGauge(), owned.has(A1), gates.length], [1, true, 0]);
  } finally {
    await own.stop({ abandon: true });
  }
});
