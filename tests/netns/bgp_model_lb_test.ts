/**
 * Stateful LB nodes taking BGP from the model (`main.ts agent --model redis`, issue 12): the
 * LoadBalancerConfig's `spec.bgp` as the controller publishes it in the model settings in Redis
 * starts the agent's bird once it is ready, with its node address as router id; it announces
 * the model's LB IPs to a router bird. A second peer added in the model gets the route too
 * while the first session stays up (`birdc configure`, no flap); a peer whose nodeSelector
 * leaves the node out is not configured; the section removed withdraws and stops bird.
 */
import { ok } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { createTopology } from "../../lab/netns.ts";
import { RouterBird } from "../../lab/_anycast_router.ts";
import { sameSession } from "../../lab/_bird_session.ts";
import { relayIntoNamespace } from "../../lab/_anycast_kube.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { connectModelStore } from "../../controller/model/mod.ts";
import { MODEL_YAML, startTestController } from "../../controller/model/_testing.ts";
import type { ModelBgp } from "../../controller/model/settings.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const BFD = { intervalMs: 100, multiplier: 3 };
const VIP = "10.0.100.1";

const bgp = (peers: { address: string; nodes?: string[] }[]): ModelBgp => ({
  localAsn: 65100,
  prefixes: ["10.0.100.0/24"],
  communities: [],
  peers: peers.map((p) => ({ ...p, asn: 65000, bfd: BFD })),
});

/** The router's BGP session line (`show protocols`) for its one peer. */
async function session(router: RouterBird): Promise<string> {
  const out = (await router.birdc("show", "protocols")).stdout;
  return out.split("\n").find((l) => /\sBGP\s/.test(l)) ?? "";
}

/** The router's kernel route to the VIP ("" when none). */
async function route(topo: { exec: RouterBird["topo"]["exec"] }, host: string): Promise<string> {
  return (await topo.exec(host, ["ip", "-o", "route", "show", `${VIP}/32`])).stdout.trim();
}

rootTest(
  "bgp model: an LB agent following the model announces after ready to the peers spec.bgp gives it; peers added without flapping the others; removed section withdraws",
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "hf-bgp-model-" });
    await using redis = await startRedis();
    const store = connectModelStore({ url: redis.url });
    await using topo = await createTopology({
      hosts: [{ name: "r1" }, { name: "r2" }, { name: "n1" }],
      links: [
        {
          a: { host: "r1", ifname: "r1-n1", address: "10.9.1.1/24" },
          b: { host: "n1", ifname: "eth0", address: "10.9.1.2/24" },
        },
        {
          a: { host: "r2", ifname: "r2-n1", address: "10.9.2.1/24" },
          b: { host: "n1", ifname: "eth1", address: "10.9.2.2/24" },
        },
      ],
      routes: [],
    });
    const relay = relayIntoNamespace(topo.ns("n1"), redis.port);
    try {
      await Deno.mkdir(`${dir}/r1`);
      await Deno.mkdir(`${dir}/r2`);
      const r1 = await RouterBird.start(topo, "r1", `${dir}/r1`, {
        routerId: "10.9.1.1",
        bfd: BFD,
        peers: [{ name: "n1", address: "10.9.1.2", asn: 65100 }],
      });
      const r2 = await RouterBird.start(topo, "r2", `${dir}/r2`, {
        routerId: "10.9.2.1",
        bfd: BFD,
        peers: [{ name: "n1", address: "10.9.2.2", asn: 65100 }],
      });
      // The controller's side: services and the BGP section (r2's peer selects another node).
      await using ctl = await startTestController(store, MODEL_YAML);
      ctl.pub.setSettings({
        bgp: bgp([{ address: "10.9.1.1" }, { address: "10.9.2.1", nodes: ["n2"] }]),
      });
      const agent = topo.spawnDeno("n1", MAIN, {
        args: [
          "agent",
          "--node-name",
          "n1",
          "--model",
          "redis",
          "--redis",
          redis.url,
          "--datapath",
          "memory",
          "--src-addr",
          "10.9.1.2",
          "--no-flow-sync",
          "--health",
          "off",
          "--bgp-dir",
          `${dir}/n1.bird`,
        ],
        permissions: [
          "--allow-read",
          `--allow-write=${dir}`,
          "--allow-run=ip,bird,birdc",
          "--allow-ffi",
          "--allow-env",
          "--allow-sys",
          "--allow-net=127.0.0.1",
          `--allow-net=unix:${dir}/n1.bird/bird.ctl`,
        ],
      });
      await agent.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 20_000 });
      await until(
        "r1 routes the VIP to n1",
        async () => (await route(topo, "r1")).includes("10.9.1.2"),
      );
      const ready = agent.lines.findIndex((l) => l.includes('"msg":"ready"'));
      const started = agent.lines.findIndex((l) => l.includes("BGP from the model: bird started"));
      ok(ready >= 0 && started > ready, "bird started before the agent was ready");
      ok(agent.lines[started]!.includes('"routerId":"10.9.1.2"'), agent.lines[started]!);
      ok((await route(topo, "r2")) === "", "r2 routes the VIP though its peer selects n2 only");
      ok(!(await session(r2)).includes("Established"), "n1 peers with r2, which selects n2");
      const before = await r1.sessionSince("n1");

      // r2's peer now selects n1: n1 peers with r2 too; r1's session is untouched.
      ctl.pub.setSettings({
        bgp: bgp([{ address: "10.9.1.1" }, { address: "10.9.2.1", nodes: ["n1", "n2"] }]),
      });
      await until(
        "r2 routes the VIP to n1",
        async () => (await route(topo, "r2")).includes("10.9.2.2"),
      );
      const after = await r1.sessionSince("n1");
      ok(sameSession(after, before), `r1's session flapped: up at ${before}, then at ${after}`);
      ok((await route(topo, "r1")).includes("10.9.1.2"), "r1 lost the route");

      // No BGP section any more: withdrawn from both, bird stopped, the agent keeps running.
      ctl.pub.setSettings({});
      await until(
        "both routes withdrawn",
        async () => (await route(topo, "r1")) === "" && (await route(topo, "r2")) === "",
      );
      await agent.waitForLine((l) => l.includes("withdrew LB addresses"));
      const status = agent.child.status;
      agent.child.kill("SIGTERM");
      ok((await status).code === 0, "the agent did not stop cleanly");
    } finally {
      relay.close();
      await store.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);
