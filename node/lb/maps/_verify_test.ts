import { deepStrictEqual } from "node:assert/strict";
import { frontendDiffers, type WrittenFrontend } from "./_verify.ts";
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
  deepStrictEqual(check(entry, table), null);
  deepStrictEqual(check(undefined, table), "service entry missing");
  deepStrictEqual(
    check({ ...entry, serviceId: 8 }, table)?.startsWith("service entry differs"),
    true,
  );
  deepStrictEqual(
    check({ ...entry, flowKeyMode: "client-ip" }, table)?.startsWith("service"),
    true,
  );
  deepStrictEqual(check(entry, table, new Set([5])), "backend 5 missing or changed");
  deepStrictEqual(check(entry, undefined), "maglev table 7 missing");
  deepStrictEqual(check(entry, table.subarray(0, 5)), "maglev table 7 has 5 slots, not 7");
  deepStrictEqual(
    check(entry, Uint32Array.of(2, 5, 2, 5, 3, 2, 2)),
    "maglev table 7 names backend 3",
  );
  deepStrictEqual(
    check(entry, Uint32Array.of(2, 5, 0, 5, 5, 2, 2)),
    "maglev table 7 names backend 0",
  );
  deepStrictEqual(
    check(entry, new Uint32Array(7).fill(2)),
    "maglev table 7 lacks some of its backends",
  );
  deepStrictEqual(scratch.every((x) => x === 0), true, "scratch left zeroed");
  // No backends: an all-unset table is what was written.
  const none = { ...want, backendIds: [] };
  deepStrictEqual(
    frontendDiffers(none, { ...entry, backendCount: 0 }, new Uint32Array(7), new Set(), scratch),
    null,
  );
});
