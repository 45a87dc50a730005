import { deepStrictEqual } from "node:assert/strict";
import { UsageError } from "../../lib/args.ts";
import { readStatusArgs } from "./main.ts";

function usageError(values: Record<string, string | boolean | string[]>): string {
  try {
    readStatusArgs(values);
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  return "";
}

Deno.test("status args: Redis, agents, --json, --serve; bad ones are named", () => {
  const a = readStatusArgs(
    { redis: "redis://10.9.0.2:6379", agents: ["10.2.1.2:9470,http://h:1/m"], json: true },
    { password: "pw" },
  );
  deepStrictEqual(a.redis, {
    url: "redis://10.9.0.2:6379",
    logComponent: "status",
    password: "pw",
  });
  deepStrictEqual(a.agents, ["http://10.2.1.2:9470/metrics", "http://h:1/m"]);
  deepStrictEqual([a.json, a.serve, a.listen, a.intervalMs], [true, null, "127.0.0.1", 1000]);
  deepStrictEqual(readStatusArgs({ serve: "8080" }).serve, 8080);
  deepStrictEqual(readStatusArgs({}).redis, null);
  deepStrictEqual(
    usageError({ redis: "10.9.0.2:6379" }),
    'Cannot use --redis "10.9.0.2:6379": expected redis:// or rediss:// (one Redis) or ' +
      "redis+cluster://HOST:PORT[,HOST:PORT…] (a Redis Cluster)",
  );
  deepStrictEqual(
    usageError({ agents: ["ftp://x"] }),
    '--agents: Cannot use agent "ftp://x": expected an http or https URL',
  );
  deepStrictEqual(usageError({ serve: "70000" }) !== "", true);
});
