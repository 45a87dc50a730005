/**
 * Gratuitous ARP through an AF_PACKET socket (libc via Deno FFI): one broadcast ARP request whose
 * sender and target address are the address just assumed, so every neighbour that has an entry
 * for it points it at this interface's MAC at once (Linux overrides an entry on a gratuitous ARP
 * even inside its lock time).
 *
 * Why a socket rather than `arping -U`: a takeover is a race against the clients' retransmits
 * (the goal is ≤ 400 ms end to end), and spawning arping costs a process start per address while
 * a send on an open socket costs microseconds; it also keeps the NAT pod image free of iputils.
 * Runs in the calling thread's network namespace (the agent runs inside the pod's).
 *
 * @module
 */

import { c as libc, cstr, errno, errnoText } from "../bpf/_ffi.ts";

const AF_PACKET = 17;
const SOCK_RAW = 3;
const ETH_P_ARP = 0x0806;
const SIOCGIFHWADDR = 0x8927;

/** Sending a gratuitous ARP failed; `errno` is the libc error number. */
export class GarpError extends Error {
  /** `errno` of the failed call. */
  constructor(message: string, readonly errno: number) {
    super(`${message}: ${errnoText(errno)} (errno ${errno})`);
    this.name = "GarpError";
  }
}

/** The ARP request frame announcing `ip` (4 bytes) at `mac` (6 bytes), padded to 60 bytes. */
export function garpFrame(mac: Uint8Array, ip: Uint8Array): Uint8Array {
  const f = new Uint8Array(60);
  const v = new DataView(f.buffer);
  f.fill(0xff, 0, 6); // broadcast
  f.set(mac, 6);
  v.setUint16(12, ETH_P_ARP);
  v.setUint16(14, 1); // hardware: Ethernet
  v.setUint16(16, 0x0800); // protocol: IPv4
  f[18] = 6;
  f[19] = 4;
  v.setUint16(20, 1); // request
  f.set(mac, 22); // sender MAC
  f.set(ip, 28); // sender IP
  f.set(ip, 38); // target IP = sender IP: gratuitous (target MAC stays zero)
  return f;
}

/**
 * Sends `count` gratuitous ARP requests for `ip` (dotted quad bytes) out of `ifname`.
 *
 * @throws {GarpError} when the interface is unknown or the socket calls fail.
 */
export function sendGratuitousArp(ifname: string, ip: Uint8Array, count = 1): void {
  const c = libc();
  const ifindex = c.if_nametoindex(cstr(ifname));
  if (ifindex === 0) {
    throw new GarpError(`Cannot send gratuitous ARP: no interface "${ifname}"`, errno());
  }
  const fd = c.socket(AF_PACKET, SOCK_RAW, ((ETH_P_ARP & 0xff) << 8) | (ETH_P_ARP >> 8));
  if (fd < 0) throw new GarpError("Cannot open an AF_PACKET socket for gratuitous ARP", errno());
  try {
    const ifreq = new Uint8Array(40);
    ifreq.set(new TextEncoder().encode(ifname).subarray(0, 15));
    if (c.ioctl(fd, BigInt(SIOCGIFHWADDR), ifreq) < 0) {
      throw new GarpError(`Cannot read the MAC address of "${ifname}"`, errno());
    }
    const mac = ifreq.slice(18, 24); // ifr_hwaddr.sa_data
    const frame = garpFrame(mac, ip);
    // struct sockaddr_ll: family, protocol (network order), ifindex, hatype, pkttype, halen, addr[8]
    const sll = new Uint8Array(20);
    const v = new DataView(sll.buffer);
    v.setUint16(0, AF_PACKET, true);
    v.setUint16(2, ETH_P_ARP);
    v.setInt32(4, ifindex, true);
    sll[11] = 6;
    sll.fill(0xff, 12, 18);
    for (let i = 0; i < count; i++) {
      if (Number(c.sendto(fd, frame, BigInt(frame.length), 0, sll, sll.length)) < 0) {
        throw new GarpError(`Cannot send gratuitous ARP on "${ifname}"`, errno());
      }
    }
  } finally {
    c.close(fd);
  }
}
