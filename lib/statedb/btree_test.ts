import { deepStrictEqual } from "node:assert/strict";
import { mulberry32 } from "../../node/lb/_testing.ts";
import { BTree, compareKeys, type Key } from "./btree.ts";

Deno.test("btree: random inserts/deletes match a sorted model and old snapshots never change", () => {
  const rnd = mulberry32(7);
  let tree = BTree.empty<number>({ aux: true });
  const model = new Map<number, number>();
  const snapshots: [BTree<number>, [number, number][]][] = [];
  for (let round = 0; round < 60; round++) {
    const ed = tree.edit();
    const ops = 1 + Math.floor(rnd() * 200);
    for (let i = 0; i < ops; i++) {
      const k = Math.floor(rnd() * 2000);
      if (rnd() < 0.6) {
        const old = ed.set(k, k * 10 + round, round);
        deepStrictEqual(old, model.get(k));
        model.set(k, k * 10 + round);
      } else {
        const old = ed.delete(k);
        deepStrictEqual(old, model.get(k));
        model.delete(k);
      }
      if (rnd() < 0.01) {
        snapshots.push([
          ed.snapshot(),
          [...model.entries()].sort((a, b) => a[0] - b[0]),
        ]);
      }
    }
    tree = ed.done();
    deepStrictEqual(tree.size, model.size);
    const expected = [...model.entries()].sort((a, b) => a[0] - b[0]);
    const got: [number, number][] = [];
    tree.scan((k, v) => {
      got.push([k as number, v]);
    });
    deepStrictEqual(got, expected);
    for (const [k, v] of expected.slice(0, 20)) deepStrictEqual(tree.get(k), v);
    snapshots.push([tree, expected]);
  }
  for (const [t, expected] of snapshots) {
    const got: [number, number][] = [];
    t.scan((k, v) => {
      got.push([k as number, v]);
    });
    deepStrictEqual(got, expected);
  }
});

Deno.test("btree: non-unique tree keeps many values per key and scans from a key", () => {
  type Row = { id: string; group: string };
  const ed = BTree.empty<Row>({ unique: false }).edit();
  const rows: Row[] = [];
  for (let i = 0; i < 500; i++) {
    const r = { id: `r${String(i).padStart(4, "0")}`, group: `g${i % 7}` };
    rows.push(r);
    ed.set(r.group, r, 0, r.id);
  }
  for (let i = 0; i < 500; i += 3) ed.delete(rows[i]!.group, rows[i]!.id);
  const t = ed.done();
  for (const g of ["g0", "g3", "g6"]) {
    const got: string[] = [];
    t.scan((k, v) => {
      if (k !== g) return false;
      got.push(v.id);
    }, g);
    const want = rows.filter((r, i) => r.group === g && i % 3 !== 0).map((r) => r.id).sort();
    deepStrictEqual(got, want);
  }
  deepStrictEqual(compareKeys("a", "b") < 0, true);
});

Deno.test("btree: clustered inserts (the last-leaf fast path) interleaved with deletes and snapshots", () => {
  const rnd = mulberry32(99);
  for (const multi of [false, true]) {
    let tree = BTree.empty<string>(multi ? { unique: false } : { aux: true });
    const model = new Map<string, [string, number]>(); // "key\0tb" → [value, aux]
    const id = (k: string, t: string) => multi ? `${k}\0${t}` : k;
    const snapshots: [BTree<string>, [string, string][]][] = [];
    const entries = () =>
      [...model.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
        .map(([k, [v]]) => [k, v] as [string, string]);
    for (let round = 0; round < 60; round++) {
      const ed = tree.edit();
      for (let op = 0; op < 150; op++) {
        // Runs of neighbouring keys, like one service's backends; sometimes a random one.
        const base = Math.floor(rnd() * 400);
        const run = 1 + Math.floor(rnd() * 12);
        for (let j = 0; j < run; j++) {
          const n = rnd() < 0.9 ? base + j : Math.floor(rnd() * 400);
          const k = multi ? `svc-${n >> 3}` : `10.0.${n >> 8}.${n & 255}:80/TCP`;
          const t = `10.0.${n >> 8}.${n & 255}:80/TCP`;
          if (rnd() < 0.8) {
            const v = `v${round}.${op}.${j}`, aux = round * 1000 + op;
            const had = model.get(id(k, t));
            const old = ed.set(k, v, aux, multi ? t : undefined);
            deepStrictEqual(old, had?.[0]);
            if (!multi && had !== undefined) deepStrictEqual(ed.oldAux, had[1]);
            model.set(id(k, t), [v, aux]);
          } else {
            deepStrictEqual(ed.delete(k, multi ? t : undefined), model.get(id(k, t))?.[0]);
            model.delete(id(k, t));
          }
        }
        if (rnd() < 0.02) snapshots.push([ed.snapshot(), entries()]);
      }
      tree = ed.done();
      deepStrictEqual(tree.size, model.size);
      snapshots.push([tree, entries()]);
    }
    for (const [t, expected] of snapshots) {
      const got: [string, string][] = [];
      t.scan((k, v) => {
        got.push([k as string, v]);
      });
      deepStrictEqual(got.map(([, v]) => v), expected.map(([, v]) => v));
      if (!multi) {
        for (const [k, v] of expected) deepStrictEqual(t.get(k), v);
      }
    }
  }
});

Deno.test("btree: get, collect and scan-from agree with a sorted model for string and number keys, unique and not", () => {
  const rnd = mulberry32(2026);
  for (const kind of ["string", "number"] as const) {
    for (const multi of [false, true]) {
      const key = (n: number) => kind === "string" ? `k${String(n).padStart(3, "0")}` : n;
      const ed = BTree.empty<string>({ unique: !multi }).edit();
      const model = new Map<string, [Key, Key, string]>(); // id → [key, tiebreak, value]
      for (let i = 0; i < 3000; i++) {
        const k = key(Math.floor(rnd() * 300)), t = multi ? `t${Math.floor(rnd() * 20)}` : "";
        const id = `${typeof k === "number" ? String(k).padStart(3, "0") : k}\0${t}`;
        if (rnd() < 0.75) {
          ed.set(k, `${i}`, 0, multi ? t : undefined);
          model.set(id, [k, t, `${i}`]);
        } else {
          ed.delete(k, multi ? t : undefined);
          model.delete(id);
        }
      }
      const tree = ed.done();
      const sorted = [...model.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, e]) => e);
      for (let n = -1; n <= 300; n++) {
        const k = key(n);
        const want = sorted.filter((e) => e[0] === k);
        deepStrictEqual(tree.collect(k, []), want.map((e) => e[2]), `collect(${k})`);
        deepStrictEqual(tree.get(k), want[0]?.[2], `get(${k})`);
        const tb = multi ? `t${n % 20}` : undefined;
        if (multi) deepStrictEqual(tree.get(k, tb), want.find((e) => e[1] === tb)?.[2]);
        // scan from (k, tb): every entry at or after it, in order (the first few suffice).
        const from = sorted.filter((e) =>
          e[0] > k || (e[0] === k && (tb === undefined || e[1] >= tb))
        );
        const got: string[] = [];
        tree.scan((_k, v) => got.push(v) < 5, k, tb);
        deepStrictEqual(got, from.slice(0, 5).map((e) => e[2]), `scan from (${k}, ${tb})`);
      }
    }
  }
});
