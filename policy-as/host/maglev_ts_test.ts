import { expectInputError, slowestAcceptedBackends } from "./_testing.ts";
import { benchBackends } from "./gen_vectors.ts";
import { backendKeyHashes } from "./key_hash.ts";
import { tableDigest } from "./table_digest.ts";
import {
  checkMaglevSize,
  encodeMaglevInput,
  isPrime,
  MAGLEV_MAX_VISITS,
  maglevBuildVisits,
} from "./maglev_input.ts";
import { maglevFill, type MaglevFillStats, modInverse, TsMaglevBuilder } from "./maglev_ts.ts";
import { loadVectors } from "./vectors.ts";

const builder = new TsMaglevBuilder();

function fill(backends: ReturnType<typeof benchBackends>, m: number): MaglevFillStats {
  const stats: MaglevFillStats = { visits: -1, probes: -1 };
  maglevFill(encodeMaglevInput(backends, m), new Uint32Array(m), stats);
  return stats;
}

/** Equal-weight populate, no shortcuts, counting every slot examined. */
function textbookProbes(keys: string[], m: number): number {
  const perms = keys.map((k) => backendKeyHashes(k)).sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]))
    .map(([h1, h2]) => ({ next: h1 % m, skip: (h2 % (m - 1)) + 1 }));
  const table = new Uint8Array(m);
  let filled = 0, probes = 0;
  for (;;) {
    for (const p of perms) {
      for (;;) {
        probes++;
        const c = p.next;
        p.next = (c + p.skip) % m;
        if (table[c] === 0) break;
      }
      table[(p.next - p.skip + m) % m] = 1;
      if (++filled === m) return probes;
    }
  }
}

Deno.test("plain-TypeScript Maglev reproduces every golden Maglev vector", async () => {
  const { maglev } = await loadVectors();
  for (const v of maglev) {
    const table = builder.build(v.backends, v.m);
    for (const [slot, want] of Object.entries(v.slots)) {
      if (table[Number(slot)] !== want) throw new Error(`"${v.name}" slot ${slot}`);
    }
    if ((await tableDigest(table)) !== v.sha256) throw new Error(`"${v.name}" digest differs`);
  }
});

Deno.test("same owners whatever the input order; weights share the slots", () => {
  const bs = benchBackends(10);
  const a = builder.build(bs, 1021);
  const rev = [...bs].reverse();
  const b = builder.build(rev, 1021);
  for (let s = 0; s < 1021; s++) {
    if (bs[a[s]! - 1]!.key !== rev[b[s]! - 1]!.key) throw new Error(`slot ${s} owner differs`);
  }
  const counts = new Map<number, number>();
  for (const x of a) counts.set(x, (counts.get(x) ?? 0) + 1);
  for (const c of counts.values()) if (c < 100 || c > 105) throw new Error(`count ${c}`);
  const w = builder.build([{ key: "a", weight: 1 }, { key: "b", weight: 3 }], 1021);
  const nb = w.filter((x) => x === 2).length;
  if (nb < 700 || nb > 830) throw new Error(`weighted share ${nb}`);
});

Deno.test("build fills the caller's buffer when it has the right length", () => {
  const out = new Uint32Array(251);
  const t = builder.build(benchBackends(3), 251, out);
  if (t !== out || t.includes(0)) throw new Error("out not filled");
  const other = builder.build(benchBackends(3), 251, new Uint32Array(7));
  if (other.length !== 251) throw new Error("wrong-size out used");
});

Deno.test("one backend: the shortcut's table is the full fill's (every weight, values or not)", () => {
  for (const weight of [1, 100, 65535]) {
    const backends = [{ key: "10.0.0.1:80", weight }];
    for (const m of [251, 1021]) {
      const full = new Uint32Array(m);
      maglevFill(encodeMaglevInput(backends, m), full);
      const built = builder.build(backends, m);
      if (built.some((v, s) => v !== full[s])) throw new Error(`weight ${weight}, M=${m}`);
      const ids = [4242];
      const named = builder.build(backends, m, new Uint32Array(m), ids);
      if (named.some((v) => v !== 4242)) throw new Error(`values, weight ${weight}, M=${m}`);
    }
  }
  expectInputError(() => builder.build([{ key: "a", weight: 1 }], 1000), "must be prime");
  const zero = builder.build([{ key: "a", weight: 0 }], 251);
  if (zero.some((v) => v !== 0)) throw new Error("weight 0: the empty table");
});

Deno.test("values (e.g. backend IDs) go straight into the slots: the same table, renamed", () => {
  for (const backends of [benchBackends(10), benchBackends(7, (i) => 1 + (i % 3))]) {
    const ids = backends.map((_, i) => 1000 + 3 * i);
    const plain = builder.build(backends, 1021);
    const named = builder.build(backends, 1021, undefined, ids);
    const diff = plain.findIndex((v, s) => ids[v - 1] !== named[s]);
    if (diff !== -1) throw new Error(`slot ${diff}: ${plain[diff]} became ${named[diff]}`);
  }
});

Deno.test("work counters: equal weights visit M backends; the bound holds for uneven ones", () => {
  const equal = fill(benchBackends(100), 16381);
  if (equal.visits !== 16381) throw new Error(`equal: ${equal.visits} visits`);
  // The probes counted after the fact equal a textbook walk's, counted one by one.
  for (const [n, m] of [[1, 251], [3, 251], [100, 1021], [100, 16381]] as const) {
    const backends = benchBackends(n);
    const want = textbookProbes(backends.map((b) => b.key), m);
    const got = fill(backends, m).probes;
    if (got !== want) throw new Error(`N=${n} M=${m}: ${got} probes, textbook walk ${want}`);
  }
  const cases: Array<[ReturnType<typeof benchBackends>, number]> = [
    [benchBackends(10, (i) => 1 + (i % 4)), 1021],
    [benchBackends(300, (i) => [0, 1, 100, 65535][i % 4]!), 16381],
    [benchBackends(1, () => 7), 251], // a lone backend walks its whole permutation
  ];
  for (const [backends, m] of cases) {
    const s = fill(backends, m);
    const bound = maglevBuildVisits(backends.map((b) => b.weight), m);
    if (s.visits > bound) throw new Error(`N=${backends.length} M=${m}: ${s.visits} > ${bound}`);
    if (s.probes < m) throw new Error(`N=${backends.length} M=${m}: ${s.probes} probes`);
  }
});

Deno.test("the slowest accepted inputs stay within the visit budget; one step more is refused", () => {
  for (const m of [16381, 65537, 131071]) {
    for (const n of [100, 1000, 10000]) {
      const backends = slowestAcceptedBackends(n, m);
      const s = fill(backends, m);
      if (s.visits > MAGLEV_MAX_VISITS) throw new Error(`N=${n} M=${m}: ${s.visits} visits`);
      // The walk: about M·ln(M) probes whatever the weights (measured ≤ 12.1·M).
      if (s.probes > 16 * m) throw new Error(`N=${n} M=${m}: ${s.probes} probes`);
      const heavy = backends[0]!.weight;
      if (heavy === 65535) continue; // the weight limit, not the budget, bounds this one
      expectInputError(
        () => builder.build([{ ...backends[0]!, weight: heavy + 1 }, ...backends.slice(1)], m),
        `Weights too uneven for a Maglev table of size M=${m}: the heaviest, ${heavy + 1}`,
      );
    }
  }
  // The build that once took 140-160 ms: one weight of 10^6 among 1,000 at M=65,537.
  expectInputError(
    () => builder.build(benchBackends(1000, (i) => (i === 0 ? 1_000_000 : 1)), 65537),
    "has weight 1000000; expected an integer 0..65535",
  );
  expectInputError(
    () => builder.build(benchBackends(1000, (i) => (i === 0 ? 65535 : 1)), 65537),
    "Weights too uneven",
  );
});

Deno.test("table sizes: prime in 251..131071, with messages that say which rule", () => {
  for (const m of [251, 1021, 16381, 65537, 131071]) checkMaglevSize(m);
  expectInputError(() => checkMaglevSize(1000), "size M=1000: must be prime");
  expectInputError(() => checkMaglevSize(241), "M=241: must be a prime in 251..131071");
  expectInputError(() => checkMaglevSize(131101), "must be a prime in 251..131071");
  expectInputError(() => checkMaglevSize(1021.5), "M=1021.5");
});

Deno.test("a key given twice is named in the error (found by the fill, not a set of keys)", () => {
  expectInputError(
    () =>
      builder.build(
        [{ key: "a", weight: 1 }, { key: "b", weight: 1 }, { key: "a", weight: 2 }],
        251,
      ),
    'backend key "a" appears twice',
  );
  // Weight 0 keeps a backend out of the table, so its key cannot collide.
  builder.build([{ key: "a", weight: 1 }, { key: "a", weight: 0 }], 251);
});

Deno.test("modular inverse and primality helpers", () => {
  for (const m of [251, 65537, 131071]) {
    if (!isPrime(m)) throw new Error(`${m} is prime`);
    for (const a of [1, 2, 3, 1000, m - 1]) {
      if ((a * modInverse(a, m)) % m !== 1) throw new Error(`inverse of ${a} mod ${m}`);
    }
  }
  for (const m of [1, 255, 65536, 131073]) if (isPrime(m)) throw new Error(`${m} is not prime`);
});
