/**
 * The lab kubelet: runs the Pods the API test server schedules on the lab's nodes, as their specs
 * declare (lab/kubelet/pod_spec.ts), each in its node's network namespace (hostNetwork) or in a
 * pod namespace behind the CNI-like helper (cni.ts). It writes each Pod's status (phase, podIP,
 * hostIP, Ready from its readiness probes, run by one prober per node from the node's namespace:
 * ready on a success, not ready after `failureThreshold` failures in a row), restarts containers
 * that exit, and on a delete stops them with SIGTERM, waits up to the pod's
 * `terminationGracePeriodSeconds`, then releases the pod (its finalizer) so the object goes.
 * Each pass also runs the workload controllers (workloads.ts) and the endpoint-slice controller
 * (endpoints.ts). The API server is reached in every namespace at `127.0.0.1:PORT` through a
 * relay (lab/_anycast_kube.ts); Service names resolve through an `/etc/hosts` kept current.
 * `killNode` stands for a node's death: nothing on it runs again and its pods turn NotReady.
 *
 * @module
 */

import type { KubeServer, Obj } from "../kube/mod.ts";
import type { Topology } from "../netns.ts";
import type { HostProcess } from "../host_process.ts";
import { type Relay, relayIntoNamespace } from "../_anycast_kube.ts";
import { run } from "../command.ts";
import { NodePodNetwork, type PodNet, type SecondaryNetwork } from "./cni.ts";
import { type ContainerRun, containerRuns } from "./pod_spec.ts";
import { KUBELET_FINALIZER, podReady, Workloads } from "./workloads.ts";
import { EndpointSlices } from "./endpoints.ts";

type Any = Record<string, unknown>;
const o = (v: unknown): Any => (v ?? {}) as Any;
const CONTAINER = new URL("./_container.ts", import.meta.url).pathname;
const PROBER = new URL("./_prober.ts", import.meta.url).pathname;
const W = { manager: "kubelet" };

/** A node of the lab, as the kubelet knows it. */
export interface KubeletNode {
  readonly name: string;
  readonly ip: string;
  /** Its IPv6 address on a dual-stack node (its pods get IPv6 addresses too). */
  readonly ip6?: string;
  /** Index N of its pod CIDR 10.2.N.0/24 (IPv6: cni.ts podCidr6). */
  readonly index: number;
  /** Its bpffs (mounted by the caller). */
  readonly bpffs: string;
}

interface Container {
  readonly run: ContainerRun;
  proc: HostProcess | null;
  exited: boolean;
  /** The readiness probe's verdict (kept while the prober has no new result). */
  ready: boolean;
  restarts: number;
  restartAt: number;
}

interface RunningPod {
  readonly key: string;
  readonly node: KubeletNode;
  readonly ip: string;
  readonly net?: PodNet;
  readonly relay?: Relay;
  readonly dir: string;
  containers: Container[];
  terminating: boolean;
}

/** The kubelet of every lab node; `start()` it, dispose to stop every pod. */
export class LabKubelet implements AsyncDisposable {
  readonly #pods = new Map<string, RunningPod>();
  readonly #nets = new Map<string, NodePodNetwork>();
  readonly #relays: Relay[] = [];
  readonly #probers: HostProcess[] = [];
  readonly #workloads: Workloads;
  readonly #slices: EndpointSlices;
  #stopped = false;
  readonly #dead = new Set<string>();
  #loop: Promise<void> | undefined;
  #serial = 0;

  constructor(
    readonly topo: Topology,
    readonly kube: KubeServer,
    readonly nodes: readonly KubeletNode[],
    readonly dir: string,
    readonly kubeconfig: string,
    /** Secondary networks pods may ask for (cni.ts, `k8s.v1.cni.cncf.io/networks`). */
    networks: readonly SecondaryNetwork[] = [],
  ) {
    this.#workloads = new Workloads(kube.rest);
    this.#slices = new EndpointSlices(kube.rest);
    const byName = new Map(networks.map((n) => [n.name, n]));
    for (const n of nodes) {
      this.#nets.set(
        n.name,
        new NodePodNetwork(topo, n.name, n.index, dir, n.ip6 !== undefined, byName),
      );
    }
  }

  /** The topology host (network namespace) of a running pod not on the host network. */
  podHost(namespace: string, name: string): string | undefined {
    return this.#pods.get(`${namespace}/${name}`)?.net?.host;
  }

  /** The pod network helper of `node`. */
  network(node: string): NodePodNetwork {
    return this.#nets.get(node)!;
  }

  /** What a pod's containers printed (stdout and stderr), for diagnostics. */
  async logs(namespace: string, name: string): Promise<string> {
    const p = this.#pods.get(`${namespace}/${name}`);
    if (!p) return "";
    return await Deno.readTextFile(`${p.dir}/log`).catch(() => "");
  }

  /** Starts the probers, the relays into the nodes and the reconcile loop. */
  async start(): Promise<void> {
    await Deno.mkdir(`${this.dir}/sa`, { recursive: true });
    await Deno.copyFile(this.kubeconfig, `${this.dir}/sa/kubeconfig`);
    await this.#writeHosts();
    for (const n of this.nodes) {
      this.#relays.push(relayIntoNamespace(this.topo.ns(n.name), this.kube.port));
      this.#probers.push(this.topo.spawn(n.name, [
        ...[Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read", "--allow-write"],
        ...[PROBER, `${this.dir}/probes-${n.name}.json`, `${this.dir}/results-${n.name}.json`],
      ], { stdout: "null", stderr: "null" }));
    }
    this.#loop = (async () => {
      for (let i = 0; i < 10_000_000 && !this.#stopped; i++) {
        try {
          await this.#pass();
        } catch (e) {
          console.error(JSON.stringify({ msg: "lab kubelet pass failed", error: String(e) }));
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
  }

  #type(plural: string) {
    return this.kube.registry.find("", "v1", plural)!;
  }

  async #pass(): Promise<void> {
    this.#workloads.reconcile();
    const store = this.kube.store;
    const byNode = new Map(this.nodes.map((n) => [n.name, n]));
    const pods = store.list("/pods").filter((p) => {
      const node = String(o(p.spec).nodeName);
      return byNode.has(node) && !this.#dead.has(node);
    });
    const seen = new Set<string>();
    let changed = false;
    for (const pod of pods) {
      const m = o(pod.metadata), key = `${m.namespace}/${m.name}`;
      seen.add(key);
      const running = this.#pods.get(key);
      if (running === undefined && m.deletionTimestamp === undefined) {
        await this.#startPod(pod, byNode.get(String(o(pod.spec).nodeName))!);
        changed = true;
      } else if (running && m.deletionTimestamp !== undefined && !running.terminating) {
        running.terminating = true;
        this.#terminate(running, pod);
      }
    }
    for (const [key, p] of this.#pods) {
      if (!seen.has(key) && !this.#dead.has(p.node.name)) {
        await this.#release(p);
        changed = true;
      }
    }
    if (changed) await this.#writeHosts();
    await this.#containersAndProbes();
    this.#slices.reconcile();
  }

  async #startPod(pod: Obj, node: KubeletNode): Promise<void> {
    const m = o(pod.metadata), key = `${m.namespace}/${m.name}`;
    const host = o(pod.spec).hostNetwork === true;
    let net: PodNet | undefined;
    try {
      net = host ? undefined : await this.#nets.get(node.name)!.add(
        o(m.annotations) as Record<string, string>,
      );
    } catch (e) {
      console.error(
        JSON.stringify({ msg: "lab kubelet cannot run pod", pod: key, error: String(e) }),
      );
      return;
    }
    const ip = net?.ip ?? node.ip;
    const hostIPs = [node.ip, ...(node.ip6 ? [node.ip6] : [])];
    const podIPs = net ? [net.ip, ...(net.ip6 ? [net.ip6] : [])] : hostIPs;
    const dir = `${this.dir}/pod-${++this.#serial}`;
    await Deno.mkdir(dir, { recursive: true });
    const relay = net ? relayIntoNamespace(this.topo.ns(net.host), this.kube.port) : undefined;
    const p: RunningPod = { key, node, ip, net, relay, dir, containers: [], terminating: false };
    this.#pods.set(key, p);
    const status = {
      phase: "Running",
      hostIP: node.ip,
      hostIPs: hostIPs.map((ip) => ({ ip })),
      podIP: ip,
      podIPs: podIPs.map((ip) => ({ ip })),
      startTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      conditions: [{ type: "Ready", status: "False" }],
    };
    this.kube.rest.patch(this.#type("pods"), String(m.namespace), String(m.name), "merge", {
      status,
    }, { ...W, subresource: "status" });
    try {
      const runs = await containerRuns(pod, {
        nodeName: node.name,
        hostIP: node.ip,
        podIP: ip,
        hostIPs,
        podIPs,
        bpffs: node.bpffs,
        dir,
        kubeconfig: "/run/secrets/kubernetes.io/serviceaccount/kubeconfig",
        secret: (ns, name) => {
          const s = this.kube.store.get("/secrets", ns, name);
          return s ? o(s.data) as Record<string, string> : undefined;
        },
      });
      p.containers = runs.map((run) => ({
        run,
        proc: null,
        exited: false,
        ready: false,
        restarts: 0,
        restartAt: 0,
      }));
    } catch (e) {
      console.error(
        JSON.stringify({ msg: "lab kubelet cannot run pod", pod: key, error: String(e) }),
      );
    }
  }

  #spawn(p: RunningPod, c: Container): void {
    const spec = `${p.dir}/${c.run.name}.json`;
    Deno.writeTextFileSync(
      spec,
      JSON.stringify({
        argv: c.run.argv,
        env: c.run.env,
        cwd: c.run.cwd,
        mounts: [...c.run.mounts, {
          source: `${this.dir}/sa`,
          target: "/run/secrets/kubernetes.io/serviceaccount",
        }],
        hosts: `${this.dir}/hosts`,
        log: `${p.dir}/log`,
        pidFile: `${p.dir}/${c.run.name}.pid`,
      }),
    );
    c.proc = this.topo.spawn(p.net?.host ?? p.node.name, [
      ...[Deno.execPath(), "run", "--quiet", "-A", CONTAINER, spec],
    ], { stdout: "null", stderr: "null" });
    c.exited = false;
    const proc = c.proc;
    proc.child.status.then(() => {
      if (c.proc === proc) c.exited = true;
    });
  }

  async #containersAndProbes(): Promise<void> {
    const now = Date.now();
    const targets = new Map<string, Record<string, unknown>>(this.nodes.map((n) => [n.name, {}]));
    const results = new Map<string, Record<string, { ok: boolean; fails: number }>>();
    for (const n of this.nodes) {
      const text = await Deno.readTextFile(`${this.dir}/results-${n.name}.json`).catch(() => "{}");
      results.set(n.name, JSON.parse(text));
    }
    for (const p of this.#pods.values()) {
      if (this.#dead.has(p.node.name)) continue;
      let ready = p.containers.length > 0;
      for (const c of p.containers) {
        const exited = c.exited;
        if (!p.terminating && (c.proc === null || exited)) {
          if (c.proc !== null && c.restartAt === 0) {
            c.restartAt = now + Math.min(10_000, 1_000 * 2 ** c.restarts++);
          }
          if (now >= c.restartAt) {
            c.restartAt = 0;
            this.#spawn(p, c);
          }
          ready = c.ready = false;
          continue;
        }
        const id = `${p.key}/${c.run.name}`;
        if (c.run.readiness) {
          targets.get(p.node.name)![id] = c.run.readiness;
          const r = results.get(p.node.name)![id];
          if (r?.ok) c.ready = true;
          else if (r && r.fails >= c.run.readiness.failureThreshold) c.ready = false;
          if (!c.ready) ready = false;
        }
      }
      const [ns, name] = p.key.split("/") as [string, string];
      const pod = this.kube.store.get("/pods", ns, name);
      if (pod && podReady(pod) !== ready) {
        this.kube.rest.patch(this.#type("pods"), ns, name, "merge", {
          status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
        }, { ...W, subresource: "status" });
      }
    }
    for (const [node, t] of targets) {
      // Through a rename: the prober never reads half a file.
      const file = `${this.dir}/probes-${node}.json`;
      await Deno.writeTextFile(`${file}.tmp`, JSON.stringify(t));
      await Deno.rename(`${file}.tmp`, file);
    }
  }

  /** SIGTERM, the grace period, then the pod's network and finalizer go. */
  #terminate(p: RunningPod, pod: Obj): void {
    const grace = Number(o(pod.spec).terminationGracePeriodSeconds ?? 30) * 1_000;
    (async () => {
      await Promise.all(p.containers.map((c) => c.proc?.stop("SIGTERM", grace)));
      await this.#killLeftovers(p);
      const m = o(pod.metadata);
      const now = this.kube.store.get("/pods", String(m.namespace), String(m.name));
      if (now) {
        const finalizers = ((o(now.metadata).finalizers ?? []) as string[])
          .filter((f) => f !== KUBELET_FINALIZER);
        this.kube.rest.patch(this.#type("pods"), String(m.namespace), String(m.name), "merge", {
          metadata: { finalizers },
        }, W);
      }
    })().catch((e) => console.error(JSON.stringify({ msg: "terminate", error: String(e) })));
  }

  async #killLeftovers(p: RunningPod): Promise<void> {
    for (const c of p.containers) {
      const pid = await Deno.readTextFile(`${p.dir}/${c.run.name}.pid`).catch(() => "");
      if (/^\d+$/.test(pid.trim())) await run(["kill", "-9", pid.trim()], { check: false });
    }
  }

  async #release(p: RunningPod): Promise<void> {
    this.#pods.delete(p.key);
    await Promise.all(p.containers.map((c) => c.proc?.stop("SIGKILL", 1_000)));
    await this.#killLeftovers(p);
    p.relay?.close();
    if (p.net) await this.#nets.get(p.node.name)!.remove(p.net);
  }

  /**
   * Node `name` died: its containers are killed at once, its pods' secondary interfaces go down,
   * nothing on it is run again, and its pods turn NotReady (as the node lifecycle controller marks
   * them); the pod objects stay.
   */
  async killNode(name: string): Promise<void> {
    this.#dead.add(name);
    for (const p of this.#pods.values()) {
      if (p.node.name !== name) continue;
      if (p.net) await this.#nets.get(name)!.cut(p.net);
      await Promise.all(p.containers.map((c) => c.proc?.stop("SIGKILL", 1_000)));
      await this.#killLeftovers(p);
      const [ns, pod] = p.key.split("/") as [string, string];
      this.kube.rest.patch(this.#type("pods"), ns, pod, "merge", {
        status: { conditions: [{ type: "Ready", status: "False" }] },
      }, { ...W, subresource: "status" });
    }
  }

  async #writeHosts(): Promise<void> {
    const lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"];
    const store = this.kube.store;
    for (const svc of store.list("/services")) {
      const m = o(svc.metadata), sel = o(o(svc.spec).selector);
      if (Object.keys(sel).length === 0) continue;
      const pod = store.list("/pods", String(m.namespace)).find((p) =>
        o(p.status).podIP !== undefined &&
        Object.entries(sel).every(([k, v]) => o(o(p.metadata).labels)[k] === v)
      );
      if (pod) {
        const n = `${m.name}.${m.namespace}.svc`;
        lines.push(`${o(pod.status).podIP} ${n} ${n}.cluster.local`);
      }
    }
    // Written in place (same inode): containers see it through their bind mount.
    await Deno.writeTextFile(`${this.dir}/hosts`, lines.join("\n") + "\n");
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    for (const p of [...this.#pods.values()]) await this.#release(p);
    for (const r of this.#relays) r.close();
    await Promise.all(this.#probers.map((p) => p.stop("SIGKILL", 1_000)));
  }
}
