import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs, type LogRecord } from "../../../lib/log.ts";
import { mulberry32, waitUntil } from "../_testing.ts";
import { createControlPlane } from "../control_plane.ts";
import { FaultyLBMaps, MemoryLBMaps, StagedMemoryLBMaps } from "./memory.ts";
import type { LBMapsCapacity } from "./lbmaps.ts";
import { frontendByAddress } from "../tables/frontend.ts";
import type { BackendInput } from "../tables/writer.ts";

type State = "active" | "terminating" | "quarantined";

/**
 * Property test of Writer + BPF reconciler against a naive model: random service, backend and
 * source operations from two sources (some under injected faults); whenever the reconciler is
 * idle the maps must hold exactly the model's selection per frontend, only referenced backends,
 * and never have broken the ordering invariant.
 */
/** The error messages of the reconciler's "will retry" warnings. */
function retryErrors(records: readonly LogRecord[]): string[] {
  return records.filter((r) => r.level === "warn" && /will retry/.test(r.msg))
    .map((r) => r.err instanceof Error ? r.err.message : String(r.err));
}

Deno.test("bpf reconciler property: maps equal a naive model's selection under random ops and faults", async () => {
  using logs = captureLogs();
  let checks = 0, nonEmpty = 0, faults = 0;
  // Seeds 14 and 15 stage tables (installed per reconciler batch), faults also in their commits.
  for (const seed of [11, 12, 13, 14, 15]) {
    const rnd = mulberry32(seed);
    const mem = seed >= 14 ? new StagedMemoryLBMaps() : new MemoryLBMaps();
    const maps = new FaultyLBMaps(mem, { seed });
    const cp = await createControlPlane(maps, {
      maglevSize: 251,
      retry: { minMs: 1, maxMs: 4, jitter: 0 },
    });
    cp.start();
    const sources = { k8s: cp.writer.source("k8s"), cluster: cp.writer.source("cluster") };
    // Model: services (owned by k8s) → frontend; per source, service → address → state.
    const services = new Map<string, string>();
    const model = {
      k8s: new Map<string, Map<string, State>>(),
      cluster: new Map<string, Map<string, State>>(),
    };
    const names = ["a", "b", "c", "d"].map((n) => `ns/${n}`);
    const addrs = Array.from({ length: 8 }, (_, i) => `10.1.0.${i + 1}:8080/TCP`);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
    for (let step = 0; step < 40; step++) {
      maps.failRate = rnd() < 0.3 ? 0.2 : 0;
      const txn = cp.writer.txn();
      for (let op = 0; op < 3; op++) {
        const r = rnd(), name = pick(names);
        if (r < 0.25) {
          const fe = `10.0.100.${names.indexOf(name) + 1}:80/TCP`;
          sources.k8s.upsertService(txn, { name, frontends: [{ address: fe }] });
          services.set(name, fe);
        } else if (r < 0.35) {
          sources.k8s.deleteService(txn, name);
          services.delete(name);
        } else if (r < 0.9) {
          const src = rnd() < 0.6 ? "k8s" : "cluster";
          const chosen = new Map<string, State>();
          for (const a of addrs) {
            if (rnd() < 0.35) {
              chosen.set(a, pick(["active", "active", "terminating", "quarantined"] as const));
            }
          }
          const backends: BackendInput[] = [...chosen].map(([address, state]) => ({
            address,
            state,
          }));
          sources[src].setBackends(txn, { service: name, backends });
          model[src].set(name, chosen);
        } else {
          const src = rnd() < 0.5 ? "k8s" : "cluster";
          sources[src].deleteAll(txn);
          model[src].clear();
          if (src === "k8s") services.clear();
        }
      }
      txn.commit();
      // Let the reconciler work while faults may be injected.
      await new Promise((r) => setTimeout(r, 1));
      if (rnd() < 0.5) continue;
      maps.failRate = 0;
      await cp.reconciler.waitIdle();
      // Expected selection per frontend: k8s instance preferred over cluster; active, else terminating.
      const expected = new Map<string, string[]>();
      for (const [name, fe] of services) {
        const active: string[] = [], terminating: string[] = [];
        for (const a of addrs) {
          const st = model.k8s.get(name)?.get(a) ?? model.cluster.get(name)?.get(a);
          if (st === "active") active.push(a.replace("/TCP", ""));
          else if (st === "terminating") terminating.push(a.replace("/TCP", ""));
        }
        expected.set(fe, active.length > 0 ? active : terminating);
      }
      const backends = new Map([...mem.backends].map(([id, b]) => [id, `${b.address}:${b.port}`]));
      const got = new Map<string, string[]>();
      const used = new Set<number>();
      for (const [, [k, e]] of mem.services) {
        const table = mem.maglev.get(e.serviceId);
        ok(table !== undefined, `service ${k.address} has no Maglev table`);
        const ids = [...new Set(table)].filter((x) => x !== 0);
        ids.forEach((x) => used.add(x));
        got.set(`${k.address}:${k.port}/${k.protocol}`, ids.map((x) => backends.get(x)!).sort());
        deepStrictEqual(
          e.backendCount,
          ids.length,
          `backendCount of ${k.address} (seed ${seed} step ${step})`,
        );
      }
      deepStrictEqual(
        [...got].sort(),
        [...expected].map(([fe, bs]) => [fe, [...bs].sort()]).sort(),
        `maps vs model (seed ${seed} step ${step})`,
      );
      deepStrictEqual(
        [...mem.backends.keys()].sort(),
        [...used].sort(),
        `unreferenced backends left (step ${step})`,
      );
      deepStrictEqual(mem.violations, [], "ordering invariant");
      checks++;
      nonEmpty += [...expected.values()].filter((b) => b.length > 0).length;
    }
    faults += maps.injected;
    await cp.stop();
  }
  ok(
    checks >= 30 && nonEmpty >= 30 && faults > 0,
    `too weak: ${checks} checks, ${nonEmpty} non-empty, ${faults} faults`,
  );
  // Every failed attempt was logged as retried, and only injected faults failed.
  const errs = retryErrors(logs.records);
  ok(errs.length > 0, "no retry logged");
  const injected =
    /^(Cannot install the Maglev table of frontend "[^"]+" \(service ID \d+\): )?Injected fault: /;
  deepStrictEqual(errs.filter((e) => !injected.test(e)), []);
  ok(errs.some((e) => e.startsWith("Cannot install the Maglev table")), "no commit fault");
});

Deno.test("bpf reconciler reuses the Maglev build for frontends of one service with the same backends", async () => {
  using logs = captureLogs();
  const mem = new MemoryLBMaps();
  let builds = 0;
  const { TsMaglevBuilder } = await import("../../../policy-as/host/maglev_ts.ts");
  const tsMaglev = new TsMaglevBuilder();
  const cp = await createControlPlane(mem, {
    maglevSize: 251,
    maglev: { build: (b, m, out, ids) => (builds++, tsMaglev.build(b, m, out, ids)) },
  });
  cp.start();
  const src = cp.writer.source("k8s");
  const txn = cp.writer.txn();
  src.upsertService(txn, {
    name: "ns/a",
    frontends: [{ address: "10.0.100.1:80/TCP" }, { address: "10.0.100.2:80/TCP" }],
  });
  src.setBackends(txn, {
    service: "ns/a",
    backends: [{ address: "10.1.0.1:8080/TCP" }, { address: "10.1.0.2:8080/TCP" }],
  });
  src.upsertService(txn, { name: "ns/b", frontends: [{ address: "10.0.100.3:80/TCP" }] });
  src.setBackends(txn, { service: "ns/b", backends: [{ address: "10.1.0.3:8080/TCP" }] });
  txn.commit();
  await cp.reconciler.waitIdle();
  deepStrictEqual(builds, 2);
  deepStrictEqual(cp.ops.metrics.holdfast_lbmaps_maglev_reused_total, 1);
  const id1 = cp.ops.serviceId("10.0.100.1:80/TCP")!, id2 = cp.ops.serviceId("10.0.100.2:80/TCP")!;
  ok(id1 !== id2);
  deepStrictEqual([...mem.maglev.get(id1)!], [...mem.maglev.get(id2)!]);
  deepStrictEqual(
    [...mem.maglev.get(id1)!],
    [...tsMaglev.build([{ key: "10.1.0.1:8080", weight: 100 }, {
      key: "10.1.0.2:8080",
      weight: 100,
    }], 251)].map((v) => cp.ops.backendId(`10.1.0.${v}:8080/TCP`)!),
  );
  deepStrictEqual(mem.violations, []);
  deepStrictEqual(retryErrors(logs.records), []);
  await cp.stop();
});

Deno.test("bpf reconciler: the full pass after a cold start reads no table back; later ones do", async () => {
  const mem = new MemoryLBMaps();
  const cp = await createControlPlane(mem, { maglevSize: 251 });
  cp.start();
  const src = cp.writer.source("k8s");
  const txn = cp.writer.txn();
  for (let i = 1; i <= 20; i++) {
    src.upsertService(txn, { name: `ns/s${i}`, frontends: [{ address: `10.0.100.${i}:80/TCP` }] });
    src.setBackends(txn, { service: `ns/s${i}`, backends: [{ address: `10.1.0.${i}:8080/TCP` }] });
  }
  txn.commit();
  await cp.reconciler.waitIdle();
  deepStrictEqual(mem.maglev.size, 20);
  // Restore's dump and the first pass's prune (table IDs only); its verify had no done row to
  // compare, so it read nothing.
  deepStrictEqual(mem.calls.dump, 2);
  mem.maglev.delete(cp.ops.serviceId("10.0.100.7:80/TCP")!); // lost behind its back
  cp.reconciler.triggerFullReconcile();
  await cp.reconciler.waitIdle();
  deepStrictEqual(mem.maglev.size, 20, "the next pass compares and repairs");
  deepStrictEqual(cp.reconciler.metrics.holdfast_reconciler_repairs_total, 1);
  await cp.stop();
});

/** A started control plane over memory maps of `capacity`, and a frontend's status by address. */
async function planeWithCapacity(capacity: Partial<LBMapsCapacity>) {
  const mem = new MemoryLBMaps({ capacity });
  const cp = await createControlPlane(mem, {
    maglevSize: 251,
    retry: { minMs: 1, maxMs: 4, jitter: 0 },
  });
  cp.start();
  const status = (address: string) =>
    cp.tables.frontends.get(cp.db.readTxn(), frontendByAddress(address))?.status;
  return { mem, cp, src: cp.writer.source("k8s"), status };
}

/** Waits until `ok()` (every 5 ms, at most 10 s); throws with `what()` otherwise. */
async function until(ok: () => boolean, what: () => string): Promise<void> {
  await waitUntil(ok, "a status").catch(() => {
    throw new Error(`gave up waiting: ${what()}`);
  });
}

Deno.test("bpf reconciler: a full service ID space fails only the frontend that needs a new ID, saying which limit", async () => {
  using logs = captureLogs();
  const { mem, cp, src, status } = await planeWithCapacity({ services: 3 }); // IDs 1..2
  const names = ["ns/a", "ns/b", "ns/c"];
  const address = (i: number) => `10.0.100.${i + 1}:80/TCP`;
  const txn = cp.writer.txn();
  names.forEach((name, i) => {
    src.upsertService(txn, { name, frontends: [{ address: address(i) }] });
    src.setBackends(txn, { service: name, backends: [{ address: `10.1.0.${i + 1}:8080/TCP` }] });
  });
  txn.commit();
  const kinds = () => names.map((_, i) => status(address(i))?.kind ?? "none");
  const count = (kind: string) => kinds().filter((k) => k === kind).length;
  await until(() => count("done") === 2 && count("error") === 1, () => kinds().join());
  const failed = kinds().indexOf("error");
  deepStrictEqual(
    status(address(failed))?.error,
    `Cannot allocate service ID for "${address(failed)}": the datapath holds 3 services ` +
      `(--max-services), IDs 1..2 are in use`,
  );
  deepStrictEqual(mem.services.size, 2, "the other frontends are in the maps");
  ok(
    retryErrors(logs.records).includes(status(address(failed))!.error!),
    "the failure is logged as retried",
  );
  // A service goes away: its ID frees up and the waiting frontend gets it on a retry.
  const del = cp.writer.txn();
  src.deleteService(del, names[(failed + 1) % 3]!);
  del.commit();
  await until(() => count("done") === 2 && count("error") === 0, () => kinds().join());
  deepStrictEqual(mem.services.size, 2);
  deepStrictEqual(mem.violations, []);
  await cp.stop();
});

Deno.test("bpf reconciler: out of backend IDs, the frontend fails and no ID leaks", async () => {
  using logs = captureLogs();
  const { mem, cp, src, status } = await planeWithCapacity({ backends: 3 }); // IDs 1..2
  const fe = "10.0.100.1:80/TCP";
  const backends = (...ips: string[]) => ips.map((ip) => ({ address: `${ip}:8080/TCP` }));
  const txn = cp.writer.txn();
  src.upsertService(txn, { name: "ns/a", frontends: [{ address: fe }] });
  src.setBackends(txn, { service: "ns/a", backends: backends("10.1.0.1", "10.1.0.2", "10.1.0.3") });
  txn.commit();
  await until(() => status(fe)?.kind === "error", () => JSON.stringify(status(fe)));
  ok(
    /^Cannot allocate backend ID for "10\.1\.0\.\d:8080\/TCP": the datapath holds 3 backends \(--max-backends\), IDs 1\.\.2 are in use$/
      .test(status(fe)?.error ?? ""),
    `error status: ${JSON.stringify(status(fe))}`,
  );
  // Down to two backends: it fits, using the IDs the failed attempts did not keep.
  const fix = cp.writer.txn();
  src.setBackends(fix, { service: "ns/a", backends: backends("10.1.0.1", "10.1.0.3") });
  fix.commit();
  await until(() => status(fe)?.kind === "done", () => JSON.stringify(status(fe)));
  deepStrictEqual([...mem.backends.keys()].sort(), [1, 2]);
  ok(
    retryErrors(logs.records).some((e) => e.startsWith("Cannot allocate backend ID for ")),
    "the failure is logged as retried",
  );
  deepStrictEqual(mem.violations, []);
  await cp.stop();
});

Deno.test("bpf reconciler: a Maglev builder returning the wrong size fails the frontend, naming it and the sizes", async () => {
  using logs = captureLogs();
  const mem = new MemoryLBMaps();
  const cp = await createControlPlane(mem, {
    maglevSize: 251,
    maglev: { build: (_b, m) => new Uint32Array(m - 1) },
    retry: { minMs: 1, maxMs: 4, jitter: 0 },
  });
  cp.start();
  const src = cp.writer.source("k8s");
  const fe = "10.0.100.1:80/TCP";
  const txn = cp.writer.txn();
  src.upsertService(txn, { name: "ns/a", frontends: [{ address: fe }] });
  src.setBackends(txn, { service: "ns/a", backends: [{ address: "10.1.0.1:8080/TCP" }] });
  txn.commit();
  const status = () => cp.tables.frontends.get(cp.db.readTxn(), frontendByAddress(fe))?.status;
  await until(() => status()?.kind === "error", () => JSON.stringify(status()));
  const message = `Cannot reconcile frontend "${fe}" of service "ns/a": ` +
    "Maglev builder returned 250 slots, expected 251";
  deepStrictEqual(status()?.error, message);
  ok(retryErrors(logs.records).includes(message), "the failure is logged as retried");
  deepStrictEqual(mem.services.size, 0, "no service entry names a table that was never written");
  await cp.stop();
});
