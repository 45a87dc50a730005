/**
 * Byte-buffer helpers shared by the datapath's map access, the lab's frame builders and the
 * hex forms of addresses and flow keys.
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

const HEX_DIGIT = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_DIGIT[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_DIGIT[97 + i] = HEX_DIGIT[65 + i] = 10 + i;

/** The value of hex digit `charCode` (either case), or -1 if it is not one. Allocation-free. */
export function hexDigit(charCode: number): number {
  return HEX_DIGIT[charCode] ?? -1;
}
