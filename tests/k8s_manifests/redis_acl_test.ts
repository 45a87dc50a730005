/**
 * The Redis of `k8s/redis.yaml`, started with the manifest's own start script (its paths moved to
 * a temp dir, its port to a free loopback one): the default user is off, the password comes from
 * the Secret file, and the holdfast user can use keys under hf: (including scripts) and nothing
 * else: no other keys, no admin commands; the egress lease scripts run. A password with a space is
 * refused at start.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { type Obj, one, readManifests } from "./_manifests.ts";
import { LEASE_SCRIPTS } from "../../controller/egress/lease.ts";

const redis = one(await readManifests(), "Deployment", "holdfast-redis");
const container = redis.spec.template.spec.containers.find((c: Obj) => c.name === "redis");
const SCRIPT: string = container.command[2];

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = l.addr as Deno.NetAddr;
  l.close();
  return port;
}

async function cli(port: number, args: string[], user?: { name: string; pass: string }) {
  const auth = user ? ["--user", user.name, "--pass", user.pass, "--no-auth-warning"] : [];
  const out = await new Deno.Command("redis-cli", {
    args: ["-h", "127.0.0.1", "-p", String(port), ...auth, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout).trim() + new TextDecoder().decode(out.stderr).trim();
}

/** Starts the manifest's script against `dir`; resolves when Redis answers on `port`. */
async function start(dir: string, port: number, password: string) {
  await Deno.mkdir(`${dir}/run`);
  await Deno.mkdir(`${dir}/secret`);
  await Deno.writeTextFile(`${dir}/secret/password`, password);
  const script = SCRIPT.replaceAll("/run/secrets/redis", `${dir}/secret`)
    .replaceAll("/run/redis", `${dir}/run`)
    .replace("'port 6379'", `'port ${port}'`)
    .replace("'bind * -::*'", "'bind 127.0.0.1'");
  assert(script !== SCRIPT && script.includes(`'port ${port}'`), "script rewritten for the test");
  const child = new Deno.Command("sh", {
    args: ["-c", script],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  return child;
}

Deno.test("k8s/redis.yaml: default user off, holdfast confined to hf:* without admin commands", async () => {
  const dir = await Deno.makeTempDir({ prefix: "hf-redis-acl-" });
  const port = freePort();
  const child = await start(dir, port, "s3cret.Pass-1");
  try {
    const user = { name: "holdfast", pass: "s3cret.Pass-1" };
    let pong = "";
    for (let i = 0; i < 50 && pong !== "PONG"; i++) {
      pong = await cli(port, ["PING"], user);
      if (pong !== "PONG") await new Promise((r) => setTimeout(r, 100));
    }
    assertEquals(pong, "PONG", "holdfast authenticates with the Secret's password");
    assert((await cli(port, ["GET", "hf:x"])).includes("NOAUTH"), "no access without a password");
    const wrong = await cli(port, ["PING"], { name: "default", pass: "" });
    assert(/WRONGPASS|NOAUTH|disabled/i.test(wrong), `default user: ${wrong}`);
    assertEquals(await cli(port, ["SET", "hf:x", "1"], user), "OK");
    assertEquals(
      await cli(port, ["EVAL", "return redis.call('GET', KEYS[1])", "1", "hf:x"], user),
      "1",
    );
    // The egress lease scripts (NAT pods) run as holdfast: ACQUIRE reads TIME, which no
    // category the user has includes (issue 23: NAT pods never acquired in the lab cluster).
    const k = "hf:egress:{ns/nat}:";
    const acquire = await cli(port, [
      "EVAL",
      LEASE_SCRIPTS.ACQUIRE!,
      "3",
      `${k}lease:198.18.0.100`,
      `${k}epoch:198.18.0.100`,
      `${k}want:198.18.0.100`,
      "pod-a/boot",
      "250",
      "",
    ], user);
    assert(!acquire.includes("ERR") && !acquire.includes("NOPERM"), `ACQUIRE: ${acquire}`);
    assert(acquire.startsWith("1"), `ACQUIRE took the lease: ${acquire}`);
    for (
      const [args, what] of [
        [["SET", "other", "1"], "a key outside hf:"],
        [["FLUSHALL"], "FLUSHALL"],
        [["CONFIG", "GET", "requirepass"], "CONFIG"],
        [["ACL", "LIST"], "ACL"],
        [["SHUTDOWN", "NOSAVE"], "SHUTDOWN"],
      ] as const
    ) {
      const out = await cli(port, [...args], user);
      assert(out.includes("NOPERM"), `${what} refused: ${out}`);
    }
    const conf = await Deno.readTextFile(`${dir}/run/redis.conf`);
    assertEquals((await Deno.stat(`${dir}/run/redis.conf`)).mode! & 0o077, 0, "config not shared");
    assert(conf.includes("user default off"), conf);
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.output();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("k8s/redis.yaml: a password Redis's config cannot carry is refused at start", async () => {
  const dir = await Deno.makeTempDir({ prefix: "hf-redis-acl-" });
  try {
    const child = await start(dir, freePort(), "two words");
    const out = await child.output();
    assertEquals(out.success, false);
    assert(new TextDecoder().decode(out.stderr).includes("Secret holdfast-redis"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
