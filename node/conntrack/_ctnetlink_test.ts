import { deepStrictEqual, ok, strictEqual, throws } from "node:assert/strict";
import {
  CtDecodeError,
  type CtEntry,
  encodeDelete,
  encodeDumpRequest,
  encodeNew,
  inverse,
  IPCTNL_MSG_CT_DELETE,
  IPCTNL_MSG_CT_NEW,
  IPS_ASSURED,
  IPS_CONFIRMED,
  IPS_SEEN_REPLY,
  MAX_NEW_LEN,
  NLM_F_CREATE,
  NLM_F_DUMP,
  tupleText,
} from "./_ctnetlink.ts";
import { decodeEntry, decodeError, splitMessages } from "./_ctnetlink_decode.ts";

const TCP: CtEntry = {
  orig: { src: 0x0a08000b, dst: 0xcb007101, proto: 6, sport: 40001, dport: 8080 },
  reply: { src: 0xcb007101, dst: 0xc6120064, proto: 6, sport: 8080, dport: 21000 },
  status: IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED | 0x10 | 0x80,
  timeoutS: 431999,
  tcpState: 3,
  natSrc: { addr: 0xc6120064, port: 21000 },
  mark: 7,
};

function buf(): { bytes: Uint8Array; view: DataView } {
  const bytes = new Uint8Array(4 * MAX_NEW_LEN);
  return { bytes, view: new DataView(bytes.buffer) };
}

Deno.test("ctnetlink: the create form decodes back: orig, plain-inverse reply, CONFIRMED status, timeout, TCP state, mark", () => {
  const { view } = buf();
  const end = encodeNew(view, 0, TCP, 42, "create");
  ok(end <= MAX_NEW_LEN, `${end} bytes`);
  const [m, ...rest] = splitMessages(view, end);
  strictEqual(rest.length, 0);
  strictEqual(m!.type, IPCTNL_MSG_CT_NEW);
  strictEqual(m!.seq, 42);
  ok(m!.flags & NLM_F_CREATE);
  const back = decodeEntry(view, m!)!;
  deepStrictEqual(back.orig, TCP.orig);
  deepStrictEqual(back.reply, inverse(TCP.orig));
  strictEqual(back.status, IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED);
  strictEqual(back.timeoutS, TCP.timeoutS);
  strictEqual(back.tcpState, 3);
  strictEqual(back.mark, 7);
  strictEqual(back.natSrc, undefined, "no SRC_NAT bit in a request");
});

Deno.test("ctnetlink: natSrc is derived from the reply tuple when IPS_SRC_NAT is set", () => {
  // A kernel-side entry: encode the create form, then patch in the translated reply + status.
  const { view } = buf();
  const natted = { ...TCP, orig: TCP.orig };
  const end = encodeNew(view, 0, natted, 1, "create");
  const m = splitMessages(view, end)[0]!;
  // reply tuple starts right after orig (20 + 52); its dst ip at +4+4+4+4 and dport further on.
  const replyAt = 20 + 52;
  view.setUint32(replyAt + 4 + 4 + 4 + 4 + 4, TCP.reply.dst, false);
  view.setUint16(replyAt + 4 + 20 + 4 + 8 + 8 + 4, 21000, false);
  view.setUint32(replyAt + 52 + 4, TCP.status, false);
  const back = decodeEntry(view, m)!;
  deepStrictEqual(back.reply, TCP.reply);
  deepStrictEqual(back.natSrc, { addr: 0xc6120064, port: 21000 });
});

Deno.test("ctnetlink: the update form carries no NAT or status; UDP carries no TCP state", () => {
  const { view } = buf();
  const udp: CtEntry = { ...TCP, orig: { ...TCP.orig, proto: 17 }, tcpState: undefined };
  const end = encodeNew(view, 0, udp, 9, "update");
  const m = splitMessages(view, end)[0]!;
  strictEqual(m.flags & NLM_F_CREATE, 0);
  throws(() => decodeEntry(view, m), /CTA_TUPLE_REPLY missing/);
  const createEnd = encodeNew(view, 0, udp, 9, "create");
  const back = decodeEntry(view, splitMessages(view, createEnd)[0]!)!;
  strictEqual(back.tcpState, undefined);
  strictEqual(back.orig.proto, 17);
});

Deno.test("ctnetlink: several messages in one buffer split by length; delete and dump requests", () => {
  const { view } = buf();
  let off = encodeNew(view, 0, TCP, 1, "create");
  off = encodeDelete(view, off, TCP.orig, 2);
  off = encodeDumpRequest(view, off, 3);
  const ms = splitMessages(view, off);
  deepStrictEqual(ms.map((m) => [m.type, m.seq]), [
    [IPCTNL_MSG_CT_NEW, 1],
    [IPCTNL_MSG_CT_DELETE, 2],
    [(1 << 8) | 1, 3],
  ]);
  strictEqual(ms[2]!.flags & NLM_F_DUMP, NLM_F_DUMP);
});

Deno.test("ctnetlink: NLMSG_ERROR gives the positive errno and the failed request's seq", () => {
  const bytes = new Uint8Array(36);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, 36, true);
  view.setUint16(4, 2, true);
  view.setInt32(16, -95, true);
  view.setUint32(16 + 4 + 8, 1234, true);
  const m = splitMessages(view, 36)[0]!;
  deepStrictEqual(decodeError(view, m), { errno: 95, seq: 1234 });
  throws(() => decodeError(view, { ...m, end: m.payload + 8 }), CtDecodeError);
});

Deno.test("ctnetlink: every truncation and random corruption is a CtDecodeError or a value, never a crash", () => {
  const { bytes, view } = buf();
  const end = encodeNew(view, 0, TCP, 1, "create");
  for (let cut = 0; cut < end; cut++) {
    try {
      for (const m of splitMessages(view, cut)) decodeEntry(view, m);
    } catch (e) {
      ok(e instanceof CtDecodeError, `cut ${cut}: ${e}`);
    }
  }
  const original = bytes.slice(0, end);
  let seed = 12345;
  const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  for (let round = 0; round < 2000; round++) {
    bytes.set(original);
    for (let k = 0; k < 3; k++) bytes[Math.floor(rand() * end)] = Math.floor(rand() * 256);
    try {
      for (const m of splitMessages(view, end)) decodeEntry(view, m);
    } catch (e) {
      ok(e instanceof CtDecodeError, `round ${round}: ${e}`);
    }
  }
});

Deno.test("ctnetlink: tupleText names an entry for error messages", () => {
  strictEqual(tupleText(TCP.orig), "tcp 10.8.0.11:40001 > 203.0.113.1:8080");
});
