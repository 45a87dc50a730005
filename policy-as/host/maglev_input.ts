/**
 * Maglev build input: the `MaglevBuilder` shape the controller calls, and the validation and
 * encoding shared by the WASM and the plain-TypeScript builders, so both reject the same inputs
 * with the same messages and fill from the same records.
 *
 * @module
 */
import { MAGLEV_M_MAX, MAGLEV_M_MIN } from "./abi.ts";
import { backendKeyHashes } from "./key_hash.ts";

/** One backend of a Maglev build: a stable key (same on every LB node) and a weight. */
export interface MaglevBackend {
  /** Stable identity, e.g. `"10.0.1.5:8080"`; hashed, never interpreted. */
  readonly key: string;
  /** Integer 0..2^32-1; 0 excludes the backend. */
  readonly weight: number;
}

/**
 * Builds a Maglev table of size `m` from `backends`. The result has `m` slots, each the index
 * into `backends` plus one; 0 means empty (only when no backend has a weight > 0: the datapath
 * drops). The same set of (key, weight) pairs gives the same slot owners whatever their order.
 */
export interface MaglevBuilder {
  build(backends: readonly MaglevBackend[], m: number): Uint32Array;
}

/** A Maglev input that cannot be built (bad table size, too many backends, bad weight, ...). */
export class MaglevInputError extends RangeError {
  override name = "MaglevInputError";
}

/** True when `m` is prime (trial division; m ≤ 131071 keeps it trivial). */
export function isPrime(m: number): boolean {
  if (!Number.isInteger(m) || m < 2) return false;
  if (m % 2 === 0) return m === 2;
  for (let d = 3; d * d <= m; d += 2) if (m % d === 0) return false;
  return true;
}

/**
 * Checks a build's inputs and encodes them as the ABI's records: `3 * n` u32 of
 * `{keyHash1, keyHash2, weight}` in input order.
 *
 * @throws {MaglevInputError} when M is not a prime in 251..131071, N > M, a weight is not an
 *   integer in 0..2^32-1, or two backends share a key.
 */
export function encodeMaglevInput(backends: readonly MaglevBackend[], m: number): Uint32Array {
  if (!Number.isInteger(m) || m < MAGLEV_M_MIN || m > MAGLEV_M_MAX) {
    throw new MaglevInputError(
      `Cannot build Maglev table: size M=${m} is outside ${MAGLEV_M_MIN}..${MAGLEV_M_MAX}`,
    );
  }
  if (!isPrime(m)) {
    throw new MaglevInputError(`Cannot build Maglev table: size M=${m} is not prime`);
  }
  if (backends.length > m) {
    throw new MaglevInputError(
      `Cannot build Maglev table: ${backends.length} backends exceed table size M=${m}`,
    );
  }
  const records = new Uint32Array(backends.length * 3);
  const seen = new Set<string>();
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i]!;
    if (!Number.isInteger(b.weight) || b.weight < 0 || b.weight > 0xffffffff) {
      throw new MaglevInputError(
        `Cannot build Maglev table: backend "${b.key}" has weight ${b.weight}; ` +
          `expected an integer 0..4294967295`,
      );
    }
    if (seen.has(b.key)) {
      throw new MaglevInputError(`Cannot build Maglev table: backend key "${b.key}" appears twice`);
    }
    seen.add(b.key);
    const [h1, h2] = backendKeyHashes(b.key);
    records[i * 3] = h1;
    records[i * 3 + 1] = h2;
    records[i * 3 + 2] = b.weight;
  }
  return records;
}
