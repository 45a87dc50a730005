/**
 * The TypeScript mirror of the IPv6 structs and constants (node/bpf/structs6.ts) matches what the
 * kernel made from bpf/structs6.h and bpf/maps6.h (key and value sizes of every IPv6 map, as
 * loaded from the built objects' BTF) and the numbers of bpf/consts6.h. Field offsets are held by
 * the fixtures, which decode what the datapath wrote (ipv6_fixtures_test.ts).
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { BpfObject, Datapath, DEFAULT_OBJECT_DIR, u32 } from "../../node/bpf/mod.ts";
import {
  AF,
  encodeFlowKey6,
  encodeFlowValue6,
  encodeLbConfig6,
  HF_ENCAP6_OVERHEAD,
  HF_MSS6_DELTA,
  SIZES6,
} from "../../node/bpf/structs6.ts";

rootTest("IPv6 map key and value sizes equal the TypeScript layouts", () => {
  using lb = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_xdp.o`);
  const sizes = (o: BpfObject, name: string) => {
    const m = o.map(name);
    return [m.keySize, m.valueSize];
  };
  deepStrictEqual(sizes(lb, "hf_flows6"), [SIZES6.flow_key6, SIZES6.flow_value6], "hf_flows6");
  deepStrictEqual(sizes(lb, "hf_services6"), [SIZES6.service_key6, 16], "hf_services6");
  deepStrictEqual(sizes(lb, "hf_backends6"), [4, SIZES6.backend_value6], "hf_backends6");
  deepStrictEqual(sizes(lb, "hf_config6"), [4, SIZES6.lb_config6], "hf_config6");
  using decap = BpfObject.open(`${DEFAULT_OBJECT_DIR}/decap_tc.o`);
  deepStrictEqual(sizes(decap, "hf_local_vips6"), [SIZES6.vip6_key, 4], "hf_local_vips6");
});

Deno.test("numbers of bpf/consts6.h and bpf/structs6.h mirrored in structs6.ts", async () => {
  const h = await Deno.readTextFile(new URL("../../bpf/consts6.h", import.meta.url));
  const define = (name: string) => Number(new RegExp(`#define ${name} (\\d+)`).exec(h)?.[1]);
  strictEqual(define("HF_ENCAP6_OVERHEAD"), HF_ENCAP6_OVERHEAD);
  strictEqual(define("HF_MSS6_DELTA"), HF_MSS6_DELTA);
  strictEqual(define("HF_AF_INET"), AF.INET);
  strictEqual(define("HF_AF_INET6"), AF.INET6);
  const s = await Deno.readTextFile(new URL("../../bpf/structs6.h", import.meta.url));
  for (const [name, size] of Object.entries(SIZES6)) {
    const before = s.slice(0, s.indexOf(`struct ${name} {`));
    const comment = before.slice(before.lastIndexOf("/*"));
    strictEqual(
      comment.includes(`${size} bytes`),
      true,
      `structs6.h documents struct ${name} as ${size} bytes: ${comment}`,
    );
  }
});

rootTest("IPv6 maps are pinned, sized with their IPv4 peers and survive a restart", async () => {
  const pinDir = `/sys/fs/bpf/hf-test-v6-${Deno.pid}`;
  const key = encodeFlowKey6({
    saddr: "2001:db8:a::1",
    daddr: "2001:db8:100::1",
    sport: 40000,
    dport: 80,
    proto: 6,
  });
  const value = encodeFlowValue6({ backend: "2001:db8:2::3", flags: 1, lastSeenNs: 5 });
  try {
    {
      using dp = await Datapath.open({ pinDir, maxServices: 8, maxBackends: 16, maxFlows: 100 });
      strictEqual(dp.object.map("hf_flows6").maxEntries, 100, "hf_flows6 sized by maxFlows");
      strictEqual(dp.object.map("hf_backends6").maxEntries, 16, "hf_backends6 by maxBackends");
      strictEqual(dp.object.map("hf_services6").maxEntries, 8, "hf_services6 by maxServices");
      dp.object.map("hf_flows6").update(key, value);
      dp.object.map("hf_config6").update(u32(0), encodeLbConfig6("2001:db8:1::2"));
    }
    using dp = await Datapath.open({ pinDir });
    deepStrictEqual(dp.object.map("hf_flows6").lookup(key), value, "the v6 flow is still there");
    deepStrictEqual(
      dp.object.map("hf_config6").lookup(u32(0)),
      encodeLbConfig6("2001:db8:1::2"),
      "and the node's IPv6 address",
    );
  } finally {
    Datapath.unpin(pinDir);
  }
});
