import { deepStrictEqual } from "node:assert/strict";
import { firstKey, hashTag, parseRedisTarget, redisUrlProblem } from "./redis_cluster.ts";

Deno.test("redis cluster URL: seeds, credentials, TLS; plain URLs are one Redis", () => {
  deepStrictEqual(parseRedisTarget("redis://h:1"), { cluster: false, url: "redis://h:1" });
  deepStrictEqual(parseRedisTarget("redis+cluster://a:7000,b.svc:7001,[fd00::1]:7002"), {
    cluster: true,
    seeds: [{ host: "a", port: 7000 }, { host: "b.svc", port: 7001 }, {
      host: "fd00::1",
      port: 7002,
    }],
    tls: false,
  });
  deepStrictEqual(parseRedisTarget("rediss+cluster://hf:p%40ss@r:6379/0"), {
    cluster: true,
    seeds: [{ host: "r", port: 6379 }],
    tls: true,
    username: "hf",
    password: "p@ss",
  });
  deepStrictEqual(redisUrlProblem("redis+cluster://a:7000"), null);
  deepStrictEqual(redisUrlProblem("rediss://a:7000"), null);
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
  deepStrictEqual(firstKey(["GET", "k"]), "k");
  deepStrictEqual(firstKey(["EVALSHA", "abc", "2", "k1", "k2", "a"]), "k1");
  deepStrictEqual(firstKey(["EVAL", "return 1", "0"]), undefined);
  deepStrictEqual(firstKey(["XREAD", "COUNT", "5", "BLOCK", "9", "STREAMS", "s1", "0-0"]), "s1");
  deepStrictEqual(firstKey(["PING"]), undefined);
  deepStrictEqual(hashTag("hf:{10.0.100.1}:flows"), "10.0.100.1");
  deepStrictEqual(hashTag("hf:{}:x"), "hf:{}:x");
  deepStrictEqual(hashTag("plain"), "plain");
  deepStrictEqual(hashTag("a{b}{c}"), "b");
});
