import { firstOrderDifference, maglevViolation } from "./maglev_checks.ts";
import { TsMaglevBuilder } from "./maglev_ts.ts";
import { loadVectors } from "./vectors.ts";

const vectors = (await loadVectors()).maglev;
const builder = new TsMaglevBuilder();
const weighted = vectors.find((v) => v.name === "weighted with a zero weight")!;

function violation(table: Uint32Array, v = weighted): string {
  const r = maglevViolation(v.backends, v.m, table);
  return "check" in r ? `${r.check}: ${r.message}` : "none";
}

Deno.test("Maglev properties: the reference's tables pass every golden vector within 3.1 % of the weights", () => {
  for (const v of vectors) {
    const r = maglevViolation(v.backends, v.m, builder.build(v.backends, v.m));
    if ("check" in r) throw new Error(`${v.name}: ${r.check}: ${r.message}`);
    if (r.shareError > 0.031) throw new Error(`${v.name}: share error ${r.shareError}`);
  }
});

Deno.test("Maglev properties: a rotated table (another fill, same shares) passes", () => {
  const t = builder.build(weighted.backends, weighted.m);
  const rotated = t.map((_, i) => t[(i + 500) % t.length]!);
  if (violation(rotated) !== "none") throw new Error(violation(rotated));
});

Deno.test("Maglev properties: each broken table fails the check that names its fault", () => {
  const good = () => builder.build(weighted.backends, weighted.m);
  const cases: Array<[string, (t: Uint32Array) => Uint32Array]> = [
    ["table-size", (t) => t.slice(1)],
    ["slot-names-backend", (t) => (t[7] = 0, t)],
    ["slot-names-backend", (t) => (t[7] = 11, t)],
    ["zero-weight-no-slot", (t) => (t[7] = 1, t)], // backend 0 has weight 0
    ["weight-share", (t) => t.map((s, i) => (i % 2 ? 10 : s))],
  ];
  for (const [check, breakIt] of cases) {
    const got = violation(breakIt(good()));
    if (!got.startsWith(`${check}:`)) throw new Error(`expected ${check}, got ${got}`);
  }
  const empty = vectors.find((v) => v.backends.length === 0)!;
  const got = violation(new Uint32Array(empty.m).fill(1), empty);
  if (!got.includes("expected 0 (no weighted backend)")) throw new Error(got);
});

Deno.test("Maglev properties: a table built from reversed input maps slot for slot, or names the slot", () => {
  const v = weighted;
  const t = builder.build(v.backends, v.m);
  const r = builder.build([...v.backends].reverse(), v.m);
  if (firstOrderDifference(t, r, v.backends.length) !== -1) throw new Error("reference differs");
  r[42] = r[42] === 1 ? 2 : 1;
  const slot = firstOrderDifference(t, r, v.backends.length);
  if (slot !== 42) throw new Error(`expected slot 42, got ${slot}`);
});
