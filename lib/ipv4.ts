/**
 * IPv4 addresses in the three forms Holdfast uses: dotted text (config, logs, Redis keys), a
 * host-order u32 (flow keys, hashing: `10.0.0.1` is `0x0a000001`) and 4 bytes in network order
 * (BPF map keys and packets). The one place that parses and formats them.
 *
 * @example
 * ```ts
 * import { formatIpv4, ipv4Bytes, parseIpv4 } from "./ipv4.ts";
 * if (parseIpv4("10.0.0.1") !== 0x0a000001) throw new Error("parse");
 * if (formatIpv4(0x0a000001) !== "10.0.0.1") throw new Error("format");
 * if (ipv4Bytes("10.0.0.1")[0] !== 10) throw new Error("bytes");
 * ```
 *
 * @module
 */

/**
 * Parses dotted-quad IPv4 into a host-order u32.
 *
 * @throws {TypeError} when the text is not four decimal octets 0..255.
 */
export function parseIpv4(text: string): number {
  const parts = text.split(".");
  if (parts.length !== 4) {
    throw new TypeError(`Cannot parse IPv4 address "${text}": expected four dot-separated octets`);
  }
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) {
      throw new TypeError(`Cannot parse IPv4 address "${text}": octet "${p}" is not 0..255`);
    }
    n = n * 256 + Number(p);
  }
  return n;
}

/** Whether `text` is a dotted-quad IPv4 address. */
export function isIpv4(text: string): boolean {
  try {
    parseIpv4(text);
    return true;
  } catch {
    return false;
  }
}

/** Formats a host-order u32 as dotted IPv4. */
export function formatIpv4(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** Dotted quad → 4 bytes in network order. */
export function ipv4Bytes(text: string): Uint8Array {
  const n = parseIpv4(text);
  return new Uint8Array([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
}

/** 4 bytes in network order at `offset` → dotted quad. */
export function ipv4Text(bytes: Uint8Array, offset = 0): string {
  if (bytes.length < offset + 4) {
    throw new RangeError(`Cannot read IPv4 address: ${bytes.length - offset} bytes, need 4`);
  }
  return `${bytes[offset]}.${bytes[offset + 1]}.${bytes[offset + 2]}.${bytes[offset + 3]}`;
}

/** An IPv4 CIDR block as an inclusive range of host-order u32 addresses. */
export interface Ipv4Cidr {
  /** The network address (host bits zero). */
  readonly first: number;
  /** The last address of the block (all host bits one). */
  readonly last: number;
  /** Prefix length 0..32. */
  readonly prefixLength: number;
}

/**
 * Parses `A.B.C.D/N` (N in 0..32). Host bits must be zero: `10.0.0.5/24` is rejected rather than
 * silently read as `10.0.0.0/24`, since the two mean different things to whoever wrote it.
 *
 * @example
 * ```ts
 * import { formatIpv4, parseIpv4Cidr } from "./ipv4.ts";
 * const c = parseIpv4Cidr("10.0.100.0/28");
 * if (formatIpv4(c.last) !== "10.0.100.15" || c.prefixLength !== 28) throw new Error("cidr");
 * ```
 *
 * @throws {TypeError} when the text is not a CIDR or has host bits set.
 */
export function parseIpv4Cidr(text: string): Ipv4Cidr {
  const slash = text.indexOf("/");
  const lenText = slash < 0 ? "" : text.slice(slash + 1);
  if (!/^\d{1,2}$/.test(lenText) || Number(lenText) > 32) {
    throw new TypeError(
      `Cannot parse IPv4 CIDR "${text}": expected ADDRESS/PREFIX with prefix 0..32`,
    );
  }
  let first: number;
  try {
    first = parseIpv4(text.slice(0, slash));
  } catch (e) {
    throw new TypeError(`Cannot parse IPv4 CIDR "${text}": ${(e as Error).message}`, { cause: e });
  }
  const prefixLength = Number(lenText);
  const size = 2 ** (32 - prefixLength);
  if (first % size !== 0) {
    const network = formatIpv4(first - (first % size));
    throw new TypeError(
      `Cannot parse IPv4 CIDR "${text}": host bits are set (the network is ${network}/${prefixLength})`,
    );
  }
  return { first, last: first + size - 1, prefixLength };
}
