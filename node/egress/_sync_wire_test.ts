import { deepStrictEqual, ok, strictEqual, throws } from "node:assert/strict";
import type { CtEntry } from "../conntrack/mod.ts";
import {
  decodeFrame,
  encodeAck,
  encodeBegin,
  encodeEnd,
  encodeEntries,
  encodeHello,
  FRAME,
  frameEntries,
  FrameReader,
  MAX_FRAME,
  SyncWireError,
} from "./_sync_wire.ts";

const TCP: CtEntry = {
  orig: { src: 0x0a08000b, dst: 0xcb007101, proto: 6, sport: 40001, dport: 8080 },
  reply: { src: 0xcb007101, dst: 0x0a08000b, proto: 6, sport: 8080, dport: 40001 },
  status: 0x19e,
  timeoutS: 431999,
  tcpState: 3,
  natSrc: { addr: 0xc6120064, port: 21000 },
  mark: 0xfffffffe,
};
const UDP: CtEntry = {
  orig: { src: 0x0a08000c, dst: 0xcb007101, proto: 17, sport: 5000, dport: 53 },
  reply: { src: 0xcb007101, dst: 0x0a08000c, proto: 17, sport: 53, dport: 5000 },
  status: 0x8,
  timeoutS: 30,
};

function decode(bytes: Uint8Array) {
  return decodeFrame(new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), 0);
}

Deno.test("sync wire: entries round-trip (reply is rebuilt as the plain inverse of orig)", () => {
  const f = decode(encodeEntries(FRAME.UPSERT, [TCP, UDP]));
  strictEqual(f.type, FRAME.UPSERT);
  deepStrictEqual(f.type === FRAME.UPSERT ? frameEntries(f) : [], [TCP, UDP]);
  const r = decode(encodeEntries(FRAME.REMOVE, [UDP]));
  deepStrictEqual(r.type === FRAME.REMOVE ? [r.count, frameEntries(r)] : [], [1, [UDP]]);
});

Deno.test("sync wire: control frames round-trip", () => {
  deepStrictEqual(decode(encodeHello("nat-1")), { type: FRAME.HELLO, name: "nat-1" });
  deepStrictEqual(decode(encodeBegin(7)), { type: FRAME.BEGIN, generation: 7 });
  deepStrictEqual(decode(encodeEnd(7, [0xc6120064, 1])), {
    type: FRAME.END,
    generation: 7,
    addrs: [0xc6120064, 1],
  });
  deepStrictEqual(decode(encodeAck(2 ** 32 + 5)), { type: FRAME.ACK, applied: 5 });
});

Deno.test("sync wire: the reader reassembles frames split at every byte", () => {
  const stream = [encodeHello("a"), encodeEntries(FRAME.UPSERT, [TCP]), encodeAck(3)];
  const all = new Uint8Array(stream.reduce((n, b) => n + b.length, 0));
  let o = 0;
  for (const b of stream) (all.set(b, o), o += b.length);
  for (let cut = 0; cut <= all.length; cut++) {
    const r = new FrameReader();
    r.push(all.subarray(0, cut));
    const first = r.frames();
    r.push(all.subarray(cut));
    deepStrictEqual([...first, ...r.frames()].map((f) => f.type), [
      FRAME.HELLO,
      FRAME.UPSERT,
      FRAME.ACK,
    ]);
  }
});

Deno.test("sync wire: the reader grows past its initial buffer for a large frame", () => {
  const many = Array.from({ length: 10_000 }, (_, i) => ({
    ...TCP,
    orig: { ...TCP.orig, sport: i },
  }));
  const bytes = encodeEntries(FRAME.UPSERT, many);
  const r = new FrameReader();
  for (let o = 0; o < bytes.length; o += 65536) r.push(bytes.subarray(o, o + 65536));
  const [f] = r.frames();
  ok(f?.type === FRAME.UPSERT && f.count === 10_000);
  deepStrictEqual(frameEntries(f)[9_999]!.orig.sport, 9_999);
});

Deno.test("sync wire: malformed frames are SyncWireErrors naming the problem", () => {
  const cases: [number[], RegExp][] = [
    [[0, 0, 0, 1, 99], /unknown frame type 99/],
    [[0, 0, 0, 5, FRAME.UPSERT, 0, 0, 0, 9], /says 9 records/],
    [[0, 0, 0, 5, FRAME.BEGIN, 0, 0, 0], /runs past/],
    [[0, 0, 0, 3, FRAME.ACK, 0, 0], /ACK of 2 bytes/],
    [[0, 0, 0, 9, FRAME.HELLO, 0, 0, 0, 0, 0, 1, 0, 0], /bad HELLO magic/],
    [[0, 0, 0, 0], /shorter than its header/],
  ];
  for (const [bytes, re] of cases) {
    throws(
      () => decode(new Uint8Array(bytes)),
      (e: Error) => e instanceof SyncWireError && re.test(e.message),
    );
  }
  const bad = encodeEntries(FRAME.UPSERT, [TCP]);
  bad[5 + 4 + 12] = 1; // protocol ICMP
  throws(
    () => decode(bad),
    (e: Error) => e instanceof SyncWireError && /protocol 1, expected 6 or 17/.test(e.message),
  );
  const r = new FrameReader();
  const huge = new Uint8Array(4);
  new DataView(huge.buffer).setUint32(0, MAX_FRAME + 1);
  r.push(huge);
  throws(() => r.frames(), SyncWireError);
});
