/**
 * Readiness in the ownership (BGP mode, docs/egress.md "BGP mode"): a pod whose heartbeats say it
 * is not ready (no BGP session established) is left out of the assignment — no address is handed
 * to it, it takes none — until it is ready; a holder that turns not ready hands over at once; with
 * no pod ready every live pod counts.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { MemoryLeaseStore } from "../../controller/egress/lease.ts";
import { EgressOwnership, type EgressOwnershipOptions } from "./ownership.ts";
import { candidates } from "./ownership.ts";
import { CuttableLeases, FakeHealth, OwnershipRecorder, waitFor } from "./_ownership_testing.ts";

const A1 = "198.18.0.100";
const A2 = "198.18.0.101";
/** Only a lease call cut off for seconds could forfeit (a loaded machine's stalls cannot). */
const PATIENT = { ttlMs: 5_000, renewMs: 100, marginMs: 1_000 };

interface Pod {
  name: string;
  own: EgressOwnership;
  health: FakeHealth;
  leases: CuttableLeases;
}

function pods(names: string[], rec: OwnershipRecorder, o: Partial<EgressOwnershipOptions>): Pod[] {
  const store = new MemoryLeaseStore();
  return names.map((name) => {
    const health = new FakeHealth(name, names.filter((n) => n !== name));
    const leases = new CuttableLeases(store);
    const own = new EgressOwnership({
      self: name,
      name: "default/egress",
      addresses: [A1, A2],
      health,
      leases,
      registry: new Registry(),
      ...rec.callbacks(name),
      ...PATIENT,
      ...o,
    });
    return { name, own, health, leases };
  });
}

/** Every pod's view says `peer` is (not) ready, as its heartbeats would. */
function setReady(all: Pod[], peer: string, ready: boolean): void {
  for (const p of all) p.health.setPeerReady(peer, ready);
}

Deno.test("candidates: pods not ready are left out while another is ready; none ready: all", () => {
  const h = new FakeHealth("nat1", ["nat2", "nat3"]);
  deepStrictEqual(candidates(h), { pods: ["nat1", "nat2", "nat3"], unready: [] });
  h.setPeerReady("nat3", false);
  deepStrictEqual(candidates(h), { pods: ["nat1", "nat2"], unready: ["nat3"] });
  h.setReady(false);
  deepStrictEqual(candidates(h), { pods: ["nat2"], unready: ["nat1", "nat3"] });
  h.setPeerReady("nat2", false); // the routers are away for everyone: nobody is left out
  deepStrictEqual(candidates(h), { pods: ["nat1", "nat2", "nat3"], unready: [] });
  h.set("nat2", false); // a dead pod is no candidate, ready or not
  deepStrictEqual(candidates(h, "nat1"), { pods: ["nat3"], unready: [] });
});

Deno.test("a joining pod not ready is given no address until it is ready, then its share", async () => {
  using logs = captureLogs();
  const rec = new OwnershipRecorder();
  const all = pods(["nat1", "nat2"], rec, { rebalanceDelayMs: 100 });
  const [a, b] = all as [Pod, Pod];
  try {
    a.health.set(b.name, false);
    await a.own.start();
    await waitFor("nat1 owns both", () => a.own.owned().size === 2);
    // nat2 joins without a BGP session: its heartbeats say not ready.
    b.health.setReady(false);
    a.health.setPeerReady(b.name, false);
    a.health.set(b.name, true);
    await b.own.start();
    const [renewed, asked] = [a.leases.renewals, b.leases.acquires];
    // Far longer than the rebalance delay: nothing moves, nat2 does not even ask.
    await waitFor("twenty renewals", () => a.leases.renewals >= renewed + 20);
    deepStrictEqual([a.own.owned().size, b.own.owned().size], [2, 0]);
    deepStrictEqual(b.leases.acquires, asked);
    deepStrictEqual([a.own.settled(), b.own.settled()], [true, true]);
    const left = logs.records.find((r) => r.msg === "assignment leaves out pods not ready");
    deepStrictEqual(left?.unready, ["nat2"]);
    // Its session comes up: the rebalance hands it its share (planned, never two owners).
    setReady(all, b.name, true);
    await waitFor("one each", () => a.own.owned().size === 1 && b.own.owned().size === 1);
    deepStrictEqual(rec.overlaps(), []);
    const moved = logs.records.find((r) => r.msg === "address forfeited");
    ok(String(moved?.why).startsWith("rebalance to nat2"), JSON.stringify(moved));
    ok(
      logs.records.some((r) =>
        r.msg === "assignment leaves out pods not ready" &&
        JSON.stringify(r.unready) === "[]"
      ),
      "the end of leaving out is logged",
    );
  } finally {
    await Promise.all(all.map((p) => p.own.stop({ abandon: true })));
  }
});

Deno.test("a holder that is no longer ready hands over at once (no rebalance delay)", async () => {
  using _logs = captureLogs();
  const rec = new OwnershipRecorder();
  // A minute of rebalance delay: within the wait only the not-ready rule can move an address.
  const all = pods(["nat1", "nat2"], rec, { rebalanceDelayMs: 60_000 });
  const [a, b] = all as [Pod, Pod];
  try {
    for (const p of all) await p.own.start();
    await waitFor("one each", () => a.own.owned().size === 1 && b.own.owned().size === 1);
    setReady(all, a.name, false); // nat1's bird lost its sessions
    await waitFor("nat2 owns both", () => b.own.owned().size === 2 && a.own.owned().size === 0);
    deepStrictEqual(rec.overlaps(), []);
    // Not ready, nat1 is nobody's standby and asks for nothing.
    deepStrictEqual(b.own.standbyFor(A1), undefined);
    deepStrictEqual(b.own.standbyFor(A2), undefined);
    deepStrictEqual([a.own.settled(), b.own.settled()], [true, true]);
  } finally {
    await Promise.all(all.map((p) => p.own.stop({ abandon: true })));
  }
});

Deno.test("mayAcquire false: a pod takes nothing new (it keeps what it holds) until it is true", async () => {
  using _logs = captureLogs();
  const rec = new OwnershipRecorder();
  let may = false, asked = 0;
  const all = pods(["nat1", "nat2"], rec, { mayAcquire: () => (asked++, may) });
  const [a, b] = all as [Pod, Pod];
  try {
    for (const p of all) await p.own.start();
    await waitFor("twenty steps that asked", () => asked >= 20);
    deepStrictEqual([a.leases.acquires, b.leases.acquires], [0, 0]);
    deepStrictEqual(rec.intervals, []);
    may = true;
    await waitFor("both owned", () => a.own.owned().size + b.own.owned().size === 2);
    may = false; // holders keep what they hold (renewals do not ask)
    const r = a.leases.renewals + b.leases.renewals;
    await waitFor("ten renewals", () => a.leases.renewals + b.leases.renewals >= r + 10);
    deepStrictEqual(a.own.owned().size + b.own.owned().size, 2);
    deepStrictEqual(rec.overlaps(), []);
  } finally {
    await Promise.all(all.map((p) => p.own.stop({ abandon: true })));
  }
});
