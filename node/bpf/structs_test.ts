import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import {
  decodeServiceKey,
  decodeServiceValue,
  encodeBackendValue,
  encodeLbConfig,
  encodeServiceKey,
  encodeServiceValue,
  SIZES,
  sumLbStats,
} from "./structs.ts";
import { REASONS } from "./consts.ts";
import { ipv4Bytes } from "../../lib/ipv4.ts";

Deno.test("service key/value and backend value round-trip", () => {
  const k = encodeServiceKey("10.0.100.1", 443, 6);
  strictEqual(k.length, SIZES.service_key);
  deepStrictEqual(decodeServiceKey(k), { address: "10.0.100.1", port: 443, proto: 6 });
  const v = { serviceId: 3, backendCount: 2, flags: 1, maglevSize: 251 };
  deepStrictEqual(decodeServiceValue(encodeServiceValue(v)), v);
  deepStrictEqual(Array.from(encodeBackendValue("10.2.0.1", 8080)), [
    10,
    2,
    0,
    1,
    0x1f,
    0x90,
    0,
    0,
  ]);
});

Deno.test("lb_config: source address network order, port and seed host order", () => {
  const b = encodeLbConfig({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0xdeadbeef });
  strictEqual(b.length, SIZES.lb_config);
  deepStrictEqual(Array.from(b.subarray(0, 6)), [10, 1, 1, 2, 0xc0, 0x17]);
  strictEqual(new DataView(b.buffer).getUint32(8, true), 0xdeadbeef);
  strictEqual(new DataView(b.buffer).getUint32(12, true), 0, "event budget 0: the default");
  const budget = encodeLbConfig({ srcAddr: "10.1.1.2", eventBudget: 5000 });
  strictEqual(new DataView(budget.buffer).getUint32(12, true), 5000);
});

Deno.test("per-CPU stats are summed over CPUs", () => {
  const b = new Uint8Array(64);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, 1n, true);
  v.setBigUint64(32, 2n, true);
  v.setBigUint64(56, 5n, true);
  deepStrictEqual(sumLbStats(b), { packets: 3n, bytes: 0n, newFlows: 0n, drops: 5n });
});

Deno.test("bad addresses are refused with the value quoted", () => {
  throws(() => ipv4Bytes("10.0.0.256"), /"10\.0\.0\.256"/);
  throws(() => ipv4Bytes("10.0.0"), /"10\.0\.0"/);
});

Deno.test("reason names: 33, in enum order (tests/bpf/consts_mirror_test.ts checks the C)", () => {
  strictEqual(REASONS.length, 33);
  strictEqual(REASONS[9], "drop_maglev_slot_zero");
  strictEqual(REASONS[14], "tx_hit");
  strictEqual(REASONS[29], "flow_shared");
});
