/**
 * `main.ts status`: what Holdfast is doing now, from Redis (the LB model, flows per LB IP,
 * egress leases, the LB nodes' health reports) and the nodes' `/metrics` — as aligned tables,
 * as one JSON object (`--json`), or as the live dashboard on localhost (`--serve PORT`).
 *
 * Exit codes: 0 printed (or served until SIGINT/SIGTERM), 1 Redis was given but could not be
 * read (the rest is still printed), 2 bad command line.
 *
 * @module
 */

import {
  applyTable,
  intOption,
  listOption,
  readCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import type { RedisStoreOptions } from "../../lib/redis_connection.ts";
import { defineCommand } from "../../lib/flags.ts";
import { readRedis, redisFlags } from "../../lib/flag_groups.ts";
import { metricsUrl, readStatus } from "./collect.ts";
import { startDashboard } from "./dashboard.ts";
import { RedisStatusStore } from "./redis_status_store.ts";
import { renderStatusText } from "./text.ts";

/** The `status` command for lib/args.ts: its flag table, options and usage. */
export const STATUS_COMMAND = defineCommand({
  command: "status",
  synopsis: "main.ts status [OPTIONS]",
  flags: {
    prefix: { arg: "P", help: "key prefix in Redis", defaultText: "hf" },
    agents: {
      arg: "URL,...",
      multiple: true,
      help: "/metrics of LB, anycast and egress nodes (http://HOST:PORT)",
    },
    json: { type: "boolean", help: "print one JSON object instead of tables" },
    serve: { arg: "PORT", help: "serve the live dashboard on http://127.0.0.1:PORT/dashboard" },
    listen: {
      arg: "HOST",
      help: "with --serve: the address to listen on (not the daemons' HOST:PORT)",
      default: "127.0.0.1",
    },
    "interval-ms": { arg: "N", help: "with --serve: time between readings", default: "1000" },
    "timeout-ms": { arg: "N", help: "longest wait for Redis or one node", default: "2000" },
    ...redisFlags(["redis", "redis-user", "redis-password-file"], {
      help: "the Redis the controller publishes the model to\n" +
        "(redis://, rediss:// or redis+cluster://HOST:PORT,... for a\n" +
        "Redis Cluster; password also from $HOLDFAST_REDIS_PASSWORD)",
    }),
  },
});

/** The parsed command line. */
export interface StatusArgs {
  readonly redis: RedisStoreOptions | null;
  readonly agents: readonly string[];
  readonly json: boolean;
  readonly serve: number | null;
  readonly listen: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
}

/** Reads the command line (throws {@linkcode UsageError} naming a bad argument). */
export function readStatusArgs(
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
  env: { password?: string | undefined } = {},
): StatusArgs {
  values = applyTable(values, STATUS_COMMAND);
  const flags = readRedis(values, { password: env.password });
  let redis: RedisStoreOptions | null = null;
  if (flags) {
    redis = { ...flags, logComponent: "status" };
    const prefix = stringOption(values, "prefix");
    if (prefix) redis.prefix = prefix;
  }
  const agents = listOption(values, "agents").map((a) => {
    try {
      return metricsUrl(a);
    } catch (err) {
      throw new UsageError(`--agents: ${(err as Error).message}`);
    }
  });
  const serve = values.serve === undefined
    ? null
    : intOption(values, "serve", { default: 0, min: 0, max: 65535 });
  return {
    redis,
    agents,
    json: values.json === true,
    serve,
    listen: stringOption(values, "listen")!,
    intervalMs: intOption(values, "interval-ms", { min: 50 })!,
    timeoutMs: intOption(values, "timeout-ms", { min: 1 })!,
  };
}

/** Prints (or serves) the status; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const read = readCommandLine(
    argv,
    STATUS_COMMAND,
    ({ values }) => readStatusArgs(values, { password: Deno.env.get("HOLDFAST_REDIS_PASSWORD") }),
  );
  if ("exit" in read) return read.exit;
  const a = read.options;
  if (a.serve !== null) return await serve(a);
  const store = a.redis ? new RedisStatusStore(a.redis) : null;
  try {
    const s = await readStatus(store, a.agents, { timeoutMs: a.timeoutMs });
    console.log(a.json ? JSON.stringify(s) : renderStatusText(s));
    return a.redis && !s.redis.up ? 1 : 0;
  } finally {
    await store?.close();
  }
}

async function serve(a: StatusArgs): Promise<number> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const s of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(s, onSignal);
  try {
    const d = await startDashboard({
      redis: a.redis,
      agents: a.agents,
      port: a.serve ?? 0,
      hostname: a.listen,
      intervalMs: a.intervalMs,
      read: { timeoutMs: a.timeoutMs },
    });
    console.log(`dashboard: ${d.url}`);
    await new Promise<void>((resolve) => stop.signal.addEventListener("abort", () => resolve()));
    await d.close();
    return 0;
  } finally {
    for (const s of ["SIGINT", "SIGTERM"] as const) Deno.removeSignalListener(s, onSignal);
  }
}
