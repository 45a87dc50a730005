import { deepStrictEqual, ok } from "node:assert/strict";
import { condition, pool, service, withStatus } from "./_testing.ts";
import { AddressAllocator, type IpamResult } from "./allocator.ts";
import type { IpamService } from "./service.ts";

const DUAL = { ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "PreferDualStack" };
const REQUIRE = { ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "RequireDualStack" };
const V6 = { ipFamilies: ["IPv6"], ipFamilyPolicy: "SingleStack" };

function addresses(r: IpamResult): Record<string, string> {
  return Object.fromEntries(r.services.map((s) => [s.name, s.addresses.join(",")]));
}

function events(r: IpamResult): string[] {
  return r.events.map((e) => `${e.type} ${e.reason} ${e.object.name}: ${e.message}`);
}

Deno.test("ipam dual stack: one pool of both families gives a dual-stack Service one address of each; IPv6 in RFC 5952 form", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("mixed", ["10.0.100.0/30", "2001:DB8:100::/120"])];
  const svcs = [
    service("dual", { created: "2026-01-01T00:00:01Z", ...DUAL }),
    service("v6", { created: "2026-01-01T00:00:02Z", ...V6 }),
    service("v4", { created: "2026-01-01T00:00:03Z" }),
  ];
  const r = ipam.reconcile(pools, svcs);
  deepStrictEqual(addresses(r), {
    dual: "10.0.100.0,2001:db8:100::",
    v6: "2001:db8:100::1",
    v4: "10.0.100.1",
  });
  deepStrictEqual(
    condition(r, "dual").message,
    'Addresses 10.0.100.0, 2001:db8:100:: from pool "mixed"',
  );
  deepStrictEqual(r.pools[0]!.total, 4 + 256);
  deepStrictEqual(r.pools[0]!.used, 4);
  deepStrictEqual(r.pools[0]!.conditions[0]!.message, "4 IPv4 and 256 IPv6 addresses in 2 blocks");
  // Level-triggered: the same input from the written status changes nothing and says nothing.
  deepStrictEqual(ipam.reconcile(pools, withStatus(svcs, r)).events, []);
});

Deno.test("ipam dual stack: a /64 pool hands out its lowest free addresses without walking 2^64", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("big", ["2001:db8:1::/64"]), pool("huge", ["2001:db8:2::/48"])];
  const svcs: IpamService[] = [];
  for (let i = 0; i < 2000; i++) {
    svcs.push(
      service(`s${i}`, { created: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), ...V6 }),
    );
  }
  // A walk of 2^64 (or 2^80 in the /48) never returns; the pass takes ~0.1 s. The bound only
  // names a walk that does return, slowly: 60 s is orders of magnitude from both, so load does
  // not flip it. How fast a pass is belongs to `./hf bench ipam --dual-stack`.
  const t0 = performance.now();
  let r = ipam.reconcile(pools, svcs);
  ok(performance.now() - t0 < 60_000, "a pass over a /64 terminates");
  deepStrictEqual(r.services.find((s) => s.name === "s0")!.addresses, ["2001:db8:1::"]);
  deepStrictEqual(r.services.find((s) => s.name === "s1999")!.addresses, ["2001:db8:1::7cf"]);
  // The counts saturate (2^64 does not fit a status integer exactly); the message is exact.
  deepStrictEqual(r.pools[0]!.total, Number.MAX_SAFE_INTEGER);
  deepStrictEqual(r.pools[0]!.conditions[0]!.message, "18446744073709551616 addresses in 1 block");
  deepStrictEqual(r.pools[0]!.used, 2000);
  // A freed address low in the range is the next one handed out.
  const next = svcs.filter((s) => s.metadata?.name !== "s5");
  next.push(service("late", { created: "2026-02-01T00:00:00Z", ...V6 }));
  r = ipam.reconcile(pools, withStatus(next, r));
  deepStrictEqual(r.services.find((s) => s.name === "late")!.addresses, ["2001:db8:1::5"]);
});

Deno.test("ipam dual stack: RequireDualStack without an IPv6 pool keeps its IPv4 address, condition False, one Warning; an IPv6 block completes it", () => {
  const ipam = new AddressAllocator();
  const v4only = [pool("blue", ["10.0.100.0/30"])];
  let svcs = [
    service("web", REQUIRE),
    service("pref", { created: "2026-01-02T00:00:00Z", ...DUAL }),
  ];
  let r = ipam.reconcile(v4only, svcs);
  deepStrictEqual(addresses(r), { pref: "10.0.100.1", web: "10.0.100.0" });
  const c = condition(r, "web");
  deepStrictEqual([c.status, c.reason], ["False", "IPFamilyUnavailable"]);
  deepStrictEqual(
    c.message,
    'Address 10.0.100.0 from pool "blue"; no IPv6 address: No AddressPool this Service may use ("blue") has IPv6 blocks; add one. ' +
      "spec.ipFamilyPolicy is RequireDualStack: the Service keeps its other address and gets the IPv6 one once a pool that selects it has a free IPv6 address",
  );
  // PreferDualStack settles for one family: allocated, and the message says what is missing.
  const p = condition(r, "pref");
  deepStrictEqual(p.status, "True");
  ok(
    p.message.endsWith(
      '; no IPv6 address: No AddressPool this Service may use ("blue") has IPv6 blocks; add one (PreferDualStack)',
    ),
    p.message,
  );
  deepStrictEqual(events(r).filter((e) => e.startsWith("Warning")), [
    `Warning AllocationFailed web: ${c.message}`,
  ]);
  svcs = withStatus(svcs, r);
  deepStrictEqual(ipam.reconcile(v4only, svcs).events, [], "nothing new: no second Warning");
  // A restarted controller reading the status says nothing either.
  deepStrictEqual(new AddressAllocator().reconcile(v4only, svcs).events, []);
  // An IPv6 block arrives: both get their IPv6 address and keep their IPv4 one.
  const both = [pool("blue", ["10.0.100.0/30", "2001:db8:100::/124"])];
  r = ipam.reconcile(both, svcs);
  deepStrictEqual(addresses(r), {
    pref: "10.0.100.1,2001:db8:100::1",
    web: "10.0.100.0,2001:db8:100::",
  });
  deepStrictEqual(condition(r, "web").status, "True");
  deepStrictEqual(events(r), [
    'Normal AddressAllocated web: Allocated 10.0.100.0, 2001:db8:100:: from pool "blue" (10.0.100.0 kept)',
    'Normal AddressAllocated pref: Allocated 10.0.100.1, 2001:db8:100::1 from pool "blue" (10.0.100.1 kept)',
  ]);
});

Deno.test("ipam dual stack: restart restores both families from status; IPv6 status text in any form", () => {
  const pools = [pool("a", ["10.0.0.0/28"]), pool("b", ["fd00:10::/112"])];
  const first = new AddressAllocator();
  const svcs: IpamService[] = [];
  for (let i = 0; i < 12; i++) {
    const fam = i % 3 === 0 ? DUAL : i % 3 === 1 ? V6 : {};
    svcs.push(
      service(`s${i}`, { created: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), ...fam }),
    );
  }
  const r = first.reconcile(pools, svcs);
  deepStrictEqual(r.services.filter((s) => s.condition.status !== "True"), []);
  const restored = new AddressAllocator().reconcile(pools, withStatus(svcs, r).reverse());
  deepStrictEqual(addresses(restored), addresses(r));
  deepStrictEqual(restored.events, []);
  // A status IPv6 address written in another form is the same address.
  const spelled = service("x", { ...V6, status: ["FD00:10:0:0:0:0:0:9"] });
  const k = new AddressAllocator().reconcile(pools, [spelled]);
  deepStrictEqual(addresses(k), { x: "fd00:10::9" });
});

Deno.test("ipam dual stack: requested IPv6 addresses; a request outside spec.ipFamilies is refused; families follow spec changes", () => {
  const pools = [pool("p", ["10.0.0.0/30", "2001:db8::/126"], { autoAssign: false })];
  const ipam = new AddressAllocator();
  const svcs = [
    service("ann", {
      ...DUAL,
      annotations: { "holdfast.io/load-balancer-ips": "10.0.0.2, 2001:db8::3" },
    }),
    service("spec", { ...V6, loadBalancerIP: "2001:db8:0:0::2" }),
    service("wrong", { ipFamilies: ["IPv4"], loadBalancerIP: "2001:db8::1" }),
  ];
  const r = ipam.reconcile(pools, svcs);
  deepStrictEqual(addresses(r), { ann: "10.0.0.2,2001:db8::3", spec: "2001:db8::2", wrong: "" });
  deepStrictEqual(
    condition(r, "wrong").message,
    "Requested address 2001:db8::1 is IPv6, but the Service's spec.ipFamilies is [IPv4] (ipFamilyPolicy SingleStack)",
  );
  // Dropping to SingleStack IPv4 releases the IPv6 address; going dual again gets one back.
  const auto = [pool("q", ["10.1.0.0/30", "2001:db8:1::/126"])];
  const a = new AddressAllocator();
  let s = [service("web", DUAL)];
  let q = a.reconcile(auto, s);
  deepStrictEqual(addresses(q), { web: "10.1.0.0,2001:db8:1::" });
  s = withStatus([service("web", { ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack" })], q);
  q = a.reconcile(auto, s);
  deepStrictEqual(addresses(q), { web: "10.1.0.0" });
  s = withStatus([service("web", DUAL)], q);
  deepStrictEqual(addresses(a.reconcile(auto, s)), { web: "10.1.0.0,2001:db8:1::" });
});

Deno.test("ipam dual stack: IPv6 blocks overlapping across pools and ranges of mixed families are not Ready", () => {
  const r = new AddressAllocator().reconcile([
    pool("old", ["2001:db8::/64"], {}, "2026-01-01T00:00:00Z"),
    pool("new", ["2001:db8::8000-2001:db8::8fff"], {}, "2026-01-02T00:00:00Z"),
    pool("mixed", ["10.0.0.1-2001:db8:9::1"]),
    pool("host", ["2001:db8:7::5/64"]),
  ], []);
  const ready = Object.fromEntries(r.pools.map((p) => [p.name, p.conditions[0]!]));
  deepStrictEqual(ready.old!.status, "True");
  deepStrictEqual([ready.new!.status, ready.new!.reason], ["False", "OverlappingPool"]);
  deepStrictEqual(ready.mixed!.reason, "InvalidBlock");
  ok(ready.mixed!.message.includes("a range is of one family"), ready.mixed!.message);
  ok(ready.host!.message.includes("the network is 2001:db8:7::/64"), ready.host!.message);
});
