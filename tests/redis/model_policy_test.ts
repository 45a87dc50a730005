/**
 * The policy module through the model in a real redis-server, to a running agent
 * (`main.ts agent --model redis --datapath memory`, in process), and through the active file it
 * follows (`--policy-follow`, what `main.ts policy swap --active PATH` writes).
 * Run: `deno test -P=redis tests/redis/model_policy_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { freePort, startRedis } from "../../lab/redis_server.ts";
import { MODEL_YAML, startTestController, waitUntil } from "../../controller/model/_testing.ts";
import { connectModelStore, modelKeys, sha256Hex } from "../../controller/model/mod.ts";
import { main as agentMain } from "../../node/lb/main.ts";
import { installAtomically, main as policyMain } from "../../policy-as/host/cli.ts";

const USER = { name: "holdfast", password: "pw", rules: ["~hf:*", "+@all", "-@dangerous"] };
const build = (name: string) =>
  Deno.readFile(new URL(`../../policy-as/build/${name}`, import.meta.url));

Deno.test("policy in the model: a running agent swaps to the published module and rebuilds its tables; the followed active file too; a bad file is rejected", async () => {
  await using redis = await startRedis({ aclUsers: [USER] });
  const dir = await Deno.makeTempDir({ prefix: "hf-policy-" });
  const store = connectModelStore({ url: redis.url, username: USER.name, password: USER.password });
  using logs = captureLogs();
  const stop = new AbortController();
  let exit: Promise<number> | undefined;
  try {
    await using ctl = await startTestController(store, MODEL_YAML);
    const debug = await build("debug.wasm");
    const debugSha = await sha256Hex(debug);
    ctl.pub.setPolicy({ sha256: debugSha, wasm: debug });
    const k = modelKeys();
    await waitUntil(
      async () => (await redis.cli("HGET", k.policy, "sha256")).trim() === debugSha,
      "published",
    );
    deepStrictEqual(await redis.cli("GET", k.rev), "3\n", "two services, then the module");

    const port = freePort();
    const active = `${dir}/active.wasm`;
    exit = agentMain([
      "--model",
      "redis",
      "--redis",
      `redis://${USER.name}:${USER.password}@127.0.0.1:${redis.port}`,
      "--node-name",
      "lb-p",
      "--datapath",
      "memory",
      "--no-flow-sync",
      "--policy-follow",
      active,
      "--listen",
      `127.0.0.1:${port}`,
    ], { signal: stop.signal });
    const swapped = (sha: string) =>
      logs.records.some((r) => r.msg === "policy swapped" && r.sha256 === sha);
    await waitUntil(
      () => logs.records.some((r) => r.msg === "ready" && r.node === "lb-p"),
      "ready",
    );
    await waitUntil(() => swapped(debugSha), `policy swapped to ${debugSha.slice(0, 16)}`);

    // The active file: `main.ts policy swap FILE --active PATH` reaches the running agent.
    const release = await build("release.wasm");
    const releaseSha = await sha256Hex(release);
    const path = new URL("../../policy-as/build/release.wasm", import.meta.url).pathname;
    deepStrictEqual(await policyMain(["swap", path, "--active", active]), 0);
    await waitUntil(() => swapped(releaseSha), "swapped to the active file's module");
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    ok(/holdfast_reconciler_repairs_total\S* [1-9]/.test(metrics), "tables rebuilt");

    // A module that fails validation, written behind the CLI's back: rejected, old one serves.
    await installAtomically(active, await build("fixtures/wrong_hash.wasm"));
    await waitUntil(
      () => logs.records.some((r) => r.msg === "policy rejected" && r.reason === "vectors"),
      "policy rejected",
    );
    const after = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    ok(after.includes('holdfast_policy_rejections_total{reason="vectors"} 1'), after);
  } finally {
    stop.abort();
    if (exit) deepStrictEqual(await exit, 0);
    await store.close();
    await Deno.remove(dir, { recursive: true });
  }
});
