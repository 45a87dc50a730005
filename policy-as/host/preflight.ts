/**
 * Pre-flight run of a candidate module in a throwaway Worker: the same calls as the golden-vector
 * validation, each step under a deadline. A module that never returns (a runaway loop, not just a
 * slow build) is terminated there instead of blocking the thread that serves. The deadline bounds
 * one step (one Maglev build, one health sequence, the flow hashes), not the whole run: the worker
 * reports each step done and the watchdog restarts, so a module that is slow but finishes is left
 * to the build budget however many steps it has and however busy the machine is. Results are not compared
 * here — `validate.ts` does that afterwards on the calling thread, knowing the calls terminate.
 *
 * The worker is a self-contained script from a blob URL, so it needs no file permissions.
 *
 * @module
 */

/** Everything the pre-flight calls, in order. */
export interface PreflightPlan {
  /** `flow_hash_5tuple` argument lists, each also run through `flow_hash_client_ip(a[0], a[5])`. */
  flowHash: number[][];
  /**
   * `flow_hash6_5tuple` argument lists (12: s0..s3, d0..d3, sport, dport, proto, seed), each also
   * run through `flow_hash6_client_ip(a[0..3], a[11])`; only for a module with those exports.
   */
  flowHash6?: number[][];
  /** Health sequences: `health_step` argument lists, record zeroed at each sequence start. */
  health: number[][][];
  /** Maglev builds in order: records (`3 * n` u32) and M (the validation's repeats included). */
  maglev: Array<{ records: Uint32Array; m: number }>;
}

const WORKER_SOURCE = `
self.onmessage = async (event) => {
  const { bytes, plan } = event.data;
  try {
    const { instance } = await WebAssembly.instantiate(bytes, {});
    const e = instance.exports;
    e.abi_version();
    self.postMessage({ step: true });
    for (const a of plan.flowHash) {
      e.flow_hash_5tuple(a[0], a[1], a[2], a[3], a[4], a[5]);
      e.flow_hash_client_ip(a[0], a[5]);
    }
    for (const a of plan.flowHash6 ?? []) {
      e.flow_hash6_5tuple(...a);
      e.flow_hash6_client_ip(a[0], a[1], a[2], a[3], a[11]);
    }
    self.postMessage({ step: true });
    for (const seq of plan.health) {
      const ptr = e.health_record_ptr() >>> 0;
      new Uint8Array(e.memory.buffer, ptr, 32).fill(0);
      for (const a of seq) e.health_step(a[0], a[1], a[2], a[3], a[4], a[5]);
      self.postMessage({ step: true });
    }
    for (const { records, m } of plan.maglev) {
      const n = records.length / 3;
      const ptr = e.maglev_input_ptr(n, m) >>> 0;
      if (ptr === 0) continue;
      new Uint32Array(e.memory.buffer, ptr, records.length).set(records);
      e.maglev_build(n, m);
      self.postMessage({ step: true });
    }
    self.postMessage({ ok: true });
  } catch (err) {
    // A trap or bad export is reported by the real validation with its proper reason.
    self.postMessage({ ok: true, trapped: String(err) });
  }
};
`;

/**
 * Runs `plan` against `bytes` in a Worker; resolves when every call returned (or trapped).
 *
 * @throws {Error} `a call did not return within N ms` when one step runs past `stepDeadlineMs`;
 *   the worker is terminated.
 */
export async function preflight(
  bytes: Uint8Array,
  plan: PreflightPlan,
  stepDeadlineMs: number,
): Promise<void> {
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `a call on the golden vectors did not return within ${stepDeadlineMs} ms ` +
                  `(runaway loop?); stopped it`,
              ),
            ),
          stepDeadlineMs,
        );
      };
      arm();
      worker.onmessage = (event: MessageEvent<{ step?: boolean }>) => {
        if (event.data?.step) arm();
        else resolve();
      };
      worker.onerror = (ev) => {
        ev.preventDefault();
        resolve(); // worker-level failure: the real validation reports it precisely
      };
      worker.postMessage({ bytes, plan });
    });
  } finally {
    clearTimeout(timer);
    worker.terminate();
    URL.revokeObjectURL(url);
  }
}
