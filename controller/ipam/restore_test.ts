import { deepStrictEqual, ok } from "node:assert/strict";
import { mulberry32 } from "../../node/lb/_testing.ts";
import { pool, service, withStatus } from "./_testing.ts";
import { AddressAllocator, type IpamResult } from "./allocator.ts";
import type { IpamService } from "./service.ts";

function addresses(r: IpamResult): Record<string, string> {
  return Object.fromEntries(
    r.services.map((s) => [`${s.namespace}/${s.name}`, s.addresses.join(",")]),
  );
}

Deno.test("ipam restart: a new allocator restores every address from status, reallocates nothing, emits nothing", () => {
  const rand = mulberry32(7);
  const pools = [
    pool("a", ["10.0.0.0/26"], { serviceSelector: { matchLabels: { team: "a" } } }),
    pool("b", ["10.0.1.0/26", "10.0.2.10-10.0.2.40"], { avoidBuggyIPs: true }),
    pool("m", ["10.0.3.0/28"], { autoAssign: false }),
  ];
  const first = new AddressAllocator();
  let svcs: IpamService[] = [];
  let result: IpamResult | undefined;
  // Services come and go over several rounds, so addresses end up scattered, not in creation order.
  for (let round = 0; round < 6; round++) {
    svcs = svcs.filter(() => rand() > 0.3);
    for (let i = 0; i < 25; i++) {
      const n = `s${round}-${i}`;
      const pick = rand();
      svcs.push(service(n, {
        created: new Date(Date.UTC(2026, 0, 1, 0, round, i)).toISOString(),
        labels: pick < 0.3 ? { team: "a" } : {},
        annotations: pick > 0.9
          ? { "holdfast.io/address-pool": "m" }
          : pick > 0.8
          ? { "holdfast.io/allow-shared-ip": "k" }
          : {},
        ports: [`${80 + Math.floor(rand() * 4)}`],
      }));
    }
    result = first.reconcile(pools, svcs);
    svcs = withStatus(svcs, result);
  }
  const before = addresses(result!);
  ok(Object.values(before).filter((a) => a !== "").length > 60, "most Services got addresses");
  // Restart: new allocator, Services in another order, a new Service arrives at the same time.
  const late = service("late", { created: "2025-01-01T00:00:00Z" });
  const restarted = new AddressAllocator();
  const r = restarted.reconcile(pools, [late, ...[...svcs].reverse()]);
  const after = addresses(r);
  delete after["default/late"];
  deepStrictEqual(after, before);
  deepStrictEqual(r.events.filter((e) => e.object.name !== "late"), []);
  ok(!Object.values(before).includes(addresses(r)["default/late"]!), "late got a free address");
  // restore() on a running allocator forgets its memory and gives the same answer.
  deepStrictEqual(addresses(first.restore(pools, svcs)), before);
});

Deno.test("ipam restart: two Services showing one address in status — the older keeps it, never both", () => {
  const pools = [pool("p", ["10.0.0.0/30"])];
  const older = service("zed", { created: "2026-01-01T00:00:00Z", status: ["10.0.0.1"] });
  const newer = service("abe", { created: "2026-01-02T00:00:00Z", status: ["10.0.0.1"] });
  for (const order of [[older, newer], [newer, older]]) {
    const r = new AddressAllocator().reconcile(pools, order);
    deepStrictEqual(addresses(r), { "default/abe": "", "default/zed": "10.0.0.1" });
    const c = r.services.find((s) => s.name === "abe")!.condition;
    deepStrictEqual([c.status, c.reason], ["False", "SharingConflict"]);
    ok(c.message.includes(`held by service "default/zed"`), c.message);
    deepStrictEqual(r.events.map((e) => `${e.reason} ${e.object.name}`), [
      "AddressReleased abe",
      "AllocationFailed abe",
    ]);
  }
  // Same creation time: the name decides.
  const tieA = service("a", { status: ["10.0.0.1"] }),
    tieB = service("b", { status: ["10.0.0.1"] });
  deepStrictEqual(addresses(new AddressAllocator().reconcile(pools, [tieB, tieA])), {
    "default/a": "10.0.0.1",
    "default/b": "",
  });
  // Once the loser's status is cleared (as the controller writes it), it is allocated anew.
  const ipam = new AddressAllocator();
  const r1 = ipam.reconcile(pools, [older, newer]);
  deepStrictEqual(ipam.reconcile(pools, [older, newer]).events, []);
  const r2 = ipam.reconcile(pools, withStatus([older, newer], r1));
  deepStrictEqual(addresses(r2), { "default/abe": "10.0.0.0", "default/zed": "10.0.0.1" });
  deepStrictEqual(r2.events.map((e) => `${e.reason} ${e.object.name}`), ["AddressAllocated abe"]);
});

Deno.test("ipam restart: a status address its pool no longer allows is replaced, and the event says so", () => {
  const svc = service("web", { status: ["10.0.0.0"] });
  const r = new AddressAllocator().reconcile(
    [pool("p", ["10.0.0.0/30"], { avoidBuggyIPs: true })],
    [svc],
  );
  deepStrictEqual(addresses(r), { "default/web": "10.0.0.1" });
  deepStrictEqual(r.events.map((e) => e.message), [
    `Allocated 10.0.0.1 from pool "p", replacing 10.0.0.0`,
  ]);
});

Deno.test("ipam restart: a failure already shown in the Service's status is not reported again", () => {
  const pools = [pool("p", ["10.0.0.0/32"])];
  const svcs = [service("a", { created: "2026-01-01T00:00:00Z" }), service("b")];
  const r = new AddressAllocator().reconcile(pools, svcs);
  deepStrictEqual(r.events.map((e) => e.reason), ["AddressAllocated", "AllocationFailed"]);
  deepStrictEqual(new AddressAllocator().reconcile(pools, withStatus(svcs, r)).events, []);
});
