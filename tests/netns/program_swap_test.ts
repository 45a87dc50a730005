/**
 * Programs replaced in place under traffic (docs/operators.md "Upgrade"): UDP frames flow from a
 * generator thread through a router to hf_lb (XDP) on lb1 and on to hf_decap (tc) on be1
 * (lab/swap_rig.ts) while the LB program is replaced five times by newly loaded objects over the
 * same pins, as an upgraded agent does, and the decap program once (tc replace): every frame sent
 * is decapsulated (none lost), each replacement names the program it replaced, the flow map holds
 * the same flows with the same backends, and no frame after the swaps needed a new flow. A second
 * test grows the flow map (a layout change) under traffic: the flows are migrated, none lost.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { SwapRig, type Traffic } from "../../lab/swap_rig.ts";

const FLOWS = 64;

/** Runs `fn` while the generator sends; returns what `fn` returned and the frames sent. */
async function underTraffic<T>(
  rig: SwapRig,
  fn: (t: Traffic) => Promise<T>,
): Promise<{ value: T; sent: number }> {
  const t = rig.traffic();
  try {
    const value = await fn(t);
    return { value, sent: await t.stop() };
  } finally {
    await t.stop().catch(() => {}); // the worker stops whatever happened
  }
}

/** Waits until the generator has sent `n` more batches. */
async function flowing(t: Traffic, n: number): Promise<void> {
  const from = t.batches();
  await until(`${n} batches sent`, () => t.batches() >= from + n, 30_000);
}

/** A control run: the paced generator loses nothing without a swap, and every flow is learned. */
async function control(rig: SwapRig): Promise<void> {
  const { sent } = await underTraffic(rig, (t) => flowing(t, 50));
  strictEqual(await rig.settle(sent), sent, "control run: every frame decapsulated");
  strictEqual(rig.flowPlacements().size, FLOWS, "every five-tuple has its flow entry");
}

rootTest(
  "LB (XDP) and decap (tc) programs replaced under traffic: no frame lost, flows kept",
  async () => {
    await using rig = await SwapRig.open({ flows: FLOWS });
    await control(rig);
    const placements = rig.flowPlacements();
    const newFlows = rig.lb.reasons().tx_new;
    const before = rig.delivered();
    let progId = rig.attachment.progId;
    const { sent } = await underTraffic(rig, async (t) => {
      for (let i = 0; i < 5; i++) {
        await flowing(t, 20);
        const swap = await rig.swapLb();
        strictEqual(swap.attachment.replacedId, progId, `swap ${i}: replaced the program there`);
        ok(swap.attachment.progId !== progId, `swap ${i}: a new program`);
        progId = swap.attachment.progId;
        if (i === 2) await rig.swapDecap();
      }
      await flowing(t, 20);
    });
    const got = (await rig.settle(before + sent)) - before;
    strictEqual(got, sent, `frames lost across 5 XDP and 1 tc replacements: ${sent - got}`);
    deepStrictEqual(rig.flowPlacements(), placements, "the same flows, the same backends");
    strictEqual(rig.lb.reasons().tx_new, newFlows, "no new flow: every frame hit a kept one");
  },
);

rootTest("a grown flow map is migrated under traffic: flows carried, no frame lost", async () => {
  await using rig = await SwapRig.open({ flows: FLOWS, maxFlows: 4096 });
  await control(rig);
  const placements = rig.flowPlacements();
  const newFlows = rig.lb.reasons().tx_new;
  const before = rig.delivered();
  const { value: swap, sent } = await underTraffic(rig, async (t) => {
    await flowing(t, 20);
    const swap = await rig.swapLb({ maxFlows: 8192 });
    await flowing(t, 20);
    return swap;
  });
  strictEqual(swap.migrated.get("hf_flows"), FLOWS, "every flow carried into the new map");
  strictEqual(rig.lb.maps.flows.maxEntries, 8192);
  const got = (await rig.settle(before + sent)) - before;
  strictEqual(got, sent, `frames lost across the migration: ${sent - got}`);
  deepStrictEqual(rig.flowPlacements(), placements, "the same flows, the same backends");
  strictEqual(rig.lb.reasons().tx_new, newFlows, "no new flow: every frame hit a carried one");
});
