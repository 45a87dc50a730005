import { firstKey, hashTag, parseRedisTarget, redisUrlProblem } from "./redis_cluster.ts";

function assertEquals(a: unknown, b: unknown, what = "") {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${what}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("redis cluster URL: seeds, credentials, TLS; plain URLs are one Redis", () => {
  assertEquals(parseRedisTarget("redis://h:1"), { cluster: false, url: "redis://h:1" });
  assertEquals(parseRedisTarget("redis+cluster://a:7000,b.svc:7001,[fd00::1]:7002"), {
    cluster: true,
    seeds: [{ host: "a", port: 7000 }, { host: "b.svc", port: 7001 }, {
      host: "fd00::1",
      port: 7002,
    }],
    tls: false,
  });
  assertEquals(parseRedisTarget("rediss+cluster://hf:p%40ss@r:6379/0"), {
    cluster: true,
    seeds: [{ host: "r", port: 6379 }],
    tls: true,
    username: "hf",
    password: "p@ss",
  });
  assertEquals(redisUrlProblem("redis+cluster://a:7000"), null);
  assertEquals(redisUrlProblem("rediss://a:7000"), null);
  for (
    const [bad, says] of [
      ["redis+cluster://", "no seed"],
      ["redis+cluster://a", 'seed "a" is not host:port'],
      ["redis+cluster://u:secret@a:1/2", "only database 0"],
      ["http://a:1", "redis+cluster://"],
    ]
  ) {
    const problem = redisUrlProblem(bad!) ?? "";
    if (!problem.includes(says!)) throw new Error(`${bad}: ${problem}`);
    if (problem.includes("secret")) throw new Error(`password shown: ${problem}`);
  }
});

Deno.test("redis cluster routing: the first key of a command; hash tags", () => {
  assertEquals(firstKey(["GET", "k"]), "k");
  assertEquals(firstKey(["EVALSHA", "abc", "2", "k1", "k2", "a"]), "k1");
  assertEquals(firstKey(["EVAL", "return 1", "0"]), undefined);
  assertEquals(firstKey(["XREAD", "COUNT", "5", "BLOCK", "9", "STREAMS", "s1", "0-0"]), "s1");
  assertEquals(firstKey(["PING"]), undefined);
  assertEquals(hashTag("hf:{10.0.100.1}:flows"), "10.0.100.1");
  assertEquals(hashTag("hf:{}:x"), "hf:{}:x");
  assertEquals(hashTag("plain"), "plain");
  assertEquals(hashTag("a{b}{c}"), "b");
});
