import { deepStrictEqual, ok } from "node:assert/strict";
import { BackendRefs, IdPool } from "./_ids.ts";

Deno.test("IdPool: restored gaps are reused lowest first; IDs past a smaller capacity are dropped", () => {
  const pool = new IdPool("service");
  pool.restore(new Set([2, 5]));
  deepStrictEqual([pool.take("a", 10), pool.take("b", 10), pool.take("c", 10)], [1, 3, 4]);
  deepStrictEqual(pool.take("d", 10), 6);
  pool.give(6);
  let error = "";
  try {
    pool.take("e/f", 6); // 6 was given back, but the maps now hold IDs 1..5 only
  } catch (e) {
    error = (e as Error).message;
  }
  deepStrictEqual(
    error,
    'Cannot allocate service ID for "e/f": the datapath holds 6 services (--max-services), ' +
      "IDs 1..5 are in use",
  );
});

Deno.test("BackendRefs: restore counts one reference per frontend; the last release deletes", async () => {
  const refs = new BackendRefs();
  const entries = [[1, { address: "10.1.0.1", port: 80 }], [4, {
    address: "10.1.0.4",
    port: 80,
  }]] as const;
  refs.restore(entries, [{ protocol: "UDP", backendIds: [1] }, {
    protocol: "TCP",
    backendIds: [1],
  }]);
  deepStrictEqual(refs.id("10.1.0.1:80/UDP"), 1, "named after the first frontend's protocol");
  deepStrictEqual(refs.id("10.1.0.4:80/TCP"), 4, "unreferenced, kept until pruned");
  ok(refs.isWritten(1) && refs.isReferenced(1) && !refs.isReferenced(4));
  deepStrictEqual(refs.acquire("10.1.0.9:80/TCP", 100), 2, "the gap below the highest ID");
  const deleted: number[] = [];
  const flush = () => refs.flushOrphans((id) => Promise.resolve(void deleted.push(id)));
  refs.release([1]);
  await flush();
  deepStrictEqual(deleted, [], "one frontend still holds it");
  refs.release([1]);
  await flush();
  deepStrictEqual(deleted, [1]);
  deepStrictEqual(refs.id("10.1.0.1:80/UDP"), undefined);
});

Deno.test("BackendRefs: hold references only what is new and returns old-only and the union", () => {
  const refs = new BackendRefs();
  const [a, b, c] = ["a:1/TCP", "b:1/TCP", "c:1/TCP"].map((k) => refs.acquire(k, 100));
  deepStrictEqual(refs.hold([a!, b!], []), { oldOnly: [], union: [a, b] });
  deepStrictEqual(refs.hold([b!, c!], [a!, b!]), { oldOnly: [a], union: [a, b, c] });
  ok(refs.isReferenced(a!) && refs.isReferenced(c!));
  refs.release([a!]);
  ok(!refs.isReferenced(a!) && refs.hasOrphans);
});
