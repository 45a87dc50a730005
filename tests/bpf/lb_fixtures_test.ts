/**
 * Fixture table for the LB XDP program through BPF_PROG_TEST_RUN: description, input frame,
 * expected verdict, expected output frame (outer headers, checksums, ports — built independently
 * in lab/packets.ts from the flow-hash reference), and the one reason counter it must bump.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { createTopology } from "../../lab/netns.ts";
import {
  Datapath,
  FLOW_F_PEER,
  inNetns,
  makeFlowKey,
  type Reason,
  REASONS,
  testRun,
  XDP,
} from "../../node/bpf/mod.ts";
import {
  encapSourcePort,
  flowHashClientIp,
  flowHashFiveTuple,
} from "../../policy-as/host/flow_hash.ts";
import {
  cat,
  encapsulated,
  eth,
  hex,
  inetChecksum,
  ipv4,
  tcpFrame,
  udp,
  udpFrame,
} from "../../lab/packets.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

const SEED = 0x1234;
const LB_SRC = "10.1.1.2";
const ENCAP_PORT = 6080;
const CLIENT = "10.0.0.1";
const BACKENDS: Record<number, string> = {
  1: "10.2.0.1",
  2: "10.2.0.2",
  3: "10.2.0.3",
  9: "10.2.0.9",
};
const TABLE7 = new Uint32Array([1, 2, 3, 1, 2, 3, 1]);
const TABLE5 = new Uint32Array([1, 2, 3, 1, 2]);

/** Expected encapsulation of a frame for a five-tuple (or client-ip) service with `table`. */
function expectEncap(
  frame: Uint8Array,
  table: Uint32Array,
  mode: "five-tuple" | "client-ip" = "five-tuple",
): Uint8Array {
  const v = new DataView(frame.buffer, frame.byteOffset);
  const src = parseIpv4(`${frame[26]}.${frame[27]}.${frame[28]}.${frame[29]}`);
  const dst = parseIpv4(`${frame[30]}.${frame[31]}.${frame[32]}.${frame[33]}`);
  const hash = mode === "client-ip" ? flowHashClientIp(src, SEED) : flowHashFiveTuple({
    saddr: src,
    daddr: dst,
    sport: v.getUint16(34),
    dport: v.getUint16(36),
    proto: frame[23]!,
  }, SEED);
  const backend = BACKENDS[table[hash % table.length]!]!;
  return encapsulated(frame, {
    outerSrc: LB_SRC,
    backend,
    sport: encapSourcePort(hash),
    dport: ENCAP_PORT,
  });
}

interface Fixture {
  readonly description: string;
  readonly input: Uint8Array;
  readonly verdict: number;
  /** Expected output frame; "unchanged" = the input; null = not checked (dropped frames). */
  readonly output: Uint8Array | "unchanged" | null;
  readonly reason: Reason;
  /** The flow is shared (put in hf_flows, new-flow event): flow_shared moves too. */
  readonly shared?: true;
  readonly before?: (dp: Datapath) => void;
}

const syn = (sport: number, dst = "10.0.100.1", dport = 80) =>
  tcpFrame(CLIENT, dst, { sport, dport, flags: 0x02 });
const payload = new TextEncoder().encode("hello holdfast");

const FIXTURES: Fixture[] = [
  {
    description:
      "TCP SYN to a frontend, new flow: Maglev pick, encapsulated, XDP_TX (held unconfirmed, not shared)",
    input: syn(40000),
    verdict: XDP.TX,
    output: expectEncap(syn(40000), TABLE7),
    reason: "tx_new",
  },
  {
    description:
      "the client's ACK on the same 5-tuple: confirmed and shared, same backend and port",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40000, dport: 80, flags: 0x10, payload }),
    verdict: XDP.TX,
    output: expectEncap(
      tcpFrame(CLIENT, "10.0.100.1", { sport: 40000, dport: 80, flags: 0x10, payload }),
      TABLE7,
    ),
    reason: "tx_confirmed",
    shared: true,
  },
  {
    description: "same 5-tuple again: flow map hit, same backend and outer port",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40000, dport: 80, flags: 0x10, payload }),
    verdict: XDP.TX,
    output: expectEncap(
      tcpFrame(CLIENT, "10.0.100.1", { sport: 40000, dport: 80, flags: 0x10, payload }),
      TABLE7,
    ),
    reason: "tx_hit",
  },
  ...[40001, 40002, 40003, 40004, 40005, 40006].map((sport): Fixture => ({
    description: `new flow sport ${sport}: backend = table[hash % 7]`,
    input: syn(sport),
    verdict: XDP.TX,
    output: expectEncap(syn(sport), TABLE7),
    reason: "tx_new",
  })),
  {
    description: "flow installed by the agent (peer) wins over Maglev",
    before: (dp) =>
      dp.flowTable().put(
        makeFlowKey({ saddr: CLIENT, daddr: "10.0.100.1", sport: 41000, dport: 80, proto: 6 }),
        { backend: parseIpv4("10.2.0.9"), flags: FLOW_F_PEER, lastSeenNs: 0 },
      ),
    input: syn(41000),
    verdict: XDP.TX,
    output: (() => {
      const f = syn(41000);
      const hash = flowHashFiveTuple({
        saddr: parseIpv4(CLIENT),
        daddr: parseIpv4("10.0.100.1"),
        sport: 41000,
        dport: 80,
        proto: 6,
      }, SEED);
      return encapsulated(f, {
        outerSrc: LB_SRC,
        backend: "10.2.0.9",
        sport: encapSourcePort(hash),
        dport: ENCAP_PORT,
      });
    })(),
    reason: "tx_hit",
  },
  {
    description: "UDP to a frontend: encapsulated and shared at once",
    input: udpFrame(CLIENT, "10.0.100.1", 5353, 53, payload),
    verdict: XDP.TX,
    output: expectEncap(udpFrame(CLIENT, "10.0.100.1", 5353, 53, payload), TABLE7),
    reason: "tx_new",
    shared: true,
  },
  {
    description: "client-ip service: new client",
    input: syn(42000, "10.0.100.2"),
    verdict: XDP.TX,
    output: expectEncap(syn(42000, "10.0.100.2"), TABLE5, "client-ip"),
    reason: "tx_new",
  },
  {
    description:
      "client-ip service: other source port of the same client finds the same unconfirmed flow (sport 0 key)",
    input: syn(42001, "10.0.100.2"),
    verdict: XDP.TX,
    output: expectEncap(syn(42001, "10.0.100.2"), TABLE5, "client-ip"),
    reason: "tx_unconfirmed",
  },
  {
    description: "client-ip service: the client's ACK confirms and shares it (sport 0 key)",
    input: tcpFrame(CLIENT, "10.0.100.2", { sport: 42001, dport: 80, flags: 0x10 }),
    verdict: XDP.TX,
    output: expectEncap(
      tcpFrame(CLIENT, "10.0.100.2", { sport: 42001, dport: 80, flags: 0x10 }),
      TABLE5,
      "client-ip",
    ),
    reason: "tx_confirmed",
    shared: true,
  },
  {
    description: "client-ip service: a third source port hits the shared flow",
    input: syn(42002, "10.0.100.2"),
    verdict: XDP.TX,
    output: expectEncap(syn(42002, "10.0.100.2"), TABLE5, "client-ip"),
    reason: "tx_hit",
  },
  {
    description: "TOS of the inner packet is copied to the outer header",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40010, dport: 80 }, { tos: 0x10 }),
    verdict: XDP.TX,
    output: expectEncap(
      tcpFrame(CLIENT, "10.0.100.1", { sport: 40010, dport: 80 }, { tos: 0x10 }),
      TABLE7,
    ),
    reason: "tx_new",
  },
  // not for us: untouched
  {
    description: "TCP to another address: passed untouched",
    input: syn(40000, "10.9.9.9"),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "frontend address, other port: passed untouched",
    input: syn(40000, "10.0.100.1", 8080),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "frontend address and port, wrong protocol (UDP 80): passed untouched",
    input: udpFrame(CLIENT, "10.0.100.1", 5000, 80, payload),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "ARP: passed untouched",
    input: cat(eth(0x0806), new Uint8Array(28)),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_ipv4",
  },
  {
    description: "IPv6: passed untouched",
    input: cat(eth(0x86dd), new Uint8Array(60)),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_ipv4",
  },
  {
    description: "EtherType IPv4 but version 6 in the header: passed untouched",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40000, dport: 80 }, { version: 6 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_ipv4",
  },
  {
    description: "ICMP echo to the frontend address: passed to the kernel",
    input: cat(
      eth(0x0800),
      ipv4({ src: CLIENT, dst: "10.0.100.1", proto: 1, payloadLen: 8 }),
      new Uint8Array([8, 0, 0xf7, 0xff, 0, 0, 0, 0]),
    ),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_icmp",
  },
  {
    description: "GRE to the frontend address: passed",
    input: cat(
      eth(0x0800),
      ipv4({ src: CLIENT, dst: "10.0.100.1", proto: 47, payloadLen: 4 }),
      new Uint8Array(4),
    ),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_l4",
  },
  // truncated
  // (frames under 14 bytes are refused by BPF_PROG_TEST_RUN itself, so the shortest is Ethernet only)
  {
    description: "Ethernet header only, EtherType IPv4, no IP header: passed",
    input: eth(0x0800),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  {
    description: "truncated IPv4 header (12 of 20 bytes): passed",
    input: syn(40000).slice(0, 26),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  {
    description: "ports cut off (IP header only): passed",
    input: syn(40000).slice(0, 34),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_truncated",
  },
  {
    description: "TCP header cut after the ports, to a frontend: dropped",
    input: syn(40000).slice(0, 38),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  // bad packets to a frontend: dropped, never forwarded
  {
    description: "IP options to a frontend: dropped",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40020, dport: 80 }, {
      options: new Uint8Array([1, 1, 1, 0]),
    }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_ip_options",
  },
  {
    description: "first fragment (MF) to a frontend: dropped",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40021, dport: 80 }, { fragOff: 0x2000 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_fragment",
  },
  {
    description: "later fragment (offset 185, ports are payload = 40021/80): dropped",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40021, dport: 80 }, { fragOff: 185 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_fragment",
  },
  {
    description: "later fragment whose payload does not look like a frontend: passed untouched",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40021, dport: 9999 }, { fragOff: 185 }),
    verdict: XDP.PASS,
    output: "unchanged",
    reason: "pass_not_frontend",
  },
  {
    description: "IP total length beyond the frame: dropped",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40022, dport: 80 }, { totLen: 1500 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "IP total length shorter than IP + TCP headers: dropped",
    input: tcpFrame(CLIENT, "10.0.100.1", { sport: 40023, dport: 80 }, { totLen: 30 }),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "UDP length disagreeing with the IP length: dropped",
    input: (() => {
      const d = udp(CLIENT, "10.0.100.1", 5353, 53, payload, 100);
      return cat(
        eth(0x0800),
        ipv4({ src: CLIENT, dst: "10.0.100.1", proto: 17, payloadLen: d.length }),
        d,
      );
    })(),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  {
    description: "TCP data offset 4 (< 5): dropped",
    input: (() => {
      const f = syn(40024);
      f[46] = 0x40;
      return f;
    })(),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_bad_length",
  },
  // service states
  {
    description: "service with 0 backends: new flow dropped",
    input: syn(40000, "10.0.100.3"),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_backends",
  },
  {
    description: "Maglev slot 0 (unset): dropped and counted",
    input: syn(40000, "10.0.100.4"),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_maglev_slot_zero",
  },
  {
    description: "slot names a backend ID that does not exist: dropped",
    input: syn(40000, "10.0.100.5"),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_backend",
  },
  {
    description: "service without a Maglev table: dropped",
    input: syn(40000, "10.0.100.6"),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_maglev",
  },
  {
    description: "LB source address not configured: dropped",
    before: (dp) => dp.configure({ srcAddr: "0.0.0.0", encapPort: ENCAP_PORT, seed: SEED }),
    input: syn(40030),
    verdict: XDP.DROP,
    output: null,
    reason: "drop_no_config",
  },
];

rootTest("hf_lb fixtures through BPF_PROG_TEST_RUN", async (t) => {
  using dp = await Datapath.open({ pinDir: null });
  dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED });
  const lb = dp.lbMaps();
  for (const [id, address] of Object.entries(BACKENDS)) {
    await lb.updateBackend(Number(id), { address, port: 80 });
  }
  const svc = async (
    address: string,
    port: number,
    protocol: "TCP" | "UDP",
    serviceId: number,
    table: Uint32Array | null,
    opts: { backendCount?: number; mode?: "five-tuple" | "client-ip"; size?: number } = {},
  ) => {
    if (table) await lb.updateMaglev(serviceId, table);
    await lb.updateService({ address, port, protocol }, {
      serviceId,
      backendCount: opts.backendCount ?? 3,
      flowKeyMode: opts.mode ?? "five-tuple",
      maglevSize: opts.size ?? table?.length ?? 7,
    });
  };
  await svc("10.0.100.1", 80, "TCP", 10, TABLE7);
  await svc("10.0.100.1", 53, "UDP", 11, TABLE7);
  await svc("10.0.100.2", 80, "TCP", 12, TABLE5, { mode: "client-ip" });
  await svc("10.0.100.3", 80, "TCP", 13, TABLE7, { backendCount: 0 });
  await svc("10.0.100.4", 80, "TCP", 14, new Uint32Array(7), { backendCount: 1 });
  await svc("10.0.100.5", 80, "TCP", 15, new Uint32Array(7).fill(8), { backendCount: 1 });
  await svc("10.0.100.6", 80, "TCP", 16, null, { backendCount: 1 });

  for (const f of FIXTURES) {
    await t.step(f.description, () => {
      f.before?.(dp);
      const before = dp.reasons();
      const r = testRun(dp.program, f.input);
      const after = dp.reasons();
      strictEqual(r.retval, f.verdict, `verdict of "${f.description}"`);
      if (f.output === "unchanged") {
        strictEqual(hex(r.data), hex(f.input), "frame must pass untouched");
      } else if (f.output !== null) strictEqual(hex(r.data), hex(f.output), "output frame");
      const moved = REASONS.filter((n) => after[n] !== before[n]).map((n) =>
        `${n}+${after[n] - before[n]}`
      );
      const want = [`${f.reason}+1`, ...(f.shared ? ["flow_shared+1"] : [])];
      deepStrictEqual(moved, want, "exactly the fixture's reason counters move, by one");
    });
  }

  await t.step("counters per frontend and backend, and new-flow events", () => {
    const fe = dp.frontendStats().get(10);
    strictEqual(
      fe !== undefined && fe.packets > 0n && fe.newFlows > 0n,
      true,
      "frontend 10 counted",
    );
    const fePackets = [...dp.frontendStats().values()].reduce((s, x) => s + x.packets, 0n);
    const r = dp.reasons();
    strictEqual(
      fePackets,
      r.tx_hit + r.tx_new + r.tx_unconfirmed + r.tx_confirmed,
      "every transmitted packet counted on its frontend",
    );
    const feDrops = [...dp.frontendStats().values()].reduce((s, x) => s + x.drops, 0n);
    const dropReasons = (Object.keys(r) as (keyof typeof r)[]).filter((k) => k.startsWith("drop_"));
    strictEqual(
      feDrops,
      dropReasons.reduce((s, k) => s + r[k], 0n),
      "every drop counted on its frontend",
    );
    const be = dp.backendNewFlows();
    const maglevPicks = [...be.values()].reduce((s, x) => s + x, 0n);
    // new flows minus the one learned from a peer (a hit) = Maglev picks, each on one backend
    strictEqual(maglevPicks, r.tx_new, "every Maglev pick counted on exactly one backend");
    const events: unknown[] = [];
    const reader = dp.subscribe((e) => events.push(e));
    reader.consume();
    strictEqual(BigInt(events.length), dp.reasons().flow_shared, "one event per shared flow");
    strictEqual(events.length, 3, "shared: the confirmed TCP flow, UDP, the client-ip flow");
    return reader.close();
  });
});

rootTest(
  "oversize frames: ICMP fragmentation-needed for DF, dropped otherwise, fitting ones sent",
  async (t) => {
    // BPF_PROG_TEST_RUN checks the MTU of the context's ingress device: a namespace whose lo has
    // MTU 1500 stands in for a 1500-MTU NIC.
    await using topo = await createTopology({ hosts: [{ name: "mtu" }] }, { sweep: false }); // -P=bpf may not run `kill`;
    await topo.exec("mtu", ["ip", "link", "set", "lo", "mtu", "1500"]);
    using dp = await Datapath.open({ pinDir: null });
    dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED });
    const lb = dp.lbMaps();
    for (const [id, address] of Object.entries(BACKENDS)) {
      await lb.updateBackend(Number(id), { address, port: 80 });
    }
    await lb.updateMaglev(10, TABLE7);
    await lb.updateService({ address: "10.0.100.1", port: 80, protocol: "TCP" }, {
      serviceId: 10,
      backendCount: 3,
      flowKeyMode: "five-tuple",
      maglevSize: 7,
    });
    const run = (frame: Uint8Array) => {
      const ctx = new Uint8Array(24); // struct xdp_md: data, data_end, data_meta, ingress_ifindex, ...
      const v = new DataView(ctx.buffer);
      v.setUint32(4, frame.length, true);
      v.setUint32(12, 1, true); // lo
      return inNetns(topo.ns("mtu"), () => testRun(dp.program, frame, { ctxIn: ctx }));
    };
    const sized = (ipLen: number, fragOff = 0x4000) =>
      tcpFrame(CLIENT, "10.0.100.1", {
        sport: 45000,
        dport: 80,
        flags: 0x10,
        payload: new Uint8Array(ipLen - 40).fill(0xab),
      }, { fragOff });

    await t.step(
      "IP 1500 bytes with DF: ICMP 3/4 with next-hop MTU 1472 back to the client",
      () => {
        const input = sized(1500);
        const before = dp.reasons();
        const r = run(input);
        strictEqual(r.retval, XDP.TX);
        const icmp = new Uint8Array(36);
        icmp.set([3, 4, 0, 0, 0, 0, 1472 >> 8, 1472 & 0xff]);
        icmp.set(input.subarray(14, 14 + 28), 8);
        new DataView(icmp.buffer).setUint16(2, inetChecksum(icmp));
        const expected = cat(
          eth(0x0800, Array.from(input.subarray(6, 12)), Array.from(input.subarray(0, 6))),
          ipv4({ src: LB_SRC, dst: CLIENT, proto: 1, payloadLen: 36, id: 0, fragOff: 0, ttl: 64 }),
          icmp,
        );
        strictEqual(hex(r.data), hex(expected), "ICMP frame");
        strictEqual(dp.reasons().tx_icmp_too_big, before.tx_icmp_too_big + 1n);
        strictEqual(
          [...dp.flowTable().entries()].length,
          0,
          "no flow is created for a packet that was not forwarded",
        );
      },
    );
    await t.step("IP 1500 bytes without DF: dropped (cannot fragment in XDP)", () => {
      const before = dp.reasons().drop_too_big;
      strictEqual(run(sized(1500, 0)).retval, XDP.DROP);
      strictEqual(dp.reasons().drop_too_big, before + 1n);
    });
    await t.step("IP 1472 bytes: fits once encapsulated (1500), sent", () => {
      const input = sized(1472);
      const r = run(input);
      strictEqual(r.retval, XDP.TX);
      strictEqual(hex(r.data), hex(expectEncap(input, TABLE7)));
    });
  },
);
