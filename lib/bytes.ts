/**
 * Byte-buffer helpers shared by the datapath's map access and the lab's frame builders.
 *
 * @module
 */

/**
 * Concatenates byte arrays into one new array (the parts are copied, never aliased).
 *
 * @example
 * ```ts
 * import { concatBytes } from "./bytes.ts";
 * const all = concatBytes(new Uint8Array([1, 2]), new Uint8Array([]), new Uint8Array([3]));
 * if (all.join() !== "1,2,3") throw new Error(`got ${all.join()}`);
 * ```
 */
export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
