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
