/**
 * SYN-flood-proof flow sharing (docs/contracts.md "When a flow is shared") through
 * BPF_PROG_TEST_RUN: a SYN's flow waits unshared in hf_flows_syn (no hf_flows entry, no new-flow
 * event, so no Redis write); retransmitted SYNs go to the same backend; the client's ACK moves the
 * flow to hf_flows with exactly one event; a spoofed SYN flood leaves hf_flows and its established
 * flows alone and emits nothing; over the node's event budget a confirmed flow is still forwarded,
 * counted as not shared, and shared by a later packet once the budget refills; with the ring
 * buffer full (no reader) confirmed flows still enter hf_flows, flagged FLOW_F_UNSHARED, and a
 * later packet sends the event once the ring has room and the budget allows.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { hex, tcpFrame, udpFrame } from "../../lab/packets.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import {
  BpfFlowTable,
  type Datapath,
  FLOW_F_UNSHARED,
  monotonicNs,
  type Reason,
  testRun,
} from "../../node/bpf/mod.ts";
import { c, errno, errnoText } from "../../node/bpf/_ffi.ts";
import {
  BACKENDS,
  CLIENT,
  drainEvents,
  ENCAP_PORT,
  expectEncap,
  type Flow,
  flowHash,
  LB_SRC,
  openFixtureLb,
  runCounted as run,
  SEED,
  TABLE7,
  VIP,
  XDP,
} from "./hostile_setup.ts";

const SYN = 0x02, ACK = 0x10, RST = 0x04, PSH_ACK = 0x18;

const flow = (sport: number, saddr = CLIENT): Flow => ({
  saddr,
  daddr: VIP,
  sport,
  dport: 80,
  proto: 6,
});
const frame = (f: Flow, flags: number) =>
  tcpFrame(f.saddr, f.daddr, { sport: f.sport, dport: f.dport, flags });

/** The unconfirmed-flow map of `dp`. */
const unconfirmed = (dp: Datapath) => new BpfFlowTable(dp.object.map("hf_flows_syn"));

/** Pins the calling thread to CPU `cpu` (null: every CPU again): the event budget is per CPU,
 * and BPF_PROG_TEST_RUN runs on the caller's CPU. */
function pinToCpu(cpu: number | null): void {
  const mask = new Uint8Array(128);
  if (cpu === null) mask.fill(0xff);
  else mask[cpu >> 3] = 1 << (cpu & 7);
  if (c().sched_setaffinity(0, BigInt(mask.length), mask) !== 0) {
    throw new Error(`Cannot pin the test thread to CPU ${cpu}: ${errnoText(errno())}`);
  }
}

/** Sleeps until just after the datapath clock (CLOCK_MONOTONIC) starts a new second. */
async function nextSecond(): Promise<void> {
  const ms = Number(1_000_000_000n - monotonicNs() % 1_000_000_000n) / 1e6;
  await new Promise((r) => setTimeout(r, ms + 10));
}

rootTest("SYN-flood-proof flow sharing", async (t) => {
  using dp = await openFixtureLb({ maxFlows: 256 });
  const flows = dp.flowTable();
  const pending = unconfirmed(dp);
  const a = flow(40000);
  const { key } = flowHash(a);
  const backend = BACKENDS[TABLE7[flowHash(a).hash % TABLE7.length]!]!;

  await t.step("SYN: forwarded; no hf_flows entry, no event; held in hf_flows_syn", async () => {
    const r = run(dp, frame(a, SYN));
    strictEqual(r.retval, XDP.TX);
    strictEqual(hex(r.data), hex(expectEncap(frame(a, SYN), a)));
    deepStrictEqual(r.moved, ["tx_new+1"]);
    strictEqual(flows.get(key), undefined, "no hf_flows entry");
    strictEqual(pending.get(key)?.backend, parseIpv4(backend), "held with its backend");
    deepStrictEqual(await drainEvents(dp), [], "no new-flow event");
  });

  await t.step(
    "SYN retransmit: the held backend, even after the Maglev table changed",
    async () => {
      const otherId = Number(Object.entries(BACKENDS).find(([, b]) => b !== backend)![0]);
      await dp.lbMaps().updateMaglev(10, new Uint32Array(7).fill(otherId));
      try {
        const r = run(dp, frame(a, SYN));
        strictEqual(hex(r.data), hex(expectEncap(frame(a, SYN), a, { backend })));
        deepStrictEqual(r.moved, ["tx_unconfirmed+1"]);
        strictEqual(flows.get(key), undefined, "still not shared");
      } finally {
        await dp.lbMaps().updateMaglev(10, TABLE7);
      }
    },
  );

  await t.step("a held flow whose backend left the service is picked again", async () => {
    const c = flow(40002);
    const held = BACKENDS[TABLE7[flowHash(c).hash % TABLE7.length]!]!;
    const heldId = Number(Object.entries(BACKENDS).find(([, b]) => b === held)![0]);
    const otherId = Number(Object.entries(BACKENDS).find(([, b]) => b !== held)![0]);
    run(dp, frame(c, SYN));
    const lb = dp.lbMaps();
    await lb.updateMaglev(10, new Uint32Array(7).fill(otherId));
    await lb.deleteBackend(heldId);
    try {
      const r = run(dp, frame(c, SYN));
      strictEqual(hex(r.data), hex(expectEncap(frame(c, SYN), c, { backend: BACKENDS[otherId] })));
      deepStrictEqual(r.moved, ["tx_new+1"]);
      strictEqual(pending.get(flowHash(c).key)?.backend, parseIpv4(BACKENDS[otherId]!));
    } finally {
      await lb.updateBackend(heldId, { address: held, port: 80 });
      await lb.updateMaglev(10, TABLE7);
    }
  });

  await t.step("a RST (a spoofed victim's answer to the SYN/ACK) does not confirm", () => {
    const r = run(dp, frame(a, RST | ACK));
    strictEqual(r.retval, XDP.TX);
    deepStrictEqual(r.moved, ["tx_unconfirmed+1"]);
    strictEqual(flows.get(key), undefined);
  });

  await t.step("the client's ACK: moved to hf_flows, exactly one event", async () => {
    const r = run(dp, frame(a, ACK));
    strictEqual(hex(r.data), hex(expectEncap(frame(a, ACK), a, { backend })));
    deepStrictEqual(r.moved, ["tx_confirmed+1", "flow_shared+1"]);
    strictEqual(flows.get(key)?.backend, parseIpv4(backend));
    strictEqual(flows.get(key)?.flags, 0, "a local flow");
    strictEqual(pending.get(key), undefined, "no longer unconfirmed");
    const events = await drainEvents(dp);
    deepStrictEqual(events.map((e) => [e.key, e.backend, e.serviceId]), [[
      key,
      parseIpv4(backend),
      10,
    ]]);
    const next = run(dp, frame(a, PSH_ACK));
    deepStrictEqual(next.moved, ["tx_hit+1"], "then a flow map hit");
    deepStrictEqual(await drainEvents(dp), [], "and no second event");
  });

  await t.step("an ACK without a SYN seen here (ECMP moved it): learned and shared", async () => {
    const b = flow(40001);
    const r = run(dp, frame(b, ACK));
    strictEqual(hex(r.data), hex(expectEncap(frame(b, ACK), b)));
    deepStrictEqual(r.moved, ["tx_new+1", "flow_shared+1"]);
    strictEqual(flows.get(flowHash(b).key) !== undefined, true);
    strictEqual((await drainEvents(dp)).length, 1);
  });

  await t.step("UDP is shared on its first packet (no handshake to wait for)", async () => {
    const u = { ...flow(5353), dport: 53, proto: 17 };
    const input = udpFrame(CLIENT, VIP, 5353, 53, new Uint8Array(8));
    const r = run(dp, input);
    strictEqual(hex(r.data), hex(expectEncap(input, u)));
    deepStrictEqual(r.moved, ["tx_new+1", "flow_shared+1"]);
    strictEqual(flows.get(flowHash(u).key) !== undefined, true);
    strictEqual((await drainEvents(dp)).length, 1);
  });

  await t.step(
    "10,000 spoofed SYNs (40× hf_flows' size): hf_flows untouched, 0 events",
    async () => {
      // 100 established connections (SYN, then ACK) beside the 3 flows shared above
      for (let sport = 41000; sport < 41100; sport++) {
        run(dp, frame(flow(sport), SYN));
        run(dp, frame(flow(sport), ACK));
      }
      await drainEvents(dp);
      const established = [...flows.entries()].map((e) => JSON.stringify(e.key)).sort();
      strictEqual(established.length, 103);
      const before = dp.reasons();
      for (let i = 0; i < 10_000; i++) {
        const src = `10.200.${(i >> 8) & 255}.${i & 255}`;
        const r = testRun(dp.program, frame(flow(1024 + (i * 7919) % 60000, src), SYN));
        if (r.retval !== XDP.TX) throw new Error(`spoofed SYN ${i}: verdict ${r.retval}`);
      }
      const after = dp.reasons();
      const delta = (n: Reason) => after[n] - before[n];
      deepStrictEqual(
        [delta("tx_new"), delta("flow_shared"), delta("event_lost")],
        [10_000n, 0n, 0n],
      );
      deepStrictEqual(
        [...flows.entries()].map((e) => JSON.stringify(e.key)).sort(),
        established,
        "every established flow is still in hf_flows, and nothing else",
      );
      deepStrictEqual(await drainEvents(dp), [], "no new-flow event");
      strictEqual([...pending.entries()].length >= 10_000, true, "the SYNs wait unconfirmed");
      const ack = run(dp, frame(flow(41000), PSH_ACK));
      deepStrictEqual(ack.moved, ["tx_hit+1"], "an established flow still hits");
    },
  );
});

rootTest("over the event budget: forwarded, counted as not shared, shared later", async () => {
  pinToCpu(0);
  try {
    await overBudget();
  } finally {
    pinToCpu(null);
  }
});

async function overBudget(): Promise<void> {
  using dp = await openFixtureLb();
  dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED, eventBudget: 2 });
  const flows = dp.flowTable();
  const pending = unconfirmed(dp);
  const acks = [50000, 50001, 50002, 50003].map((sport) => flow(sport));
  // Each flow's first packet is an ACK: confirmed at once, shared while the budget lasts. Retried
  // when the four straddled a second boundary (the budget is per second).
  let moved: string[][] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    for (const f of acks) flows.delete(flowHash(f).key);
    for (const f of acks) pending.delete(flowHash(f).key);
    await drainEvents(dp);
    await nextSecond();
    moved = acks.map((f) => {
      const r = run(dp, frame(f, ACK));
      strictEqual(r.retval, XDP.TX, "forwarded whatever the budget");
      strictEqual(hex(r.data), hex(expectEncap(frame(f, ACK), f)));
      return r.moved;
    });
    if ((await drainEvents(dp)).length === 2) break;
  }
  deepStrictEqual(moved, [
    ["tx_new+1", "flow_shared+1"],
    ["tx_new+1", "flow_shared+1"],
    ["tx_new+1", "flow_unshared+1"],
    ["tx_new+1", "flow_unshared+1"],
  ]);
  const [, , c, d] = acks.map((f) => flowHash(f).key);
  strictEqual(flows.get(c!), undefined, "not shared: no hf_flows entry");
  strictEqual(pending.get(c!) !== undefined && pending.get(d!) !== undefined, true, "held");
  const again = run(dp, frame(acks[2]!, PSH_ACK));
  deepStrictEqual(again.moved, ["tx_unconfirmed+1", "flow_unshared+1"], "still over budget");
  await nextSecond();
  const later = run(dp, frame(acks[2]!, PSH_ACK));
  deepStrictEqual(later.moved, ["tx_confirmed+1", "flow_shared+1"], "shared once refilled");
  strictEqual(flows.get(c!)?.flags, 0, "in hf_flows, with its event");
  strictEqual(pending.get(c!), undefined, "no longer held");
  strictEqual((await drainEvents(dp)).length, 1);
}

rootTest(
  "ring buffer full (no reader): flows still enter hf_flows; a later packet shares",
  async (t) => {
    pinToCpu(0);
    try {
      await ringFull(t);
    } finally {
      pinToCpu(null);
    }
  },
);

/** The ring made 1 MiB here (8 by default), of 40-byte records (32 + an 8-byte header): 26,214. */
const RING_BYTES = 1 << 20;
const RING_RECORDS = Math.floor(RING_BYTES / 40);

async function ringFull(t: Deno.TestContext): Promise<void> {
  using dp = await openFixtureLb({ maxFlows: 32768, ringBytes: RING_BYTES });
  dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED, eventBudget: 1_000_000 });
  const flows = dp.flowTable();
  const pending = unconfirmed(dp);
  const n = RING_RECORDS + 500;
  const src = (i: number) => `10.201.${i >> 8}.${i & 255}`;
  const fl = (i: number) => flow(40000, src(i));
  const unsharedKeys = () =>
    [...flows.entries()].filter((e) => (e.value.flags & FLOW_F_UNSHARED) !== 0).map((e) => e.key);

  await t.step(`${n} confirmed flows, no reader: every one in hf_flows, the last flagged`, () => {
    const before = dp.reasons();
    for (let i = 0; i < n; i++) {
      const r = testRun(dp.program, frame(fl(i), ACK));
      if (r.retval !== XDP.TX) throw new Error(`ACK ${i}: verdict ${r.retval}`);
    }
    const after = dp.reasons();
    const delta = (name: Reason) => after[name] - before[name];
    deepStrictEqual(
      [delta("tx_new"), delta("flow_shared"), delta("event_lost"), delta("flow_unshared")],
      [BigInt(n), BigInt(RING_RECORDS), 500n, 0n],
    );
    strictEqual([...flows.entries()].length, n, "hf_flows kept growing");
    strictEqual([...pending.entries()].length, 0, "nothing held in hf_flows_syn");
    deepStrictEqual(
      unsharedKeys().map((k) => JSON.stringify(k)).sort(),
      Array.from({ length: 500 }, (_, i) => JSON.stringify(flowHash(fl(RING_RECORDS + i)).key))
        .sort(),
      "the flows past the ring's room carry FLOW_F_UNSHARED",
    );
  });

  const last = fl(n - 1);
  const lastKey = flowHash(last).key;
  await t.step("a packet of a flagged flow while the ring is still full: a hit, no event", () => {
    const r = run(dp, frame(last, PSH_ACK));
    strictEqual(hex(r.data), hex(expectEncap(frame(last, PSH_ACK), last)));
    deepStrictEqual(r.moved, ["tx_hit+1"]);
    strictEqual(flows.get(lastKey)?.flags, FLOW_F_UNSHARED, "still flagged");
  });

  await t.step(
    "once read, the next packet sends exactly one event and clears the flag",
    async () => {
      strictEqual((await drainEvents(dp)).length, RING_RECORDS, "the ring held what it could");
      const r = run(dp, frame(last, PSH_ACK));
      strictEqual(hex(r.data), hex(expectEncap(frame(last, PSH_ACK), last)));
      deepStrictEqual(r.moved, ["tx_hit+1", "flow_shared+1"]);
      strictEqual(flows.get(lastKey)?.flags, 0, "flag cleared");
      const backend = BACKENDS[TABLE7[flowHash(last).hash % TABLE7.length]!]!;
      deepStrictEqual((await drainEvents(dp)).map((e) => [e.key, e.backend, e.serviceId]), [[
        lastKey,
        parseIpv4(backend),
        10,
      ]]);
      deepStrictEqual(run(dp, frame(last, PSH_ACK)).moved, ["tx_hit+1"], "then a plain hit");
      deepStrictEqual(await drainEvents(dp), [], "and no second event");
    },
  );

  await t.step(
    "budget spent: a flagged flow's packet waits; after the refill it shares",
    async () => {
      const flagged = fl(n - 2);
      const key = flowHash(flagged).key;
      dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED, eventBudget: 1 });
      // Spends this second's one event on a new flow, then tries the flagged one. Retried when the
      // two straddled a second boundary.
      let moved: string[][] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        await nextSecond();
        moved = [
          run(dp, frame(flow(40100 + attempt), ACK)).moved,
          run(dp, frame(flagged, ACK)).moved,
        ];
        if (moved[1]!.length === 1) break;
      }
      deepStrictEqual(moved, [["tx_new+1", "flow_shared+1"], ["tx_hit+1"]]);
      strictEqual(flows.get(key)?.flags, FLOW_F_UNSHARED, "still flagged");
      strictEqual((await drainEvents(dp)).length, 1, "only the new flow's event");
      await nextSecond();
      deepStrictEqual(run(dp, frame(flagged, ACK)).moved, ["tx_hit+1", "flow_shared+1"]);
      strictEqual(flows.get(key)?.flags, 0);
      strictEqual((await drainEvents(dp)).length, 1);
    },
  );
}
