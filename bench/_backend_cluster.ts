/**
 * bench:backend's cluster part (bench/backend.ts part 3): the lab kubelet's cluster
 * (lab/kubelet/cluster.ts) running k8s/ as `deno task deploy` applies it, with a test Deployment
 * behind a Service of class holdfast.io/lb, as tests/e2e/kubelet_path_test.ts runs it.
 *
 * - **Pod ready → reachable through the LB**: while the Deployment scales up, the bench polls the
 *   API server's store every 5 ms for the moment each new pod's Ready condition turns True (two
 *   pods of a scale 3 → 5, then one at a time at a steady 6 pods), and a
 *   client in the client namespace opens new connections to the LB IP, 16 at a time
 *   (lab/clients/lb_peer.ts `watch`), noting when each pod first answers. The figure is the
 *   difference: the lab endpoint-slice controller (same pass as the Ready write), the controller's
 *   informers, the model in Redis, the LB agents' Maglev tables and the node agent's entry.
 * - **Held connections lost, ours vs a stateless peer**: 60 connections held through a scale
 *   3 → 5 and an LB node killed (the router's BFD moves every connection to the other LB node),
 *   once as deployed and once with the LB agents rolled to `--no-flow-sync` (Maglev only, no flows
 *   shared: what a stateless ECMP + consistent-hash LB keeps), each in a fresh cluster.
 *
 * @module
 */

import { bgpSpec, POOL, startKubeletCluster } from "../lab/kubelet/cluster.ts";
import { routeGateways } from "../lab/_anycast_router.ts";
import { podReady } from "../lab/kubelet/workloads.ts";
import { webApp } from "../lab/kubelet/web_app.ts";

const PEER = new URL("../lab/clients/lb_peer.ts", import.meta.url).pathname;

const web = (replicas: number) => webApp(replicas, { gracePeriodS: 2 });

const SETUP = [{
  apiVersion: "holdfast.io/v1alpha1",
  kind: "LoadBalancerConfig",
  metadata: { name: "default" },
  spec: { bgp: bgpSpec() },
}, {
  apiVersion: "holdfast.io/v1alpha1",
  kind: "AddressPool",
  metadata: { name: "lab" },
  spec: { blocks: [{ cidr: POOL }] },
}];

/** Waits (bounded) until `ok()`; throws naming `what`. */
async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number) {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One trial's results. */
export interface ClusterTrial {
  readonly flowSync: boolean;
  readonly held: number;
  readonly lostAfterScale: number;
  readonly lostAfterLbKill: number;
  /** Pod ready → first connection through the LB reaching it, ms (with `readySamples`). */
  readonly readyToReachableMs: number[];
  /** Pod ready → the controller's next `model published` line, ms (where the time goes). */
  readonly readyToModelMs: number[];
  /** Pod ready → its node agent's `serves` line, ms. */
  readonly readyToNodeAgentMs: number[];
  /** New connections per second the watcher made (its resolution: pods / this). */
  readonly watchPerS: number;
}

/**
 * A fresh cluster: deploy, the Service, 60 held connections through a scale 3 → 5 and lb2
 * killed; with `readySamples` > 0, ready → reachable of the two scaled-up pods and of
 * `readySamples - 2` more, one at a time.
 */
export async function clusterTrial(flowSync: boolean, readySamples: number): Promise<ClusterTrial> {
  await using cluster = await startKubeletCluster();
  const { kube, topo } = cluster;
  const kubectl = (args: string[], stdin?: unknown[]) =>
    topo.exec("w1", [
      ...["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`],
      ...args,
    ], { stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"), timeoutMs: 30_000 });
  const deno = [Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read=/tmp"];
  const files = ["go1", "go2", "stop"].map((n) => `/tmp/hf-${Deno.pid}-bench-${n}`);
  const [go1, go2, stop] = files as [string, string, string];
  for (const f of files) await Deno.remove(f).catch(() => {});
  const pods = () =>
    kube.store.list("/pods", "default").filter((p) =>
      (p.metadata as { labels?: Record<string, string> }).labels?.app === "web"
    );
  const name = (p: { metadata?: unknown }) => (p.metadata as { name: string }).name;
  const agentsRolled = () => {
    const w = kube.store.get("apps/daemonsets", "holdfast-system", "holdfast-agent");
    const st = (w?.status ?? {}) as Record<string, number>;
    return st.observedGeneration === (w?.metadata as { generation?: number })?.generation &&
      st.updatedNumberScheduled === 2 && st.numberAvailable === 2 &&
      kube.store.list("/pods", "holdfast-system").filter((p) =>
          name(p).startsWith("holdfast-agent-")
        ).length === 2;
  };
  try {
    await cluster.deploy(["--timeout", "180"]);
    if (!flowSync) {
      await kubectl([
        "-n",
        "holdfast-system",
        "patch",
        "daemonset",
        "holdfast-agent",
        "--type=json",
        "-p",
        JSON.stringify([{
          op: "add",
          path: "/spec/template/spec/containers/0/args/-",
          value: "--no-flow-sync",
        }]),
      ]);
      await until("the LB agents rolled to --no-flow-sync", agentsRolled, 180_000);
    }
    await kubectl(["apply", "--server-side", "-f", "-"], [...SETUP, ...web(3)]);
    let vip = "";
    await until("the Service has an address", async () => {
      const svc = JSON.parse((await kubectl(["get", "service", "web", "-o", "json"])).stdout);
      vip = svc.status?.loadBalancer?.ingress?.[0]?.ip ?? "";
      return vip !== "";
    }, 60_000);
    await until("connections reach 3 pods", async () => {
      const r = await topo.exec("client", [...deno, PEER, "client", vip, "80", "60", "10"]);
      const s = JSON.parse(r.stdout.trim().split("\n").pop()!);
      return s.ok === 60 && Object.keys(s.spread).length === 3;
    }, 120_000);

    // Ready times, polled from the store (the kubelet writes Ready there).
    const readyAt = new Map<string, number>();
    const before = new Set(pods().map(name));
    let polling = true;
    const poller = (async () => {
      for (let i = 0; polling && i < 200_000; i++) {
        for (const p of pods()) {
          if (!before.has(name(p)) && !readyAt.has(name(p)) && podReady(p)) {
            readyAt.set(name(p), Date.now());
          }
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const watcher = readySamples > 0
      ? topo.spawn("client", [...deno, PEER, "watch", vip, "80", "600000", stop, "16"])
      : undefined;
    /** When each pod first answered the watcher (its `first` lines). */
    const firstAt = () =>
      new Map(
        (watcher?.lines ?? []).filter((l) => l.includes('"msg":"first"')).map((l) => {
          const m = JSON.parse(l) as { backend: string; t: number };
          return [m.backend, m.t] as const;
        }),
      );
    const reached = (want: number) =>
      until(`${want} new pods reached`, () => {
        const first = firstAt();
        const fresh = [...readyAt.keys()].filter((n) => first.has(n));
        return fresh.length >= want;
      }, 120_000);

    const holder = topo.spawn("client", [
      ...deno,
      ...["--allow-env=LB_PEER_DEADLINE_MS", PEER, "hold", vip, "80", "60", go1, go2],
    ], { env: { LB_PEER_DEADLINE_MS: "600000" } });
    const phase = async (n: number, file?: string) => {
      if (file) await Deno.writeTextFile(file, "");
      return JSON.parse(
        await holder.waitForLine((l) => l.includes(`"phase":${n}`), { timeoutMs: 120_000 }),
      );
    };
    const held = (await phase(0)).held as number;
    await kubectl(["apply", "--server-side", "-f", "-"], web(5));
    await until("5 pods ready", () => pods().filter(podReady).length === 5, 120_000);
    if (watcher) await reached(2);
    else await new Promise((r) => setTimeout(r, 3_000)); // the LB agents' tables follow
    const lostAfterScale = (await phase(1, go1)).broken as number;
    await cluster.killNode("lb2");
    await until("the router's route only via lb1", async () => {
      const out = await topo.exec("router", ["ip", "-o", "route", "show"]);
      return out.stdout.split("\n").some((l) => routeGateways(l, vip)?.join() === "10.11.1.2");
    }, 60_000);
    const lostAfterLbKill = (await phase(2, go2)).broken as number;
    // More samples at a steady 6 pods: up to 6 (a new pod, measured), back to 5 (the newest goes).
    for (let n = 2; n < readySamples; n++) {
      await kubectl(["apply", "--server-side", "-f", "-"], web(6));
      await reached(n + 1);
      await kubectl(["apply", "--server-side", "-f", "-"], web(5));
      await until("back to 5 pods", () => pods().length === 5, 60_000);
    }
    await Deno.writeTextFile(stop, "");
    const done = watcher
      ? JSON.parse(
        await watcher.waitForLine((l) => l.includes('"msg":"done"'), { timeoutMs: 30_000 }),
      )
      : undefined;
    polling = false;
    await poller;
    const first = firstAt();
    const measured = [...readyAt].filter(([n]) => first.has(n));
    const readyToReachableMs = measured.map(([n, t]) => first.get(n)! - t);
    // Where the time goes, from the components' own log lines (ISO times, ms).
    const logs = async (prefix: string) => {
      const out: { ts: number; line: string }[] = [];
      for (
        const p of kube.store.list("/pods", "holdfast-system").filter((p) =>
          name(p).startsWith(prefix)
        )
      ) {
        for (const line of (await cluster.kubelet.logs("holdfast-system", name(p))).split("\n")) {
          const ts = /"ts":"([^"]+)"/.exec(line)?.[1];
          if (ts) out.push({ ts: Date.parse(ts), line });
        }
      }
      return out.sort((a, b) => a.ts - b.ts);
    };
    const published = (await logs("holdfast-controller-")).filter((l) =>
      l.line.includes('"msg":"model published"')
    );
    const serves = await logs("holdfast-node-");
    const after = (list: { ts: number }[], t: number) =>
      (list.find((l) => l.ts >= t)?.ts ?? NaN) - t;
    const readyToModelMs = measured.map(([, t]) => after(published, t));
    const readyToNodeAgentMs = measured.map(([n, t]) =>
      after(
        serves.filter((l) => l.line.includes(`"msg":"pod ${n} `) && l.line.includes(" serves ")),
        t,
      )
    );
    return {
      flowSync,
      held,
      lostAfterScale,
      lostAfterLbKill,
      readyToReachableMs,
      readyToModelMs,
      readyToNodeAgentMs,
      watchPerS: done?.per_s ?? 0,
    };
  } finally {
    for (const f of files) await Deno.remove(f).catch(() => {});
  }
}
