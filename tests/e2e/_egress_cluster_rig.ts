/**
 * The egress cluster test's rig (tests/e2e/_egress_cluster.ts): the lab cluster with the NAT
 * nodes labelled, what the test applies (plan), and the views and waits every scenario uses —
 * owners from the EgressNAT's status, the live NAT pods, the router's routes (BGP), the client
 * nodes' steering, a NAT pod frozen and thawed, the owners settling.
 */

import { until } from "../harness/mod.ts";
import {
  EXTERNAL_SERVER,
  FAR_NET,
  FAR_SERVER,
  type KubeletCluster,
  startKubeletCluster,
  WAN_NET,
  WAN_ROUTER,
} from "../../lab/kubelet/cluster.ts";
import { routeGateways, ROUTER_ASN } from "../../lab/_anycast_router.ts";
import { RouteHistory } from "../../lab/egress_bgp.ts";
import { run } from "../../lab/command.ts";
import type { HostProcess } from "../../lab/host_process.ts";

/** How the floating addresses reach the server's network. */
export type EgressClusterMode = "garp" | "bgp";

export const NS = "holdfast-system"; // the Secret holdfast-redis is there already
// Off w1 and w2, where the lab scheduler puts Redis and the controller (lowest names first): the
// node that dies must not take the control plane with it (Redis is one pod in the manifests).
export const NAT_NODES = ["w3", "w4", "w5"];
/** The client nodes: four, none of them a NAT node. */
export const CLIENT_NODES = ["w1", "w2", "w6", "w7"];
export const TCP_PORT = 8080, UDP_PORT = 8081, CONNECTIONS = 50;
/** The clients' bound: the test ends them (SIGUSR1) once every step is done. */
export const HOLD_MS = 240_000;
const NAT_ASN = 65200;

// deno-lint-ignore no-explicit-any
export type Any = any;

/** A JSON log line, or {} when it is none. */
export function json(line: string): Record<string, unknown> {
  try {
    return JSON.parse(line);
  } catch {
    return {};
  }
}

/** What the test applies: the EgressNAT, its floating addresses, the client pods, the server. */
export function plan(mode: EgressClusterMode) {
  const bgp = mode === "bgp";
  // GARP: on the server's segment; BGP: outside every segment, reachable only by the routes.
  const floating = bgp ? ["192.0.2.100", "192.0.2.101"] : ["198.18.0.100", "198.18.0.101"];
  const destinations = bgp ? FAR_NET : WAN_NET;
  /** Client pod → its node, group and floating address (sources entry i → addresses[i]). */
  const clients = CLIENT_NODES.map((node, i) => ({
    name: `client-${i}`,
    node,
    group: String(i % 2),
    address: floating[i % 2]!,
    connections: Math.floor(CONNECTIONS / CLIENT_NODES.length) + (i < 2 ? 1 : 0),
  }));
  const nat = {
    apiVersion: "holdfast.io/v1alpha1",
    kind: "EgressNAT",
    metadata: { name: "internet", namespace: NS },
    spec: {
      destinations: [destinations],
      addresses: floating,
      // The internal gateways serve clients on a shared segment; here nothing routes through them.
      gateways: ["10.8.0.100", "10.8.0.101"],
      sources: ["0", "1"].map((g) => ({ podSelector: { matchLabels: { "egress-client": g } } })),
      replicas: 3,
      nodeSelector: { "holdfast.io/egress-node": "true" },
      podAnnotations: {
        "k8s.v1.cni.cncf.io/networks": "wan@ext0",
        "cni.projectcalico.org/allowedSourcePrefixes": JSON.stringify([destinations]),
      },
      interfaces: { internal: "eth0", external: "ext0" },
      ...(bgp
        ? {
          bgp: {
            localAsn: NAT_ASN,
            peers: [{
              address: WAN_ROUTER,
              asn: ROUTER_ASN,
              bfd: { intervalMs: 100, multiplier: 3 },
            }],
          },
        }
        : {}),
    },
  };
  return {
    floating,
    clients,
    nat,
    server: bgp ? { host: "far", address: FAR_SERVER } : { host: "ext", address: EXTERNAL_SERVER },
  };
}

/** The cluster and the test's views of it; dispose to tear everything down. */
export class EgressRig implements AsyncDisposable {
  readonly plan: ReturnType<typeof plan>;
  /** Nodes killed. */
  readonly dead = new Set<string>();
  /** BGP: the router's routes to the floating addresses, every change. */
  readonly histories: RouteHistory[] = [];
  monitor?: HostProcess;

  private constructor(
    readonly t: Deno.TestContext,
    readonly mode: EgressClusterMode,
    readonly cluster: KubeletCluster,
  ) {
    this.plan = plan(mode);
  }

  /** The lab cluster with three NAT nodes, four client nodes and the wan segment. */
  static async start(t: Deno.TestContext, mode: EgressClusterMode): Promise<EgressRig> {
    const cluster = await startKubeletCluster({
      extraWorkers: 5,
      wan: true,
      nodeLabels: Object.fromEntries(
        NAT_NODES.map((n) => [n, { "holdfast.io/egress-node": "true" }]),
      ),
    });
    return new EgressRig(t, mode, cluster);
  }

  get topo() {
    return this.cluster.topo;
  }

  get kubelet() {
    return this.cluster.kubelet;
  }

  kubectl(args: string[], stdin?: unknown[]) {
    const c = this.cluster;
    return c.topo.exec("w1", [
      ...["kubectl", "--kubeconfig", c.kubeconfig, `--cache-dir=${c.dir}/kcache`],
      ...args,
    ], { stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"), timeoutMs: 30_000 });
  }

  /** A test step that stops the test when it fails. */
  async step(name: string, fn: () => Promise<void>): Promise<void> {
    if (!(await this.t.step(name, fn))) throw new Error(`step failed: ${name}`);
  }

  pods(): Any[] {
    return this.cluster.kube.store.list("/pods", NS) as Any[];
  }

  natPods(): Any[] {
    return this.pods().filter((p) => p.metadata.labels?.["holdfast.io/egress"] === "internet");
  }

  podOf(name: string): Any {
    return this.pods().find((p) => p.metadata.name === name);
  }

  /** NAT pods not on a dead node and not being deleted. */
  live(): Any[] {
    return this.natPods().filter((p) =>
      !this.dead.has(p.spec.nodeName) && !p.metadata.deletionTimestamp
    );
  }

  status(): Any {
    return (this.cluster.kube.store.get("holdfast.io/egressnats", NS, "internet") as Any)
      ?.status ?? {};
  }

  ownerOf(address: string): string | undefined {
    return (this.status().owners ?? []).find((o: Any) => o.address === address)?.pod;
  }

  /** The pod's host (its network namespace's topology name). */
  hostOf(pod: string): string {
    return this.kubelet.podHost(NS, pod)!;
  }

  nodeAgentLog(node: string): Promise<string> {
    const p = this.pods().find((p) =>
      p.metadata.labels?.["app.kubernetes.io/name"] === "holdfast-node" &&
      p.spec.nodeName === node && !p.metadata.deletionTimestamp
    );
    return p ? this.kubelet.logs(NS, p.metadata.name) : Promise.resolve("");
  }

  /** The last lines of every NAT pod's log (for an error message). */
  async natLogs(): Promise<string> {
    return (await Promise.all(
      this.natPods().map(async (p: Any) =>
        `${p.metadata.name} (${p.spec.nodeName}):\n` +
        (await this.kubelet.logs(NS, p.metadata.name)).split("\n").slice(-12).join("\n")
      ),
    )).join("\n---\n");
  }

  /** Waits until `address` is owned by a live pod other than `not`; returns it. */
  async newOwner(address: string, not: readonly string[], timeoutMs = 60_000): Promise<string> {
    await until(
      `${address} owned by a live pod other than ${not.join(", ")}`,
      () => {
        const o = this.ownerOf(address);
        return o !== undefined && !not.includes(o) &&
          this.live().some((p) => p.metadata.name === o);
      },
      timeoutMs,
      100,
    ).catch(async (err) => {
      const s = JSON.stringify(this.status());
      throw new Error(`${err}; status ${s}; logs:\n${await this.natLogs()}`);
    });
    return this.ownerOf(address)!;
  }

  /** Every client node of `address` steers to its owner now (its agent's log says so). */
  async steersToOwner(address: string): Promise<void> {
    const owner = this.ownerOf(address);
    for (const c of this.plan.clients.filter((c) => c.address === address)) {
      await until(
        `${c.node}'s agent steers ${address} to ${owner}`,
        async () => {
          const lines = (await this.nodeAgentLog(c.node)).split("\n").map(json);
          const last = lines.filter((l) =>
            l.msg === "egress steering to owner" && l.address === address
          ).at(-1);
          return last?.pod === owner ||
            (last === undefined &&
              lines.some((l) =>
                l.msg === "egress client steered" && l.address === address && l.owner === owner
              ));
        },
        30_000,
        100,
      );
    }
  }

  /**
   * The owners settle: both addresses owned by live pods and unchanged for `quietMs` (a
   * rebalance to a pod that joined comes 2 s after it is ready), the router's routes and the
   * client nodes' steering on them.
   */
  async settled(what: string, quietMs = 5_000): Promise<void> {
    const { floating } = this.plan;
    let last = "", since = performance.now();
    await until(
      `${what}: owners unchanged for ${quietMs} ms`,
      () => {
        const liveNames = new Set(this.live().map((p) => p.metadata.name));
        const owners = floating.map((a) => this.ownerOf(a));
        const now = owners.join();
        if (now !== last || !owners.every((o) => o !== undefined && liveNames.has(o))) {
          last = now;
          since = performance.now();
          return false;
        }
        return performance.now() - since >= quietMs;
      },
      120_000,
      250,
    ).catch(async (err) => {
      const s = JSON.stringify(this.status());
      throw new Error(`${err}; status ${s}; logs:\n${await this.natLogs()}`);
    });
    await this.routesFollowOwners(`${what}: the router's routes follow the owners`);
    for (const a of floating) await this.steersToOwner(a);
  }

  /** BGP: the router's route to each floating address goes via its owner's ext0 (only). */
  async routesFollowOwners(what: string): Promise<void> {
    if (this.mode !== "bgp") return;
    let seen = "";
    await until(
      what,
      async () => {
        const out = await this.topo.exec("router", ["ip", "-o", "-4", "route", "show"]);
        const views: string[] = [];
        let good = true;
        for (const a of this.plan.floating) {
          const line = out.stdout.split("\n").find((l) => routeGateways(l, a) !== null);
          const via = line ? routeGateways(line, a)! : [];
          const owner = this.ownerOf(a);
          const host = owner ? this.kubelet.podHost(NS, owner) : undefined;
          const ext = host
            ? (await this.topo.exec(host, ["ip", "-4", "-o", "addr", "show", "dev", "ext0"])).stdout
            : "";
          const own = /inet (198\.18\.0\.\d+)\/24/.exec(ext)?.[1];
          views.push(`${a} via ${via.join("+") || "none"} (owner ${owner} at ${own})`);
          // The owner as the status says, alive: not a dead node's pod nor a deleted one.
          const alive = this.live().some((p: Any) => p.metadata.name === owner);
          good &&= alive && own !== undefined && via.length === 1 && via[0] === own;
        }
        seen = views.join("; ");
        return good;
      },
      30_000,
      100,
    ).catch((err) => {
      throw new Error(`${err}: ${seen}`);
    });
  }

  /** BGP: follows every change of the router's routes from now on (lab/egress_bgp.ts). */
  async watchRoutes(): Promise<void> {
    if (this.mode !== "bgp") return;
    const monitor = this.topo.spawn("router", ["ip", "-o", "monitor", "route"]);
    this.monitor = monitor;
    await new Promise((r) => setTimeout(r, 100)); // listening before the snapshot
    for (const a of this.plan.floating) {
      const h = new RouteHistory(a, monitor, []);
      const now = await this.topo.exec("router", ["ip", "-4", "-o", "route", "show", `${a}/32`]);
      h.changes[0] = {
        at: performance.now(),
        wall: Date.now(),
        hops: (routeGateways(now.stdout, a) ?? []).sort(),
      };
      this.histories.push(h);
    }
  }

  /** Where each route history stands now (pass to {@link doubles} as `from`). */
  routeMark(): number[] {
    return this.histories.map((h) => h.doubles() && h.changes.length);
  }

  /** Route states with two next hops (from the marks `from` on). */
  doubles(from: number[] = [], to: number[] = []): string[] {
    return this.histories.flatMap((h, i) =>
      h.doubles().filter((c) => {
        const k = h.changes.indexOf(c);
        return k >= (from[i] ?? 0) && k < (to[i] ?? Infinity);
      }).map((c) => `${h.prefix} via ${c.hops.join("+")}`)
    );
  }

  /** BGP: the router peers with every address the NAT pods can get on wan (.21 upwards). */
  async routerPeersNatPods(): Promise<void> {
    if (this.mode !== "bgp") return;
    const router = this.cluster.router;
    await router.setPeers([
      ...router.peers,
      ...Array.from({ length: 10 }, (_, k) => ({
        name: `nat${21 + k}`,
        address: `198.18.0.${21 + k}`,
        asn: NAT_ASN,
      })),
    ]);
  }

  /** Sends `signal` to every process of pod `pod` (its agent, bird and bird's watchdog). */
  async signalPod(pod: string, signal: "STOP" | "CONT"): Promise<number> {
    const out = await run(["ip", "netns", "pids", this.topo.ns(this.hostOf(pod))], {
      check: false,
    });
    const pids = out.stdout.split("\n").map((l) => l.trim()).filter((l) => /^\d+$/.test(l));
    for (const pid of pids) await run(["kill", `-${signal}`, pid], { check: false });
    return pids.length;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.monitor?.stop("SIGKILL", 1_000).catch(() => {});
    await this.cluster[Symbol.asyncDispose]();
  }
}
