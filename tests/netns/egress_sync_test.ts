import { deepStrictEqual as assertEquals, ok as assert, rejects } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import {
  Conntrack,
  ConntrackEvents,
  type CtEntry,
  type CtEvent,
  readRecord,
  RECORD_LEN,
} from "../../node/conntrack/mod.ts";
import { SyncReceiver, SyncSender } from "../../node/egress/sync.ts";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { CLIENT, FLOATING_U32, heldFlows, natPair, routeThroughB, snatEntry } from "./_nat_pair.ts";

function flow(ct: Conntrack, proto: number, dport: number): CtEntry | undefined {
  return ct.dump({ natSrcAddrs: new Set([FLOATING_U32]) }).find((e) =>
    e.orig.proto === proto && e.orig.dport === dport && e.orig.src === parseIpv4(CLIENT)
  );
}

/** Polls `fn` every 20 ms until it returns a value; 15 s, far above what it takes when idle. */
async function waitFor<T>(what: string, fn: () => T | undefined, timeoutMs = 15_000): Promise<T> {
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
      const { client } = await heldFlows(topo, 6000);

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
      // (this one injects on a worker thread: both injection paths serve in this test)
      receiver = new SyncReceiver({
        ct: ctB,
        listen: { host: "127.0.0.1", port: 0 },
        registry,
        pipelined: true,
      });
      await receiver.start();
      const again = await waitFor("the resync to restore B", () => flow(ctB, 6, 8080));
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

// Without root: stand-ins for the kernel table and its events, the real TCP stream between them.

const entry = (i: number, addr = FLOATING_U32) => snatEntry(i, { addr });

const tupleKey = (e: CtEntry) => `${e.orig.src}:${e.orig.sport}`;

/** The owner's table and events. */
class OwnerStandIn {
  table = new Map<string, CtEntry>();
  queue: CtEvent[] = [];
  overruns = 0;
  *dumpChunks(filter: { natSrcAddrs?: ReadonlySet<number> } = {}, size = 4096) {
    const all = [...this.table.values()].filter((e) =>
      !filter.natSrcAddrs || (e.natSrc && filter.natSrcAddrs.has(e.natSrc.addr))
    );
    for (let i = 0; i < all.length; i += size) yield all.slice(i, i + size);
  }
  read(max = 4096): CtEvent[] {
    return this.queue.splice(0, max);
  }
  add(e: CtEntry): void {
    this.table.set(tupleKey(e), e);
    this.queue.push({ type: "new", entry: e });
  }
  destroy(e: CtEntry): void {
    this.table.delete(tupleKey(e));
    this.queue.push({ type: "destroy", entry: e });
  }
}

/** The standby's table. */
class StandbyStandIn {
  table = new Map<string, CtEntry>();
  injectRecords(view: DataView, offset: number, count: number) {
    for (let i = 0; i < count; i++) {
      const e = readRecord(view, offset + i * RECORD_LEN);
      this.table.set(tupleKey(e), e);
    }
    return { injected: count, failed: [] };
  }
  remove(entries: readonly CtEntry[]): number {
    return entries.filter((e) => this.table.delete(tupleKey(e))).length;
  }
}

Deno.test("egress sync (stand-ins): events stream, only owned addresses, a lost destroy is cleaned up by the next resync, overruns resync, flush waits for the ACK", async () => {
  using _logs = captureLogs();
  const registry = new Registry();
  const owner = new OwnerStandIn(), standby = new StandbyStandIn();
  const other = parseIpv4("198.18.0.101");
  for (let i = 1; i <= 3; i++) owner.add(entry(i));
  owner.add(entry(9, other));
  owner.queue = [];
  const receiver = new SyncReceiver({
    ct: standby,
    listen: { host: "127.0.0.1", port: 0 },
    registry,
  });
  await receiver.start();
  const sender = new SyncSender({
    ct: owner,
    events: owner,
    self: "owner",
    peers: () => [{ name: "standby", host: "127.0.0.1", port: receiver.port }],
    resyncMs: 60_000,
    registry,
  });
  const keys = () => [...standby.table.keys()].sort();
  const resyncs = registry.counter("holdfast_egress_sync_resyncs_total", "");
  try {
    sender.setOwned(new Set([FLOATING_U32]));
    sender.start();
    await waitFor("the connect-time resync", () => resyncs.get() >= 1 ? true : undefined);
    await sender.flush();
    assertEquals(keys(), [1, 2, 3].map((i) => tupleKey(entry(i))).sort());

    owner.add(entry(4));
    owner.add(entry(10, other)); // not owned: not sent
    owner.destroy(entry(1));
    await sender.flush();
    assertEquals(keys(), [2, 3, 4].map((i) => tupleKey(entry(i))).sort());

    owner.table.delete(tupleKey(entry(2))); // its destroy event was lost
    await sender.resync();
    await sender.flush();
    assertEquals(keys(), [3, 4].map((i) => tupleKey(entry(i))).sort());

    const before = resyncs.get();
    owner.overruns++;
    await waitFor("a resync after the overrun", () => resyncs.get() > before ? true : undefined);
    assertEquals(registry.counter("holdfast_conntrack_overruns_total", "").get(), 1);
  } finally {
    await sender.stop();
    await receiver.stop();
  }
});

Deno.test("egress sync (stand-ins): a peer that stops reading overflows its bounded buffer: counted as dropped, reconnected", async () => {
  using logs = captureLogs();
  const registry = new Registry();
  const owner = new OwnerStandIn();
  for (let i = 0; i < 60_000; i++) owner.table.set(String(i), entry(i));
  const stuck = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of stuck) held.push(c); // accepted, never read
  })();
  const sender = new SyncSender({
    ct: owner,
    events: owner,
    peers: () => [{ name: "stuck", host: "127.0.0.1", port: (stuck.addr as Deno.NetAddr).port }],
    resyncMs: 200,
    maxQueueBytes: 256 * 1024,
    registry,
  });
  try {
    sender.setOwned(new Set([FLOATING_U32]));
    sender.start();
    const dropped = registry.counter("holdfast_egress_sync_dropped_total", "");
    await waitFor("entries dropped", () => dropped.get() > 0 ? true : undefined, 10_000);
    await waitFor("a reconnect", () => held.length >= 2 ? true : undefined, 10_000);
    assert(
      logs.records.some((r) => r.msg === "sync peer send buffer full: reconnecting to resync"),
    );
  } finally {
    await sender.stop();
    stuck.close();
    for (const c of held) c.close();
    await accepting.catch(() => {});
  }
});

Deno.test("egress sync (stand-ins): flush waits for a peer still connecting and its resync; a peer that never comes is named", async () => {
  using _logs = captureLogs();
  const owner = new OwnerStandIn(), standby = new StandbyStandIn();
  for (let i = 1; i <= 5; i++) owner.table.set(String(i), entry(i));
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close(); // nothing listens there until the receiver below starts
  const sender = new SyncSender({
    ct: owner,
    events: owner,
    peers: () => [{ name: "late", host: "127.0.0.1", port }],
    flushTimeoutMs: 30_000, // far above the connect backoff and resync of an idle machine
    registry: new Registry(),
  });
  const receiver = new SyncReceiver({
    ct: standby,
    listen: { host: "127.0.0.1", port },
    registry: new Registry(),
  });
  try {
    sender.setOwned(new Set([FLOATING_U32]));
    sender.start();
    const flushed = sender.flush();
    await new Promise((r) => setTimeout(r, 300));
    await receiver.start();
    await flushed;
    assertEquals(standby.table.size, 5);
  } finally {
    await sender.stop();
    await receiver.stop();
  }

  const lonely = new SyncSender({
    ct: owner,
    events: owner,
    peers: () => [{ name: "never", host: "127.0.0.1", port }],
    flushTimeoutMs: 300,
    registry: new Registry(),
  });
  try {
    await rejects(lonely.flush(), /"never" not connected/);
  } finally {
    await lonely.stop();
  }
});

/**
 * Called at each slice of work: counts calls at which a timer that was due since the previous
 * call had not run yet (the event loop had no turn in between: a lease renew would be late).
 */
class TurnProbe {
  calls = 0;
  starved = 0;
  largest = 0;
  #fired = true;

  check(entries: number): void {
    this.calls++;
    this.largest = Math.max(this.largest, entries);
    if (!this.#fired) this.starved++;
    this.#fired = false;
    const at = performance.now();
    setTimeout(() => (this.#fired = true), 0);
    // Make that timer due (setTimeout clamps 0 to at most 4 ms) before the caller goes on.
    while (performance.now() - at < 5) { /* spin */ }
  }
}

Deno.test("egress sync (stand-ins): a resync of 20,000 entries lets due timers run every 1,024 entries at both ends (issue 29)", async () => {
  using _logs = captureLogs();
  const registry = new Registry();
  const dumpProbe = new TurnProbe(), injectProbe = new TurnProbe();
  const owner = new (class extends OwnerStandIn {
    override *dumpChunks(filter: { natSrcAddrs?: ReadonlySet<number> } = {}, size = 4096) {
      for (const chunk of super.dumpChunks(filter, size)) {
        dumpProbe.check(chunk.length);
        yield chunk;
      }
    }
  })();
  const standby = new (class extends StandbyStandIn {
    override injectRecords(view: DataView, offset: number, count: number) {
      injectProbe.check(count);
      return super.injectRecords(view, offset, count);
    }
  })();
  const n = 20_000;
  for (let i = 1; i <= n; i++) owner.add(entry(i));
  owner.queue = [];
  const receiver = new SyncReceiver({
    ct: standby,
    listen: { host: "127.0.0.1", port: 0 },
    registry,
  });
  await receiver.start();
  const sender = new SyncSender({
    ct: owner,
    events: owner,
    self: "owner",
    peers: () => [{ name: "standby", host: "127.0.0.1", port: receiver.port }],
    resyncMs: 60_000,
    flushTimeoutMs: 60_000,
    registry,
  });
  try {
    sender.setOwned(new Set([FLOATING_U32]));
    sender.start();
    await waitFor(
      "the connect-time resync",
      () => standby.table.size === n ? true : undefined,
      30_000,
    );
    await sender.flush();
    assertEquals(standby.table.size, n);
    assert(dumpProbe.calls >= n / 1024, `dump slices: ${dumpProbe.calls}`);
    assertEquals([dumpProbe.largest <= 1024, dumpProbe.starved], [true, 0], `${dumpProbe.largest}`);
    assert(injectProbe.calls >= n / 1024, `inject slices: ${injectProbe.calls}`);
    assertEquals(
      [injectProbe.largest <= 1024, injectProbe.starved],
      [true, 0],
      `${injectProbe.largest}`,
    );
  } finally {
    await sender.stop();
    await receiver.stop();
  }
});
