import { createClient } from "redis";
import { labRedisPids, startRedis } from "../../lab/redis_server.ts";

Deno.test("redis: npm:redis stores and reads through the harness's redis-server", async () => {
  let pid: number | null;
  {
    await using redis = await startRedis();
    pid = redis.pid;
    const client = createClient({ url: redis.url });
    await client.connect();
    try {
      await client.set("hf:test", "value");
      await client.hSet("hf:{10.0.100.1}:flow", { backend: "10.2.0.2", epoch: "1" });
      if ((await client.get("hf:test")) !== "value") {
        throw new Error("GET did not return what SET stored");
      }
      const h = await client.hGetAll("hf:{10.0.100.1}:flow");
      if (h.backend !== "10.2.0.2") throw new Error(`HGETALL returned ${JSON.stringify(h)}`);
    } finally {
      await client.close();
    }
  }
  if (pid !== null && (await labRedisPids()).includes(pid)) {
    throw new Error(`redis-server ${pid} still runs after dispose`);
  }
});

Deno.test("redis: password-protected server refuses anonymous and accepts the password", async () => {
  await using redis = await startRedis({ password: "s3cret" });
  const anon = createClient({ url: redis.url });
  anon.on("error", () => {});
  await anon.connect();
  let refused = false;
  try {
    await anon.get("x");
  } catch (err) {
    refused = /NOAUTH/.test(String(err));
  } finally {
    await anon.close();
  }
  if (!refused) throw new Error("anonymous GET was not refused with NOAUTH");
  const authed = createClient({ url: redis.url, password: "s3cret" });
  await authed.connect();
  await authed.set("x", "1");
  await authed.close();
});
