/**
 * IPv6 hash parity: every golden vector of policy-as/vectors/flow_hash6.json computed by the BPF
 * IPv6 flow hash (hf_hash6_probe, bpf/hash_probe.c, the same flow_hash.h as hf_lb's IPv6 path)
 * through BPF_PROG_TEST_RUN and by the WASM policy module's optional `flow_hash6_*` exports must
 * match bit for bit. That hf_lb follows it (Maglev pick, outer port, flow label) is checked by
 * tests/bpf/ipv6_fixtures_test.ts.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfObject, DEFAULT_OBJECT_DIR, testRun, XDP } from "../../node/bpf/mod.ts";
import { loadFlowHash6Vectors } from "../../policy-as/host/vectors.ts";
import { ipv6Bytes, ipv6Words } from "../../lib/ipv6.ts";

const SOURCE = "policy-as/vectors/flow_hash6.json";

rootTest("BPF IPv6 flow hash equals the policy-as golden vectors", async () => {
  const vectors = await loadFlowHash6Vectors();
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/hash_probe.o`);
  const probe = obj.program("hf_hash6_probe");
  strictEqual(vectors.length > 0, true, `no vectors in ${SOURCE}`);
  for (const v of vectors) {
    const input = new Uint8Array(64);
    const view = new DataView(input.buffer);
    input.set(ipv6Bytes(v.saddr), 0);
    input.set(ipv6Bytes(v.daddr), 16);
    view.setUint16(32, v.sport);
    view.setUint16(34, v.dport);
    input[36] = v.proto;
    view.setUint32(40, v.seed >>> 0);
    const r = testRun(probe, input);
    strictEqual(r.retval, XDP.PASS);
    const out = new DataView(r.data.buffer, r.data.byteOffset);
    const what = `${JSON.stringify(v)} (${SOURCE})`;
    strictEqual(out.getUint32(44), v.five_tuple >>> 0, `five-tuple hash of ${what}`);
    strictEqual(out.getUint32(48), v.client_ip >>> 0, `client-ip hash of ${what}`);
  }
});

Deno.test("WASM policy module's IPv6 flow hash equals the golden vectors", async () => {
  const vectors = await loadFlowHash6Vectors();
  const url = new URL("../../policy-as/build/release.wasm", import.meta.url);
  const { instance } = await WebAssembly.instantiate(await Deno.readFile(url), {});
  const e = instance.exports as {
    flow_hash6_5tuple: (...args: number[]) => number;
    flow_hash6_client_ip: (...args: number[]) => number;
  };
  for (const v of vectors) {
    const s = ipv6Words(v.saddr);
    const d = ipv6Words(v.daddr);
    const what = `${JSON.stringify(v)} (${SOURCE})`;
    strictEqual(
      e.flow_hash6_5tuple(...s, ...d, v.sport, v.dport, v.proto, v.seed) >>> 0,
      v.five_tuple >>> 0,
      `WASM five-tuple hash of ${what}`,
    );
    strictEqual(
      e.flow_hash6_client_ip(...s, v.seed) >>> 0,
      v.client_ip >>> 0,
      `WASM client-ip hash of ${what}`,
    );
  }
});
