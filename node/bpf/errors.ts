/**
 * The error of the BPF layer: what failed, on what, and libbpf's text for the errno.
 *
 * @module
 */

import { bpf } from "./_ffi.ts";

/** libbpf's description of an error code (positive or negative errno, or a LIBBPF_ERRNO__*). */
export function strerror(err: number): string {
  const buf = new Uint8Array(256);
  bpf().libbpf_strerror(Math.abs(err), buf, BigInt(buf.length));
  const end = buf.indexOf(0);
  return new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end));
}

/** A failed libbpf or kernel call. `errno` is positive (e.g. 2 for ENOENT). */
export class BpfError extends Error {
  /** Positive errno (or LIBBPF_ERRNO__* code). */
  readonly errno: number;

  /** `action` reads like "Cannot load BPF object \"x.o\"". */
  constructor(action: string, errno: number) {
    const code = Math.abs(errno);
    super(`${action}: ${strerror(code)} (errno ${code})`);
    this.name = "BpfError";
    this.errno = code;
  }
}

/** Errno values callers test for. */
export const ERRNO = { EPERM: 1, ENOENT: 2, EEXIST: 17, E2BIG: 7, EINVAL: 22, ENOSPC: 28 } as const;

/** Throws a BpfError when a libbpf int result is negative; returns it otherwise. */
export function check(result: number, action: string): number {
  if (result < 0) throw new BpfError(action, -result);
  return result;
}
