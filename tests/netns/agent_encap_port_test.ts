/**
 * The model's `encapPort` in the real datapath (issue 10): `main.ts agent --model redis` with
 * the BPF datapath writes the port the controller published into its pinned node settings map
 * (`hf_config`, read back with bpftool), and a restart while Redis is down keeps that port instead
 * of going back to the default: the LB node never sends to a port the backends do not decap.
 */
import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { run } from "../../lab/mod.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { MODEL_YAML, startTestController, waitUntil } from "../../controller/model/_testing.ts";
import { Datapath } from "../../node/bpf/mod.ts";

/** The encap port in the pinned `hf_config` (struct lb_config: u16 little-endian at byte 4). */
async function pinnedPort(pinDir: string): Promise<number> {
  const out = await run(["bpftool", "-j", "map", "dump", "pinned", `${pinDir}/hf_config`]);
  const [entry] = JSON.parse(out.stdout) as { value: string[] }[];
  const b = entry!.value.map((x) => parseInt(x, 16));
  return b[4]! | (b[5]! << 8);
}

rootTest(
  "agent --model redis: the model's encapPort reaches the pinned config map and survives a restart without Redis",
  async () => {
    const { main } = await import("../../node/lb/main.ts");
    const pinDir = `/sys/fs/bpf/hf-test-encap-${Deno.pid}`;
    await using redis = await startRedis();
    const store = connectModelStore({ url: redis.url });
    using logs = captureLogs();
    const agent = (signal: AbortSignal) =>
      main([
        ...["--model", "redis", "--redis", redis.url, "--node-name", "lb1"],
        ...["--datapath", "bpf", "--pin-dir", pinDir, "--src-addr", "10.9.9.2"],
        ...["--no-flow-sync", "--listen", "none"],
      ], { signal });
    try {
      {
        await using ctl = await startTestController(store, MODEL_YAML);
        ctl.pub.setSettings({ encapPort: 7000 });
        const stop = new AbortController();
        const exit = agent(stop.signal);
        try {
          await waitUntil(
            () => logs.records.some((r) => r.msg === "encap port set to 7000 (from the model)"),
            "the model's port applied",
            20_000,
          );
          strictEqual(await pinnedPort(pinDir), 7000);
        } finally {
          stop.abort();
        }
        strictEqual(await exit, 0);
      }
      // Restarted while Redis is down: the pinned port stays (not the default 6080).
      await store.close();
      await redis.stop();
      const stop = new AbortController();
      const exit = agent(stop.signal);
      try {
        await waitUntil(
          () => logs.records.some((r) => r.msg === "model unreachable: serving the rows applied"),
          "the restarted agent running without Redis",
          20_000,
        );
        strictEqual(await pinnedPort(pinDir), 7000, "kept across the restart");
      } finally {
        stop.abort();
      }
      strictEqual(await exit, 0);
    } finally {
      await store.close().catch(() => {});
      Datapath.unpin(pinDir);
    }
  },
);
