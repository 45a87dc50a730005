import { parseAgentArgs } from "./agent_args.ts";

function assertEquals(a: unknown, b: unknown) {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("agent arguments: required, lists, defaults, secrets from a file", () => {
  const a = parseAgentArgs([
    "--config",
    "/etc/holdfast/services.yaml",
    "--redis",
    "redis://127.0.0.1:6379",
    "--vip",
    "10.0.100.1,10.0.100.2",
    "--vip=10.0.100.3",
    "--node-name",
    "lb-a",
    "--redis-user",
    "holdfast",
    "--redis-password-file",
    "/secret",
    "--datapath",
    "memory",
    "--idle-timeout-ms",
    "1000",
  ], { readFile: () => "s3cret\n" });
  assertEquals(a.vips, ["10.0.100.1", "10.0.100.2", "10.0.100.3"]);
  assertEquals(a.redis, {
    url: "redis://127.0.0.1:6379",
    username: "holdfast",
    password: "s3cret",
  });
  assertEquals([a.nodeName, a.datapath, a.idleTimeoutMs], ["lb-a", "memory", 1000]);
  assertEquals(a.listen, { hostname: "127.0.0.1", port: 9470 });
  assertEquals([a.config, a.flowSync, a.configPollMs], ["/etc/holdfast/services.yaml", true, 200]);
  assertEquals(a.fullReconcileIntervalMs, 30_000);
});

Deno.test("agent arguments: --full-reconcile-interval-ms sets how often the maps are repaired", () => {
  const base = ["--config", "s.yaml", "--node-name", "lb1", "--no-flow-sync"];
  assertEquals(
    parseAgentArgs([...base, "--full-reconcile-interval-ms", "5000"]).fullReconcileIntervalMs,
    5000,
  );
  assertEquals(
    parseAgentArgs([...base, "--full-reconcile-interval-ms", "0"]).fullReconcileIntervalMs,
    0,
  );
});

Deno.test("agent arguments: --no-flow-sync needs no Redis; --vip is optional", () => {
  const a = parseAgentArgs(["--config", "s.yaml", "--node-name", "lb1", "--no-flow-sync"]);
  assertEquals([a.flowSync, a.vips], [false, []]);
});

Deno.test("agent arguments: errors name the argument", () => {
  const base = ["--config", "s.yaml", "--node-name", "a"];
  const cases: [string[], string][] = [
    [["--vip", "10.0.100.1", ...base], '"--redis" is required'],
    [["--redis", "redis://h:1", "--node-name", "a"], '"--config" is required'],
    [["--redis", "redis://h:1", "--vip", "10.0.100", ...base], 'IPv4 address "10.0.100"'],
    [["--redis", "http://h", ...base], "redis:// or rediss://"],
    [["--redis", "redis://h:1", ...base, "--bogus", "1"], '"--bogus"'],
  ];
  for (const [args, want] of cases) {
    let msg = "";
    try {
      parseAgentArgs(args);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.includes(want)) throw new Error(`${JSON.stringify(args)}: "${msg}" lacks ${want}`);
  }
});
