/**
 * BPF_PROG_TEST_RUN through `bpf_prog_test_run_opts`: run a program on a packet in the kernel
 * without an interface, for fixtures and benchmarks.
 *
 * @module
 */

import { addressOf, bpf } from "./_ffi.ts";
import { check } from "./errors.ts";
import type { BpfProgram } from "./object.ts";

/** XDP return codes. */
export const XDP = { ABORTED: 0, DROP: 1, PASS: 2, TX: 3, REDIRECT: 4 } as const;
/** tc (direct action) return codes. */
export const TC_ACT = { OK: 0, SHOT: 2 } as const;

/** Options for {@linkcode testRun}. */
export interface TestRunOptions {
  /** In-kernel repetitions (default 1). The packet buffer is NOT reset between them. */
  readonly repeat?: number;
  /** Room for the output packet (default input + 256). */
  readonly outSize?: number;
  /** Program context in (e.g. struct xdp_md / __sk_buff), optional. */
  readonly ctxIn?: Uint8Array;
  /**
   * XDP live frames (`BPF_F_TEST_XDP_LIVE_FRAMES`, kernel ≥ 5.18): each of the `repeat` runs
   * sends a real frame (XDP_TX / XDP_REDIRECT go out of the interface named by `ctxIn`'s
   * ingress_ifindex). The kernel refuses an output buffer in this mode, so the result's `data`
   * is empty.
   */
  readonly liveFrames?: boolean;
}

/** `bpf_test_run_opts.flags` bit for XDP live frames. */
const BPF_F_TEST_XDP_LIVE_FRAMES = 1 << 1;

/** Result of one test run. */
export interface TestRunResult {
  /** The program's return code (e.g. {@linkcode XDP}.TX). */
  readonly retval: number;
  /** Output packet. */
  readonly data: Uint8Array;
  /** Mean ns per repetition, measured in the kernel. */
  readonly durationNs: number;
}

/** Runs `prog` once (or `repeat` times) on `data`. */
export function testRun(
  prog: BpfProgram,
  data: Uint8Array,
  options: TestRunOptions = {},
): TestRunResult {
  const live = options.liveFrames ?? false;
  const out = new Uint8Array(live ? 0 : options.outSize ?? data.length + 256);
  const opts = new Uint8Array(80); // struct bpf_test_run_opts
  const v = new DataView(opts.buffer);
  v.setBigUint64(0, 80n, true); // sz
  v.setBigUint64(8, addressOf(data), true); // data_in
  if (!live) v.setBigUint64(16, addressOf(out), true); // data_out
  v.setUint32(24, data.length, true); // data_size_in
  v.setUint32(28, out.length, true); // data_size_out
  if (options.ctxIn) {
    v.setBigUint64(32, addressOf(options.ctxIn), true); // ctx_in
    v.setUint32(48, options.ctxIn.length, true); // ctx_size_in
  }
  v.setInt32(60, options.repeat ?? 1, true); // repeat
  if (live) v.setUint32(68, BPF_F_TEST_XDP_LIVE_FRAMES, true); // flags
  check(
    bpf().bpf_prog_test_run_opts(prog.fd, opts),
    `Cannot test-run program "${prog.name}" on ${data.length} bytes${live ? " (live frames)" : ""}`,
  );
  return {
    retval: v.getUint32(56, true),
    data: out.slice(0, live ? 0 : v.getUint32(28, true)),
    durationNs: v.getUint32(64, true),
  };
}
