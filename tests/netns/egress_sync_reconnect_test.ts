/**
 * The conntrack sync receiver when a sender reconnects while its older connection still lives
 * (its TCP outlived a partition; what it had queued arrives after the heal): the older connection
 * is closed and its late frames are ignored, and a resync's END never drops entries a later resync
 * refreshed. Found in a loaded CI rehearsal: two connections from one NAT pod interleaved two
 * resyncs, the older END removed 1,080 of 2,081 entries a moment before the receiver took the
 * address over, and half the connections died. A stand-in conntrack (what is injected and removed)
 * behind real TCP on loopback.
 */
import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import type { CtEntry } from "../../node/conntrack/mod.ts";
import { SyncReceiver } from "../../node/egress/_sync_receiver.ts";
import {
  encodeBegin,
  encodeEnd,
  encodeEntries,
  encodeHello,
  FRAME,
} from "../../node/egress/_sync_wire.ts";
import { inverse, RECORD_LEN } from "../../node/conntrack/mod.ts";

const NAT = 0xc6120064; // 198.18.0.100

function flow(i: number): CtEntry {
  const orig = {
    src: 0x0a08000b,
    dst: 0xc6120001,
    proto: 6 as const,
    sport: 40_000 + i,
    dport: 80,
  };
  return {
    orig,
    reply: { ...inverse(orig), dst: NAT, dport: 10_000 + i },
    status: 0x19e,
    timeoutS: 120,
    tcpState: 3,
    natSrc: { addr: NAT, port: 10_000 + i },
  };
}

/** A stand-in conntrack: the source ports of entries injected and removed. */
function standIn() {
  const removed: number[] = [];
  let injected = 0;
  return {
    removed,
    get injected() {
      return injected;
    },
    ct: {
      injectRecords(view: DataView, offset: number, count: number) {
        for (let i = 0; i < count; i++) view.getUint32(offset + i * RECORD_LEN);
        injected += count;
        return { injected: count, failed: [] };
      },
      remove(entries: readonly CtEntry[]) {
        for (const e of entries) removed.push(e.orig.sport);
        return entries.length;
      },
    },
  };
}

async function connect(port: number, name: string): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(encodeHello(name));
  return conn;
}

async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (let i = 0; i < 2_000 && !cond(); i++) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("egress sync: a sender's older connection is closed when it reconnects; its late END drops nothing", async () => {
  using logs = captureLogs();
  const ct = standIn();
  const receiver = new SyncReceiver({ ct: ct.ct, listen: { host: "127.0.0.1", port: 0 } });
  await receiver.start();
  const all = Array.from({ length: 20 }, (_, i) => flow(i));
  let older: Deno.TcpConn | undefined, newer: Deno.TcpConn | undefined;
  try {
    // The older connection starts a resync and sends half of the entries.
    older = await connect(receiver.port, "nat1");
    await older.write(encodeBegin(1));
    await older.write(encodeEntries(FRAME.UPSERT, all.slice(0, 10)));
    await until("the first half applied", () => ct.injected === 10);
    // The sender reconnects: a full resync on the newer connection.
    newer = await connect(receiver.port, "nat1");
    await until(
      "the older connection closed",
      () => logs.records.some((r) => r.msg === "sync sender reconnected: older connection closed"),
    );
    await newer.write(encodeBegin(2));
    await newer.write(encodeEntries(FRAME.UPSERT, all));
    await newer.write(encodeEnd(2, [NAT]));
    await until("the resync applied", () => ct.injected === 30);
    // The older connection's late END (queued before the partition healed) changes nothing.
    await older.write(encodeEnd(1, [NAT])).catch(() => 0);
    await new Promise((r) => setTimeout(r, 100));
    deepStrictEqual(ct.removed, [], "entries removed as stale");
    // A later resync on the live connection still drops what the owner no longer has.
    await newer.write(encodeBegin(3));
    await newer.write(encodeEntries(FRAME.UPSERT, all.slice(5)));
    await newer.write(encodeEnd(3, [NAT]));
    await until("stale entries dropped", () => ct.removed.length === 5);
    deepStrictEqual(ct.removed.sort((a, b) => a - b), [40_000, 40_001, 40_002, 40_003, 40_004]);
  } finally {
    for (const c of [older, newer]) {
      try {
        c?.close();
      } catch { /* closed */ }
    }
    await receiver.stop();
  }
});
