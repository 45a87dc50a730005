/**
 * SHA-256 of a Maglev table as little-endian u32 bytes, hex: the digest the golden vectors and
 * `policy check` print.
 *
 * @module
 */

/** Hex SHA-256 of `table`'s slots, each as 4 little-endian bytes. */
export async function tableDigest(table: Uint32Array): Promise<string> {
  const bytes = new Uint8Array(table.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < table.length; i++) view.setUint32(i * 4, table[i]!, true);
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}
