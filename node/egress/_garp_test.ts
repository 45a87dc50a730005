import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { garpFrame } from "./_garp.ts";
import { ipv4Bytes } from "../../lib/ipv4.ts";

Deno.test("gratuitous ARP frame: broadcast request, sender IP = target IP, target MAC zero", () => {
  const mac = new Uint8Array([0x02, 0, 0, 0, 0, 0x21]);
  const f = garpFrame(mac, ipv4Bytes("10.8.0.100"));
  strictEqual(f.length, 60);
  deepStrictEqual([...f.subarray(0, 6)], [255, 255, 255, 255, 255, 255]);
  deepStrictEqual([...f.subarray(6, 12)], [...mac]);
  deepStrictEqual([...f.subarray(12, 22)], [0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
  deepStrictEqual([...f.subarray(22, 28)], [...mac]);
  deepStrictEqual([...f.subarray(28, 32)], [10, 8, 0, 100]);
  deepStrictEqual([...f.subarray(32, 38)], [0, 0, 0, 0, 0, 0]);
  deepStrictEqual([...f.subarray(38, 42)], [10, 8, 0, 100]);
});
