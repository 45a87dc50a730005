/**
 * A virtual Kubernetes cluster run from the manifests: the API test server (lab/kube/, in this
 * process), Node objects for network namespaces, and the lab kubelet (kubelet.ts) running what
 * `deno task deploy` applies. Topology (IPv4):
 *
 * ```
 *  client 10.10.0.2 ── c0 router ── l1 ── lb1  10.11.1.2 (holdfast.io/lb-node=true, tainted)
 *                        ├── n1 ── w1 10.12.1.2   pods 10.2.1.0/24 behind veths
 *                        └── n2 ── w2 10.12.2.2   pods 10.2.2.0/24 behind veths
 * ```
 *
 * The router sends the address pool `10.0.100.0/28` to lb1 and each pod CIDR to its node. Every
 * node has a bpffs of its own (its host path `/sys/fs/bpf`).
 *
 * @module
 */

import { createTopology, type Topology } from "../netns.ts";
import { run } from "../command.ts";
import { unmountUnder } from "../_anycast_sweep.ts";
import { type KubeServer, startKubeServer } from "../kube/mod.ts";
import { attachXdp, BpfObject, DEFAULT_OBJECT_DIR } from "../../node/bpf/mod.ts";
import { type KubeletNode, LabKubelet } from "./kubelet.ts";

const REPO = new URL("../../", import.meta.url).pathname;
/** The addresses the router sends to the LB node. */
export const POOL = "10.0.100.0/28";
export const CLIENT = "10.10.0.2";

/** The running cluster. */
export interface KubeletCluster extends AsyncDisposable {
  readonly topo: Topology;
  readonly kube: KubeServer;
  readonly kubelet: LabKubelet;
  readonly kubeconfig: string;
  readonly dir: string;
  readonly nodes: readonly KubeletNode[];
  /** `deno task deploy` against the API server; resolves with its output, throws on failure. */
  deploy(args?: readonly string[]): Promise<string>;
}

const NODES = [
  { name: "lb1", link: "l1", net: "10.11.1", index: 3, lb: true },
  { name: "w1", link: "n1", net: "10.12.1", index: 1, lb: false },
  { name: "w2", link: "n2", net: "10.12.2", index: 2, lb: false },
];

/** Builds the network, starts the API server and Nodes, and the kubelet. */
export async function startKubeletCluster(): Promise<KubeletCluster> {
  const dir = await Deno.makeTempDir({ prefix: `hf-${Deno.pid}-kubelet-` });
  const cleanups: (() => PromiseLike<void> | void)[] = [];
  const teardown = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
    await unmountUnder(dir);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    const topo = await createTopology({
      hosts: [
        { name: "client" },
        {
          name: "router",
          sysctls: {
            "net.ipv4.ip_forward": 1,
            "net.ipv4.conf.all.rp_filter": 2,
            "net.ipv4.conf.default.rp_filter": 2,
          },
        },
        ...NODES.map((n) => ({ name: n.name, sysctls: { "net.ipv4.ip_forward": 1 } })),
      ],
      links: [
        {
          a: { host: "client", ifname: "eth0", address: `${CLIENT}/24`, txChecksumOff: true },
          b: { host: "router", ifname: "c0", address: "10.10.0.1/24" },
        },
        ...NODES.map((n) => ({
          a: { host: "router", ifname: n.link, address: `${n.net}.1/24`, txChecksumOff: true },
          b: { host: n.name, ifname: "eth0", address: `${n.net}.2/24` },
        })),
      ],
      routes: [
        { host: "client", to: "default", via: "10.10.0.1" },
        { host: "router", to: POOL, via: "10.11.1.2" },
        ...NODES.flatMap((n) => [
          { host: n.name, to: "default", via: `${n.net}.1` },
          { host: "router", to: `10.2.${n.index}.0/24`, via: `${n.net}.2` },
        ]),
      ],
    });
    cleanups.push(() => topo.destroy());
    const pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    cleanups.push(() => pass[Symbol.dispose]());
    attachXdp(pass.program("hf_xdp_pass"), "l1", { netns: topo.ns("router") });
    const nodes: KubeletNode[] = [];
    for (const n of NODES) {
      const bpffs = `${dir}/bpffs-${n.name}`;
      await Deno.mkdir(bpffs);
      await run(["mount", "-t", "bpf", "bpf", bpffs]);
      nodes.push({ name: n.name, ip: `${n.net}.2`, index: n.index, bpffs });
    }
    const kube = await startKubeServer({ crdDirs: [`${REPO}k8s/crds`] });
    cleanups.push(() => kube[Symbol.asyncDispose]());
    const kubeconfig = await kube.writeKubeconfig(`${dir}/kubeconfig`);
    const nodeType = kube.registry.find("", "v1", "nodes")!;
    for (const n of NODES) {
      kube.rest.create(nodeType, "", {
        metadata: {
          name: n.name,
          labels: {
            "kubernetes.io/hostname": n.name,
            "kubernetes.io/os": "linux",
            ...(n.lb ? { "holdfast.io/lb-node": "true" } : {}),
          },
        },
        spec: {
          podCIDR: `10.2.${n.index}.0/24`,
          ...(n.lb ? { taints: [{ key: "holdfast.io/lb-node", effect: "NoSchedule" }] } : {}),
        },
      }, { manager: "kubelet" });
      kube.rest.patch(nodeType, "", n.name, "merge", {
        status: {
          addresses: [{ type: "InternalIP", address: `${n.net}.2` }, {
            type: "Hostname",
            address: n.name,
          }],
          conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
        },
      }, { manager: "kubelet", subresource: "status" });
    }
    const kubelet = new LabKubelet(topo, kube, nodes, dir, kubeconfig);
    cleanups.push(() => kubelet[Symbol.asyncDispose]());
    await kubelet.start();
    return {
      topo,
      kube,
      kubelet,
      kubeconfig,
      dir,
      nodes,
      deploy: async (args = []) => {
        const out = await new Deno.Command(Deno.execPath(), {
          args: [
            ...["run", "-P=deploy", "--quiet", "--no-prompt", `${REPO}scripts/deploy.ts`],
            ...["--kubeconfig", kubeconfig, ...args],
          ],
          cwd: REPO,
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
        if (!out.success) throw new Error(`deno task deploy failed:\n${text}`);
        return text;
      },
      [Symbol.asyncDispose]: teardown,
    };
  } catch (e) {
    await teardown();
    throw e;
  }
}
