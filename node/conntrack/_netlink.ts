/**
 * A raw NETLINK_NETFILTER socket through libc FFI: socket, bind (with multicast groups),
 * setsockopt, sendto, recv. The socket is created inside the requested network namespace (see
 * `inNetns`) and stays bound to it whatever thread later uses it.
 *
 * Private to node/conntrack.
 *
 * @module
 */

import { c as libc, errno, errnoText } from "../bpf/_ffi.ts";
import { inNetns } from "../bpf/netns.ts";

export { errnoText };

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_NETFILTER = 12;
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_RCVBUF = 8;
const SO_RCVTIMEO = 20;
const SO_ATTACH_FILTER = 26;
const SO_DETACH_FILTER = 27;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SOL_NETLINK = 270;
const NETLINK_CAP_ACK = 10;
/** recv flag: do not block. */
export const MSG_DONTWAIT = 0x40;
/** recv flag: return the real length of a message longer than the buffer. */
export const MSG_TRUNC = 0x20;

/** Errno values callers test for. */
export const E = {
  ENOENT: 2,
  EINTR: 4,
  EAGAIN: 11,
  EEXIST: 17,
  EINVAL: 22,
  EOPNOTSUPP: 95,
  ENOBUFS: 105,
} as const;

/** A failed netlink call or request; `errno` is positive. */
export class NetlinkError extends Error {
  override name = "NetlinkError";
  /** Positive errno. */
  readonly errno: number;

  /** `action` reads like `Cannot open conntrack socket in "hf-1-a"`. */
  constructor(action: string, code: number, options?: ErrorOptions) {
    super(`${action}: ${errnoText(code)} (errno ${code})`, options);
    this.errno = code;
  }
}

function sockaddrNl(groups: number): Uint8Array<ArrayBuffer> {
  const sa = new Uint8Array(12);
  const v = new DataView(sa.buffer);
  v.setUint16(0, AF_NETLINK, true);
  v.setUint32(8, groups >>> 0, true);
  return sa;
}

const KERNEL = sockaddrNl(0);

/** Options of {@linkcode NetlinkSocket.open}. */
export interface NetlinkOpenOptions {
  /** Network namespace name (`/run/netns/<name>`) or path; default the caller's. */
  netns?: string;
  /** Multicast group bitmask to join (bit g-1 for group g). */
  groups?: number;
  /** Receive buffer in bytes, forced past rmem_max (root). */
  rcvbuf?: number;
  /** Send buffer in bytes, forced past wmem_max (root). */
  sndbuf?: number;
  /** Timeout of a blocking recv in ms (0 = none). */
  recvTimeoutMs?: number;
}

/** One NETLINK_NETFILTER socket. */
export class NetlinkSocket {
  #fd: number;
  readonly #where: string;

  private constructor(fd: number, where: string) {
    this.#fd = fd;
    this.#where = where;
  }

  /** Opens and binds a socket inside `options.netns`. */
  static open(options: NetlinkOpenOptions = {}): NetlinkSocket {
    const where = options.netns ? `namespace "${options.netns}"` : "the current namespace";
    const fd = inNetns(options.netns, () => {
      const fd = libc().socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
      if (fd < 0) {
        throw new NetlinkError(`Cannot open a netfilter netlink socket in ${where}`, errno());
      }
      return fd;
    });
    const sock = new NetlinkSocket(fd, where);
    try {
      const sa = sockaddrNl(options.groups ?? 0);
      if (libc().bind(fd, sa, sa.length) < 0) {
        throw new NetlinkError(`Cannot bind a netfilter netlink socket in ${where}`, errno());
      }
      sock.#setInt(SOL_NETLINK, NETLINK_CAP_ACK, 1, "NETLINK_CAP_ACK");
      if (options.rcvbuf) sock.#setBuf(SO_RCVBUFFORCE, SO_RCVBUF, options.rcvbuf, "receive");
      if (options.sndbuf) sock.#setBuf(SO_SNDBUFFORCE, SO_SNDBUF, options.sndbuf, "send");
      if (options.recvTimeoutMs) {
        const tv = new BigInt64Array([
          BigInt(Math.floor(options.recvTimeoutMs / 1000)),
          BigInt((options.recvTimeoutMs % 1000) * 1000),
        ]);
        const bytes = new Uint8Array(tv.buffer);
        if (libc().setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, bytes, bytes.length) < 0) {
          throw new NetlinkError(`Cannot set SO_RCVTIMEO on a netlink socket in ${where}`, errno());
        }
      }
    } catch (e) {
      sock.close();
      throw e;
    }
    return sock;
  }

  /** Where the socket lives, for messages. */
  get where(): string {
    return this.#where;
  }

  #setInt(level: number, name: number, value: number, what: string): void {
    const v = new Uint8Array(new Int32Array([value]).buffer);
    if (libc().setsockopt(this.#fd, level, name, v, 4) < 0) {
      throw new NetlinkError(`Cannot set ${what} on a netlink socket in ${this.#where}`, errno());
    }
  }

  #setBuf(force: number, plain: number, bytes: number, what: string): void {
    try {
      this.#setInt(SOL_SOCKET, force, bytes, `the ${what} buffer (FORCE)`);
    } catch {
      this.#setInt(SOL_SOCKET, plain, bytes, `the ${what} buffer`);
    }
  }

  /**
   * Attaches a classic BPF socket filter (`struct sock_filter` array, 8 bytes per instruction),
   * replacing any previous one; null detaches.
   */
  setFilter(program: Uint8Array<ArrayBuffer> | null): void {
    this.#checkOpen();
    if (program === null) {
      const none = new Uint8Array(4);
      if (libc().setsockopt(this.#fd, SOL_SOCKET, SO_DETACH_FILTER, none, 4) < 0) {
        const e = errno();
        if (e !== E.ENOENT) throw new NetlinkError(`Cannot detach the filter in ${this.#where}`, e);
      }
      return;
    }
    const fprog = new Uint8Array(16); // struct sock_fprog { u16 len; struct sock_filter *filter; }
    const v = new DataView(fprog.buffer);
    v.setUint16(0, program.length / 8, true);
    v.setBigUint64(8, BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(program))), true);
    if (libc().setsockopt(this.#fd, SOL_SOCKET, SO_ATTACH_FILTER, fprog, fprog.length) < 0) {
      throw new NetlinkError(`Cannot attach a socket filter in ${this.#where}`, errno());
    }
  }

  /** Sends `len` bytes of `buf` to the kernel; throws NetlinkError (retries EINTR). */
  send(buf: Uint8Array<ArrayBuffer>, len: number): void {
    this.#checkOpen();
    for (let attempt = 0; attempt < 100; attempt++) {
      const n = Number(libc().sendto(this.#fd, buf, BigInt(len), 0, KERNEL, KERNEL.length));
      if (n >= 0) return;
      const e = errno();
      if (e !== E.EINTR) {
        throw new NetlinkError(`Cannot send ${len} bytes on netlink in ${this.#where}`, e);
      }
    }
    throw new NetlinkError(`Cannot send on netlink in ${this.#where}`, E.EINTR);
  }

  /**
   * {@linkcode send} on a worker thread (`buf` must stay untouched until it resolves). A failure
   * is retried once on the calling thread, where errno can be read (a netlink request that fails
   * in sendto was not processed).
   */
  async sendAsync(buf: Uint8Array<ArrayBuffer>, len: number): Promise<void> {
    this.#checkOpen();
    const n = Number(
      await libc().sendtoAsync(this.#fd, buf, BigInt(len), 0, KERNEL, KERNEL.length),
    );
    if (n < 0) this.send(buf, len);
  }

  /**
   * Receives one datagram into `buf`: its length, or the negative errno (-EAGAIN when
   * non-blocking and nothing is queued, -ENOBUFS after an overrun). A length larger than the
   * buffer means it was truncated (MSG_TRUNC is always passed).
   */
  recv(buf: Uint8Array<ArrayBuffer>, flags = 0): number {
    this.#checkOpen();
    const n = Number(libc().recv(this.#fd, buf, BigInt(buf.length), flags | MSG_TRUNC));
    return n >= 0 ? n : -errno();
  }

  #checkOpen(): void {
    if (this.#fd < 0) throw new Error(`Netlink socket in ${this.#where} is closed`);
  }

  /** Closes the socket; safe to call twice. */
  close(): void {
    if (this.#fd >= 0) libc().close(this.#fd);
    this.#fd = -1;
  }
}
