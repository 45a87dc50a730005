import { deepStrictEqual, ok } from "node:assert/strict";
import { condition, pool, service } from "./_testing.ts";
import { AddressAllocator } from "./allocator.ts";
import { readPools } from "./pool.ts";

Deno.test("ipam pools: CIDR and range blocks count their addresses; sorted by name; defaults", () => {
  const [a, b] = readPools([
    pool("blue", ["10.0.100.0/28", "10.0.100.40-10.0.100.49"]),
    pool("amber", ["192.0.2.7/32"], { autoAssign: false, avoidBuggyIPs: true }),
  ]);
  deepStrictEqual([a!.name, a!.total, a!.ready, a!.autoAssign, a!.avoidBuggyIPs], [
    "amber",
    1,
    true,
    false,
    true,
  ]);
  deepStrictEqual([b!.name, b!.total, b!.ready, b!.reason, b!.autoAssign], [
    "blue",
    26,
    true,
    "Valid",
    true,
  ]);
});

Deno.test("ipam pools: avoidBuggyIPs leaves out every .0 and .255 from the total", () => {
  const [p] = readPools([
    pool("p", ["10.0.0.0/22", "10.0.9.255-10.0.10.0"], { avoidBuggyIPs: true }),
  ]);
  deepStrictEqual(p!.total, 1024 - 8 + 0);
  const [q] = readPools([pool("q", ["10.0.0.254-10.0.1.1"], { avoidBuggyIPs: true })]);
  deepStrictEqual(q!.total, 2);
});

Deno.test("ipam pools: a bad block makes the pool not Ready with a message naming the block", () => {
  const cases: [string[], string][] = [
    [["10.0.0.0/33"], `block "10.0.0.0/33"`],
    [["10.0.0.5/24"], "host bits are set"],
    [["10.0.0.9-10.0.0.1"], `block "10.0.0.9-10.0.0.1": start 10.0.0.9 is after stop 10.0.0.1`],
    [
      ["10.0.0.0/28", "10.0.0.8-10.0.0.20"],
      `block "10.0.0.8-10.0.0.20" overlaps block "10.0.0.0/28"`,
    ],
    [["nonsense"], `block "nonsense"`],
    [[], "spec.blocks is empty"],
  ];
  for (const [blocks, want] of cases) {
    const [p] = readPools([pool("bad", blocks)]);
    deepStrictEqual([p!.ready, p!.reason], [false, "InvalidBlock"], blocks.join(" "));
    ok(p!.problem.includes(want), `${blocks}: ${p!.problem}`);
  }
  const [both] = readPools([{
    metadata: { name: "x" },
    spec: { blocks: [{ cidr: "10.0.0.0/30", start: "10.0.0.1", stop: "10.0.0.2" }] },
  }]);
  ok(both!.problem.includes("sets both cidr and start/stop"), both!.problem);
});

Deno.test("ipam pools: of two overlapping pools the younger is not Ready, the older keeps working", () => {
  const pools = readPools([
    pool("a-new", ["10.0.0.8/29"], {}, "2026-02-01T00:00:00Z"),
    pool("z-old", ["10.0.0.0-10.0.0.9"], {}, "2026-01-01T00:00:00Z"),
    pool("other", ["10.1.0.0/24"], {}, "2026-03-01T00:00:00Z"),
  ]);
  const by = Object.fromEntries(pools.map((p) => [p.name, p]));
  deepStrictEqual([by["z-old"]!.ready, by["other"]!.ready, by["a-new"]!.ready], [
    true,
    true,
    false,
  ]);
  deepStrictEqual(by["a-new"]!.reason, "OverlappingPool");
  deepStrictEqual(
    by["a-new"]!.problem,
    `block "10.0.0.8/29" overlaps block "10.0.0.0-10.0.0.9" of older pool "z-old"`,
  );
  // Same age: the name decides.
  const tie = readPools([pool("b", ["10.0.0.0/30"]), pool("a", ["10.0.0.2/31"])]);
  deepStrictEqual(tie.map((p) => [p.name, p.ready]), [["a", true], ["b", false]]);
});

Deno.test("ipam pools: an invalid serviceSelector makes the pool not Ready (InvalidSelector)", () => {
  const [p] = readPools([pool("s", ["10.0.0.0/30"], {
    serviceSelector: { matchExpressions: [{ key: "team", operator: "In", values: [] }] },
  })]);
  deepStrictEqual([p!.ready, p!.reason], [false, "InvalidSelector"]);
  ok(p!.problem.includes("needs at least one value"), p!.problem);
});

Deno.test("ipam pools: a /32 of a .0 address under avoidBuggyIPs is Ready with 0 addresses, Exhausted; its Service PoolExhausted", () => {
  const r = new AddressAllocator().reconcile(
    [pool("zero", ["10.0.0.0/32"], { avoidBuggyIPs: true })],
    [service("web")],
  );
  const [status] = r.pools;
  deepStrictEqual([status!.total, status!.used, status!.available], [0, 0, 0]);
  const [ready, exhausted] = status!.conditions;
  deepStrictEqual([ready!.status, ready!.reason, ready!.message], [
    "True",
    "Valid",
    "0 addresses in 1 block",
  ]);
  deepStrictEqual([exhausted!.status, exhausted!.reason], ["True", "NoAddressesLeft"]);
  ok(exhausted!.message.includes("no address to hand out"), exhausted!.message);
  const c = condition(r, "web");
  deepStrictEqual([c.status, c.reason], ["False", "PoolExhausted"]);
  deepStrictEqual(c.message.startsWith('No free address in pool "zero"'), true, c.message);
});
