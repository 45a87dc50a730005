/**
 * Test helpers: the built WASM files (with a clear message when `deno task build` has not run),
 * a tiny encoder for hand-made WASM modules that break one rule at a time, and the slowest
 * Maglev input the build budget accepts.
 *
 * @module
 */
import { REQUIRED_EXPORTS } from "./abi.ts";
import { benchBackends } from "./gen_vectors.ts";
import {
  MAGLEV_MAX_VISITS,
  MAGLEV_WEIGHT_MAX,
  type MaglevBackend,
  maglevBuildVisits,
  MaglevInputError,
} from "./maglev_input.ts";

const BUILD_DIR = new URL("../build/", import.meta.url);

/** Reads `policy-as/build/<name>.wasm` (e.g. `release`, `fixtures/trap_build`). */
export async function readBuiltWasm(name: string): Promise<Uint8Array> {
  const url = new URL(`${name}.wasm`, BUILD_DIR);
  try {
    return await Deno.readFile(url);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new Error(
        `Policy WASM "${url.pathname}" is missing: run \`deno task build\` before the tests`,
      );
    }
    throw e;
  }
}

function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

function name(s: string): number[] {
  const bytes = [...new TextEncoder().encode(s)];
  return [...leb(bytes.length), ...bytes];
}

function section(id: number, body: number[]): number[] {
  return [id, ...leb(body.length), ...body];
}

function vec(items: number[][]): number[] {
  return [...leb(items.length), ...items.flat()];
}

/** What a hand-made module looks like. Every function has type `() -> i32`. */
export interface HandMadeModule {
  /**
   * Function exports: name → constant it returns, "trap" for `unreachable`, or "hang" for a
   * loop that never ends.
   */
  functions: Record<string, number | "trap" | "hang">;
  /** Initial memory pages; omit for no memory. */
  memoryPages?: number;
  /** Adds an import `env.abort` (a function). */
  withImport?: boolean;
}

/**
 * Encodes a minimal WASM module. JS calls ignore surplus arguments, so a `() -> i32` function
 * stands in for any ABI export.
 */
export function handMadeWasm(spec: HandMadeModule): Uint8Array {
  const fnames = Object.keys(spec.functions);
  const imported = spec.withImport ? 1 : 0;
  const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  out.push(...section(1, vec([[0x60, 0x00, 0x01, 0x7f]])));
  if (spec.withImport) {
    out.push(...section(2, vec([[...name("env"), ...name("abort"), 0x00, 0x00]])));
  }
  out.push(...section(3, vec(fnames.map(() => [0x00]))));
  if (spec.memoryPages !== undefined) {
    out.push(...section(5, vec([[0x00, ...leb(spec.memoryPages)]])));
  }
  const exports = fnames.map((f, i) => [...name(f), 0x00, ...leb(i + imported)]);
  if (spec.memoryPages !== undefined) exports.push([...name("memory"), 0x02, 0x00]);
  out.push(...section(7, vec(exports)));
  const bodies = fnames.map((f) => {
    const v = spec.functions[f]!;
    const code = v === "trap" ? [0x00] : v === "hang"
      ? [0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00] // loop (br 0) end; i32.const 0
      : [0x41, ...sleb(v | 0)];
    const body = [0x00, ...code, 0x0b];
    return [...leb(body.length), ...body];
  });
  out.push(...section(10, vec(bodies)));
  return new Uint8Array(out);
}

/** Every required ABI function as a trap, `abi_version` returning `abi`. */
export function allExportsTrapping(abi = 1): Record<string, number | "trap" | "hang"> {
  const fns: Record<string, number | "trap" | "hang"> = {};
  for (const [k, kind] of Object.entries(REQUIRED_EXPORTS)) {
    if (kind === "function") fns[k] = "trap";
  }
  fns.abi_version = abi;
  return fns;
}

/**
 * The slowest weighted Maglev input the build budget accepts for `n` backends at size `m`: one
 * backend as heavy as the budget allows, the others weight 1 (the shape that maximises the
 * rounds a weighted fill walks: `maglevBuildVisits`). Keys as `benchBackends`.
 */
export function slowestAcceptedBackends(n: number, m: number): MaglevBackend[] {
  const weights = (h: number) => [h, ...new Array<number>(n - 1).fill(1)];
  let lo = 1, hi = MAGLEV_WEIGHT_MAX;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (maglevBuildVisits(weights(mid), m) <= MAGLEV_MAX_VISITS) lo = mid;
    else hi = mid - 1;
  }
  return benchBackends(n, (i) => (i === 0 ? lo : 1));
}

/** Throws unless `fn` throws a {@link MaglevInputError} whose message includes `fragment`. */
export function expectInputError(fn: () => unknown, fragment: string): void {
  try {
    fn();
  } catch (e) {
    if (e instanceof MaglevInputError && e.message.includes(fragment)) return;
    throw new Error(`expected MaglevInputError with "${fragment}", got ${e}`);
  }
  throw new Error(`accepted; expected MaglevInputError with "${fragment}"`);
}
