import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { Conntrack, ConntrackEvents, type CtEntry } from "../../node/conntrack/mod.ts";
import { SyncReceiver, SyncSender } from "../../node/egress/sync.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { CLIENT, FLOATING_U32, natPair, routeThroughB, SERVER, udpPing } from "./_nat_pair.ts";

const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("../../lab/clients/hold_client.ts", import.meta.url).pathname;

function flow(ct: Conntrack, proto: number, dport: number): CtEntry | undefined {
  return ct.dump({ natSrcAddrs: new Set([FLOATING_U32]) }).find((e) =>
    e.orig.proto === proto && e.orig.dport === dport && e.orig.src === parseIpv4(CLIENT)
  );
}

async function waitFor<T>(what: string, fn: () => T | undefined, timeoutMs = 3_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

rootTest(
  "egress sync: the owner's new flows appear in the standby, a destroyed one goes, a restarted standby is resynced, and the TCP connection continues through it",
  async () => {
    using logs = captureLogs();
    await using topo = await natPair();
    const registry = new Registry();
    const ctA = Conntrack.open({ netns: topo.ns("nata") });
    const events = ConntrackEvents.open({ netns: topo.ns("nata") });
    const ctB = Conntrack.open({ netns: topo.ns("natb") });
    let receiver = new SyncReceiver({ ct: ctB, listen: { host: "127.0.0.1", port: 0 }, registry });
    await receiver.start();
    const sender = new SyncSender({
      ct: ctA,
      events,
      self: "nata",
      peers: () => [{ name: "natb", host: "127.0.0.1", port: receiver.port }],
      resyncMs: 60_000, // only the event stream and the reconnect resync in this test
      registry,
    });
    try {
      sender.setOwned(new Set([FLOATING_U32]));
      sender.start();
      const server = topo.spawnDeno("srv", ECHO, {
        args: ["server", SERVER, "8080"],
        permissions: ["--allow-net"],
      });
      await server.waitForLine((l) => l.includes("listening"));
      const client = topo.spawnDeno("cli", HOLD, {
        args: [SERVER, "8080", "1", "6000", "100"],
        permissions: ["--allow-net"],
      });
      await client.waitForLine((l) => l.includes('"connected"') && l.includes('"open":1'));
      await udpPing(topo, 5353);

      // Streamed from A's events: both flows land in B with A's NAT mapping.
      const tcpA = flow(ctA, 6, 8080)!;
      const tcpB = await waitFor("the TCP flow in B", () => flow(ctB, 6, 8080));
      assertEquals(tcpB.natSrc, tcpA.natSrc);
      assertEquals(tcpB.tcpState, 3);
      await waitFor("the UDP flow in B", () => flow(ctB, 17, 5353));
      await sender.flush();

      // Destroyed at the owner → removed at the standby.
      await topo.exec("nata", ["conntrack", "-D", "-p", "udp", "--orig-port-dst", "5353"]);
      await waitFor("the UDP flow to leave B", () => flow(ctB, 17, 5353) ? undefined : true);

      // B restarts with an empty table: the reconnect's resync restores the TCP flow.
      await receiver.stop();
      await topo.exec("natb", ["conntrack", "-F"]);
      assertEquals(flow(ctB, 6, 8080), undefined);
      receiver = new SyncReceiver({ ct: ctB, listen: { host: "127.0.0.1", port: 0 }, registry });
      await receiver.start();
      const again = await waitFor("the resync to restore B", () => flow(ctB, 6, 8080), 5_000);
      assertEquals(again.natSrc, tcpA.natSrc);

      // And the connection carries on through B.
      await routeThroughB(topo);
      const summary = JSON.parse(await client.waitForLine((l) => l.includes("summary")));
      assertEquals(summary.survived, 1, `connection died through B: ${JSON.stringify(summary)}`);

      const sent = registry.counter("holdfast_egress_sync_entries_total", "", {
        labelNames: ["direction", "op"],
      });
      assert(sent.get({ direction: "sent", op: "upsert" }) >= 3);
      assert(sent.get({ direction: "sent", op: "remove" }) >= 1);
      assert(registry.counter("holdfast_egress_sync_resyncs_total", "").get() >= 2);
      const msgs = logs.records.map((r) => r.msg);
      assert(msgs.filter((m) => m === "sync peer connected").length >= 2, JSON.stringify(msgs));
      assert(msgs.includes("sync sender connected"), JSON.stringify(msgs));
    } finally {
      await sender.stop();
      await receiver.stop();
      events.close();
      ctA.close();
      ctB.close();
    }
  },
);

rootTest(
  "egress sync: a malformed frame closes that connection with a log line, the receiver lives on",
  async () => {
    using logs = captureLogs();
    await using topo = await natPair();
    const ct = Conntrack.open({ netns: topo.ns("natb") });
    const receiver = new SyncReceiver({
      ct,
      listen: { host: "127.0.0.1", port: 0 },
      registry: new Registry(),
    });
    await receiver.start();
    try {
      for (
        const garbage of [[0, 0, 0, 2, 99, 0], [0xff, 0xff, 0xff, 0xff, 1], [
          0,
          0,
          0,
          5,
          2,
          0,
          0,
          0,
          9,
        ]]
      ) {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: receiver.port });
        await conn.write(new Uint8Array(garbage));
        const closed = await conn.read(new Uint8Array(16)).catch(() => null);
        assertEquals(closed, null, `connection stayed open after ${garbage}`);
        conn.close();
      }
      const warned = logs.records.filter((r) =>
        r.msg === "sync connection closed on malformed frame"
      );
      assertEquals(warned.length, 3, JSON.stringify(logs.records));
      assert(String(warned[0]!.peer).startsWith("127.0.0.1:"));
    } finally {
      await receiver.stop();
      ct.close();
    }
  },
);
