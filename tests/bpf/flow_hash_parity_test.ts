/**
 * Hash parity: every golden vector of policy-as/vectors/flow_hash.json (the ones the WASM module
 * is validated against) computed by the BPF flow hash through BPF_PROG_TEST_RUN must match bit
 * for bit. The probe, hf_hash_probe, is a test-only object (bpf/hash_probe.c) built from the same
 * flow_hash.h as hf_lb; that hf_lb follows the hash (outer source port, Maglev pick) is checked
 * by the fixtures in lb_fixtures_test.ts.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import {
  BpfObject,
  DEFAULT_OBJECT_DIR,
  makeFlowKey,
  testRun,
  writeFlowKey,
  XDP,
} from "../../node/bpf/mod.ts";
import { loadVectors } from "../../policy-as/host/vectors.ts";

rootTest("BPF flow hash equals the policy-as golden vectors", async () => {
  const source = "policy-as/vectors/flow_hash.json";
  const { flowHash: vectors } = await loadVectors();
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/hash_probe.o`);
  const probe = obj.program("hf_hash_probe");
  strictEqual(vectors.length > 0, true, `no vectors in ${source}`);
  for (const v of vectors) {
    // hf_hash_probe's input: a struct flow_key, then the seed at offset 16.
    const input = new Uint8Array(64);
    const view = new DataView(input.buffer);
    writeFlowKey(view, 0, makeFlowKey(v));
    view.setUint32(16, v.seed >>> 0);
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
