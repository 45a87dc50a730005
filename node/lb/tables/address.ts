/**
 * L3/L4 addresses in their canonical string form `IP:PORT/PROTO` (e.g. `10.0.100.1:80/TCP`, or
 * `[2001:db8::1]:80/TCP` for IPv6: brackets, RFC 5952 text), the primary key of frontends and
 * backends. One string per row, parsed on demand, keeps rows small. An IPv6 address must be in
 * its RFC 5952 form (lower case, `::` for the longest zero run), so one address has one key.
 *
 * @module
 */

import type { L4Protocol } from "../maps/lbmaps.ts";
import { formatIpv6, ipv6Bytes } from "../../../lib/ipv6.ts";

/** A parsed `IP:PORT/PROTO` address. */
export interface L3n4Addr {
  /** Dotted-quad IPv4 or RFC 5952 IPv6 text (no brackets). */
  readonly ip: string;
  readonly port: number;
  readonly protocol: L4Protocol;
}

const RE = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):(\d{1,5})\/(TCP|UDP)$/;

/**
 * Index just past a dotted-quad IPv4 at the start of `s` (each octet 0..255, 1–3 digits), or -1.
 * A hand-written scanner: validation runs for every backend written, a regex costs ~5× more.
 */
export function scanIPv4(s: string): number {
  let i = 0;
  for (let octet = 0; octet < 4; octet++) {
    if (octet > 0) {
      if (s.charCodeAt(i) !== 46) return -1; // "."
      i++;
    }
    let v = 0, digits = 0;
    for (;;) {
      const c = s.charCodeAt(i) - 48;
      if (!(c >= 0 && c <= 9) || digits === 3) break;
      v = v * 10 + c;
      digits++;
      i++;
    }
    if (digits === 0 || v > 255) return -1;
  }
  return i;
}

/** True for canonical `IPv4:PORT/TCP|UDP` (port 1..65535), without allocating. */
export function isAddr(s: string): boolean {
  let i = scanIPv4(s);
  if (i < 0 || s.charCodeAt(i) !== 58) return false; // ":"
  i++;
  let port = 0, digits = 0;
  for (;;) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9 || digits === 5) break;
    port = port * 10 + c;
    digits++;
    i++;
  }
  if (digits === 0 || port < 1 || port > 65535 || s.charCodeAt(i) !== 47) return false; // "/"
  const rest = s.length - i - 1;
  return rest === 3 && (s.endsWith("TCP") || s.endsWith("UDP"));
}

/** Thrown for addresses that are not canonical `IPv4:PORT/TCP|UDP`. */
export class AddressError extends Error {
  override name = "AddressError";
}

const RE6 = /^\[([^\]]*)\]:(\d{1,5})\/(TCP|UDP)$/;

/** Parses `[IPv6]:PORT/PROTO` (RFC 5952 text only); throws {@linkcode AddressError}. */
function parseAddr6(s: string): L3n4Addr {
  const m = RE6.exec(s);
  if (m === null) {
    throw new AddressError(`Cannot parse address "${s}": expected [IPv6]:PORT/TCP|UDP`);
  }
  let canonical: string;
  try {
    canonical = formatIpv6(ipv6Bytes(m[1]!));
  } catch (e) {
    throw new AddressError(`Cannot parse address "${s}": ${(e as Error).message}`, { cause: e });
  }
  if (canonical !== m[1]) {
    throw new AddressError(
      `Cannot parse address "${s}": IPv6 "${m[1]}" is not in RFC 5952 form, write "${canonical}"`,
    );
  }
  const port = Number(m[2]);
  if (port < 1 || port > 65535) {
    throw new AddressError(`Cannot parse address "${s}": port ${port} out of 1..65535`);
  }
  return { ip: canonical, port, protocol: m[3] as L4Protocol };
}

/** True if `ip` (an {@linkcode L3n4Addr.ip}, or a maps entry's address) is IPv6 text. */
export function isIp6(ip: string): boolean {
  return ip.includes(":");
}

/** `IP:PORT` with an IPv6 address in brackets: a backend's identity ({@linkcode hostPort}). */
export function joinHostPort(ip: string, port: number): string {
  return isIp6(ip) ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** Splits `IP:PORT` or `[IPv6]:PORT` (as {@linkcode hostPort} returns) into address and port. */
export function splitHostPort(hp: string): { ip: string; port: number } {
  const colon = hp.lastIndexOf(":");
  const host = hp.slice(0, colon);
  const ip = host.startsWith("[") ? host.slice(1, -1) : host;
  return { ip, port: Number(hp.slice(colon + 1)) };
}

/**
 * Parses `IP:PORT/PROTO` (IPv4, or `[IPv6]` in RFC 5952 form); throws {@linkcode AddressError}
 * saying what is wrong.
 */
export function parseAddr(s: string): L3n4Addr {
  if (s.startsWith("[")) return parseAddr6(s);
  if (isAddr(s)) {
    // Fast path: already validated; split without a regex.
    const colon = s.indexOf(":"), slash = s.length - 4;
    return {
      ip: s.slice(0, colon),
      port: Number(s.slice(colon + 1, slash)),
      protocol: s.charCodeAt(slash + 1) === 84 ? "TCP" : "UDP",
    };
  }
  const m = RE.exec(s);
  if (m === null) {
    throw new AddressError(
      `Cannot parse address "${s}": expected IPv4:PORT/TCP|UDP or [IPv6]:PORT/TCP|UDP`,
    );
  }
  for (let i = 1; i <= 4; i++) {
    if (Number(m[i]) > 255) {
      throw new AddressError(`Cannot parse address "${s}": octet ${m[i]} > 255`);
    }
  }
  const port = Number(m[5]);
  if (port < 1 || port > 65535) {
    throw new AddressError(`Cannot parse address "${s}": port ${port} out of 1..65535`);
  }
  return { ip: `${m[1]}.${m[2]}.${m[3]}.${m[4]}`, port, protocol: m[6] as L4Protocol };
}

/** Formats the canonical address string, validating it. */
export function formatAddr(ip: string, port: number, protocol: string): string {
  const s = `${joinHostPort(ip, port)}/${protocol.toUpperCase()}`;
  parseAddr(s);
  return s;
}

/** `IP:PORT` of an address: the identity of a backend in the BPF maps (no protocol there). */
export function hostPort(addr: string): string {
  const slash = addr.lastIndexOf("/");
  return slash < 0 ? addr : addr.slice(0, slash);
}
