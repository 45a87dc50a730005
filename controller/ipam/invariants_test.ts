import { deepStrictEqual, ok } from "node:assert/strict";
import { mulberry32 } from "../../node/lb/_testing.ts";
import { pool, service, withPoolStatus, withStatus } from "./_testing.ts";
import { AddressAllocator, type IpamResult } from "./allocator.ts";
import type { K8sAddressPool } from "./pool.ts";
import type { IpamService } from "./service.ts";

function checkNoDoubleAllocation(r: IpamResult, svcs: IpamService[], round: number): void {
  const byKey = new Map(svcs.map((s) => [`${s.metadata!.namespace}/${s.metadata!.name}`, s]));
  const holders = new Map<string, IpamService[]>();
  for (const a of r.services) {
    for (const ip of a.addresses) {
      const list = holders.get(ip) ?? [];
      list.push(byKey.get(`${a.namespace}/${a.name}`)!);
      holders.set(ip, list);
    }
  }
  for (const [ip, hs] of holders) {
    if (hs.length < 2) continue;
    const key = (s: IpamService) => s.metadata?.annotations?.["holdfast.io/allow-shared-ip"];
    const ports = new Set<string>();
    for (const h of hs) {
      ok(
        key(h) !== undefined && key(h) === key(hs[0]!),
        `round ${round}: ${ip} held without a common key`,
      );
      deepStrictEqual(h.metadata?.namespace, hs[0]!.metadata?.namespace);
      for (const p of h.spec?.ports ?? []) {
        const k = `${p.port}/${p.protocol}`;
        ok(!ports.has(k), `round ${round}: ${ip} shared with colliding port ${k}`);
        ports.add(k);
      }
    }
  }
}

Deno.test("ipam invariants: random churn never double-allocates, repeats itself exactly, survives a restart", () => {
  const rand = mulberry32(42);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const ipam = new AddressAllocator();
  let pools: K8sAddressPool[] = [];
  let svcs: IpamService[] = [];
  let serial = 0;
  for (let round = 0; round < 200; round++) {
    const op = rand();
    if (op < 0.1 || pools.length === 0) {
      const n = Math.floor(rand() * 4);
      pools = [
        pool(`p${n}`, [`10.0.${n}.0/29`], { avoidBuggyIPs: rand() < 0.3 }),
        ...pools.filter((p) => p.metadata?.name !== `p${n}`),
      ];
      if (rand() < 0.3) {
        pools = pools.filter((p) => p.metadata?.name !== "overlap");
        pools.push(pool("overlap", [`10.0.${n}.4/30`]));
      }
    } else if (op < 0.15) {
      pools = pools.slice(1);
    } else if (op < 0.35 && svcs.length > 0) {
      svcs = svcs.filter(() => rand() > 0.2);
    } else {
      const ann: Record<string, string> = {};
      if (rand() < 0.3) ann["holdfast.io/allow-shared-ip"] = pick(["k1", "k2"]);
      if (rand() < 0.15) {
        ann["holdfast.io/load-balancer-ips"] = `10.0.${pick([0, 1, 2])}.${pick([0, 1, 2, 3])}`;
      }
      if (rand() < 0.1) ann["holdfast.io/address-pool"] = `p${pick([0, 1, 2, 3])}`;
      svcs.push(service(`s${serial++}`, {
        namespace: pick(["a", "b"]),
        annotations: ann,
        ports: [`${pick([53, 80, 443])}/${pick(["TCP", "UDP"])}`],
        created: new Date(Date.UTC(2026, 0, 1) + round * 1000).toISOString(),
      }));
    }
    const r = ipam.reconcile(pools, svcs);
    checkNoDoubleAllocation(r, svcs, round);
    const again = ipam.reconcile(pools, svcs);
    deepStrictEqual(again.events, [], `round ${round}: second reconcile emitted events`);
    deepStrictEqual({ ...again, events: [] }, { ...r, events: [], released: [] }, `round ${round}`);
    svcs = withStatus(svcs, r);
    pools = withPoolStatus(pools, r);
    const written = ipam.reconcile(pools, svcs);
    deepStrictEqual(written.events, [], `round ${round}: events after status write`);
    if (round % 20 === 19) {
      const fresh = new AddressAllocator().reconcile(pools, svcs);
      deepStrictEqual(
        fresh.services,
        written.services,
        `round ${round}: restart changed allocations`,
      );
      deepStrictEqual(fresh.events, [], `round ${round}: restart emitted events`);
    }
  }
});
