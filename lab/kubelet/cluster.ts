/**
 * A virtual Kubernetes cluster run from the manifests: the API test server (lab/kube/, in this
 * process), Node objects for network namespaces, and the lab kubelet (kubelet.ts) running what
 * `deno task deploy` applies. Topology (IPv4):
 *
 * ```
 *  client 10.10.0.2 ── c0 router ── l1 ── lb1  10.11.1.2 (holdfast.io/lb-node=true, tainted)
 *                        ├── l2 ── lb2  10.11.2.2 (holdfast.io/lb-node=true, tainted)
 *                        ├── n1 ── w1 10.12.1.2   pods 10.2.1.0/24 behind veths
 *                        └── n2 ── w2 10.12.2.2   pods 10.2.2.0/24 behind veths
 * ```
 *
 * With `ipv6` the cluster is dual stack: every link has IPv6 too (client `2001:db8:10::2`, node
 * links `2001:db8:11:K::/64` and `2001:db8:12:K::/64`, `::2` the node), each node an IPv6 pod CIDR
 * (`2001:db8:2:N::/64`, cni.ts), Nodes list both addresses and CIDRs, and the LB nodes also peer
 * with the router over IPv6 for the IPv6 pool {@linkcode POOL6} (a session per family).
 *
 * With `extraWorkers` N there are nodes w3…w(2+N) too (link `nK`, `10.12.K.2`, pod CIDR index
 * K+2), labelled as `nodeLabels` says. With `wan` there is an external segment
 * {@linkcode WAN_NET} (a bridge in host `wan`): the external server host `ext` ({@linkcode
 * EXTERNAL_SERVER}) and the router (`.254`) are on it, and pods reach it through the secondary
 * network `wan` (cni.ts: annotation `k8s.v1.cni.cncf.io/networks: wan@IFNAME`, addresses from
 * `.21`, with a route to {@linkcode FAR_NET} via the router). `ext` has no route beyond its
 * segment: it can answer only addresses on it. The server host `far` ({@linkcode FAR_SERVER}) is
 * behind the router (default route via it): it answers whatever the router routes, e.g. floating
 * addresses the router learns over BGP from peers on `wan` ({@linkcode RouterBird.setPeers}).
 *
 * The router routes each pod CIDR to its node, and runs bird2 (lab/_anycast_router.ts, AS 65000,
 * BFD, ECMP) peering with each LB node's address (AS {@linkcode LB_ASN}): the LB IPs reach the LB
 * nodes once their agents announce them (the LoadBalancerConfig's `spec.bgp`,
 * {@linkcode bgpSpec}). Every node has a bpffs of its own (its host path `/sys/fs/bpf`).
 *
 * @module
 */

import { createTopology, type Topology } from "../netns.ts";
import { run } from "../command.ts";
import { unmountUnder } from "../_anycast_sweep.ts";
import { type KubeServer, startKubeServer } from "../kube/mod.ts";
import { attachXdp, BpfObject, DEFAULT_OBJECT_DIR } from "../../node/bpf/mod.ts";
import { ROUTER_ASN, RouterBird } from "../_anycast_router.ts";
import { type KubeletNode, LabKubelet } from "./kubelet.ts";
import { podCidr6, SecondaryNetwork } from "./cni.ts";

const REPO = new URL("../../", import.meta.url).pathname;
/** The addresses the router sends to the LB node. */
export const POOL = "10.0.100.0/28";
/** The IPv6 addresses the router sends to the LB nodes (dual stack). */
export const POOL6 = "2001:db8:100::/124";
const CLIENT = "10.10.0.2";
/** The client's IPv6 address (dual stack). */
export const CLIENT6 = "2001:db8:10::2";
/** The LB nodes' AS (one for all: the LoadBalancerConfig has one `localAsn`). */
export const LB_ASN = 65100;
const BFD = { intervalMs: 100, multiplier: 3 };
/** The external segment (`wan`). */
export const WAN_NET = "198.18.0.0/24";
/** The external server's address on it (host `ext`). */
export const EXTERNAL_SERVER = "198.18.0.1";
/** The router's address on `wan` (a BGP peer for pods there). */
export const WAN_ROUTER = "198.18.0.254";
/** The network behind the router (host `far`). */
export const FAR_NET = "203.0.113.0/24";
/** The server behind the router (host `far`). */
export const FAR_SERVER = "203.0.113.2";

/**
 * The LoadBalancerConfig `spec.bgp` that peers each LB node with the router on its link; with
 * `ipv6`, over IPv6 too for {@linkcode POOL6}.
 */
export function bgpSpec(ipv6 = false): Record<string, unknown> {
  const lbs = NODES.filter((n) => n.lb);
  const peer = (n: typeof lbs[number], address: string) => ({
    address,
    asn: ROUTER_ASN,
    bfd: BFD,
    nodeSelector: { matchLabels: { "kubernetes.io/hostname": n.name } },
  });
  return {
    localAsn: LB_ASN,
    prefixes: ipv6 ? [POOL, POOL6] : [POOL],
    peers: [
      ...lbs.map((n) => peer(n, `${n.net}.1`)),
      ...(ipv6 ? lbs.map((n) => peer(n, `${n.net6}::1`)) : []),
    ],
  };
}

/** The running cluster. */
export interface KubeletCluster extends AsyncDisposable {
  readonly topo: Topology;
  readonly kube: KubeServer;
  readonly kubelet: LabKubelet;
  readonly kubeconfig: string;
  readonly dir: string;
  readonly nodes: readonly KubeletNode[];
  /** The router's bird. */
  readonly router: RouterBird;
  /**
   * Kills node `name` as a power cut would: its uplink goes down, every process in its namespace
   * is killed, the kubelet stops running its pods, the Node and its pods turn NotReady.
   */
  killNode(name: string): Promise<void>;
  /** `deno task deploy` against the API server; resolves with its output, throws on failure. */
  deploy(args?: readonly string[]): Promise<string>;
}

const NODES = [
  { name: "lb1", link: "l1", net: "10.11.1", net6: "2001:db8:11:1", index: 3, lb: true },
  { name: "lb2", link: "l2", net: "10.11.2", net6: "2001:db8:11:2", index: 4, lb: true },
  { name: "w1", link: "n1", net: "10.12.1", net6: "2001:db8:12:1", index: 1, lb: false },
  { name: "w2", link: "n2", net: "10.12.2", net6: "2001:db8:12:2", index: 2, lb: false },
];

/** The nodes of a cluster with `extra` more workers. */
function nodesOf(extra: number): typeof NODES {
  if (!(extra >= 0 && extra <= 8)) throw new Error(`extraWorkers ${extra}: 0..8`);
  const more = Array.from({ length: extra }, (_, i) => {
    const k = i + 3;
    return {
      name: `w${k}`,
      link: `n${k}`,
      net: `10.12.${k}`,
      net6: `2001:db8:12:${k}`,
      index: k + 2,
      lb: false,
    };
  });
  return [...NODES, ...more];
}

/** IPv6 in fresh namespaces: no duplicate address detection, addresses kept on link down. */
const SYSCTLS6 = {
  "net.ipv6.conf.all.accept_dad": 0,
  "net.ipv6.conf.default.accept_dad": 0,
  "net.ipv6.conf.all.keep_addr_on_down": 1,
  "net.ipv6.conf.all.forwarding": 1,
};

/** Options of {@linkcode startKubeletCluster}. */
export interface KubeletClusterOptions {
  /** Dual stack (default false: IPv4 only). */
  readonly ipv6?: boolean;
  /** Worker nodes besides w1 and w2 (module doc; default 0). */
  readonly extraWorkers?: number;
  /** Labels added to the Nodes, by node name. */
  readonly nodeLabels?: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** The external segment and the secondary network `wan` (module doc; IPv4 only). */
  readonly wan?: boolean;
}

const WAN = (ifname: string) => ({ host: "wan", ifname });

/** Builds the network, starts the API server and Nodes, and the kubelet. */
export async function startKubeletCluster(
  options: KubeletClusterOptions = {},
): Promise<KubeletCluster> {
  const v6 = options.ipv6 === true;
  const wan = options.wan === true;
  const NODES = nodesOf(options.extraWorkers ?? 0);
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
        { name: "client", ...(v6 ? { sysctls: SYSCTLS6 } : {}) },
        {
          name: "router",
          sysctls: {
            "net.ipv4.ip_forward": 1,
            "net.ipv4.conf.all.rp_filter": 2,
            "net.ipv4.conf.default.rp_filter": 2,
            ...(v6 ? SYSCTLS6 : {}),
          },
        },
        ...NODES.map((n) => ({
          name: n.name,
          sysctls: { "net.ipv4.ip_forward": 1, ...(v6 ? SYSCTLS6 : {}) },
        })),
        ...(wan ? [{ name: "wan" }, { name: "ext" }, { name: "far" }] : []),
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
        ...(wan
          ? [
            { a: { host: "router", ifname: "w0", address: `${WAN_ROUTER}/24` }, b: WAN("r0") },
            { a: { host: "ext", ifname: "eth0", address: `${EXTERNAL_SERVER}/24` }, b: WAN("s0") },
            {
              a: { host: "router", ifname: "x0", address: "203.0.113.1/24" },
              b: { host: "far", ifname: "eth0", address: `${FAR_SERVER}/24` },
            },
          ]
          : []),
      ],
      routes: [
        { host: "client", to: "default", via: "10.10.0.1" },
        ...(wan ? [{ host: "far", to: "default", via: "203.0.113.1" }] : []),
        ...NODES.flatMap((n) => [
          { host: n.name, to: "default", via: `${n.net}.1` },
          { host: "router", to: `10.2.${n.index}.0/24`, via: `${n.net}.2` },
        ]),
      ],
    });
    cleanups.push(() => topo.destroy());
    const networks: SecondaryNetwork[] = [];
    if (wan) {
      await topo.exec("wan", "ip link add br0 type bridge stp_state 0 forward_delay 0".split(" "));
      for (const port of ["r0", "s0"]) {
        await topo.exec("wan", ["ip", "link", "set", "dev", port, "master", "br0"]);
      }
      await topo.exec("wan", ["ip", "link", "set", "dev", "br0", "up"]);
      networks.push(
        new SecondaryNetwork("wan", "wan", "br0", "198.18.0", 21, [
          { to: FAR_NET, via: WAN_ROUTER },
        ]),
      );
    }
    if (v6) {
      const addr6 = (h: string, dev: string, a: string) =>
        topo.exec(h, ["ip", "-6", "addr", "add", a, "dev", dev, "nodad"]);
      await addr6("client", "eth0", `${CLIENT6}/64`);
      await addr6("router", "c0", "2001:db8:10::1/64");
      await topo.addRoute({ host: "client", to: "default", via: "2001:db8:10::1" });
      for (const n of NODES) {
        await addr6("router", n.link, `${n.net6}::1/64`);
        await addr6(n.name, "eth0", `${n.net6}::2/64`);
        await topo.addRoute({ host: n.name, to: "default", via: `${n.net6}::1` });
        await topo.addRoute({ host: "router", to: podCidr6(n.index), via: `${n.net6}::2` });
      }
    }
    const pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
    cleanups.push(() => pass[Symbol.dispose]());
    for (const n of NODES.filter((n) => n.lb)) {
      attachXdp(pass.program("hf_xdp_pass"), n.link, { netns: topo.ns("router") });
    }
    // Processes a container left (bird daemons, a killed node's): gone before the namespaces.
    cleanups.push(async () => {
      for (const host of topo.hosts) {
        const out = await run(["ip", "netns", "pids", topo.ns(host)], { check: false });
        for (const pid of out.stdout.split("\n").filter((l) => /^\d+$/.test(l.trim()))) {
          await run(["kill", "-9", pid.trim()], { check: false });
        }
      }
    });
    const router = await RouterBird.start(topo, "router", dir, {
      routerId: "10.10.0.1",
      bfd: BFD,
      peers: NODES.filter((n) => n.lb).flatMap((n) => [
        { name: n.name, address: `${n.net}.2`, asn: LB_ASN },
        ...(v6 ? [{ name: n.name, address: `${n.net6}::2`, asn: LB_ASN }] : []),
      ]),
    });
    const nodes: KubeletNode[] = [];
    for (const n of NODES) {
      const bpffs = `${dir}/bpffs-${n.name}`;
      await Deno.mkdir(bpffs);
      await run(["mount", "-t", "bpf", "bpf", bpffs]);
      nodes.push({
        name: n.name,
        ip: `${n.net}.2`,
        ...(v6 ? { ip6: `${n.net6}::2` } : {}),
        index: n.index,
        bpffs,
      });
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
            ...(options.nodeLabels?.[n.name] ?? {}),
          },
        },
        spec: {
          podCIDR: `10.2.${n.index}.0/24`,
          podCIDRs: [`10.2.${n.index}.0/24`, ...(v6 ? [podCidr6(n.index)] : [])],
          ...(n.lb ? { taints: [{ key: "holdfast.io/lb-node", effect: "NoSchedule" }] } : {}),
        },
      }, { manager: "kubelet" });
      kube.rest.patch(nodeType, "", n.name, "merge", {
        status: {
          addresses: [
            { type: "InternalIP", address: `${n.net}.2` },
            ...(v6 ? [{ type: "InternalIP", address: `${n.net6}::2` }] : []),
            { type: "Hostname", address: n.name },
          ],
          conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
        },
      }, { manager: "kubelet", subresource: "status" });
    }
    const kubelet = new LabKubelet(topo, kube, nodes, dir, kubeconfig, networks);
    cleanups.push(() => kubelet[Symbol.asyncDispose]());
    await kubelet.start();
    return {
      topo,
      kube,
      kubelet,
      kubeconfig,
      dir,
      nodes,
      router,
      killNode: async (name) => {
        const n = NODES.find((x) => x.name === name)!;
        await topo.setLink("router", n.link, false);
        await kubelet.killNode(name);
        const out = await run(["ip", "netns", "pids", topo.ns(name)], { check: false });
        for (const pid of out.stdout.split("\n").filter((l) => /^\d+$/.test(l.trim()))) {
          await run(["kill", "-9", pid.trim()], { check: false });
        }
        kube.rest.patch(nodeType, "", name, "merge", {
          status: {
            conditions: [{ type: "Ready", status: "Unknown", reason: "NodeStatusUnknown" }],
          },
        }, { manager: "node-controller", subresource: "status" });
      },
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
