import { deepStrictEqual } from "node:assert/strict";
import { decodeHeartbeat, encodeHeartbeat, MAX_HEARTBEAT_BYTES } from "./_health_wire.ts";

const encoder = new TextEncoder();

Deno.test("a heartbeat survives the wire", () => {
  const hb = { name: "nat1", seq: 41, boot: "b-1", draining: true };
  deepStrictEqual(decodeHeartbeat(encodeHeartbeat(hb)), hb);
  deepStrictEqual(encodeHeartbeat(hb).length < MAX_HEARTBEAT_BYTES, true);
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
  ];
  for (const d of bad) deepStrictEqual(decodeHeartbeat(d), null, new TextDecoder().decode(d));
});
