/**
 * IPv6 addresses in the forms Holdfast uses: text (RFC 4291 2.2, with `::` and an embedded
 * dotted IPv4 tail; formatted per RFC 5952), 16 bytes in network order (BPF map keys and packets)
 * and four host-order u32 words (the IPv6 flow hash: word i is bytes 4i..4i+3 read big-endian).
 * The one place that parses and formats them; `lib/ipv4.ts` is the IPv4 counterpart.
 *
 * @example
 * ```ts
 * import { formatIpv6, ipv6Bytes, ipv6Words } from "./ipv6.ts";
 * if (formatIpv6(ipv6Bytes("2001:DB8:0:0::1")) !== "2001:db8::1") throw new Error("format");
 * if (ipv6Words("::1")[3] !== 1) throw new Error("words");
 * ```
 *
 * @module
 */
import { hexDigit } from "./bytes.ts";
import { ipv4Bytes } from "./ipv4.ts";

function fail(text: string, why: string): never {
  throw new TypeError(`Cannot parse IPv6 address "${text}": ${why}`);
}

/**
 * Parses IPv6 text into 16 bytes in network order.
 *
 * @throws {TypeError} when the text is not an IPv6 address (the reason quoted).
 */
export function ipv6Bytes(text: string): Uint8Array {
  const b = new Uint8Array(16);
  if (writeIpv6Fast(text, b, 0)) return b;
  return ipv6BytesFull(text);
}

/**
 * Writes the 16 bytes of IPv6 `text` into `out` at `offset` without allocating (for the common
 * forms; others are parsed by {@link ipv6Bytes} and copied).
 *
 * @throws {TypeError} when the text is not an IPv6 address (the reason quoted).
 */
export function writeIpv6(text: string, out: Uint8Array, offset: number): void {
  if (!writeIpv6Fast(text, out, offset)) out.set(ipv6BytesFull(text), offset);
}

const COLON = 58;
const groupScratch = new Uint16Array(8);

/**
 * The common forms (hex groups, at most one `::`, no dotted IPv4 tail) in one pass without
 * allocating, into `out` at `offset`: the flow agent parses one per IPv6 flow and key. False
 * (and `out` untouched) for anything else, valid or not: {@link ipv6BytesFull} then decides and
 * names what is wrong.
 */
function writeIpv6Fast(text: string, out: Uint8Array, offset: number): boolean {
  const n = text.length;
  if (n < 2 || n > 39 || out.length < offset + 16) return false;
  let count = 0;
  let gap = -1;
  let i = 0;
  if (text.charCodeAt(0) === COLON) {
    if (text.charCodeAt(1) !== COLON) return false;
    gap = 0;
    i = 2;
  }
  while (i < n) {
    let value = 0;
    let digits = 0;
    for (; i < n && digits < 5; i++, digits++) {
      const d = hexDigit(text.charCodeAt(i));
      if (d < 0) break;
      value = value * 16 + d;
    }
    if (digits === 0 || digits > 4 || count === 8) return false;
    groupScratch[count++] = value;
    if (i === n) break;
    if (text.charCodeAt(i++) !== COLON || i === n) return false;
    if (text.charCodeAt(i) === COLON) {
      if (gap >= 0) return false;
      gap = count;
      i++;
    }
  }
  if (gap < 0 ? count !== 8 : count > 7) return false;
  out.fill(0, offset, offset + 16);
  for (let k = 0; k < count; k++) {
    const at = offset + 2 * (gap < 0 || k < gap ? k : 8 - (count - k));
    out[at] = groupScratch[k]! >> 8;
    out[at + 1] = groupScratch[k]! & 0xff;
  }
  return true;
}

/** Every form RFC 4291 2.2 allows, each error named. */
function ipv6BytesFull(text: string): Uint8Array {
  const halves = text.split("::");
  if (halves.length > 2) fail(text, `"::" appears more than once`);
  const groups = (s: string): number[] => {
    if (s === "") return [];
    const out: number[] = [];
    const parts = s.split(":");
    parts.forEach((p, i) => {
      if (i === parts.length - 1 && p.includes(".")) {
        const b = ipv4Bytes(p);
        out.push((b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!);
      } else if (/^[0-9a-fA-F]{1,4}$/.test(p)) {
        out.push(parseInt(p, 16));
      } else {
        fail(text, `group "${p}" is not 1..4 hex digits`);
      }
    });
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) {
    fail(text, `expected 8 groups, found ${head.length + tail.length}`);
  }
  const all = [...head, ...new Array(halves.length === 2 ? missing : 0).fill(0), ...tail];
  const b = new Uint8Array(16);
  all.forEach((g, i) => {
    b[2 * i] = g >> 8;
    b[2 * i + 1] = g & 0xff;
  });
  return b;
}

/** Whether `text` is an IPv6 address. */
export function isIpv6(text: string): boolean {
  try {
    ipv6Bytes(text);
    return true;
  } catch {
    return false;
  }
}

/** 16 bytes at `offset` → RFC 5952 text (lower case, longest zero run of ≥ 2 groups as `::`). */
export function formatIpv6(bytes: Uint8Array, offset = 0): string {
  if (bytes.length < offset + 16) {
    throw new RangeError(
      `Cannot format IPv6 address: ${bytes.length - offset} bytes at offset ${offset}, need 16`,
    );
  }
  const g = groupScratch;
  for (let i = 0; i < 8; i++) g[i] = (bytes[offset + 2 * i]! << 8) | bytes[offset + 2 * i + 1]!;
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) [best, bestLen] = [i, j - i];
    i = j;
  }
  let out = "";
  for (let i = 0; i < 8; i++) {
    if (i === best) {
      out += "::";
      i += bestLen - 1;
      continue;
    }
    if (out !== "" && !out.endsWith(":")) out += ":";
    out += g[i]!.toString(16);
  }
  return out;
}

/** IPv6 text (or 16 bytes) → four host-order u32 words, as the IPv6 flow hash takes them. */
export function ipv6Words(address: string | Uint8Array): [number, number, number, number] {
  const b = typeof address === "string" ? ipv6Bytes(address) : address;
  const v = new DataView(b.buffer, b.byteOffset, 16);
  return [v.getUint32(0), v.getUint32(4), v.getUint32(8), v.getUint32(12)];
}

/**
 * Whether IPv6 `address` (text or 16 bytes) is a unicast address of global scope as Linux scopes
 * them: not `::`, `::1`, link-local `fe80::/10`, multicast `ff00::/8` nor IPv4-mapped
 * `::ffff:0:0/96` (unique-local `fc00::/7` is global scope). What a node can use as its own
 * IPv6 address, or an LB IP read from `lo`.
 */
export function isGlobalUnicastIpv6(address: string | Uint8Array): boolean {
  const b = typeof address === "string" ? ipv6Bytes(address) : address;
  const zeroTo = (n: number) => b.subarray(0, n).every((x) => x === 0);
  if (zeroTo(15) && b[15]! <= 1) return false; // :: and ::1
  if (b[0] === 0xff) return false;
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return false;
  return !(zeroTo(10) && b[10] === 0xff && b[11] === 0xff);
}

/** IPv6 text → the address as an unsigned 128-bit integer (for ranges and arithmetic). */
export function ipv6BigInt(text: string): bigint {
  const [a, b, c, d] = ipv6Words(text); // four conversions, not sixteen
  return (BigInt(a) << 96n) | (BigInt(b) << 64n) | (BigInt(c) << 32n) | BigInt(d);
}

/** An unsigned 128-bit integer → RFC 5952 text (the inverse of {@linkcode ipv6BigInt}). */
export function formatIpv6BigInt(n: bigint): string {
  if (n < 0n || n >> 128n !== 0n) {
    throw new RangeError(`Cannot format IPv6 address: ${n} is not in 0..2^128-1`);
  }
  const hex = n.toString(16).padStart(32, "0");
  const b = new Uint8Array(16);
  for (let i = 0; i < 16; i++) b[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return formatIpv6(b);
}

/** An IPv6 CIDR block as an inclusive range of 128-bit integers. */
export interface Ipv6Cidr {
  /** The network address (host bits zero). */
  readonly first: bigint;
  /** The last address of the block (all host bits one). */
  readonly last: bigint;
  /** Prefix length 0..128. */
  readonly prefixLength: number;
}

/**
 * Parses `ADDRESS/N` (N in 0..128). Host bits must be zero, as with `parseIpv4Cidr`:
 * `2001:db8::5/64` is rejected and the message names the network.
 *
 * @example
 * ```ts
 * import { formatIpv6BigInt, parseIpv6Cidr } from "./ipv6.ts";
 * const c = parseIpv6Cidr("2001:db8:100::/120");
 * if (formatIpv6BigInt(c.last) !== "2001:db8:100::ff") throw new Error("cidr");
 * ```
 *
 * @throws {TypeError} when the text is not an IPv6 CIDR or has host bits set.
 */
export function parseIpv6Cidr(text: string): Ipv6Cidr {
  const slash = text.indexOf("/");
  const lenText = slash < 0 ? "" : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(lenText) || Number(lenText) > 128) {
    throw new TypeError(
      `Cannot parse IPv6 CIDR "${text}": expected ADDRESS/PREFIX with prefix 0..128`,
    );
  }
  let first: bigint;
  try {
    first = ipv6BigInt(text.slice(0, slash));
  } catch (e) {
    throw new TypeError(`Cannot parse IPv6 CIDR "${text}": ${(e as Error).message}`, { cause: e });
  }
  const prefixLength = Number(lenText);
  const size = 1n << BigInt(128 - prefixLength);
  if (first % size !== 0n) {
    const network = formatIpv6BigInt(first - (first % size));
    throw new TypeError(
      `Cannot parse IPv6 CIDR "${text}": host bits are set (the network is ${network}/${prefixLength})`,
    );
  }
  return { first, last: first + size - 1n, prefixLength };
}
