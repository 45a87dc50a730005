import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { TupleTable } from "./_tuple_table.ts";

Deno.test("tuple table: agrees with a Map through 200,000 random puts, gets and deletes (growth and backward-shift deletion included)", () => {
  const table = new TupleTable();
  const ref = new Map<string, number>();
  let seed = 7;
  const rand = (n: number) => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n;
  // A small universe of tuples so that keys repeat and probe runs collide.
  const tuple = (): [number, number, number, number] => [
    0x0a000000 + rand(3000),
    0xcb007100 + rand(3),
    ((40_000 << 16) | (80 + rand(2))) >>> 0,
    rand(2) ? 6 : 17,
  ];
  for (let step = 0; step < 200_000; step++) {
    const [s, d, p, pr] = tuple();
    const k = `${s}/${d}/${p}/${pr}`;
    const op = rand(10);
    if (op < 5) {
      const v = rand(1 << 20);
      strictEqual(table.put(s, d, p, pr, v), ref.get(k) ?? -1, `put at step ${step}`);
      ref.set(k, v);
    } else if (op < 8) {
      strictEqual(table.delete(s, d, p, pr), ref.delete(k), `delete at step ${step}`);
    } else {
      strictEqual(table.get(s, d, p, pr), ref.get(k) ?? -1, `get at step ${step}`);
    }
    strictEqual(table.size, ref.size);
  }
  const seen = new Map<string, number>();
  table.forEach((s, d, p, pr, v) => seen.set(`${s}/${d}/${p}/${pr}`, v));
  deepStrictEqual(new Map([...seen].sort()), new Map([...ref].sort()));
});

Deno.test("tuple table: put without insert leaves an absent tuple absent", () => {
  const table = new TupleTable();
  strictEqual(table.put(1, 2, 3, 6, 9, false), -1);
  strictEqual(table.get(1, 2, 3, 6), -1);
  strictEqual(table.put(1, 2, 3, 6, 9), -1);
  strictEqual(table.put(1, 2, 3, 6, 10, false), 9);
  strictEqual(table.get(1, 2, 3, 6), 10);
  strictEqual(table.get(1, 2, 3, 17), -1, "the protocol is part of the key");
  strictEqual(table.get(0xffffffff, 2, 3, 6), -1);
  strictEqual(table.put(0xffffffff, 2, 0xffffffff, 6, 1), -1);
  strictEqual(table.get(0xffffffff, 2, 0xffffffff, 6), 1, "u32 extremes round-trip");
});
