/**
 * Dual stack through the lab kubelet (issue 22, "IPv6 Services reach IPv6 pods the same way"),
 * with nothing set by hand: the lab cluster is dual stack (`startKubeletCluster({ ipv6: true })`:
 * every link has IPv6, each node an IPv6 pod CIDR, the lab CNI gives every pod an IPv6 address
 * with the same anti-spoofing rule, Nodes list both addresses, so the agents' `status.hostIPs`
 * holds both). `deno task deploy` applies k8s/ as it is; the test applies a LoadBalancerConfig
 * peering each LB node with the router over IPv4 and IPv6, an AddressPool with an IPv4 and an
 * IPv6 block, a Deployment listening on `::` and a RequireDualStack Service (port 80 → targetPort
 * `http` = 8080). The lab's endpoint-slice controller writes an IPv4 and an IPv6 EndpointSlice;
 * the controller gives the Service an address of each family. Then: IPv6 client connections
 * through the router to the IPv6 LB address reach the pods' IPv6 addresses with the client's own
 * address (the anti-spoofing rule accepts the pods' IPv6 replies and drops none), IPv4 ones too;
 * 40 IPv6 connections held through a scale 3 → 5, a restart of every node agent and an LB node
 * killed (the router's BFD over IPv6 drops it; the other LB node has its flows from Redis): none
 * lost.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { bgpSpec, CLIENT6, POOL, POOL6, startKubeletCluster } from "../../lab/kubelet/cluster.ts";
import { routeGateways } from "../../lab/_anycast_router.ts";
import { webApp } from "../../lab/kubelet/web_app.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;

const WEB = (replicas: number) => webApp(replicas, { listen: "::", dualStack: true });

const CONFIG = [{
  apiVersion: "holdfast.io/v1alpha1",
  kind: "LoadBalancerConfig",
  metadata: { name: "default" },
  spec: { bgp: bgpSpec(true) },
}, {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "AddressPool",
  metadata: { name: "lab" },
  spec: { blocks: [{ cidr: POOL }, { cidr: POOL6 }] },
}];

type Spread = { ok: number; failed: number; wrongPeer: number; spread: Record<string, number> };

rootTest(
  "kubelet, dual stack: IPv6 connections to a dual-stack Service reach the pods' IPv6 addresses " +
    "with the client's address; held ones survive a scale, the node agents' restart, an LB node killed",
  async (t) => {
    await using cluster = await startKubeletCluster({ ipv6: true });
    const { kube, topo } = cluster;
    const kubectl = (args: string[], stdin?: unknown[]) =>
      topo.exec("w1", [
        ...["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`],
        ...args,
      ], { stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"), timeoutMs: 30_000 });
    const peer = (args: string[]) =>
      topo.exec("client", [
        ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
        ...args,
      ], { timeoutMs: 90_000 });
    let vip = "", vip6 = "";
    /** 100 new connections to `to`; true when all see our address and `check` holds. */
    const connections = async (to: string, what: string, check: (s: Spread) => boolean) => {
      let last = "";
      await until(
        what,
        async () => {
          const r = await peer(["client", to, "80", "100", "10"]);
          last = r.stdout;
          const s = JSON.parse(r.stdout.trim().split("\n").pop()!) as Spread;
          return s.ok === 100 && s.wrongPeer === 0 && check(s);
        },
        120_000,
        1_000,
      ).catch((e) => {
        throw new Error(`${e}: ${last}`);
      });
    };
    const rolledOut = (name: string) => () => {
      const w = kube.store.get("apps/daemonsets", "holdfast-system", name);
      const st = (w?.status ?? {}) as Record<string, number>;
      const gen = (w?.metadata as { generation?: number })?.generation;
      const pods = kube.store.list("/pods", "holdfast-system").filter((p) =>
        (p.metadata as { name: string }).name.startsWith(`${name}-`)
      );
      return st.observedGeneration === gen &&
        st.updatedNumberScheduled === st.desiredNumberScheduled &&
        st.numberAvailable === st.desiredNumberScheduled &&
        pods.length === st.desiredNumberScheduled;
    };
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };
    const go = [1, 2, 3].map((n) => `/tmp/hf-${Deno.pid}-kubelet6-go${n}`);
    for (const f of go) await Deno.remove(f).catch(() => {});
    try {
      await step("deno task deploy on dual-stack nodes: every workload rolled out", async () => {
        const out = await cluster.deploy(["--timeout", "180"]);
        strictEqual(out.includes("daemonset.apps/holdfast-agent rolled out (2/2 available)"), true);
        strictEqual(out.includes("daemonset.apps/holdfast-node rolled out (4/4 available)"), true);
      });
      await step("a RequireDualStack Service gets an IPv4 and an IPv6 address", async () => {
        await kubectl(["apply", "--server-side", "-f", "-"], [...CONFIG, ...WEB(3)]);
        await until(
          "the Service has both addresses",
          async () => {
            const svc = JSON.parse((await kubectl(["get", "service", "web", "-o", "json"])).stdout);
            const ips = ((svc.status?.loadBalancer?.ingress ?? []) as { ip: string }[])
              .map((i) => i.ip);
            vip = ips.find((ip) => !ip.includes(":")) ?? "";
            vip6 = ips.find((ip) => ip.includes(":")) ?? "";
            return vip !== "" && vip6 !== "";
          },
          60_000,
          500,
        );
        const families = () =>
          kube.store.list("discovery.k8s.io/endpointslices", "default")
            .map((s) => s.addressType).sort().join();
        await until(
          "an IPv4 and an IPv6 EndpointSlice",
          () => families() === "IPv4,IPv6",
          30_000,
          250,
        )
          .catch((e) => {
            throw new Error(`${e}: ${families()}`);
          });
      });
      await step(
        "IPv6 connections reach the three pods' IPv6 addresses with the client's address",
        async () => {
          await connections(vip6, "100 of 100 IPv6 connections over 3 pods", (s) => {
            return Object.keys(s.spread).length === 3;
          });
          await connections(vip, "100 of 100 IPv4 connections over 3 pods", (s) => {
            return Object.keys(s.spread).length === 3;
          });
          for (const n of ["w1", "w2"]) {
            const [accepted, dropped] = await cluster.kubelet.network(n).antiSpoofCounts("ip6");
            strictEqual(accepted > 0, true, `${n}: pods' IPv6 replies passed the anti-spoofing`);
            strictEqual(dropped, 0, `${n}: nothing a pod sent over IPv6 was dropped as spoofed`);
          }
          // Each node agent serves its pods' IPv6 addresses (one log line per pod and frontend).
          const agents = kube.store.list("/pods", "holdfast-system")
            .map((p) => (p.metadata as { name: string }).name)
            .filter((n) => /^holdfast-node-w\d-/.test(n));
          let served = 0;
          for (const name of agents) {
            const log = await cluster.kubelet.logs("holdfast-system", name);
            served += log.split("\n").filter((l) =>
              / serves \[[0-9a-f:]+\]:80\/TCP/.test(l)
            ).length;
          }
          strictEqual(served >= 3, true, `IPv6 frontends served: ${served}`);
        },
      );

      const holder = topo.spawn("client", [
        ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp"],
        ...["--allow-env=LB_PEER_DEADLINE_MS", PEER, "hold", vip6, "80", "40", ...go],
      ], { env: { LB_PEER_DEADLINE_MS: "600000" } });
      const phase0 = JSON.parse(
        await holder.waitForLine((l) => l.includes('"phase":0'), { timeoutMs: 60_000 }),
      ) as { held: number };
      strictEqual(phase0.held, 40);
      const phase = async (n: number) => {
        await Deno.writeTextFile(go[n - 1]!, "");
        const line = await holder.waitForLine((l) => l.includes(`"phase":${n}`), {
          timeoutMs: 60_000,
        });
        const { msg: _, ...p } = JSON.parse(line) as Record<string, unknown>;
        return p;
      };

      await step("scaled 3 → 5: IPv6 connections reach five pods, held ones stay", async () => {
        await kubectl(["apply", "--server-side", "-f", "-"], WEB(5));
        await connections(vip6, "IPv6 connections over 5 pods", (s) => {
          return Object.keys(s.spread).length === 5;
        });
        deepStrictEqual(await phase(1), { phase: 1, same: 40, moved: 0, broken: 0 });
      });

      await step("every node agent restarted: held IPv6 connections stay", async () => {
        await kubectl(["-n", "holdfast-system", "rollout", "restart", "daemonset/holdfast-node"]);
        await until("holdfast-node rolled out", rolledOut("holdfast-node"), 120_000, 500);
        deepStrictEqual(await phase(2), { phase: 2, same: 40, moved: 0, broken: 0 });
        await connections(vip6, "IPv6 connections after the restart", (s) => {
          return Object.keys(s.spread).length === 5;
        });
      });

      await step("LB node lb2 killed: lb1 carries every IPv6 connection", async () => {
        await cluster.killNode("lb2");
        await until(
          "the router's IPv6 route only via lb1",
          async () => {
            const out = await topo.exec("router", ["ip", "-6", "-o", "route", "show"]);
            return out.stdout.split("\n").some((l) =>
              routeGateways(l, vip6)?.join() === "2001:db8:11:1::2"
            );
          },
          60_000,
          250,
        );
        deepStrictEqual(await phase(3), { phase: 3, same: 40, moved: 0, broken: 0 });
        await connections(vip6, "IPv6 connections through lb1 alone", (s) => {
          return Object.keys(s.spread).length === 5;
        });
      });
    } catch (e) {
      console.error(`client ${CLIENT6}, LB IPs ${vip} ${vip6}`);
      for (const p of kube.store.list("/pods")) {
        const m = p.metadata as Record<string, string>;
        console.error(`--- ${m.namespace}/${m.name} ${JSON.stringify(p.status)}`);
        console.error((await cluster.kubelet.logs(m.namespace!, m.name!)).slice(-2000));
      }
      throw e;
    } finally {
      for (const f of go) await Deno.remove(f).catch(() => {});
    }
  },
);
