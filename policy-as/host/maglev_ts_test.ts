import { backendKeyHashes } from "./key_hash.ts";
import { tableDigest } from "./table_digest.ts";
import { isPrime } from "./maglev_input.ts";
import { modInverse, TsMaglevBuilder } from "./maglev_ts.ts";
import { loadVectors } from "./vectors.ts";

Deno.test("plain-TypeScript Maglev reproduces every golden Maglev vector", async () => {
  const { maglev } = await loadVectors();
  const builder = new TsMaglevBuilder();
  for (const v of maglev) {
    const table = builder.build(v.backends, v.m);
    for (const [slot, want] of Object.entries(v.slots)) {
      if (table[Number(slot)] !== want) throw new Error(`"${v.name}" slot ${slot}`);
    }
    if ((await tableDigest(table)) !== v.sha256) throw new Error(`"${v.name}" digest differs`);
  }
});

Deno.test("the direct tail search picks exactly the slots the classic walk would", () => {
  // Classic populate, no shortcuts, on small tables; compare with the builder.
  const builder = new TsMaglevBuilder();
  for (const [n, m] of [[3, 251], [40, 257], [251, 251], [100, 1021]] as const) {
    const backends = Array.from({ length: n }, (_, i) => ({ key: `k${i}`, weight: 1 }));
    const fast = builder.build(backends, m);
    // Re-derive with the textbook loop from the same sorted permutations.
    const perms = backends.map((b, i) => ({ i, ...permutation(b.key, m) }))
      .sort((a, b) => (a.h1 - b.h1) || (a.h2 - b.h2));
    const table = new Uint32Array(m);
    const next = perms.map((p) => p.offset);
    let filled = 0;
    outer: for (;;) {
      for (let k = 0; k < perms.length; k++) {
        let c = next[k]!;
        while (table[c] !== 0) c = (c + perms[k]!.skip) % m;
        table[c] = perms[k]!.i + 1;
        next[k] = (c + perms[k]!.skip) % m;
        if (++filled === m) break outer;
      }
    }
    const diff = table.findIndex((v, i) => v !== fast[i]);
    if (diff !== -1) throw new Error(`N=${n} M=${m}: slot ${diff} differs`);
  }
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

function permutation(key: string, m: number) {
  const [h1, h2] = backendKeyHashes(key);
  return { h1, h2, offset: h1 % m, skip: (h2 % (m - 1)) + 1 };
}
