/**
 * Client steering on a routed pod network (issue 23 item 2, docs/egress.md "Steering client
 * pods"), lab/egress_routed.ts: a client pod on node cn1, two NAT pods on nodes nn1 and nn2, the
 * nodes reach each other only through a router that has no route to the destinations. The node
 * agent of cn1 (`main.ts node --egress-steer`) encapsulates the client pod's packets to the NAT
 * pod that owns the floating address; when the owner dies (links down + SIGKILL) the standby
 * takes over and the node agent repoints at once from the owner-changes stream: 20 long-lived
 * TCP connections and a UDP stream keep their translated source address and port.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { createRoutedEgressLab, FLOATING, natIp, NATS } from "../../lab/egress_routed.ts";
import { natFlowsIn } from "../../lab/egress_checks.ts";

/** 1 MiB to the server's echo and back on one connection, bounded by 30 s; prints a JSON line. */
const BULK = `
const c = await Deno.connect({ hostname: "198.18.0.1", port: 8080 });
const size = 1 << 20, data = new Uint8Array(size).fill(7), buf = new Uint8Array(65536);
const timer = setTimeout(() => { console.log(JSON.stringify({ ok: false, why: "timeout" })); Deno.exit(1); }, 30000);
const writing = (async () => { for (let o = 0; o < size;) o += await c.write(data.subarray(o, o + 65536)); })();
let got = 0;
while (got < size) { const n = await c.read(buf); if (n === null) break; got += n; }
await writing;
clearTimeout(timer);
c.close();
console.log(JSON.stringify({ ok: got === size, got }));
`;

function json(line: string): Record<string, unknown> {
  try {
    return JSON.parse(line);
  } catch {
    return {};
  }
}

rootTest(
  "egress steering: a routed pod network — the node agent steers a client pod to the owner and repoints when it dies; TCP and UDP keep their source",
  async () => {
    const verbose = Deno.env.get("HF_VERBOSE") === "1";
    await using lab = await createRoutedEgressLab();
    await lab.publish();
    await lab.startServer();
    for (const name of NATS) await lab.startNat(name, verbose);
    const owner = await lab.owner();
    const standby = NATS.find((n) => n !== owner)!;
    const node = await lab.startNode(verbose);
    const steered = await node.waitForLine(
      (l) => l.includes('"msg":"egress client steered"'),
      { timeoutMs: 10_000 },
    );
    ok(json(steered).owner === owner, `steered to ${json(steered).owner}, owner is ${owner}`);
    const epoch0 = Number(json(steered).epoch);

    const holdMs = 10_000, connections = 20;
    const tcp = await lab.startTcp(connections, holdMs);
    const udp = await lab.startUdp(holdMs, 100);
    // The standby holds every established flow with the owner's NAT port (conntrack sync).
    const deadline = Date.now() + 15_000;
    let gap = "";
    for (let i = 0; i < 300 && Date.now() < deadline; i++) {
      const mine = natFlowsIn(lab.topo.ns(owner), FLOATING);
      const theirs = natFlowsIn(lab.topo.ns(standby), FLOATING);
      const missing = [...mine].filter(([f, p]) => theirs.get(f) !== p).length;
      gap = `${owner} has ${mine.size} flows, ${standby} misses ${missing}`;
      if (mine.size >= connections && missing === 0) {
        gap = "";
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    ok(gap === "", `the standby is not ready: ${gap}`);

    const from = node.lineCount;
    await lab.killNat(owner);
    const repointed = await node.waitForLine(
      (l) => l.includes('"msg":"egress steering to owner"') && l.includes(`"pod":"${standby}"`),
      { fromLine: from, timeoutMs: 15_000 },
    );
    const r = json(repointed);
    ok(r.ip === natIp(NATS.indexOf(standby) + 1), `repointed to ${r.ip}`);
    ok(r.address === FLOATING && Number(r.epoch) > epoch0, `${repointed} (epoch ${epoch0})`);

    const t = await clientSummary(tcp, holdMs + 20_000);
    const u = await clientSummary<Record<string, number>>(udp, holdMs + 10_000);
    const server = lab.server!;
    const udpSources = server.udp.lines.map(json).filter((l) => l.msg === "udp source")
      .map((l) => String(l.from));
    const tcpSources = server.tcp.lines.map(json).filter((l) => l.msg === "accepted")
      .map((l) => String(l.peer));
    console.log(JSON.stringify({ owner, standby, repointed: r, tcp: t, udp: u, udpSources }));
    ok(
      t.survived === connections,
      `TCP: ${t.survived} of ${connections} survived: ${JSON.stringify(t)}`,
    );
    ok(Number(u.last_echo_age_ms) < 5_000, `the UDP stream stopped: ${JSON.stringify(u)}`);
    ok(udpSources.length === 1, `the server saw the UDP stream from ${udpSources}`);
    ok(udpSources[0]!.startsWith(`${FLOATING}:`), `UDP from ${udpSources[0]}`);
    ok(
      tcpSources.length === connections && tcpSources.every((s) => s.startsWith(`${FLOATING}:`)),
      `the server accepted ${JSON.stringify(tcpSources)}`,
    );

    // Bulk: 1 MiB each way through the steering (full-size segments: the SYN/ACK's MSS is
    // clamped so the client's segments still fit once encapsulated).
    const bulk = await lab.topo.exec("cp1", [Deno.execPath(), "eval", BULK], { timeoutMs: 60_000 });
    const b = json(bulk.stdout.trim().split("\n").pop() ?? "");
    ok(b.ok === true, `bulk transfer through the steering: ${bulk.stdout} ${bulk.stderr}`);

    // The pod leaves the selection: its entry goes (the controller's next revision).
    await lab.publish([]);
    await node.waitForLine((l) => l.includes('"msg":"egress client no longer steered"'), {
      timeoutMs: 10_000,
    });
    // Stopped, the node agent leaves the steering in place for its successor.
    const left = node.lineCount;
    await node.stop("SIGTERM", 10_000);
    await node.waitForLine((l) => l.includes('"msg":"egress steering left in place"'), {
      fromLine: left,
      timeoutMs: 5_000,
    });
  },
);
