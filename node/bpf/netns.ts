/**
 * Running FFI calls inside a network namespace.
 *
 * Choice: `setns()` on the calling thread via libc FFI. The network namespace is per thread, BPF
 * programs and maps are not per namespace, and libbpf's XDP/tc attach calls open their netlink
 * socket in the caller's current namespace. So one Deno process can load the objects once and
 * attach them to interfaces in many namespaces: {@linkcode inNetns} switches the JS thread into
 * the named namespace (`/run/netns/<name>`, as `ip netns add` creates it), runs a synchronous
 * callback and always switches back. The callback must be synchronous: nothing else runs on the
 * thread meanwhile, and Deno's own I/O threads never change namespace.
 *
 * @module
 */

import { c, cstr, errno } from "./_ffi.ts";
import { BpfError } from "./errors.ts";

const CLONE_NEWNET = 0x40000000;
const O_RDONLY_CLOEXEC = 0o2000000;

function openNs(path: string): number {
  const fd = c().open(cstr(path), O_RDONLY_CLOEXEC);
  if (fd < 0) throw new BpfError(`Cannot open network namespace "${path}"`, errno());
  return fd;
}

/**
 * Runs `fn` with the calling thread in network namespace `name` (or the current one when
 * undefined). Returns what `fn` returns.
 *
 * @example
 * ```ts ignore
 * const ifindex = inNetns("hf-1234-lb1", () => ifIndex("eth0"));
 * ```
 */
export function inNetns<T>(name: string | undefined, fn: () => T): T {
  if (name === undefined) return fn();
  if (fn.constructor.name === "AsyncFunction") {
    throw new TypeError(
      `Cannot run an async function in namespace "${name}": the switch is per thread and synchronous`,
    );
  }
  const self = openNs("/proc/thread-self/ns/net");
  try {
    const target = openNs(name.includes("/") ? name : `/run/netns/${name}`);
    try {
      if (c().setns(target, CLONE_NEWNET) < 0) {
        throw new BpfError(`Cannot enter network namespace "${name}"`, errno());
      }
    } finally {
      c().close(target);
    }
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: fn() };
    } catch (error) {
      outcome = { ok: false, error };
    }
    // Staying in the wrong namespace would silently misdirect every later call.
    if (c().setns(self, CLONE_NEWNET) < 0) {
      throw new BpfError(`Cannot return from network namespace "${name}"`, errno());
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  } finally {
    c().close(self);
  }
}

/** Interface index of `ifname` in the calling thread's current namespace. */
export function ifIndex(ifname: string): number {
  const idx = c().if_nametoindex(cstr(ifname));
  if (idx === 0) throw new BpfError(`Cannot find interface "${ifname}"`, errno());
  return idx;
}
