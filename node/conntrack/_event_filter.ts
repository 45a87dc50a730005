/**
 * A classic BPF socket filter for conntrack event sockets that lets through only events of
 * entries source-NAT'd to given addresses (their reply tuple's destination), so a NAT pod's
 * event socket does not fill with the entries it merely holds for others (every entry a standby
 * injects or refreshes makes an event). The same idea as libnetfilter_conntrack's
 * nfct_filter_attach, written with the kernel's netlink-attribute helpers for cBPF
 * (SKF_AD_NLATTR, SKF_AD_NLATTR_NEST: "offset of attribute X searching from offset A").
 *
 * A message without the attributes (not a conntrack entry we decode) is let through.
 *
 * @module
 */

const BPF_LD = 0x00, BPF_LDX = 0x01, BPF_JMP = 0x05, BPF_RET = 0x06, BPF_MISC = 0x07;
const BPF_W = 0x00, BPF_IMM = 0x00, BPF_ABS = 0x20, BPF_IND = 0x40;
const BPF_JEQ = 0x10, BPF_K = 0x00, BPF_TAX = 0x00;
const SKF_AD_OFF = -0x1000;
const SKF_AD_NLATTR = 12;
const SKF_AD_NLATTR_NEST = 16;
/** Classic BPF's program length limit (BPF_MAXINSNS). */
const MAX_INSNS = 4096;

const CTA_TUPLE_REPLY = 2, CTA_TUPLE_IP = 1, CTA_IP_V4_DST = 2;
/** nlmsghdr + nfgenmsg: where a conntrack message's attributes start. */
const ATTRS_AT = 16 + 4;

type Insn = [code: number, jt: number, jf: number, k: number];

const ACCEPT: Insn = [BPF_RET | BPF_K, 0, 0, 0xffffffff];
const DROP: Insn = [BPF_RET | BPF_K, 0, 0, 0];
/** A = offset of attribute X, searching the attributes from offset A (`nest`: inside attribute A). */
const find = (type: number, nest: boolean): Insn[] => [
  [BPF_LDX | BPF_W | BPF_IMM, 0, 0, type],
  [BPF_LD | BPF_W | BPF_ABS, 0, 0, SKF_AD_OFF + (nest ? SKF_AD_NLATTR_NEST : SKF_AD_NLATTR)],
  [BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0], // not found: accept (next), else skip it
  ACCEPT,
];

/**
 * The filter program for `addrs` (u32 IPv4, host order) as `struct sock_filter` bytes. Every
 * jump is to the next instruction or over it, so any number of addresses fits classic BPF's
 * 8-bit jump offsets; throws a RangeError past its 4,096 instructions (about 2,040 addresses).
 */
export function natSrcFilter(addrs: ReadonlySet<number>): Uint8Array<ArrayBuffer> {
  const insns: Insn[] = [
    [BPF_LD | BPF_IMM, 0, 0, ATTRS_AT],
    ...find(CTA_TUPLE_REPLY, false),
    ...find(CTA_TUPLE_IP, true),
    ...find(CTA_IP_V4_DST, true),
    [BPF_MISC | BPF_TAX, 0, 0, 0],
    [BPF_LD | BPF_W | BPF_IND, 0, 0, 4], // the address after the 4-byte attribute header
  ];
  for (const a of addrs) insns.push([BPF_JMP | BPF_JEQ | BPF_K, 0, 1, a], ACCEPT);
  insns.push(DROP);
  if (insns.length > MAX_INSNS) {
    throw new RangeError(
      `Cannot filter conntrack events by ${addrs.size} NAT addresses: over ${MAX_INSNS} BPF instructions`,
    );
  }
  const out = new Uint8Array(insns.length * 8);
  const view = new DataView(out.buffer);
  insns.forEach(([code, jt, jf, k], i) => {
    view.setUint16(i * 8, code, true);
    view.setUint8(i * 8 + 2, jt);
    view.setUint8(i * 8 + 3, jf);
    view.setUint32(i * 8 + 4, k >>> 0, true);
  });
  return out;
}
