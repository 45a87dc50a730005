import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import {
  Conntrack,
  ConntrackEvents,
  type CtEntry,
  failureText,
  RECORD_LEN,
  writeRecord,
} from "../../node/conntrack/mod.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import {
  CLIENT,
  FLOATING,
  FLOATING_U32,
  heldFlows,
  natPair,
  routeThroughB,
  snatEntry,
} from "./_nat_pair.ts";

function find(entries: CtEntry[], proto: number, dport: number): CtEntry | undefined {
  return entries.find((e) =>
    e.orig.proto === proto && e.orig.dport === dport && e.orig.src === parseIpv4(CLIENT)
  );
}

rootTest(
  "conntrack: A's dump shows the SNAT'd TCP and UDP flows; injected into B they list as source-NAT'd with the same port, and the TCP connection keeps working through B",
  async () => {
    await using topo = await natPair();
    const events = ConntrackEvents.open({ netns: topo.ns("nata") });
    const ctA = Conntrack.open({ netns: topo.ns("nata") });
    const ctB = Conntrack.open({ netns: topo.ns("natb") });
    try {
      const { server, client } = await heldFlows(topo, 5000);

      const dumped = ctA.dump({ natSrcAddrs: new Set([FLOATING_U32]) });
      const tcp = find(dumped, 6, 8080);
      const udp = find(dumped, 17, 5353);
      assert(tcp?.natSrc && udp?.natSrc, `A's dump lacks the flows: ${JSON.stringify(dumped)}`);
      assertEquals(formatIpv4(tcp.natSrc.addr), FLOATING);
      assertEquals(tcp.tcpState, 3, "TCP entry should be ESTABLISHED");
      assert(tcp.natSrc.port >= 20000 && tcp.natSrc.port <= 29999, `port ${tcp.natSrc.port}`);
      const accepted = await server.waitForLine((l) => l.includes("accepted"));
      assertEquals(JSON.parse(accepted).peer, `${FLOATING}:${tcp.natSrc.port}`);
      assertEquals(ctA.dump({ natSrcAddrs: new Set([parseIpv4("198.18.0.99")]) }).length, 0);
      // Past 16 addresses the dump is filtered here rather than in the kernel: same answer.
      const many = Array.from({ length: 20 }, (_, i) => parseIpv4("192.0.2.1") + i);
      const wide = ctA.dump({ natSrcAddrs: new Set([...many, FLOATING_U32]) });
      assertEquals(wide.map((e) => e.orig.sport).sort(), dumped.map((e) => e.orig.sport).sort());

      // Injected into B: the kernel sets SRC_NAT itself and computes the translated reply.
      const first = ctB.inject([tcp, udp]);
      assertEquals(first.failed.map(failureText), []);
      assertEquals(first.injected, 2);
      const again = ctB.inject([tcp, udp]); // existing entries are updated, not refused
      assertEquals(again.failed.map(failureText), []);
      assertEquals(again.injected, 2);
      const listed = await topo.exec("natb", ["conntrack", "-L", "--src-nat"]);
      for (const e of [tcp, udp]) {
        const line = listed.stdout.split("\n").find((l) => l.includes(`sport=${e.orig.sport} `));
        assert(line, `B's conntrack -L --src-nat lacks ${e.orig.sport}: ${listed.stdout}`);
        assert(
          line.includes(`dst=${FLOATING} sport=${e.orig.dport} dport=${e.natSrc!.port}`),
          line,
        );
      }
      const inB = ctB.dump({ natSrcAddrs: new Set([FLOATING_U32]) });
      assertEquals(find(inB, 6, 8080)?.natSrc, tcp.natSrc);

      // The real thing: traffic moves to B and the connection carries on, same source port.
      await routeThroughB(topo);
      const summary = JSON.parse(await client.waitForLine((l) => l.includes("summary")));
      assertEquals(summary.survived, 1, `connection died through B: ${JSON.stringify(summary)}`);
      assert(summary.exchanges > 30, JSON.stringify(summary));
      const afterMove = ctB.dump({ natSrcAddrs: new Set([FLOATING_U32]) });
      assert(find(afterMove, 6, 8080), "B's entry is gone after carrying the traffic");
      assertEquals(server.lines.filter((l) => l.includes("accepted")).length, 1);

      assertEquals(ctB.remove([udp]), 1);
      assertEquals(ctB.remove([udp]), 0);

      // Events on A: the NEW of both flows (with the NAT mapping), and a DESTROY on delete.
      assertEquals(ctA.remove([tcp]), 1);
      const seen = events.read();
      const newTcp = seen.find((e) => e.type === "new" && e.entry.orig.sport === tcp.orig.sport);
      assertEquals(newTcp?.entry.natSrc, tcp.natSrc);
      assert(seen.some((e) => e.type === "new" && e.entry.orig.sport === udp.orig.sport));
      assert(
        seen.some((e) => e.type === "destroy" && e.entry.orig.sport === tcp.orig.sport),
        `no destroy event: ${JSON.stringify(seen.map((e) => [e.type, e.entry.orig]))}`,
      );
      assertEquals(events.overruns, 0);
    } finally {
      events.close();
      ctA.close();
      ctB.close();
    }
  },
);

rootTest(
  "conntrack: a refused entry is reported with its tuple and errno, and a full event queue counts as an overrun",
  async () => {
    await using topo = await natPair();
    const ct = Conntrack.open({ netns: topo.ns("nata") });
    const events = ConntrackEvents.open({ netns: topo.ns("nata"), rcvbuf: 4096 });
    try {
      const make = (i: number) => snatEntry(i);
      const bad = { ...make(0), tcpState: 200 }; // not a TCP_CONNTRACK_* state
      const { injected, failed } = ct.inject([make(1), bad, make(2)]);
      assertEquals(injected, 2);
      assertEquals(failed.length, 1);
      assertEquals(failed[0]!.entry, bad);
      assertEquals(failed[0]!.errno, 34); // ERANGE: the attribute policy bounds the state
      assert(
        /^tcp 10\.8\.0\.11:50000 > 203\.0\.113\.1:443: .+ \(errno 34\)$/.test(
          failureText(failed[0]!),
        ),
        failureText(failed[0]!),
      );
      // The pipelined path (worker-thread sendto) reports the same, and updates the existing two.
      const records = new DataView(new ArrayBuffer(3 * RECORD_LEN));
      [make(1), bad, make(2)].forEach((e, i) => writeRecord(records, i * RECORD_LEN, e));
      const piped = await ct.injectRecordsPipelined(records, 0, 3);
      assertEquals(piped.injected, 2);
      assertEquals(piped.failed.map((f) => [f.index, f.errno]), [[1, 34]]);

      ct.inject(Array.from({ length: 3_000 }, (_, i) => make(10 + i)));
      const seen = events.read(100_000);
      assert(events.overruns >= 1, `no overrun with a 4 KiB queue after ${seen.length} events`);
      assert(seen.length < 3_000);
    } finally {
      events.close();
      ct.close();
    }
  },
);

rootTest(
  "conntrack events: the NAT-address filter lets through only events of entries translated to the given addresses",
  async () => {
    await using topo = await natPair();
    const ct = Conntrack.open({ netns: topo.ns("natb") });
    const events = ConntrackEvents.open({ netns: topo.ns("natb") });
    try {
      const other = parseIpv4("198.18.0.101");
      const make = (i: number, addr: number) => snatEntry(i, { addr, udp: true, dport: 53 });
      events.filterNatSrc(new Set([FLOATING_U32]));
      const mine = [1, 2, 3].map((i) => make(i, FLOATING_U32));
      const theirs = Array.from({ length: 500 }, (_, i) => make(10 + i, other));
      assertEquals(ct.inject([...theirs, ...mine]).failed.length, 0);
      const seen = events.read(10_000);
      assertEquals(seen.map((e) => e.entry.orig.src).sort(), mine.map((e) => e.orig.src).sort());
      events.filterNatSrc(null);
      ct.remove(theirs.slice(0, 2));
      assertEquals(events.read().filter((e) => e.type === "destroy").length, 2);
    } finally {
      events.close();
      ct.close();
    }
  },
);
