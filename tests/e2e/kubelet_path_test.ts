/**
 * The whole path with nothing set by hand (issue 22 items 3–4): `deno task deploy` applies k8s/
 * to the API test server; the lab kubelet (lab/kubelet/) runs what the manifests declare — the
 * controller, Redis, the LB agent on the two LB nodes, the node agent on every node — and the test
 * Deployment's pods in namespaces behind veths with anti-spoofing. The test then applies, with
 * kubectl as an operator would, the LoadBalancerConfig's `spec.bgp` (the LB nodes peer with the
 * router, ECMP), an AddressPool, a Deployment of three pods and its Service (port 80 → targetPort
 * `http` = 8080, class holdfast.io/lb), and checks that client connections through the router reach
 * the pods with the client's own address. Then, under 60 held connections: scale 3 → 5, a pod
 * deleted (it drains: held connections answered, no new ones, until it exits), every node agent
 * restarted, the LB agent DaemonSet rolled, an LB node killed — no held connection to a live pod
 * is lost (the deleted pod's own end when it exits, as in Kubernetes). No `main.ts decap`, no
 * address set inside a pod, no per-pod command: the pods run their template's command.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { bgpSpec, startKubeletCluster } from "../../lab/kubelet/cluster.ts";
import { routeGateways } from "../../lab/_anycast_router.ts";
import { webApp } from "../../lab/kubelet/web_app.ts";

const PEER = new URL("../../lab/clients/lb_peer.ts", import.meta.url).pathname;

const WEB = (replicas: number) => webApp(replicas, { gracePeriodS: 15, drain: true });

/** Peering with the router: the LB nodes announce the LB IPs (ECMP at the router). */
const LBC = {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "LoadBalancerConfig",
  metadata: { name: "default" },
  spec: { bgp: bgpSpec() },
};

const POOL = {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "AddressPool",
  metadata: { name: "lab" },
  spec: { blocks: [{ cidr: "10.0.100.0/28" }] },
};

type Spread = { ok: number; failed: number; wrongPeer: number; spread: Record<string, number> };
type Phase = { phase: number; same: number; moved: number; broken: number; brokenBy?: object };

rootTest(
  "kubelet: deploy → pods → the LB reaches them with the client's address; scale, a graceful " +
    "delete, node agents and the LB agent rolled, an LB node killed: no held connection to a live pod lost",
  async (t) => {
    await using cluster = await startKubeletCluster();
    const { kube, topo } = cluster;
    const kubectl = (args: string[], stdin?: unknown[]) =>
      topo.exec("w1", [
        ...["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`],
        ...args,
      ], {
        stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"),
        timeoutMs: 30_000,
      });
    const peer = (args: string[]) =>
      topo.exec("client", [
        ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp", PEER],
        ...args,
      ], { timeoutMs: 90_000 });
    let vip = "";
    /** 100 new connections; true when `check` holds for their summary (all must see our address). */
    const connections = async (what: string, check: (s: Spread) => boolean) => {
      let last = "";
      await until(
        what,
        async () => {
          const r = await peer(["client", vip, "80", "100", "10"]);
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
    const webPods = () =>
      kube.store.list("/pods", "default").filter((p) =>
        (p.metadata as { labels?: Record<string, string> }).labels?.app === "web"
      );
    const rolledOut = (kind: "daemonsets" | "deployments", name: string) => () => {
      const w = kube.store.get(`apps/${kind}`, "holdfast-system", name);
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
    /** The router's next hops for the LB IP (its BGP route, ECMP). */
    const gateways = async () => {
      const out = await topo.exec("router", ["ip", "-o", "route", "show"]);
      for (const line of out.stdout.split("\n")) {
        const g = routeGateways(line, vip) ?? routeGateways(line, "10.0.100.0/28");
        if (g !== null) return [...g].sort();
      }
      return [];
    };
    const agentPods = (prefix: string) =>
      kube.store.list("/pods", "holdfast-system").map((p) => (p.metadata as { name: string }).name)
        .filter((n) => n.startsWith(`${prefix}-`));
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };
    const go = [1, 2, 3, 4, 5, 6].map((n) => `/tmp/hf-${Deno.pid}-kubelet-go${n}`);
    for (const f of go) await Deno.remove(f).catch(() => {});
    try {
      await step("deno task deploy: every workload rolled out by the lab kubelet", async () => {
        const out = await cluster.deploy(["--timeout", "180"]);
        strictEqual(
          out.includes("daemonset.apps/holdfast-node rolled out (4/4 available)"),
          true,
          out,
        );
        strictEqual(
          out.includes("daemonset.apps/holdfast-agent rolled out (2/2 available)"),
          true,
          out,
        );
      });
      await step("pool, Deployment and Service: the Service gets its address", async () => {
        await kubectl(["apply", "--server-side", "-f", "-"], [LBC, POOL, ...WEB(3)]);
        await until(
          "the Service has an address",
          async () => {
            const svc = JSON.parse((await kubectl(["get", "service", "web", "-o", "json"])).stdout);
            vip = svc.status?.loadBalancer?.ingress?.[0]?.ip ?? "";
            return vip !== "";
          },
          60_000,
          500,
        );
      });
      await step(
        "connections reach the three pods, on two nodes, with the client's address",
        async () => {
          await connections(
            "100 of 100 connections over 3 pods",
            (s) => Object.keys(s.spread).length === 3,
          );
          const nodes = new Set(
            webPods().map((p) => (p.spec as { nodeName: string }).nodeName),
          );
          deepStrictEqual([...nodes].sort(), ["w1", "w2"]);
          for (const n of ["w1", "w2"]) {
            const [accepted, dropped] = await cluster.kubelet.network(n).antiSpoofCounts();
            strictEqual(accepted > 0, true, `${n}: pods' replies passed the anti-spoofing rule`);
            strictEqual(dropped, 0, `${n}: nothing a pod sent was dropped as spoofed`);
          }
        },
      );

      const holder = topo.spawn("client", [
        ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp"],
        ...["--allow-env=LB_PEER_DEADLINE_MS", PEER, "hold", vip, "80", "60", ...go],
      ], { env: { LB_PEER_DEADLINE_MS: "600000" } });
      const phase0 = JSON.parse(
        await holder.waitForLine((l) => l.includes('"phase":0'), { timeoutMs: 60_000 }),
      ) as { held: number; by: Record<string, number> };
      strictEqual(phase0.held, 60);
      const phase = async (n: number) => {
        await Deno.writeTextFile(go[n - 1]!, "");
        const line = await holder.waitForLine((l) => l.includes(`"phase":${n}`), {
          timeoutMs: 60_000,
        });
        const { msg: _, ...p } = JSON.parse(line) as Phase & { msg: string };
        return p;
      };

      await step("scaled 3 → 5: new connections reach five pods, held ones stay", async () => {
        await kubectl(["apply", "--server-side", "-f", "-"], WEB(5));
        await connections("connections over 5 pods", (s) => Object.keys(s.spread).length === 5);
        deepStrictEqual(await phase(1), { phase: 1, same: 60, moved: 0, broken: 0 });
      });

      const gone = Object.keys(phase0.by).sort()[0]!;
      const lost = phase0.by[gone]!;
      await step(
        `pod ${gone} deleted: it drains (held connections answered, no new ones), then goes`,
        async () => {
          await kubectl(["delete", "pod", gone, "--wait=false"]);
          await connections(`no new connection reaches ${gone}`, (s) => !(gone in s.spread));
          deepStrictEqual(await phase(2), { phase: 2, same: 60, moved: 0, broken: 0 });
          await until(
            `${gone} gone`,
            () => !webPods().some((p) => (p.metadata as { name: string }).name === gone),
            60_000,
            500,
          );
          deepStrictEqual(await phase(3), {
            phase: 3,
            same: 60 - lost,
            moved: 0,
            broken: lost,
            brokenBy: { [gone]: lost },
          });
        },
      );

      const live = { same: 60 - lost, moved: 0, broken: lost, brokenBy: { [gone]: lost } };
      await step("every node agent restarted (DaemonSet rolled): nothing more lost", async () => {
        const before = agentPods("holdfast-node");
        await kubectl(["-n", "holdfast-system", "rollout", "restart", "daemonset/holdfast-node"]);
        await until(
          "holdfast-node rolled out",
          rolledOut("daemonsets", "holdfast-node"),
          120_000,
          500,
        );
        const after = agentPods("holdfast-node");
        strictEqual(after.some((n) => before.includes(n)), false, `new pods: ${after}`);
        for (const name of after.filter((n) => /-w\d-/.test(n))) {
          // The new agent adopted the pinned maps: the pods' frontends were there already.
          const log = await cluster.kubelet.logs("holdfast-system", name);
          const start = log.split("\n").find((l) => l.includes('"msg":"starting"'));
          const adopted = start ? JSON.parse(start).adopted : undefined;
          strictEqual((adopted?.frontends ?? 0) > 0, true, `${name}: ${start}`);
        }
        deepStrictEqual(await phase(4), { phase: 4, ...live });
        await connections(
          "new connections after the node agents' restart",
          (s) => Object.keys(s.spread).length === 5,
        );
      });

      await step("the LB agent DaemonSet rolled: nothing more lost", async () => {
        await kubectl(["-n", "holdfast-system", "rollout", "restart", "daemonset/holdfast-agent"]);
        await until(
          "holdfast-agent rolled out",
          rolledOut("daemonsets", "holdfast-agent"),
          120_000,
          500,
        );
        deepStrictEqual(await phase(5), { phase: 5, ...live });
        await connections(
          "new connections after the LB agent's roll",
          (s) => Object.keys(s.spread).length === 5,
        );
      });

      await step(
        "LB node lb2 killed: the router drops it, lb1 carries every connection",
        async () => {
          await cluster.killNode("lb2");
          await until(
            "the router's route only via lb1",
            async () => {
              return (await gateways()).join() === "10.11.1.2";
            },
            60_000,
            250,
          );
          deepStrictEqual(await phase(6), { phase: 6, ...live });
          await connections(
            "new connections through lb1 alone",
            (s) => Object.keys(s.spread).length === 5,
          );
        },
      );
    } catch (e) {
      const birdLog = await Deno.readTextFile(`${cluster.dir}/router.log`).catch(() => "");
      console.error(`--- router bird log\n${birdLog.slice(-3000)}`);
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
