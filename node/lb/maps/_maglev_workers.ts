/**
 * Maglev tables built ahead on Deno Workers, for a pass that rebuilds many (a policy swap: every
 * table, about 0.25 ms of WASM fill each at M = 16,381). Each worker instantiates the serving
 * policy module (its compiled `WebAssembly.Module`, posted: the code compiled and optimised on the
 * reconciler's thread is shared) and fills tables, maps their slots to backend IDs and digests
 * them, in the order the reconciler will ask for them, at most {@linkcode AHEAD_WINDOW} ahead; the
 * reconciler's thread meanwhile stages and installs the ones already built. The same module and
 * the same functions (`mapSlots`, `tableDigest`: their source text runs in the worker) give the
 * same tables, slot for slot.
 *
 * A result counts only if it was built for the same keys, IDs and M by the module that serves
 * when it is taken; anything else (an error, a trap, a build over the time budget or memory cap,
 * another module) gives null and the caller builds on its own thread as before, with that path's
 * errors, metrics and fallback. Workers run a script from a blob URL (no file permissions), start
 * with a pass that builds ahead and stay up for the next one until idle 30 s or the control plane
 * stops (`maps/_maglev.ts` `WORKERS_IDLE_MS`; a live Worker keeps a process running).
 *
 * @module
 */

import { encodeMaglevInput, type MaglevBackend } from "../../../policy-as/host/maglev_input.ts";
import type { MaglevFillModule } from "../../../policy-as/host/maglev_input.ts";
import { mapSlots } from "../../../policy-as/host/policy_module.ts";
import { tableDigest } from "./_digest.ts";

/** One table to build ahead: a frontend's backends (keys, IDs) and M. */
export interface AheadJob {
  readonly address: string;
  readonly keys: readonly MaglevBackend[];
  readonly ids: readonly number[];
  readonly m: number;
}

/** A table built ahead: slots hold backend IDs; `digest` is its `tableDigest`. */
export interface AheadTable {
  readonly table: Uint32Array;
  readonly digest: number;
}

/** Tables sent to workers and not yet taken, at most (bounds memory: 64 KB each at M = 16,381). */
export const AHEAD_WINDOW = 32;
/** Jobs per message to a worker (and results per message back): a message costs ~50 µs. */
export const BATCH = 8;

const WORKER_SOURCE = `
const mapSlots = ${mapSlots.toString()};
const tableDigest = ${tableDigest.toString()};
let ready = null;
self.onmessage = async ({ data }) => {
  if (data.kind === "module") {
    ready = WebAssembly.instantiate(data.compiled, {}).then((instance) => instance.exports);
    ready.catch(() => {});
    return;
  }
  // data.input: per job [n, m, n records of 3 u32, n IDs]; data.seqs: the jobs' sequence numbers;
  // data.claims[data.indexes[k]]: 0 until a thread takes job k (1: a worker, 2: the reconciler).
  const { seqs, indexes, claims, input, maxPages, budgetMs } = data;
  let total = 0;
  for (let at = 0; at < input.length; at += 2 + 4 * input[at]) total += input[at + 1];
  const out = new Uint32Array(total), digests = [], errors = [];
  for (let k = 0, at = 0, o = 0; k < seqs.length; k++) {
    const n = input[at], m = input[at + 1];
    const records = input.subarray(at + 2, at + 2 + 3 * n);
    const ids = input.subarray(at + 2 + 3 * n, at + 2 + 4 * n);
    at += 2 + 4 * n;
    const table = out.subarray(o, o + m);
    o += m;
    if (Atomics.compareExchange(claims, indexes[k], 0, 1) !== 0) {
      digests.push(0);
      errors.push("taken by the reconciler");
      continue;
    }
    try {
      const e = await ready;
      const ptr = e.maglev_input_ptr(n, m) >>> 0;
      if (ptr === 0) throw new Error("no memory for the input");
      new Uint32Array(e.memory.buffer, ptr, records.length).set(records);
      const t0 = performance.now();
      const used = e.maglev_build(n, m);
      const ms = performance.now() - t0;
      if (used < 0) throw new Error("maglev_build error " + used);
      if (e.memory.buffer.byteLength / 65536 > maxPages) throw new Error("over its memory cap");
      if (ms > budgetMs) throw new Error("over its time budget");
      const tp = e.maglev_table_ptr() >>> 0;
      if (tp % 4 !== 0 || tp + m * 4 > e.memory.buffer.byteLength) throw new Error("table pointer");
      if (mapSlots(new Uint32Array(e.memory.buffer, tp, m), ids, table) >= 0) {
        throw new Error("slot names no backend");
      }
      digests.push(tableDigest(table));
      errors.push(null);
    } catch (err) {
      digests.push(0);
      errors.push(String(err));
    }
  }
  // One message and one buffer for the batch: a message costs tens of µs, each array in it more.
  self.postMessage({ seqs, out, digests, errors }, [out.buffer]);
};
`;

interface Pending {
  readonly job: AheadJob;
  /** Its place in the pass: its claim's index. */
  readonly index: number;
  readonly seq: number;
  readonly module: string;
  /** Set once sent to a worker. */
  result?: Promise<AheadTable | null>;
}

/** A pool of workers building Maglev tables ahead of the reconciler (see the module doc). */
export class MaglevWorkers {
  readonly #size: number;
  #workers: Worker[] = [];
  #url: string | null = null;
  /** Digest of the module the workers hold. */
  #module: string | null = null;
  /** Jobs in the order they will be taken; the first `#sent` are with a worker. */
  #queue: Pending[] = [];
  #sent = 0;
  #seq = 0;
  #next = 0;
  readonly #waiting = new Map<number, (r: AheadTable | null) => void>();
  /** Sequence number → M of a job with a worker. */
  readonly #sizes = new Map<number, number>();
  #fill: MaglevFillModule | null = null;
  /** Per job of the pass, who builds it: 0 nobody yet, 1 a worker, 2 the reconciler's thread. */
  #claims = new Int32Array(new SharedArrayBuffer(4));

  /** `size` workers (at least 1). */
  constructor(size: number) {
    this.#size = Math.max(1, Math.floor(size));
  }

  /** Starts building `jobs` with `module`, in this order; replaces jobs queued before. */
  start(module: MaglevFillModule, jobs: readonly AheadJob[]): void {
    this.clear();
    if (this.#workers.length === 0) this.#spawn();
    if (this.#module !== module.digest) {
      for (const w of this.#workers) w.postMessage({ kind: "module", compiled: module.compiled });
      this.#module = module.digest;
    }
    this.#fill = module;
    this.#claims = new Int32Array(new SharedArrayBuffer(4 * Math.max(1, jobs.length)));
    this.#queue = jobs.map((job, index) => ({
      job,
      index,
      seq: this.#seq++,
      module: module.digest,
    }));
    this.#pump();
  }

  /**
   * The table built ahead for `address`, if it was queued with these keys, IDs and M, `module`
   * still serves and a worker has started it (resolves null when its build failed); null when
   * there is none: the caller builds it (a job no worker has started is claimed for the caller,
   * so a busy machine never waits on a worker that is not running). Jobs queued before it are
   * dropped (the reconciler skipped them).
   */
  take(
    address: string,
    keys: readonly MaglevBackend[],
    ids: readonly number[],
    m: number,
    module: string | undefined,
  ): Promise<AheadTable | null> | null {
    const at = this.#queue.findIndex((p) => p.job.address === address);
    if (at < 0) return null;
    const taken = this.#queue.splice(0, at + 1), p = taken[at]!;
    this.#sent = Math.max(0, this.#sent - (at + 1));
    let mine = 0; // jobs this call claims for the reconciler's thread: no worker builds them
    for (const q of taken) {
      if (Atomics.compareExchange(this.#claims, q.index, 0, 2) === 0 && q === p) mine++;
    }
    this.#pump();
    if (mine > 0 || p.result === undefined) return null;
    if (p.module !== module || !sameInput(p.job, keys, ids, m)) return null;
    return p.result;
  }

  /** Jobs of the pass a worker has started building so far. */
  get started(): number {
    let n = 0;
    for (let i = 0; i < this.#claims.length; i++) if (Atomics.load(this.#claims, i) === 1) n++;
    return n;
  }

  /** Drops every job not taken (results still to come are discarded). */
  clear(): void {
    this.#queue = [];
    this.#sent = 0;
  }

  /**
   * Stops the workers (a live Worker keeps the process alive; they start again with the next
   * `start`) and drops every job not taken.
   */
  close(): void {
    for (const w of this.#workers) w.terminate();
    this.#workers = [];
    this.#module = null;
    for (const resolve of this.#waiting.values()) resolve(null);
    this.#waiting.clear();
    this.#sizes.clear();
    this.#queue = [];
    this.#sent = 0;
    if (this.#url !== null) URL.revokeObjectURL(this.#url);
    this.#url = null;
  }

  #spawn(): void {
    this.#url ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
    for (let i = 0; i < this.#size; i++) {
      const w = new Worker(this.#url, { type: "module" });
      w.onmessage = ({ data }) => {
        const { seqs, out, digests, errors } = data;
        for (let k = 0, o = 0; k < seqs.length; k++) {
          const resolve = this.#waiting.get(seqs[k]);
          this.#waiting.delete(seqs[k]);
          const m = this.#sizes.get(seqs[k]) ?? 0;
          this.#sizes.delete(seqs[k]);
          const table = (out as Uint32Array).subarray(o, o + m);
          o += m;
          resolve?.(errors[k] === null ? { table, digest: digests[k] } : null);
        }
      };
      w.onerror = (ev) => {
        ev.preventDefault();
        this.close(); // every build still to come is done on the reconciler's thread
      };
      this.#workers.push(w);
    }
  }

  /** Sends jobs to workers, {@linkcode BATCH} a message, until {@linkcode AHEAD_WINDOW} are out. */
  #pump(): void {
    while (this.#sent < this.#queue.length && this.#sent < AHEAD_WINDOW) {
      const end = Math.min(this.#queue.length, AHEAD_WINDOW, this.#sent + BATCH);
      this.#send(this.#queue.slice(this.#sent, end));
      this.#sent = end;
    }
  }

  /** Sends `batch` to the next worker; each job's `result` resolves when its table is back. */
  #send(batch: Pending[]): void {
    const seqs: number[] = [], indexes: number[] = [], inputs: Uint32Array[] = [];
    let length = 0;
    for (const p of batch) {
      const { keys, ids, m } = p.job;
      let records: Uint32Array;
      try {
        records = encodeMaglevInput(keys, m);
      } catch {
        p.result = Promise.resolve(null); // the reconciler's own build reports the input error
        continue;
      }
      if (this.#workers.length === 0 || this.#fill === null) {
        p.result = Promise.resolve(null);
        continue;
      }
      p.result = new Promise((resolve) => this.#waiting.set(p.seq, resolve));
      this.#sizes.set(p.seq, m);
      const input = new Uint32Array(2 + records.length + ids.length);
      input[0] = ids.length, input[1] = m;
      input.set(records, 2);
      input.set(ids, 2 + records.length);
      seqs.push(p.seq);
      indexes.push(p.index);
      inputs.push(input);
      length += input.length;
    }
    if (seqs.length === 0) return;
    const input = new Uint32Array(length);
    for (let k = 0, at = 0; k < inputs.length; at += inputs[k]!.length, k++) {
      input.set(inputs[k]!, at);
    }
    const { maxMemoryPages, buildBudgetMs } = this.#fill!.limits;
    const w = this.#workers[this.#next++ % this.#workers.length]!;
    const claims = this.#claims;
    const message = {
      seqs,
      indexes,
      claims,
      input,
      maxPages: maxMemoryPages,
      budgetMs: buildBudgetMs,
    };
    w.postMessage(message, [input.buffer]);
  }
}

function sameInput(
  job: AheadJob,
  keys: readonly MaglevBackend[],
  ids: readonly number[],
  m: number,
): boolean {
  if (job.m !== m || job.keys.length !== keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    const a = job.keys[i]!, b = keys[i]!;
    if (a.key !== b.key || a.weight !== b.weight || job.ids[i] !== ids[i]) return false;
  }
  return true;
}
