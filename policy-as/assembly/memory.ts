// Linear-memory layout shared by the policy module's parts: the health record sits at the start
// of the heap, the Maglev area after it.

/** Bytes reserved at the start of the heap for the health record (32 used). */
export const HEALTH_RECORD_BYTES: usize = 64;

@inline
export function align16(x: usize): usize {
  return (x + 15) & ~(<usize>15);
}
