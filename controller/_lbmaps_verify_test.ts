import { assertEquals } from "./_testing.ts";
import { frontendDiffers, type WrittenFrontend } from "./_lbmaps_verify.ts";
import type { ServiceEntry } from "./lbmaps.ts";

const want: WrittenFrontend = {
  serviceId: 7,
  backendIds: [2, 5],
  maglevSize: 7,
  flowKeyMode: "five-tuple",
};
const entry: ServiceEntry = {
  serviceId: 7,
  backendCount: 2,
  flowKeyMode: "five-tuple",
  maglevSize: 7,
};
const table = Uint32Array.of(2, 5, 2, 5, 5, 2, 2);

Deno.test("verify: a frontend's entries as written match; each kind of damage is named", () => {
  const scratch = new Uint8Array(8);
  const check = (
    e: ServiceEntry | undefined,
    t: Uint32Array | undefined,
    lost = new Set<number>(),
  ) => frontendDiffers(want, e, t, lost, scratch);
  assertEquals(check(entry, table), null);
  assertEquals(check(undefined, table), "service entry missing");
  assertEquals(check({ ...entry, serviceId: 8 }, table)?.startsWith("service entry differs"), true);
  assertEquals(check({ ...entry, flowKeyMode: "client-ip" }, table)?.startsWith("service"), true);
  assertEquals(check(entry, table, new Set([5])), "backend 5 missing or changed");
  assertEquals(check(entry, undefined), "maglev table 7 missing");
  assertEquals(check(entry, table.subarray(0, 5)), "maglev table 7 has 5 slots, not 7");
  assertEquals(check(entry, Uint32Array.of(2, 5, 2, 5, 3, 2, 2)), "maglev table 7 names backend 3");
  assertEquals(check(entry, Uint32Array.of(2, 5, 0, 5, 5, 2, 2)), "maglev table 7 names backend 0");
  assertEquals(
    check(entry, new Uint32Array(7).fill(2)),
    "maglev table 7 lacks some of its backends",
  );
  assertEquals(scratch.every((x) => x === 0), true, "scratch left zeroed");
  // No backends: an all-unset table is what was written.
  const none = { ...want, backendIds: [] };
  assertEquals(
    frontendDiffers(none, { ...entry, backendCount: 0 }, new Uint32Array(7), new Set(), scratch),
    null,
  );
});
