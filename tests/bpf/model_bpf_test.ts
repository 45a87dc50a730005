/**
 * The LB model followed into real BPF maps (the model store in memory): a controller restart
 * writes no map entry, and an agent restarted on its pinned maps while the model store is down
 * prunes nothing, then applies the model back without a write.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import type { LBMapsContents } from "../../node/lb/maps/lbmaps.ts";
import { MemoryModelStore } from "../../controller/model/_memory_model_store.ts";
import {
  MODEL_YAML,
  startTestAgent,
  startTestController,
} from "../../controller/model/_testing.ts";
import { Datapath } from "../../node/bpf/mod.ts";

const plain = (c: LBMapsContents) => ({
  services: c.services,
  backends: c.backends,
  maglev: c.maglev.map(([id, t]) => [id, Array.from(t)]),
});

rootTest(
  "model → real BPF maps: controller restart and agent restart without Redis change nothing",
  async () => {
    const pinDir = `/sys/fs/bpf/hf-test-model-${Deno.pid}`;
    const store = new MemoryModelStore();
    try {
      let before: ReturnType<typeof plain>;
      {
        using dp = await Datapath.open({ pinDir });
        await using agent = await startTestAgent(store, { maps: dp.lbMaps() });
        {
          await using _ctl = await startTestController(store, MODEL_YAML);
          await agent.source.ready();
          await agent.cp.waitFrontend("10.0.100.1:80/TCP", { timeoutMs: 10_000 });
          await agent.cp.waitFrontend("10.0.100.2:53/UDP", { timeoutMs: 10_000 });
        }
        before = plain(await dp.lbMaps().dump());
        strictEqual(before.services.length, 2);
        const writes = agent.writes();
        {
          await using _ctl = await startTestController(store, MODEL_YAML);
          await new Promise((r) => setTimeout(r, 300));
        }
        strictEqual(agent.writes(), writes, "no map write after the controller restart");
        deepStrictEqual(plain(await dp.lbMaps().dump()), before);
      }
      // The agent restarts on its pinned maps while the model store is down: nothing pruned.
      store.available = false;
      using dp = await Datapath.open({ pinDir });
      await using agent = await startTestAgent(store, { maps: dp.lbMaps() });
      await new Promise((r) => setTimeout(r, 300));
      deepStrictEqual(plain(await dp.lbMaps().dump()), before, "kept while the store is down");
      strictEqual(agent.writes(), 0);
      store.available = true;
      await agent.source.ready();
      await agent.cp.waitFrontend("10.0.100.1:80/TCP", { timeoutMs: 10_000 });
      await agent.cp.waitFrontend("10.0.100.2:53/UDP", { timeoutMs: 10_000 });
      deepStrictEqual(plain(await dp.lbMaps().dump()), before, "same maps once the model is back");
      const w = agent.cp.ops.metrics;
      strictEqual(w.holdfast_lbmaps_pruned_total + w.holdfast_lbmaps_service_deletes_total, 0);
    } finally {
      Datapath.unpin(pinDir);
    }
  },
);
