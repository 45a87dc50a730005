/**
 * The digest by which the BPF reconciler knows a rebuilt Maglev table equals the installed one.
 * Self-contained: the Maglev workers (`_maglev_workers.ts`) run its source text as well.
 *
 * @module
 */

/**
 * A 53-bit digest of `table`'s slots and length (two 32-bit multiplicative hashes): a rebuilt
 * table with the installed one's digest is taken as equal and not written again (a chance
 * collision, ~2^-53, would leave the previous table, which names live backends only).
 */
export function tableDigest(table: Uint32Array): number {
  let a = 0x811c9dc5 ^ table.length, b = 0x9747b28c + table.length;
  for (let i = 0; i < table.length; i++) {
    const v = table[i]!;
    a = Math.imul(a ^ v, 0x01000193);
    b = Math.imul(b ^ v, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0) * 0x200000 + ((b >>> 0) >>> 11);
}
