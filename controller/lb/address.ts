/**
 * L3/L4 addresses in their canonical string form `IP:PORT/PROTO` (e.g. `10.0.100.1:80/TCP`),
 * the primary key of frontends and backends. One string per row, parsed on demand, keeps rows
 * small.
 *
 * @module
 */

import type { L4Protocol } from "../lbmaps.ts";

/** A parsed `IP:PORT/PROTO` address. */
export interface L3n4Addr {
  readonly ip: string;
  readonly port: number;
  readonly protocol: L4Protocol;
}

const RE = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):(\d{1,5})\/(TCP|UDP)$/;

/** Thrown for addresses that are not canonical `IPv4:PORT/TCP|UDP`. */
export class AddressError extends Error {
  override name = "AddressError";
}

/** Parses `IP:PORT/PROTO`; throws {@linkcode AddressError} saying what is wrong. */
export function parseAddr(s: string): L3n4Addr {
  const m = RE.exec(s);
  if (m === null) {
    throw new AddressError(`Cannot parse address "${s}": expected IPv4:PORT/TCP|UDP`);
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
  const s = `${ip}:${port}/${protocol.toUpperCase()}`;
  parseAddr(s);
  return s;
}

/** `IP:PORT` of an address: the identity of a backend in the BPF maps (no protocol there). */
export function hostPort(addr: string): string {
  const slash = addr.lastIndexOf("/");
  return slash < 0 ? addr : addr.slice(0, slash);
}
