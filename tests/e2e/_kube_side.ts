/**
 * The Kubernetes side of the e2e tests in the virtual cluster's `ctl` namespace: the API test
 * server on its loopback, kubectl through `ip netns exec`, `main.ts controller` publishing the
 * model into the cluster's Redis; and waiting for the LB agents to apply it.
 *
 * @module
 */
import { type AgentRelease, type Cluster, type HostProcess } from "../../lab/mod.ts";
import { type ModelEntry, modelKeys } from "../../controller/model/mod.ts";

const REPO = new URL("../../", import.meta.url).pathname;
const API_PORT = 6443; // on the ctl namespace's loopback

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 100 ms until it returns true; throws after `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let k = 0; k < 10_000 && Date.now() < deadline; k++) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** The Kubernetes side inside the cluster's ctl namespace: API server, kubectl, controller. */
export class KubeSide {
  readonly kubeconfig: string;
  #namespace = false;
  constructor(readonly cluster: Cluster) {
    this.kubeconfig = `${cluster.dir}/kubeconfig`;
  }

  /** Starts the API test server (with Holdfast's CRDs) on the ctl namespace's loopback. */
  async startApiServer(): Promise<void> {
    const server = this.cluster.topo.spawn("ctl", [
      Deno.execPath(),
      "run",
      "-P=kube",
      `--config=${REPO}deno.json`,
      "--quiet",
      "--no-prompt",
      `${REPO}lab/kube/main.ts`,
      `--port=${API_PORT}`,
      `--crds=${REPO}k8s/crds`,
      `--kubeconfig=${this.kubeconfig}`,
    ], { stderr: "inherit" });
    await server.waitForLine((l) => l.includes("kube test server listening"), {
      timeoutMs: 30_000,
    });
  }

  /**
   * `main.ts controller` publishing the model into the cluster's Redis (of `release`, another
   * build: lab/previous_release.ts; default this checkout). The first start creates its namespace.
   */
  async startController(release?: AgentRelease): Promise<HostProcess> {
    // (`kubectl create namespace` sends protobuf, which the test server does not read.)
    if (!this.#namespace) {
      await this.kubectl(["create", "-f", "-"], {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "holdfast-system" },
      });
      this.#namespace = true;
    }
    return this.cluster.topo.spawn("ctl", [
      Deno.execPath(),
      "run",
      "-P=controller",
      `--config=${release?.config ?? `${REPO}deno.json`}`,
      "--quiet",
      "--no-prompt",
      release?.main ?? `${REPO}main.ts`,
      "controller",
      `--kubeconfig=${this.kubeconfig}`,
      "--identity=controller-0",
      `--redis=${this.cluster.redis.url}`,
      "--listen=127.0.0.1:9480",
    ], { stderr: "inherit" });
  }

  /** Runs kubectl in the ctl namespace; returns stdout, throws on a non-zero exit. */
  async kubectl(args: readonly string[], stdin?: unknown): Promise<string> {
    const { stdout } = await this.cluster.topo.exec("ctl", [
      "kubectl",
      `--kubeconfig=${this.kubeconfig}`,
      `--cache-dir=${this.cluster.dir}/kube-cache`,
      ...args,
    ], { stdin: stdin === undefined ? undefined : JSON.stringify(stdin), timeoutMs: 30_000 });
    return stdout;
  }

  async json<T>(args: readonly string[]): Promise<T> {
    return JSON.parse(await this.kubectl([...args, "-o", "json"])) as T;
  }

  /**
   * Creates AddressPool `lab` of `cidrs` (the LB IPs the router sends to the LB nodes) and the
   * LoadBalancer Service `default/web` of Holdfast's class on the cluster's port, `spec` added.
   */
  async createPoolAndService(
    cidrs: readonly string[],
    spec: Record<string, unknown> = {},
  ): Promise<void> {
    await this.kubectl(["create", "-f", "-"], {
      apiVersion: "holdfast.io/v1alpha1",
      kind: "AddressPool",
      metadata: { name: "lab" },
      spec: { blocks: cidrs.map((cidr) => ({ cidr })) },
    });
    await this.kubectl(["create", "-f", "-"], {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web", namespace: "default" },
      spec: {
        type: "LoadBalancer",
        loadBalancerClass: "holdfast.io/lb",
        ports: [{ name: "http", port: this.cluster.port, protocol: "TCP" }],
        ...spec,
      },
    });
  }
}

/** Waits until every running agent applied the model's current revision. */
export async function agentsCaughtUp(cluster: Cluster): Promise<void> {
  const { stdout } = await cluster.topo.exec("ctl", [
    "redis-cli",
    "-u",
    cluster.redis.url,
    "GET",
    modelKeys().rev,
  ]);
  const rev = Number(stdout.trim());
  for (const node of cluster.lbNodes.values()) {
    const agent = node.agent;
    if (!agent) continue;
    await agent.waitForLine((l) => {
      if (!l.includes('"model applied"')) return false;
      return Number(JSON.parse(l).rev) >= rev;
    }, { timeoutMs: 15_000 });
  }
}

/** Service `name`'s entry in the model the controller published to the cluster's Redis. */
export async function modelEntryOf(
  cluster: Cluster,
  name = "default/web",
): Promise<ModelEntry | undefined> {
  const { stdout } = await cluster.topo.exec("ctl", [
    "redis-cli",
    "-u",
    cluster.redis.url,
    "HGET",
    modelKeys().services,
    name,
  ]);
  return stdout.trim() === "" ? undefined : JSON.parse(stdout) as ModelEntry;
}
