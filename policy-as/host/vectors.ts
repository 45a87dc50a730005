/**
 * Loads the golden vectors in `policy-as/vectors/` (flow hash, Maglev, health), written from the
 * plain-TypeScript references by `gen_vectors.ts`. Validation (`validate.ts`) holds a module to
 * them differently: the flow-hash results are pinned (the BPF tests read the same file); the Maglev
 * and health vectors are inputs whose results are checked by properties, and their expected
 * digests and records only say whether a module equals the reference.
 *
 * @module
 */
import type { HealthParams, HealthRecord } from "./abi.ts";
import type { MaglevBackend } from "./maglev_input.ts";

/** Default location of the vector files. */
export const VECTORS_DIR: URL = new URL("../vectors/", import.meta.url);

/** One flow-hash vector (docs/contracts.md). */
export interface FlowHashVector {
  saddr: string;
  daddr: string;
  sport: number;
  dport: number;
  proto: number;
  seed: number;
  five_tuple: number;
  client_ip: number;
}

/**
 * One IPv6 flow-hash vector (docs/contracts.md, IPv6): `policy-as/vectors/flow_hash6.json`. The
 * same fields as {@linkcode FlowHashVector}, the addresses in IPv6 text.
 */
export type FlowHash6Vector = FlowHashVector;

/** One Maglev vector: inputs, the table's SHA-256 and a few slots. */
export interface MaglevVector {
  name: string;
  m: number;
  backends: MaglevBackend[];
  sha256: string;
  slots: Record<string, number>;
}

/** One health sequence: parameters and the record expected after each probe. */
export interface HealthVector {
  name: string;
  params: HealthParams;
  steps: Array<{ ok: boolean; now_ms: number; expect: HealthRecord }>;
}

/** All golden vectors. */
export interface PolicyVectors {
  flowHash: FlowHashVector[];
  maglev: MaglevVector[];
  health: HealthVector[];
}

async function readVectors<T>(dir: URL, file: string): Promise<T[]> {
  const url = new URL(file, dir);
  let text: string;
  try {
    text = await Deno.readTextFile(url);
  } catch (e) {
    throw new Error(
      `Cannot read policy vectors "${url.pathname}": ${e instanceof Error ? e.message : e}`,
      { cause: e },
    );
  }
  const doc = JSON.parse(text) as { version?: number; vectors?: T[] };
  if (doc.version !== 1 || !Array.isArray(doc.vectors) || doc.vectors.length === 0) {
    throw new Error(
      `Cannot use policy vectors "${url.pathname}": expected version 1 with a non-empty ` +
        `"vectors" list`,
    );
  }
  return doc.vectors;
}

/** Reads the three vector files from `dir` (default {@link VECTORS_DIR}). */
export async function loadVectors(dir: URL = VECTORS_DIR): Promise<PolicyVectors> {
  const [flowHash, maglev, health] = await Promise.all([
    readVectors<FlowHashVector>(dir, "flow_hash.json"),
    readVectors<MaglevVector>(dir, "maglev.json"),
    readVectors<HealthVector>(dir, "health.json"),
  ]);
  return { flowHash, maglev, health };
}

/**
 * Reads the IPv6 flow-hash vectors (`flow_hash6.json` in `dir`). Apart from {@link loadVectors}:
 * the IPv6 hash is an optional export of a policy module, and the IPv4 set stays as it was.
 */
export function loadFlowHash6Vectors(dir: URL = VECTORS_DIR): Promise<FlowHash6Vector[]> {
  return readVectors<FlowHash6Vector>(dir, "flow_hash6.json");
}
