import { assert, assertEquals } from "./_testing.ts";
import { BackendRefs, IdPool } from "./_lbmaps_ids.ts";

Deno.test("IdPool: restored gaps are reused lowest first; IDs past a smaller capacity are dropped", () => {
  const pool = new IdPool("service");
  pool.restore(new Set([2, 5]));
  assertEquals([pool.take("a", 10), pool.take("b", 10), pool.take("c", 10)], [1, 3, 4]);
  assertEquals(pool.take("d", 10), 6);
  pool.give(6);
  let error = "";
  try {
    pool.take("e/f", 6); // 6 was given back, but the maps now hold IDs 1..5 only
  } catch (e) {
    error = (e as Error).message;
  }
  assertEquals(
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
  assertEquals(refs.id("10.1.0.1:80/UDP"), 1, "named after the first frontend's protocol");
  assertEquals(refs.id("10.1.0.4:80/TCP"), 4, "unreferenced, kept until pruned");
  assert(refs.isWritten(1) && refs.isReferenced(1) && !refs.isReferenced(4));
  assertEquals(refs.acquire("10.1.0.9:80/TCP", 100), 2, "the gap below the highest ID");
  const deleted: number[] = [];
  const flush = () => refs.flushOrphans((id) => Promise.resolve(void deleted.push(id)));
  refs.release([1]);
  await flush();
  assertEquals(deleted, [], "one frontend still holds it");
  refs.release([1]);
  await flush();
  assertEquals(deleted, [1]);
  assertEquals(refs.id("10.1.0.1:80/UDP"), undefined);
});

Deno.test("BackendRefs: hold references only what is new and returns old-only and the union", () => {
  const refs = new BackendRefs();
  const [a, b, c] = ["a:1/TCP", "b:1/TCP", "c:1/TCP"].map((k) => refs.acquire(k, 100));
  assertEquals(refs.hold([a!, b!], []), { oldOnly: [], union: [a, b] });
  assertEquals(refs.hold([b!, c!], [a!, b!]), { oldOnly: [a], union: [a, b, c] });
  assert(refs.isReferenced(a!) && refs.isReferenced(c!));
  refs.release([a!]);
  assert(!refs.isReferenced(a!) && refs.hasOrphans);
});
