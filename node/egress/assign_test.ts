import { deepStrictEqual } from "node:assert/strict";
import { assignAddresses } from "./assign.ts";

function addresses(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `198.18.${100 + (i >> 8)}.${i & 255}`);
}

function pods(p: number): string[] {
  return Array.from({ length: p }, (_, i) => `nat${i + 1}`);
}

const SHAPES: [number, number][] = [[1, 3], [2, 2], [3, 3], [4, 3], [6, 3], [10, 4], [16, 5], [
  100,
  7,
]];

Deno.test("every pod owns floor(N/P) or ceil(N/P) addresses", () => {
  for (const [n, p] of SHAPES) {
    const a = assignAddresses(addresses(n), pods(p));
    deepStrictEqual(a.size, n);
    const load = new Map(pods(p).map((x) => [x, 0]));
    for (const { owner } of a.values()) load.set(owner, load.get(owner)! + 1);
    for (const [pod, l] of load) {
      const ok = l === Math.floor(n / p) || l === Math.ceil(n / p);
      deepStrictEqual(ok, true, `${n} addresses over ${p} pods: ${pod} owns ${l}`);
    }
  }
});

Deno.test("the same inputs in any order give the same answer", () => {
  const a = assignAddresses(addresses(10), pods(4));
  const b = assignAddresses(addresses(10).reverse(), [...pods(4).reverse(), "nat2"]);
  deepStrictEqual([...b].sort(), [...a].sort());
});

Deno.test("standbys are the other pods, the first one being the owner once the owner dies", () => {
  for (const [n, p] of SHAPES) {
    const a = assignAddresses(addresses(n), pods(p));
    for (const [address, { owner, standbys }] of a) {
      deepStrictEqual([owner, ...standbys].sort(), pods(p).sort());
      const after = assignAddresses(addresses(n), pods(p).filter((x) => x !== owner));
      deepStrictEqual(after.get(address)?.owner, standbys[0]);
    }
  }
  const one = assignAddresses(addresses(3), pods(3), { standbys: 1 });
  for (const { standbys } of one.values()) deepStrictEqual(standbys.length, 1);
});

Deno.test("a pod's death moves its addresses and few others", () => {
  for (const [n, p] of SHAPES) {
    if (p < 2) continue;
    const before = assignAddresses(addresses(n), pods(p));
    let dead = 0;
    let others = 0;
    for (const gone of pods(p)) {
      const after = assignAddresses(addresses(n), pods(p).filter((x) => x !== gone));
      for (const [address, { owner }] of before) {
        if (owner === gone) dead++;
        else if (after.get(address)!.owner !== owner) others++;
      }
    }
    // Every death in turn: the dead pods' addresses move (n in total); the bounded loads push
    // fewer others along (the ownership moves those later, by planned handover).
    deepStrictEqual(dead, n);
    deepStrictEqual(others <= n, true, `${n}/${p}: ${others} other addresses moved`);
  }
});

Deno.test("a joining pod takes about its share", () => {
  for (const [n, p] of SHAPES) {
    const before = assignAddresses(addresses(n), pods(p));
    const after = assignAddresses(addresses(n), [...pods(p), "natnew"]);
    let moved = 0;
    let toNew = 0;
    for (const [address, { owner }] of before) {
      const now = after.get(address)!.owner;
      if (now !== owner) moved++;
      if (now === "natnew") toNew++;
    }
    deepStrictEqual(toNew, Math.floor(n / (p + 1)) + (toNew > Math.floor(n / (p + 1)) ? 1 : 0));
    deepStrictEqual(moved <= 2 * Math.ceil(n / (p + 1)), true, `${n}/${p}+1: ${moved} moved`);
  }
});

Deno.test("no pods: no owners", () => {
  deepStrictEqual(assignAddresses(addresses(2), []).size, 0);
});
