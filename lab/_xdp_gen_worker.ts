/**
 * The worker behind `lab/swap_rig.ts`'s traffic: on its own thread (so the main thread can swap
 * programs while frames flow), it loads bpf/build/xdp_gen.o and sends the given frame as live
 * frames (BPF_PROG_TEST_RUN, BPF_F_TEST_XDP_LIVE_FRAMES) out of an interface inside a namespace,
 * `batch` at a time with a pause between batches, until the shared stop flag is set or its
 * bounds (calls, seconds) are reached. It posts `{ sent }` when done, or `{ error }`.
 *
 * @module
 */

import { BpfObject, DEFAULT_OBJECT_DIR, ifIndex, inNetns, testRun, u32 } from "../node/bpf/mod.ts";

/** What the worker is started with. */
export interface GenJob {
  readonly netns: string;
  readonly ifname: string;
  /** The 42-byte Ethernet+IPv4+UDP header (UDP checksum 0) and payload to send. */
  readonly frame: Uint8Array;
  readonly sportBase: number;
  readonly flows: number;
  readonly batch: number;
  readonly pauseMs: number;
  readonly maxSeconds: number;
  /** Int32Array over a SharedArrayBuffer: [0] stop flag, [1] batches sent so far. */
  readonly control: SharedArrayBuffer;
}

const MAX_CALLS = 2_000_000;

function run(job: GenJob): number {
  using gen = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_gen.o`);
  gen.map("hf_gen_cfg").update(u32(0), u32(job.sportBase));
  gen.map("hf_gen_cfg").update(u32(1), u32(job.flows));
  gen.map("hf_gen_tmpl").update(u32(0), job.frame.slice(0, 42));
  const prog = gen.program("hf_xdp_gen");
  const control = new Int32Array(job.control);
  const end = performance.now() + job.maxSeconds * 1000;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  return inNetns(job.netns, () => {
    const ctx = new Uint32Array(6); // struct xdp_md
    ctx[1] = job.frame.length; // data_end
    ctx[3] = ifIndex(job.ifname); // ingress_ifindex: the interface the frames leave by
    const ctxIn = new Uint8Array(ctx.buffer);
    let sent = 0;
    for (let calls = 0; calls < MAX_CALLS && performance.now() < end; calls++) {
      if (Atomics.load(control, 0) === 1) break;
      testRun(prog, job.frame, { repeat: job.batch, ctxIn, liveFrames: true });
      sent += job.batch;
      Atomics.store(control, 1, calls + 1);
      if (job.pauseMs > 0) Atomics.wait(pause, 0, 0, job.pauseMs);
    }
    return sent;
  });
}

/** The worker's global scope (the checker types this module's `self` as a window). */
const scope = self as unknown as {
  onmessage: (e: MessageEvent<GenJob>) => void;
  postMessage(message: { sent: number } | { error: string }): void;
};

scope.onmessage = (e) => {
  try {
    scope.postMessage({ sent: run(e.data) });
  } catch (err) {
    scope.postMessage({ error: (err as Error).stack ?? String(err) });
  }
};
