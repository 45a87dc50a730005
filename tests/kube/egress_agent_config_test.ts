/**
 * The NAT pod's Redis config source (`main.ts egress --egress NS/NAME`, node/egress/_redis_config.ts)
 * against a real redis-server: it waits until the config lists the pod, gives up naming the key,
 * applies peer changes live and says which other changes need a restart. Also the command line.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { parseEgressConfig } from "../../controller/egress/config.ts";
import { publishEgressConfig } from "../../controller/egress/redis_config.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { parseCommandLine, UsageError } from "../../lib/args.ts";
import { captureLogs, log } from "../../lib/log.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import { ConfigFollower, waitForEgressConfig } from "../../node/egress/_redis_config.ts";
import { EGRESS_COMMAND, readEgressArgs } from "../../node/egress/egress_args.ts";
import type { EgressPeer } from "../../controller/egress/config.ts";
import { waitFor } from "./_kubectl.ts";

/** The error `p` rejects with, or undefined. */
const failure = (p: Promise<unknown>): Promise<Error | undefined> =>
  p.then(() => undefined, (e) => e as Error);

const config = (peers: string[], extra: Record<string, unknown> = {}) =>
  parseEgressConfig({
    name: "egress/internet",
    destinations: ["198.18.0.0/24"],
    addresses: [{ address: "198.18.0.100", gateway: "10.8.0.100" }],
    sources: [{ prefix: "10.8.0.0/26" }],
    peers: peers.map((name, i) => ({ name, address: `10.8.0.${21 + i}` })),
    ...extra,
  });

Deno.test("egress agent config from Redis: waits for its pod, follows peers, names the key", async () => {
  await using server = await startRedis();
  const redis = new RedisConnection({ url: server.url, logComponent: "test" });
  using logs = captureLogs();
  try {
    // Absent: gives up after the bound, naming the key.
    let err = await failure(
      waitForEgressConfig(redis, "egress/internet", { self: "nat-b", timeoutMs: 200, log }),
    );
    ok(err?.message.includes('"hf:egress:{egress/internet}:config" absent'), err?.message);

    // Published without this pod, then with it: the wait ends once it is listed.
    await publishEgressConfig(redis, config(["nat-a"]));
    const waiting = waitForEgressConfig(redis, "egress/internet", {
      self: "nat-b",
      timeoutMs: 30_000,
      pollMs: 50,
      log,
    });
    // It read the config without this pod (and said so) before the pod is added.
    await waitFor(
      "the wait to log the config without this pod",
      () => logs.records.some((r) => r.msg === "waiting for config" && r.why !== "absent"),
    );
    await publishEgressConfig(redis, config(["nat-a", "nat-b"]));
    const initial = await waiting;
    deepStrictEqual(initial.config.peers.map((p) => p.name), ["nat-a", "nat-b"]);
    deepStrictEqual(initial.rev, 2);

    // Peers change: applied live. Another field changes: logged as needing a restart.
    const seen: EgressPeer[][] = [];
    const follower = new ConfigFollower({
      redis,
      egressName: "egress/internet",
      initial,
      onPeers: (p) => seen.push([...p]),
      log,
    });
    await follower.poll();
    deepStrictEqual(seen.length, 0);
    await publishEgressConfig(redis, config(["nat-a", "nat-b", "nat-c"]));
    await follower.poll();
    deepStrictEqual(seen.at(-1)?.map((p) => p.name), ["nat-a", "nat-b", "nat-c"]);
    await publishEgressConfig(
      redis,
      config(["nat-a", "nat-b", "nat-c"], { snatPorts: "2000-3000" }),
    );
    await follower.poll();
    deepStrictEqual(seen.length, 1);
    const restart = logs.records.find((r) => r.msg === "config changed; restart the pod to apply");
    deepStrictEqual(restart?.fields, ["snatPorts"]);
    deepStrictEqual(restart?.key, "hf:egress:{egress/internet}:config");

    // A document that does not validate is an error naming the key and the field.
    await redis.command(["HSET", "hf:egress:{egress/bad}:config", "json", '{"name":"x"}']);
    err = await failure(
      waitForEgressConfig(redis, "egress/bad", { self: "nat-a", timeoutMs: 1_000, log }),
    );
    ok(err?.message.includes('"hf:egress:{egress/bad}:config"'), err?.message);
    ok(err?.message.includes('field "destinations"'), err?.message);
  } finally {
    await redis.close();
  }
});

Deno.test("egress command line: exactly one of --config and --egress; --egress needs --redis", () => {
  const read = (args: string[]) => readEgressArgs(parseCommandLine(args, EGRESS_COMMAND));
  const a = read(["--egress", "egress/internet", "--name", "nat-a", "--redis", "redis://r:6379"]);
  deepStrictEqual([a.egress, a.config, a.configWaitMs], ["egress/internet", undefined, 120_000]);
  for (
    const [args, says] of [
      [["--name", "n"], "exactly one"],
      [["--name", "n", "--config", "f", "--egress", "a/b", "--redis", "redis://r"], "exactly one"],
      [["--name", "n", "--egress", "a/b"], "--egress needs --redis"],
      [["--name", "n", "--egress", "nope", "--redis", "redis://r"], '--egress "nope"'],
    ] as const
  ) {
    let err: unknown;
    try {
      read([...args]);
    } catch (e) {
      err = e;
    }
    ok(err instanceof UsageError && err.message.includes(says), `${args}: ${err}`);
  }
});
