import { deepStrictEqual, ok } from "node:assert/strict";
import { condition, pool, service, withStatus } from "./_testing.ts";
import { AddressAllocator, type IpamResult } from "./allocator.ts";

/** `namespace/name` → addresses (joined) or the failure reason. */
function summary(r: IpamResult): Record<string, string> {
  return Object.fromEntries(r.services.map((s) => [
    `${s.namespace}/${s.name}`,
    s.condition.status === "True" ? s.addresses.join(",") : s.condition.reason,
  ]));
}

function events(r: IpamResult): string[] {
  return r.events.map((e) => `${e.reason} ${e.object.namespace ?? ""}/${e.object.name}`);
}

Deno.test("ipam: lowest free address of the first pool by name; idempotent, no events the second time", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("b", ["10.0.2.0/30"]), pool("a", ["10.0.1.8-10.0.1.9"])];
  const svcs = [
    service("one", { created: "2026-01-01T00:00:01Z" }),
    service("two", { created: "2026-01-01T00:00:02Z" }),
    service("three", { created: "2026-01-01T00:00:03Z" }),
  ];
  const r1 = ipam.reconcile(pools, svcs);
  deepStrictEqual(summary(r1), {
    "default/one": "10.0.1.8",
    "default/three": "10.0.2.0",
    "default/two": "10.0.1.9",
  });
  deepStrictEqual(condition(r1, "one"), {
    type: "holdfast.io/AddressAllocated",
    status: "True",
    reason: "Allocated",
    message: `Address 10.0.1.8 from pool "a"`,
  });
  deepStrictEqual(r1.events[0], {
    object: { kind: "Service", namespace: "default", name: "one" },
    type: "Normal",
    reason: "AddressAllocated",
    message: `Allocated 10.0.1.8 from pool "a"`,
  });
  deepStrictEqual(r1.events.length, 3);
  deepStrictEqual(r1.pools.map((p) => [p.name, p.total, p.used, p.available]), [
    ["a", 2, 2, 0],
    ["b", 4, 1, 3],
  ]);
  deepStrictEqual(r1.pools[0]!.conditions.map((c) => [c.type, c.status, c.reason]), [
    ["Ready", "True", "Valid"],
    ["Exhausted", "True", "NoAddressesLeft"],
  ]);
  const r2 = ipam.reconcile(pools, svcs);
  deepStrictEqual(r2.events, []);
  deepStrictEqual(r2, { ...r1, events: [] });
  // With the status written, still nothing to say.
  deepStrictEqual(ipam.reconcile(pools, withStatus(svcs, r1)).events, []);
});

Deno.test("ipam: an exhausted pool fails the Service that asked last (condition + event), the others keep their addresses", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("tiny", ["10.0.0.0/31"])];
  const svcs = ["a", "b", "c"].map((n, i) => service(n, { created: `2026-01-01T00:00:0${i}Z` }));
  const r = ipam.reconcile(pools, svcs);
  deepStrictEqual(summary(r), {
    "default/a": "10.0.0.0",
    "default/b": "10.0.0.1",
    "default/c": "PoolExhausted",
  });
  const c = condition(r, "c");
  deepStrictEqual([c.status, c.reason], ["False", "PoolExhausted"]);
  ok(c.message.includes(`No free address in pool "tiny"`), c.message);
  const failed = r.events.filter((e) => e.reason === "AllocationFailed");
  deepStrictEqual(failed, [{
    object: { kind: "Service", namespace: "default", name: "c" },
    type: "Warning",
    reason: "AllocationFailed",
    message: c.message,
  }]);
  // Once reported, the failure is not reported again; a freed address goes to the waiting Service.
  deepStrictEqual(ipam.reconcile(pools, svcs).events, []);
  const r3 = ipam.reconcile(pools, svcs.filter((s) => s.metadata?.name !== "a"));
  deepStrictEqual(summary(r3), { "default/b": "10.0.0.1", "default/c": "10.0.0.0" });
  deepStrictEqual(events(r3), ["AddressReleased default/a", "AddressAllocated default/c"]);
  deepStrictEqual(r3.events[0]!.message, "Released 10.0.0.0: the Service was deleted");
});

Deno.test("ipam: an invalid pool gets a condition and one PoolInvalid event; other pools keep working", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("bad", ["10.0.0.0/33"]), pool("good", ["10.0.1.0/30"])];
  const r = ipam.reconcile(pools, [service("web")]);
  deepStrictEqual(summary(r), { "default/web": "10.0.1.0" });
  const bad = r.pools.find((p) => p.name === "bad")!;
  deepStrictEqual([bad.conditions[0]!.status, bad.conditions[0]!.reason], [
    "False",
    "InvalidBlock",
  ]);
  ok(bad.conditions[0]!.message.includes(`block "10.0.0.0/33"`), bad.conditions[0]!.message);
  const invalid = r.events.filter((e) => e.reason === "PoolInvalid");
  deepStrictEqual(invalid.map((e) => [e.object, e.type]), [[
    { kind: "AddressPool", name: "bad" },
    "Warning",
  ]]);
  deepStrictEqual(ipam.reconcile(pools, [service("web")]).events, []);
  // A restarted controller reads the pool's status condition and does not repeat the event.
  const shown = { ...pools[0]!, status: { conditions: bad.conditions } };
  deepStrictEqual(
    new AddressAllocator().reconcile([shown, pools[1]!], withStatus([service("web")], r)).events,
    [],
  );
});

Deno.test("ipam: a pool that turns invalid keeps its Services' addresses but hands out no new ones", () => {
  const ipam = new AddressAllocator();
  const good = [pool("p", ["10.0.0.0/30"])];
  const r1 = ipam.reconcile(good, [service("old")]);
  deepStrictEqual(summary(r1), { "default/old": "10.0.0.0" });
  const broken = [pool("p", ["10.0.0.0/30", "10.0.0.2/31"])];
  const r2 = ipam.reconcile(broken, [
    service("old"),
    service("new", { created: "2026-02-01T00:00:00Z" }),
  ]);
  deepStrictEqual(summary(r2), { "default/new": "NoMatchingPool", "default/old": "10.0.0.0" });
  ok(condition(r2, "new").message.includes(`"p": not Ready`), condition(r2, "new").message);
  deepStrictEqual(events(r2), ["AllocationFailed default/new", "PoolInvalid /p"]);
});

Deno.test("ipam: a requested address is honoured, in a pool with autoAssign false too", () => {
  const ipam = new AddressAllocator();
  const pools = [
    pool("auto", ["10.0.0.0/29"]),
    pool("manual", ["10.0.9.0/29"], { autoAssign: false }),
  ];
  const r = ipam.reconcile(pools, [
    service("dyn", { created: "2026-01-01T00:00:00Z" }),
    service("ann", { annotations: { "holdfast.io/load-balancer-ips": "10.0.0.0" } }),
    service("spec", { loadBalancerIP: "10.0.9.3" }),
    service("two", { annotations: { "holdfast.io/load-balancer-ips": "10.0.0.5, 10.0.9.5" } }),
  ]);
  // Requests go before dynamic allocations, so "dyn" does not take 10.0.0.0.
  deepStrictEqual(summary(r), {
    "default/ann": "10.0.0.0",
    "default/dyn": "10.0.0.1",
    "default/spec": "10.0.9.3",
    "default/two": "10.0.0.5,10.0.9.5",
  });
  deepStrictEqual(
    condition(r, "two").message,
    `Addresses 10.0.0.5 from pool "auto", 10.0.9.5 from pool "manual"`,
  );
});

Deno.test("ipam: a requested address that is unavailable says why, and nothing is allocated instead", () => {
  const ipam = new AddressAllocator();
  const pools = [
    pool("p", ["10.0.0.0/24"], { avoidBuggyIPs: true }),
    pool("blue", ["10.0.1.0/24"], { serviceSelector: { matchLabels: { team: "blue" } } }),
  ];
  const ask = (name: string, ips: string, o: Parameters<typeof service>[1] = {}) =>
    service(name, {
      ...o,
      annotations: { "holdfast.io/load-balancer-ips": ips, ...o.annotations },
    });
  const r = ipam.reconcile(pools, [
    ask("holder", "10.0.0.7", { created: "2026-01-01T00:00:00Z" }),
    ask("taken", "10.0.0.7"),
    ask("nowhere", "192.0.2.1"),
    ask("text", "ten"),
    ask("buggy", "10.0.0.255"),
    ask("unselected", "10.0.1.4"),
    ask("wrongpool", "10.0.0.9", { annotations: { "holdfast.io/address-pool": "blue" } }),
    service("both", {
      loadBalancerIP: "10.0.0.1",
      annotations: { "holdfast.io/load-balancer-ips": "10.0.0.2" },
    }),
  ]);
  const want: Record<string, string> = {
    taken: `Requested address 10.0.0.7 is held by service "default/holder" (to share it, give both`,
    nowhere: "Requested address 192.0.2.1 is in no AddressPool",
    text: `Requested address "ten" is not an IPv4 or IPv6 address`,
    buggy: `Requested address 10.0.0.255 ends in .0 or .255, which pool "p" does not hand out`,
    unselected: `Requested address 10.0.1.4 is in pool "blue", whose serviceSelector (team=blue)`,
    wrongpool: `Requested address 10.0.0.9 is in pool "p", not in pool "blue" that annotation`,
    both: 'spec.loadBalancerIP="10.0.0.1" ask for different addresses',
  };
  for (const [name, text] of Object.entries(want)) {
    const c = condition(r, name);
    deepStrictEqual([c.status, c.reason], ["False", "RequestedAddressUnavailable"], name);
    ok(c.message.includes(text), `${name}: ${c.message}`);
  }
  deepStrictEqual(r.services.filter((s) => s.addresses.length > 0).map((s) => s.name), ["holder"]);
});

Deno.test("ipam: Services with one sharing key share an address when their ports differ; a collision is a SharingConflict", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("p", ["10.0.0.0/29"])];
  const shared = (name: string, ports: string[], o: Parameters<typeof service>[1] = {}) =>
    service(name, { ports, annotations: { "holdfast.io/allow-shared-ip": "k" }, ...o });
  const svcs = [
    shared("dns-tcp", ["53/TCP"], { created: "2026-01-01T00:00:00Z" }),
    shared("dns-udp", ["53/UDP"], { created: "2026-01-01T00:00:01Z" }),
    shared("clash", ["53/UDP", "54/UDP"], { created: "2026-01-01T00:00:02Z" }),
    shared("elsewhere", ["53/TCP"], { namespace: "other" }),
    service("plain", { ports: ["443"], created: "2026-01-01T00:00:03Z" }),
  ];
  const r = ipam.reconcile(pools, svcs);
  deepStrictEqual(summary(r), {
    "default/clash": "SharingConflict",
    "default/dns-tcp": "10.0.0.0",
    "default/dns-udp": "10.0.0.0",
    "default/plain": "10.0.0.2",
    "other/elsewhere": "10.0.0.1",
  });
  ok(
    condition(r, "clash").message.includes(
      `shared under key "k" with service "default/dns-udp", which also uses port 53/UDP`,
    ),
    condition(r, "clash").message,
  );
  deepStrictEqual(
    condition(r, "dns-udp").message,
    `Address 10.0.0.0 from pool "p" (sharing key "k")`,
  );
  deepStrictEqual(r.pools[0]!.used, 3);
  // A requested shared address works the same way; without the key it is refused.
  const r2 = ipam.reconcile(pools, [
    ...svcs,
    shared("web", ["80/TCP"], {
      annotations: {
        "holdfast.io/allow-shared-ip": "k",
        "holdfast.io/load-balancer-ips": "10.0.0.0",
      },
    }),
    service("nokey", { ports: ["81"], loadBalancerIP: "10.0.0.0" }),
  ]);
  deepStrictEqual(summary(r2)["default/web"], "10.0.0.0");
  deepStrictEqual(summary(r2)["default/nokey"], "RequestedAddressUnavailable");
});

Deno.test("ipam: release on delete, on leaving the class or type; the address is reused", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("p", ["10.0.0.0/30"])];
  const a = service("a", { created: "2026-01-01T00:00:00Z" });
  const b = service("b", { created: "2026-01-01T00:00:01Z" });
  const c = service("c", { created: "2026-01-01T00:00:02Z" });
  deepStrictEqual(summary(ipam.reconcile(pools, [a, b, c])), {
    "default/a": "10.0.0.0",
    "default/b": "10.0.0.1",
    "default/c": "10.0.0.2",
  });
  const bNodePort = { ...b, spec: { ...b.spec, type: "NodePort" } };
  const cOther = service("c", {
    created: "2026-01-01T00:00:02Z",
    loadBalancerClass: "example.com/lb",
  });
  const r = ipam.reconcile(pools, [bNodePort, cOther]);
  deepStrictEqual(summary(r), {});
  deepStrictEqual(r.events.map((e) => `${e.object.name}: ${e.message}`), [
    "a: Released 10.0.0.0: the Service was deleted",
    `b: Released 10.0.0.1: the Service is no longer of type LoadBalancer with class "holdfast.io/lb"`,
    `c: Released 10.0.0.2: the Service is no longer of type LoadBalancer with class "holdfast.io/lb"`,
  ]);
  deepStrictEqual(r.released.map((o) => o.name), ["b", "c"]);
  deepStrictEqual(r.pools[0]!.used, 0);
  deepStrictEqual(summary(ipam.reconcile(pools, [service("d")])), { "default/d": "10.0.0.0" });
});

Deno.test("ipam: Services without a class are claimed only when configured", () => {
  const svc = service("x", { loadBalancerClass: null });
  const pools = [pool("p", ["10.0.0.0/30"])];
  deepStrictEqual(summary(new AddressAllocator().reconcile(pools, [svc])), {});
  deepStrictEqual(
    summary(new AddressAllocator({ claimServicesWithoutClass: true }).reconcile(pools, [svc])),
    { "default/x": "10.0.0.0" },
  );
});

Deno.test("ipam: selectors and autoAssign decide which pool a Service gets", () => {
  const ipam = new AddressAllocator();
  const pools = [
    pool("a-blue", ["10.0.1.0/30"], {
      serviceSelector: {
        matchLabels: { team: "blue" },
        matchExpressions: [{ key: "tier", operator: "NotIn", values: ["test"] }],
      },
    }),
    pool("b-manual", ["10.0.2.0/30"], { autoAssign: false }),
    pool("c-rest", ["10.0.3.0/30"], {
      serviceSelector: { matchExpressions: [{ key: "team", operator: "DoesNotExist" }] },
    }),
  ];
  const r = ipam.reconcile(pools, [
    service("blue", { labels: { team: "blue" } }),
    service("blue-test", { labels: { team: "blue", tier: "test" } }),
    service("untagged"),
    service("named", { annotations: { "holdfast.io/address-pool": "b-manual" } }),
    service("named-unselected", {
      labels: { team: "red" },
      annotations: { "holdfast.io/address-pool": "a-blue" },
    }),
    service("named-missing", { annotations: { "holdfast.io/address-pool": "nope" } }),
  ]);
  deepStrictEqual(summary(r), {
    "default/blue": "10.0.1.0",
    "default/blue-test": "NoMatchingPool",
    "default/named": "10.0.2.0",
    "default/named-missing": "NoMatchingPool",
    "default/named-unselected": "NoMatchingPool",
    "default/untagged": "10.0.3.0",
  });
  ok(condition(r, "blue-test").message.includes(`"b-manual": autoAssign is false`));
  ok(
    condition(r, "named-unselected").message.includes(
      `pool "a-blue" named by annotation holdfast.io/address-pool does not select this Service (serviceSelector: team=blue,tier notin (test))`,
    ),
    condition(r, "named-unselected").message,
  );
  ok(condition(r, "named-missing").message.includes(`pool "nope"`));
  ok(condition(r, "named-missing").message.includes("does not exist"));
});

Deno.test("ipam: avoidBuggyIPs never hands out .0 or .255", () => {
  const ipam = new AddressAllocator();
  const pools = [pool("p", ["10.0.0.254-10.0.1.1"], { avoidBuggyIPs: true })];
  const r = ipam.reconcile(
    pools,
    ["a", "b", "c"].map((n, i) => service(n, { created: `2026-01-01T00:00:0${i}Z` })),
  );
  deepStrictEqual(summary(r), {
    "default/a": "10.0.0.254",
    "default/b": "10.0.1.1",
    "default/c": "PoolExhausted",
  });
  deepStrictEqual([r.pools[0]!.total, r.pools[0]!.available], [2, 0]);
});
