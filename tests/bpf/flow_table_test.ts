/**
 * The flow-sync agent's FlowTable over the real BPF flow map (node/bpf/flow_table.ts).
 * Run: `deno test -P=bpf tests/bpf/flow_table_test.ts` (root).
 */
import { deepStrictEqual } from "node:assert/strict";
import { BpfFlowTable, Datapath, FLOW_F_PEER, makeFlowKey } from "../../node/bpf/mod.ts";
import { rootTest } from "../harness/root.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

rootTest(
  "bpf flow table: get/put/delete/batch/entries on hf_flows, shared with the datapath's view",
  async () => {
    using dp = await Datapath.open({ pinDir: null });
    const table = new BpfFlowTable(dp.maps.flows);
    const key = makeFlowKey({
      saddr: "10.0.0.1",
      daddr: "10.0.100.1",
      sport: 40000,
      dport: 80,
      proto: 6,
    });
    const now = table.nowNs();
    table.put(key, { backend: parseIpv4("10.0.1.2"), flags: FLOW_F_PEER, lastSeenNs: now });
    deepStrictEqual(
      table.get(key),
      { backend: parseIpv4("10.0.1.2"), flags: 1, lastSeenNs: now },
      "get",
    );
    // The datapath reads these bytes (network order key/backend per docs/contracts.md).
    const raw = dp.maps.flows.lookup(
      new Uint8Array([10, 0, 0, 1, 10, 0, 100, 1, 0x9c, 0x40, 0, 80, 6, 0, 0, 0]),
    );
    deepStrictEqual(
      [...(raw ?? new Uint8Array(8)).subarray(0, 8)],
      [10, 0, 1, 2, 1, 0, 0, 0],
      "datapath view",
    );
    deepStrictEqual(
      String(new DataView(raw!.buffer, raw!.byteOffset).getBigUint64(8, true)),
      String(now),
      "last seen, host order",
    );
    const many = Array.from({ length: 5000 }, (_, i) => ({
      key: makeFlowKey({
        saddr: 0x0b000000 + i,
        daddr: "10.0.100.1",
        sport: 1,
        dport: 80,
        proto: 6,
      }),
      value: { backend: parseIpv4("10.0.1.3"), flags: 1, lastSeenNs: 0 },
    }));
    table.putBatch(many);
    const all = [...table.entries()];
    deepStrictEqual(all.length, 5001, "entries");
    deepStrictEqual(table.get(many[4999]!.key)?.backend, parseIpv4("10.0.1.3"), "batch put");
    deepStrictEqual([table.delete(key), table.delete(key)], [true, false], "delete");
  },
);
