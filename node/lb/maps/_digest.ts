/**
 * The digest by which the BPF reconciler knows a rebuilt Maglev table equals the installed one.
 * Self-contained: the Maglev workers (`_maglev_workers.ts`) run its source text as well.
 *
 * @module
 */

/**
 * A 53-bit digest of `table`'s slots and length (two 32-bit multiplicative hashes): a rebuilt
 * table with the installed one's digest is taken as equal and not written again (a chance
 * collision, ~2^-53, would leave the previous table, which names live backends only). A table
 * whose slots all hold one value (a one-backend service's) is named exactly instead, by a
 * negative number from that value and the length (no hash is negative, so the two never meet):
 * checking the slots costs a third of hashing them.
 */
export function tableDigest(table: Uint32Array): number {
  const n = table.length, v0 = n === 0 ? 0 : table[0]!;
  let u = 1;
  while (u < n && table[u] === v0) u++;
  // v0 < 2^32 and n ≤ 2^18 (Maglev M ≤ 131,071): below 2^50, exact.
  if (u === n && n < 0x40000) return -1 - (v0 * 0x40000 + n);
  let a = 0x811c9dc5 ^ n, b = 0x9747b28c + n;
  for (let i = 0; i < n; i++) {
    const v = table[i]!;
    a = Math.imul(a ^ v, 0x01000193);
    b = Math.imul(b ^ v, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0) * 0x200000 + ((b >>> 0) >>> 11);
}
