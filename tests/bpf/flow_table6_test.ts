/**
 * The flow agent's view of the IPv6 flow map over the real BPF maps (node/bpf/flow_table.ts
 * `BpfFlowTable6`, `DualFlowTable`): IPv6 keys with backends of either family, as the datapath
 * reads them (docs/contracts.md "IPv6"), and one table for both families.
 * Run: `deno test -P=bpf tests/bpf/flow_table6_test.ts` (root).
 */
import { deepStrictEqual } from "node:assert/strict";
import { Datapath, FLOW_F_PEER, Ipv6Maps, makeFlowKey } from "../../node/bpf/mod.ts";
import { DualFlowTable } from "../../node/bpf/flow_table.ts";
import type { FlowKey6 } from "../../node/bpf/structs6.ts";
import { rootTest } from "../harness/root.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

const VIP6 = "2001:db8:100::1";

rootTest(
  "bpf flow table: IPv6 flows (IPv6 or IPv4 backend) in hf_flows6 beside IPv4 ones, one table",
  async () => {
    using dp = await Datapath.open({ pinDir: null });
    const v6 = new Ipv6Maps(dp.object);
    const table = new DualFlowTable(dp.flowTable(), v6.flowTable());
    const k6: FlowKey6 = { saddr: "2001:db8::5", daddr: VIP6, sport: 40000, dport: 80, proto: 6 };
    const k6to4: FlowKey6 = { ...k6, sport: 40001 };
    const k4 = makeFlowKey({
      saddr: "10.0.0.1",
      daddr: "10.0.100.1",
      sport: 1,
      dport: 80,
      proto: 6,
    });
    const now = table.nowNs();
    table.put(k6, { backend: "2001:db8:2::3", flags: FLOW_F_PEER, lastSeenNs: now });
    table.putBatch([
      { key: k6to4, value: { backend: parseIpv4("10.0.1.2"), flags: FLOW_F_PEER, lastSeenNs: 0 } },
      { key: k4, value: { backend: parseIpv4("10.0.1.3"), flags: 0, lastSeenNs: 0 } },
    ]);
    // What the datapath reads (struct flow_value6: address, family, flags, last seen).
    deepStrictEqual(v6.getFlow(k6), { backend: "2001:db8:2::3", flags: 1, lastSeenNs: now }, "v6");
    deepStrictEqual(v6.getFlow(k6to4)?.backend, "10.0.1.2", "IPv4 backend of an IPv6 flow");
    deepStrictEqual(table.get(k6to4)?.backend, parseIpv4("10.0.1.2"), "as the agent holds it");
    deepStrictEqual(table.get(k4)?.backend, parseIpv4("10.0.1.3"), "IPv4 flow in hf_flows");
    const all = [...table.entries()].map((e) => `${e.key.sport}:${e.value.backend}`).sort();
    deepStrictEqual(all, ["1:167772419", "40000:2001:db8:2::3", "40001:167772418"], "entries");
    deepStrictEqual(
      [table.delete(k6), table.delete(k6), table.delete(k4)],
      [true, false, true],
      "",
    );
    deepStrictEqual([...table.entries()].length, 1, "one left");
    const many = Array.from({ length: 3000 }, (_, i) => ({
      key: { ...k6, saddr: `2001:db8::1:${i.toString(16)}` },
      value: { backend: "2001:db8:2::4", flags: FLOW_F_PEER, lastSeenNs: 0 },
    }));
    table.putBatch(many);
    deepStrictEqual([...v6.flows()].length, 3001, "batch");
    let refused = "";
    try {
      table.put(k4, { backend: "2001:db8:2::3", flags: 0, lastSeenNs: 0 });
    } catch (err) {
      refused = (err as Error).message;
    }
    deepStrictEqual(refused.includes('"2001:db8:2::3"'), true, `IPv6 backend refused: ${refused}`);
  },
);
