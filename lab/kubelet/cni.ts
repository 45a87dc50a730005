/**
 * A CNI-like helper for the lab kubelet: each pod is a network namespace behind a veth to its
 * node, with an address from the node's pod CIDR (`10.2.N.0/24`) and, on a dual-stack node, one
 * from its IPv6 pod CIDR (`2001:db8:2:N::/64`), as Calico makes them:
 *
 * - the pod's `eth0` holds `IP/32` (and `IP6/128`), its default route is `dev eth0` (IPv6: via
 *   `fe80::1`, which every host-side veth holds, as Calico's veths share one link-local address);
 *   the node answers ARP on the host-side veth (`proxy_arp`) and routes `IP/32` (`IP6/128`) to it;
 * - anti-spoofing: an nft rule on the node drops what arrives from the pod's veth with another
 *   source than the pod's own address (`table inet hf_antispoof`, chain `pods`, prerouting at
 *   priority -150, counters per pod and family as in lab/node_pods.ts; IPv6 besides the pod's own
 *   address only link-local and unspecified sources, for neighbour discovery).
 *
 * Host-side veth names are never reused (`vk<n>`), so a deleted pod's rule never matches a later
 * pod. A pod's veth is deleted with it (taking its host route); its namespace goes at teardown.
 *
 * Two pod annotations are honoured, as the plugins that define them read them:
 *
 * - `k8s.v1.cni.cncf.io/networks` (Multus): `NAME@IFNAME[,…]` — a second interface `IFNAME` on
 *   the lab's secondary network `NAME` ({@linkcode SecondaryNetwork}: a veth into one bridge
 *   shared by every node, as a macvlan on a second NIC would be), with the next free address of
 *   its range and no route beyond its own prefix. An unknown network fails the pod.
 * - `cni.projectcalico.org/allowedSourcePrefixes` (Calico): a JSON list of prefixes the pod may
 *   also send from past the anti-spoofing rule (an egress NAT pod forwarding de-NATed replies).
 *
 * @module
 */

import type { Topology } from "../netns.ts";

/** A secondary interface of a pod. */
export interface PodAttachment {
  /** Its name in the pod. */
  readonly ifname: string;
  /** The bridge-side end, in the network's host. */
  readonly peer: string;
  readonly address: string;
  readonly network: SecondaryNetwork;
}

/**
 * A secondary network (Multus' NetworkAttachmentDefinition in the lab): a bridge `bridge` in
 * topology host `host`; pods get addresses `PREFIX.first` upwards in `PREFIX.0/24`, and `routes`.
 */
export class SecondaryNetwork {
  #next: number;
  static #serial = 0;
  constructor(
    readonly name: string,
    readonly host: string,
    readonly bridge: string,
    readonly prefix: string,
    first: number,
    /** Routes every attached pod gets through this network (the attachment's IPAM routes). */
    readonly routes: readonly { to: string; via: string }[] = [],
  ) {
    this.#next = first;
  }

  /** Puts interface `ifname` of pod host `pod` on the bridge with the next address. */
  async attach(topo: Topology, pod: string, ifname: string): Promise<PodAttachment> {
    if (this.#next > 250) throw new Error(`secondary network ${this.name} is exhausted`);
    const address = `${this.prefix}.${this.#next++}`;
    const peer = `wk${++SecondaryNetwork.#serial}`;
    await topo.addLink({
      a: { host: pod, ifname, address: `${address}/24` },
      b: { host: this.host, ifname: peer },
    });
    await topo.exec(this.host, ["ip", "link", "set", "dev", peer, "master", this.bridge, "up"]);
    for (const r of this.routes) await topo.addRoute({ host: pod, to: r.to, via: r.via });
    return { ifname, peer, address, network: this };
  }
}

const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const ALLOWED_SOURCES = "cni.projectcalico.org/allowedSourcePrefixes";

/** What a pod's annotations ask of the network (see the module doc); throws on what is not known. */
export function podNetworkRequests(
  annotations: Record<string, string>,
  networks: ReadonlyMap<string, SecondaryNetwork>,
): { attachments: { network: SecondaryNetwork; ifname: string }[]; allowedSources: string[] } {
  const attachments = (annotations[NETWORKS] ?? "").split(",").map((w) => w.trim())
    .filter((w) => w !== "").map((word) => {
      const [ref = "", ifname = ""] = word.split("@");
      const name = ref.includes("/") ? ref.slice(ref.indexOf("/") + 1) : ref;
      const network = networks.get(name);
      if (network === undefined) throw new Error(`${NETWORKS}: no network "${name}" in the lab`);
      if (!/^[a-z][a-z0-9]{0,14}$/.test(ifname)) {
        throw new Error(`${NETWORKS}: "${word}" needs NAME@IFNAME (the lab names no interfaces)`);
      }
      return { network, ifname };
    });
  const raw = annotations[ALLOWED_SOURCES];
  const allowedSources = raw === undefined ? [] : JSON.parse(raw);
  if (
    !Array.isArray(allowedSources) ||
    !allowedSources.every((p) => typeof p === "string" && /^[0-9.]+\/\d+$/.test(p))
  ) throw new Error(`${ALLOWED_SOURCES}: expected a JSON list of IPv4 prefixes, got ${raw}`);
  return { attachments, allowedSources };
}

/** A pod's network as the helper made it. */
export interface PodNet {
  /** The topology host of the pod's namespace. */
  readonly host: string;
  readonly ip: string;
  /** Its IPv6 address on a dual-stack node. */
  readonly ip6?: string;
  /** The host-side veth on the node. */
  readonly veth: string;
  /** Its secondary interfaces (`k8s.v1.cni.cncf.io/networks`). */
  readonly attachments?: readonly PodAttachment[];
}

const TABLE = `table inet hf_antispoof {
  chain pods {
    type filter hook prerouting priority -150;
  }
}
`;

/** Pod networks on one node. */
export class NodePodNetwork {
  #next = 2;
  static #serial = 0;
  #ready: Promise<void> | undefined;

  /** `index` N gives the pod CIDR `10.2.N.0/24` (and with `ipv6`, `2001:db8:2:N::/64`). */
  constructor(
    readonly topo: Topology,
    readonly node: string,
    readonly index: number,
    readonly dir: string,
    readonly ipv6 = false,
    readonly networks: ReadonlyMap<string, SecondaryNetwork> = new Map(),
  ) {}

  get cidr(): string {
    return `10.2.${this.index}.0/24`;
  }

  /** The IPv6 pod CIDR (dual stack). */
  get cidr6(): string {
    return podCidr6(this.index);
  }

  #init(): Promise<void> {
    return this.#ready ??= (async () => {
      const file = `${this.dir}/antispoof-${this.node}.nft`;
      await Deno.writeTextFile(file, TABLE);
      await this.topo.exec(this.node, ["nft", "-f", file]);
    })();
  }

  /**
   * Creates a pod's namespace, veth, address, routes and anti-spoofing rule; with `annotations`,
   * its secondary interfaces and allowed sources (module doc).
   */
  async add(annotations: Record<string, string> = {}): Promise<PodNet> {
    const asks = podNetworkRequests(annotations, this.networks);
    await this.#init();
    if (this.#next > 250) throw new Error(`pod CIDR ${this.cidr} of ${this.node} is exhausted`);
    const last = this.#next++;
    const ip = `10.2.${this.index}.${last}`;
    const ip6 = this.ipv6 ? `2001:db8:2:${this.index}::${last.toString(16)}` : undefined;
    const n = ++NodePodNetwork.#serial;
    const host = `pod${n}`, veth = `vk${n}`;
    await this.topo.addHost({
      name: host,
      sysctls: { "net.ipv6.conf.all.accept_dad": 0, "net.ipv6.conf.default.accept_dad": 0 },
    });
    await this.topo.addLink({
      a: { host: this.node, ifname: veth },
      b: { host, ifname: "eth0", address: `${ip}/32` },
    });
    await this.topo.exec(this.node, ["sysctl", "-q", "-w", `net.ipv4.conf.${veth}.proxy_arp=1`]);
    await this.topo.addRoute({ host: this.node, to: `${ip}/32`, dev: veth });
    await this.topo.addRoute({ host, to: "default", dev: "eth0" });
    if (ip6) {
      const addr6 = (h: string, dev: string, a: string) =>
        this.topo.exec(h, ["ip", "-6", "addr", "add", a, "dev", dev, "nodad"]);
      await addr6(this.node, veth, "fe80::1/64");
      await addr6(host, "eth0", `${ip6}/128`);
      await this.topo.addRoute({ host: this.node, to: `${ip6}/128`, dev: veth });
      await this.topo.exec(host, [
        "ip",
        "-6",
        "route",
        "add",
        "default",
        "via",
        "fe80::1",
        "dev",
        "eth0",
      ]);
    }
    const own6 = ip6 ? [`${ip6},`] : [];
    for (
      const rule of [
        ["ip", "saddr", ip, "counter", "accept"],
        ...asks.allowedSources.map((p) => ["ip", "saddr", p, "counter", "accept"]),
        ["ip", "saddr", "!=", ip, "counter", "drop"],
        ...(ip6 ? [["ip6", "saddr", ip6, "counter", "accept"]] : []),
        // Besides its own address: only link-local and unspecified sources (neighbour discovery).
        ["ip6", "saddr", "!=", "{", ...own6, "::,", "fe80::/10", "}", "counter", "drop"],
      ]
    ) {
      await this.topo.exec(this.node, [
        ...["nft", "add", "rule", "inet", "hf_antispoof", "pods", "iifname", veth],
        ...rule,
      ]);
    }
    const attachments: PodAttachment[] = [];
    for (const a of asks.attachments) {
      attachments.push(await a.network.attach(this.topo, host, a.ifname));
    }
    return {
      host,
      ip,
      ...(ip6 ? { ip6 } : {}),
      veth,
      ...(attachments.length > 0 ? { attachments } : {}),
    };
  }

  /** Removes a pod's veth (and with it the host route) and its secondary interfaces. */
  async remove(pod: PodNet): Promise<void> {
    await this.topo.exec(this.node, ["ip", "link", "del", pod.veth], { check: false });
    for (const a of pod.attachments ?? []) {
      await this.topo.exec(a.network.host, ["ip", "link", "del", a.peer], { check: false });
    }
  }

  /** A dead node's pod: its secondary interfaces go down too (their bridge-side ends). */
  async cut(pod: PodNet): Promise<void> {
    for (const a of pod.attachments ?? []) {
      await this.topo.exec(a.network.host, ["ip", "link", "set", "dev", a.peer, "down"], {
        check: false,
      });
    }
  }

  /** Packets the anti-spoofing rules [accepted, dropped] on this node (one family, or both). */
  async antiSpoofCounts(family?: "ip" | "ip6"): Promise<[number, number]> {
    await this.#init();
    const out = await this.topo.exec(this.node, ["nft", "list", "table", "inet", "hf_antispoof"]);
    let accepted = 0, dropped = 0;
    const lines = out.stdout.split("\n").filter((l) => !family || l.includes(` ${family} saddr `));
    for (const m of lines.join("\n").matchAll(/counter packets (\d+) bytes \d+ (accept|drop)/g)) {
      if (m[2] === "accept") accepted += Number(m[1]);
      else dropped += Number(m[1]);
    }
    return [accepted, dropped];
  }
}

/** The IPv6 pod CIDR of node index N. */
export function podCidr6(index: number): string {
  return `2001:db8:2:${index}::/64`;
}
