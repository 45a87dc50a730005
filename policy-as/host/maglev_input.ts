/**
 * Maglev build input: the one `MaglevBuilder` interface (the controller's reconciler calls it,
 * the WASM and the plain-TypeScript builders implement it), and the checks and encoding both
 * builders share, so they reject the same inputs with the same messages and fill from the same
 * records. Why the limits are what they are: `docs/maglev.md`.
 *
 * @module
 */
import { MAGLEV_M_MAX, MAGLEV_M_MIN } from "./abi.ts";
import { backendKeyHashes, KEY_SEED_OFFSET, KEY_SEED_SKIP, murmur3String } from "./key_hash.ts";

/** One backend of a Maglev build: a stable key (same on every LB node) and a weight. */
export interface MaglevBackend {
  /** Stable identity, e.g. `"10.0.1.5:8080"`; hashed, never interpreted. */
  readonly key: string;
  /** Integer 0..{@link MAGLEV_WEIGHT_MAX}; 0 excludes the backend. */
  readonly weight: number;
}

/**
 * Builds a Maglev table of size `m` from `backends`. The result has `m` slots, each the index
 * into `backends` plus one; 0 means empty (only when no backend has a weight > 0: the datapath
 * drops). The same set of (key, weight) pairs gives the same slot owners whatever their order.
 */
export interface MaglevBuilder {
  /**
   * `out`, if given (length `m`), may be filled and returned instead of a new array — typed
   * arrays of this size are allocated outside the JS heap and cost microseconds each. A builder
   * may ignore it; the caller must use the returned array. `values`, if given (one non-zero
   * value per backend, e.g. its ID), is what the slots of `backends[i]` hold instead of i + 1.
   *
   * @throws {MaglevInputError} for an input outside the limits of {@link encodeMaglevInput}.
   */
  build(
    backends: readonly MaglevBackend[],
    m: number,
    out?: Uint32Array,
    values?: readonly number[],
  ): Uint32Array;
  /**
   * Optional: the WASM module `build` fills with now, for builds on other threads (each
   * instantiates the same module: the same tables). Undefined when the tables come from elsewhere.
   */
  fillModule?(): MaglevFillModule | undefined;
}

/** A policy module as other threads need it to build the tables its host would. */
export interface MaglevFillModule {
  /** The compiled module (each thread instantiates it; posted to a Worker, its code is shared). */
  readonly compiled: WebAssembly.Module;
  /** Hex SHA-256 of its bytes: a table built elsewhere counts only while this module serves. */
  readonly digest: string;
  readonly limits: { readonly maxMemoryPages: number; readonly buildBudgetMs: number };
}

/** A Maglev input that cannot be built (bad table size, too many backends, bad weight, ...). */
export class MaglevInputError extends RangeError {
  override name = "MaglevInputError";
}

/** Largest backend weight (as Cilium's u16 weights; the default weight is 100). */
export const MAGLEV_WEIGHT_MAX = 65535;

/**
 * Most backend visits a weighted build may make (`N × rounds`, see {@link maglevBuildVisits}):
 * 2^22 (4,194,304): at most ~20 ms on a shared vCPU (`docs/maglev.md`). Equal weights need
 * exactly M visits, far below it.
 */
export const MAGLEV_MAX_VISITS = 1 << 22;

/** True when `m` is prime (trial division; m ≤ 131071 keeps it trivial). */
export function isPrime(m: number): boolean {
  if (!Number.isInteger(m) || m < 2) return false;
  if (m % 2 === 0) return m === 2;
  for (let d = 3; d * d <= m; d += 2) if (m % d === 0) return false;
  return true;
}

/**
 * Throws unless `m` is a usable table size: a prime in {@link MAGLEV_M_MIN}..{@link MAGLEV_M_MAX}.
 *
 * @example
 * ```ts
 * import { checkMaglevSize } from "./maglev_input.ts";
 * checkMaglevSize(16381);
 * try {
 *   checkMaglevSize(1000);
 *   throw new Error("accepted");
 * } catch (e) {
 *   if (!(e as Error).message.includes("must be prime")) throw e;
 * }
 * ```
 *
 * @throws {MaglevInputError} naming the size and the rule it breaks.
 */
export function checkMaglevSize(m: number): void {
  if (!Number.isInteger(m) || m < MAGLEV_M_MIN || m > MAGLEV_M_MAX) {
    throw new MaglevInputError(
      `Invalid Maglev table size M=${m}: must be a prime in ${MAGLEV_M_MIN}..${MAGLEV_M_MAX}`,
    );
  }
  if (!isPrime(m)) {
    throw new MaglevInputError(`Invalid Maglev table size M=${m}: must be prime`);
  }
}

/**
 * Upper bound of the backend visits a weighted fill makes: in round r a backend of weight w has
 * had floor(r·w / maxW) turns, one turn fills one slot, so after
 * R = ceil((M + N)·maxW / sumW) rounds the table is full (and after M: the heaviest backend
 * has a turn every round); each round visits the N backends of weight > 0. Equal weights skip the
 * rounds: M visits.
 *
 * @example
 * ```ts
 * import { maglevBuildVisits } from "./maglev_input.ts";
 * if (maglevBuildVisits([100, 100, 0], 16381) !== 16381) throw new Error("equal weights");
 * // One weight of 1,000 among 999 of weight 1: about N·M visits.
 * const uneven = [1000, ...new Array(999).fill(1)];
 * if (maglevBuildVisits(uneven, 65537) < 30_000_000) throw new Error("uneven weights");
 * ```
 */
export function maglevBuildVisits(weights: ArrayLike<number>, m: number): number {
  const s = weightStats(weights);
  return visits(s, m);
}

interface WeightStats {
  /** Backends of weight > 0. */
  n: number;
  max: number;
  sum: number;
}

function weightStats(weights: ArrayLike<number>): WeightStats {
  let n = 0, max = 0, sum = 0;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i]!;
    if (w <= 0) continue;
    n++;
    sum += w;
    if (w > max) max = w;
  }
  return { n, max, sum };
}

function visits({ n, max, sum }: WeightStats, m: number): number {
  if (n === 0) return 0;
  if (max * n === sum) return m;
  return n * Math.min(m, Math.ceil(((m + n) * max) / sum));
}

/**
 * Throws when weights this uneven would make a build at size `m` exceed
 * {@link MAGLEV_MAX_VISITS} (the cost grows with the heaviest weight over the mean weight).
 *
 * @throws {MaglevInputError} with the heaviest weight, the mean and the largest allowed ratio.
 */
export function checkMaglevWeights(weights: ArrayLike<number>, m: number): void {
  const s = weightStats(weights);
  const v = visits(s, m);
  if (v <= MAGLEV_MAX_VISITS) return;
  const mean = s.sum / s.n;
  // visits ≈ (M + N)·max/mean: the ratio this M allows.
  const allowed = Math.floor(MAGLEV_MAX_VISITS / (m + s.n));
  throw new MaglevInputError(
    `Weights too uneven for a Maglev table of size M=${m}: the heaviest, ${s.max}, is ` +
      `${Math.round(s.max / mean)}× the mean weight ${mean.toFixed(1)} of ${s.n} backends, ` +
      `so a build takes ${v} steps (limit ${MAGLEV_MAX_VISITS}); keep the heaviest within ` +
      `${allowed}× the mean, or use a smaller table size`,
  );
}

/**
 * Checks a build's inputs and encodes them as the ABI's records: `3 * n` u32 of
 * `{keyHash1, keyHash2, weight}` in input order.
 *
 * Two backends with one key are not looked for here: the fill meets them anyway (adjacent after
 * sorting by hash) and the builder then reports them with {@link duplicateKeyError}, so the
 * common case pays no set of keys.
 *
 * @throws {MaglevInputError} when M is not a prime in 251..131071, N > M, a weight is not an
 *   integer in 0..65535, or the weights are so uneven that the build would exceed
 *   {@link MAGLEV_MAX_VISITS} ({@link checkMaglevWeights}).
 */
export function encodeMaglevInput(backends: readonly MaglevBackend[], m: number): Uint32Array {
  checkMaglevSize(m);
  if (backends.length > m) {
    throw new MaglevInputError(
      `Cannot build Maglev table: ${backends.length} backends exceed table size M=${m}`,
    );
  }
  const records = new Uint32Array(backends.length * 3);
  let max = 0, min = MAGLEV_WEIGHT_MAX;
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i]!;
    if (!Number.isInteger(b.weight) || b.weight < 0 || b.weight > MAGLEV_WEIGHT_MAX) {
      throw new MaglevInputError(
        `Cannot build Maglev table: backend "${b.key}" has weight ${b.weight}; ` +
          `expected an integer 0..${MAGLEV_WEIGHT_MAX}`,
      );
    }
    records[i * 3] = murmur3String(b.key, KEY_SEED_OFFSET);
    records[i * 3 + 1] = murmur3String(b.key, KEY_SEED_SKIP);
    records[i * 3 + 2] = b.weight;
    if (b.weight > max) max = b.weight;
    if (b.weight > 0 && b.weight < min) min = b.weight;
  }
  // Weighted rounds cost at most N·M visits; skip the count when that is within budget.
  if (max !== min && backends.length * m > MAGLEV_MAX_VISITS) {
    checkMaglevWeights(backends.map((b) => b.weight), m);
  }
  return records;
}

/**
 * The table of a build with exactly one backend, of weight > 0: every slot is that backend's
 * (`values[0]`, else 1) — the only table `maglev_checks.ts`'s properties allow (each slot names
 * a weighted backend), so every builder and module fills this one. Null for any other input
 * (the builder runs). A one-backend service is common (and Cilium's benchmark shape): its build
 * would hash the key and walk M slots to the same answer.
 *
 * @throws {MaglevInputError} for a bad `m`, as {@link encodeMaglevInput}.
 */
export function singleBackendTable(
  backends: readonly MaglevBackend[],
  m: number,
  out?: Uint32Array,
  values?: readonly number[],
): Uint32Array | null {
  if (backends.length !== 1) return null;
  const w = backends[0]!.weight;
  if (!Number.isInteger(w) || w < 1 || w > MAGLEV_WEIGHT_MAX) return null;
  checkMaglevSize(m);
  const table = out !== undefined && out.length === m ? out : new Uint32Array(m);
  return table.fill(values === undefined ? 1 : values[0]!);
}

/**
 * The error for a build that met two backends with the same key hashes: names the key that
 * appears twice (or the two keys whose hashes collide). Called only after a build failed so.
 */
export function duplicateKeyError(backends: readonly MaglevBackend[]): MaglevInputError {
  const byHash = new Map<string, string>();
  for (const b of backends) {
    if (b.weight === 0) continue;
    const h = backendKeyHashes(b.key).join(":");
    const other = byHash.get(h);
    if (other === b.key) {
      return new MaglevInputError(
        `Cannot build Maglev table: backend key "${b.key}" appears twice`,
      );
    }
    if (other !== undefined) {
      return new MaglevInputError(
        `Cannot build Maglev table: backend keys "${other}" and "${b.key}" have the same hashes`,
      );
    }
    byHash.set(h, b.key);
  }
  return new MaglevInputError("Cannot build Maglev table: two backends have the same key hash");
}
