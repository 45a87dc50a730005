import { deepStrictEqual } from "node:assert/strict";
import { decodeHeartbeat, encodeHeartbeat, MAX_HEARTBEAT_BYTES } from "./_health_wire.ts";

const encoder = new TextEncoder();

Deno.test("a heartbeat survives the wire", () => {
  const hb = { name: "nat1", seq: 41, boot: "b-1", draining: true, ready: true };
  deepStrictEqual(decodeHeartbeat(encodeHeartbeat(hb)), hb);
  deepStrictEqual(encodeHeartbeat(hb).length < MAX_HEARTBEAT_BYTES, true);
  const waiting = { ...hb, draining: false, ready: false };
  deepStrictEqual(decodeHeartbeat(encodeHeartbeat(waiting)), waiting);
});

Deno.test("a ready pod's heartbeat has no ready field (older pods read it as before)", () => {
  const text = new TextDecoder().decode(
    encodeHeartbeat({ name: "nat1", seq: 1, boot: "b", draining: false, ready: true }),
  );
  deepStrictEqual(text, '{"t":"hf-egress-hb","v":1,"n":"nat1","s":1,"b":"b","d":0}');
  // And one without the field (an older pod) is ready.
  deepStrictEqual(decodeHeartbeat(encoder.encode(text))?.ready, true);
});

Deno.test("malformed and foreign datagrams decode to null, never throw", () => {
  const bad = [
    new Uint8Array(0),
    new Uint8Array([0xff, 0xfe, 0x00]),
    new Uint8Array(MAX_HEARTBEAT_BYTES + 1).fill(0x20),
    encoder.encode("null"),
    encoder.encode("[1,2]"),
    encoder.encode('{"t":"hf-egress-hb","v":2,"n":"a","s":1,"b":"x","d":0}'),
    encoder.encode('{"t":"other","v":1,"n":"a","s":1,"b":"x","d":0}'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"","s":1,"b":"x","d":0}'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"a","s":-1,"b":"x","d":0}'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"a","s":1.5,"b":"x","d":0}'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"a","s":1,"b":"x","d":"yes"}'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"a","s":1,"b":"x"'),
    encoder.encode('{"t":"hf-egress-hb","v":1,"n":"a","s":1,"b":"x","d":0,"r":"no"}'),
  ];
  for (const d of bad) deepStrictEqual(decodeHeartbeat(d), null, new TextDecoder().decode(d));
});
