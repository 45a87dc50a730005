import { parseAgentArgs } from "./main.ts";

function assertEquals(a: unknown, b: unknown) {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("agent arguments: required, lists, defaults, secrets from a file", () => {
  const a = parseAgentArgs([
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
});

Deno.test("agent arguments: errors name the argument", () => {
  const cases: [string[], string][] = [
    [["--vip", "10.0.100.1", "--node-name", "a"], '"--redis" is required'],
    [["--redis", "redis://h:1", "--node-name", "a"], '"--vip" is required'],
    [
      ["--redis", "redis://h:1", "--vip", "10.0.100", "--node-name", "a"],
      'IPv4 address "10.0.100"',
    ],
    [["--redis", "http://h", "--vip", "10.0.100.1", "--node-name", "a"], "redis:// or rediss://"],
    [
      ["--redis", "redis://h:1", "--vip", "10.0.100.1", "--node-name", "a", "--bogus", "1"],
      '"--bogus"',
    ],
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

Deno.test("agent arguments: the e2e cluster's spellings are aliases", () => {
  const a = parseAgentArgs([
    "--node",
    "lb1",
    "--iface",
    "eth0",
    "--address",
    "10.2.1.2",
    "--bpffs",
    "/tmp/bpffs-lb1",
    "--redis",
    "redis://10.9.0.2:6379",
    "--vip",
    "10.0.100.1",
  ]);
  assertEquals(
    [a.nodeName, a.attach, a.configure, a.pinDir, a.redis.url, a.vips],
    [
      "lb1",
      { ifname: "eth0" },
      { srcAddr: "10.2.1.2", encapPort: 6080, seed: 0 },
      "/tmp/bpffs-lb1",
      "redis://10.9.0.2:6379",
      ["10.0.100.1"],
    ],
  );
});
