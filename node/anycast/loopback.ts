/**
 * The /32s (IPv6: /128s) on `lo`: the one side effect of the anycast agent, behind a narrow
 * interface. bird's
 * `protocol direct` announces what is here (node/bgp), so adding is assuming and removing is
 * forfeiting. {@linkcode IpLoopback} runs `ip` in the caller's namespace;
 * {@linkcode MemoryLoopback} is the unit tests' stand-in.
 *
 * @module
 */

import { formatIpv6, ipv6Bytes, isGlobalUnicastIpv6 } from "../../lib/ipv6.ts";

/** Addresses on `lo`. */
export interface Loopback {
  /** The /32 and global /128 addresses on `lo` (without prefix length; IPv6 as RFC 5952). */
  list(): Promise<Set<string>>;
  /** Puts `address/32` (IPv6: `/128`) on `lo` (no error if already there). */
  add(address: string): Promise<void>;
  /** Removes `address/32` (IPv6: `/128`) from `lo` (no error if absent). */
  remove(address: string): Promise<void>;
}

/** `A/32` for IPv4, `A/128` for IPv6: one address as a host route. */
export function hostPrefix(address: string): string {
  return `${address}/${address.includes(":") ? 128 : 32}`;
}

/** Raised when `ip` fails; carries its stderr. */
export class LoopbackError extends Error {
  override name = "LoopbackError";
}

/** Runs `ip ARGS` (killed after 5 s); never throws for a failed command. */
export async function runIp(
  args: string[],
): Promise<{ ok: boolean; out: string; err: string }> {
  const child = new Deno.Command("ip", { args, stdin: "null", stdout: "piped", stderr: "piped" })
    .spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, 5_000);
  try {
    const r = await child.output();
    const d = new TextDecoder();
    return { ok: r.success, out: d.decode(r.stdout), err: d.decode(r.stderr).trim() };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `lo` (or another device, e.g. flow redirection's dummy `hf-anycast`) through the `ip` command,
 * in the caller's network namespace.
 */
export class IpLoopback implements Loopback {
  /** Acts on `device` (default `lo`). */
  constructor(readonly device = "lo") {}

  /**
   * Lists /32 IPv4 and /128 global IPv6 addresses on the device (`ip -j addr show dev DEVICE`;
   * `::1` is never one of them).
   */
  async list(): Promise<Set<string>> {
    const r = await runIp(["-j", "addr", "show", "dev", this.device]);
    if (!r.ok) throw new LoopbackError(`Cannot list addresses on "${this.device}": ${r.err}`);
    const links = JSON.parse(r.out || "[]") as {
      addr_info?: { family: string; local: string; prefixlen: number }[];
    }[];
    const held = (a: { family: string; local: string; prefixlen: number }) =>
      a.family === "inet"
        ? a.prefixlen === 32
        : a.family === "inet6" && a.prefixlen === 128 && isGlobalUnicastIpv6(a.local);
    return new Set(
      links.flatMap((l) => l.addr_info ?? []).filter(held).map((a) =>
        a.family === "inet6" ? formatIpv6(ipv6Bytes(a.local)) : a.local
      ),
    );
  }

  /** `ip addr replace A/32 dev DEVICE` (IPv6: `/128`, no DAD) (idempotent). */
  async add(address: string): Promise<void> {
    const host = hostPrefix(address);
    const r = await runIp([
      "addr",
      "replace",
      host,
      "dev",
      this.device,
      ...(host.endsWith("/128") ? ["nodad"] : []),
    ]);
    if (!r.ok) {
      throw new LoopbackError(`Cannot add "${host}" to "${this.device}": ${r.err}`);
    }
  }

  /** `ip addr del A/32 dev DEVICE` (IPv6: `/128`); an absent address is not an error. */
  async remove(address: string): Promise<void> {
    const host = hostPrefix(address);
    const r = await runIp(["addr", "del", host, "dev", this.device]);
    if (!r.ok && !/Cannot assign requested address/.test(r.err)) {
      throw new LoopbackError(`Cannot remove "${host}" from "${this.device}": ${r.err}`);
    }
  }
}

/** An in-memory `lo` for tests; `failNext` makes the next add or remove throw. */
export class MemoryLoopback implements Loopback {
  readonly addresses = new Set<string>();
  failNext = 0;

  list(): Promise<Set<string>> {
    return Promise.resolve(new Set(this.addresses));
  }

  add(address: string): Promise<void> {
    if (this.failNext > 0 && this.failNext--) {
      return Promise.reject(new LoopbackError(`injected failure adding "${address}"`));
    }
    this.addresses.add(address);
    return Promise.resolve();
  }

  remove(address: string): Promise<void> {
    if (this.failNext > 0 && this.failNext--) {
      return Promise.reject(new LoopbackError(`injected failure removing "${address}"`));
    }
    this.addresses.delete(address);
    return Promise.resolve();
  }
}
