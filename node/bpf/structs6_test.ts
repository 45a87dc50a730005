import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import {
  decodeFlowEvent6,
  decodeFlowKey6,
  decodeFlowValue6,
  encodeBackendValue6,
  encodeFlowKey6,
  encodeFlowValue6,
  encodeServiceKey6,
  SIZES6,
} from "./structs6.ts";

Deno.test("IPv6 flow key and value round-trip, both backend families", () => {
  const key = { saddr: "2001:db8::1", daddr: "2001:db8:100::1", sport: 40000, dport: 80, proto: 6 };
  const kb = encodeFlowKey6(key);
  strictEqual(kb.length, SIZES6.flow_key6);
  deepStrictEqual([kb[32], kb[33], kb[36], kb[37]], [0x9c, 0x40, 6, 0], "ports network order");
  deepStrictEqual(decodeFlowKey6(kb), key);
  for (const backend of ["10.2.0.1", "2001:db8:2::1"]) {
    const value = { backend, flags: 1, lastSeenNs: 123456789 };
    const vb = encodeFlowValue6(value);
    strictEqual(vb.length, SIZES6.flow_value6);
    strictEqual(vb[16], backend.includes(":") ? 6 : 4, "family byte");
    deepStrictEqual(decodeFlowValue6(vb), value);
  }
});

Deno.test("IPv6 event, service key and backend layouts", () => {
  const ev = new Uint8Array(SIZES6.flow_event6);
  ev.set(encodeFlowKey6({ saddr: "::2", daddr: "::3", sport: 1, dport: 2, proto: 17 }), 0);
  ev.set(encodeFlowValue6({ backend: "2001:db8::9", flags: 0, lastSeenNs: 0 }).subarray(0, 20), 40);
  new DataView(ev.buffer).setUint32(60, 77, true);
  new DataView(ev.buffer).setBigUint64(64, 5n, true);
  deepStrictEqual(decodeFlowEvent6(ev), {
    key: { saddr: "::2", daddr: "::3", sport: 1, dport: 2, proto: 17 },
    backend: "2001:db8::9",
    serviceId: 77,
    tsNs: 5,
  });
  throws(() => decodeFlowEvent6(ev.subarray(0, 32)), /72/);
  const sk = encodeServiceKey6("2001:db8:100::1", 443, 6);
  deepStrictEqual([sk.length, sk[16], sk[17], sk[18], sk[19]], [20, 1, 0xbb, 6, 0]);
  strictEqual(encodeBackendValue6("2001:db8::1", 80).length, SIZES6.backend_value6);
});
