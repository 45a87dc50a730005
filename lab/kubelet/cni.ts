/**
 * A CNI-like helper for the lab kubelet: each pod is a network namespace behind a veth to its
 * node, with an address from the node's pod CIDR (`10.2.N.0/24`), as Calico makes them:
 *
 * - the pod's `eth0` holds `IP/32`, its default route is `dev eth0`; the node answers ARP on the
 *   host-side veth (`proxy_arp`) and routes `IP/32` to it;
 * - anti-spoofing: an nft rule on the node drops what arrives from the pod's veth with another
 *   source than the pod's own address (`table inet hf_antispoof`, chain `pods`, prerouting at
 *   priority -150, counters per pod as in lab/node_pods.ts; IPv6 only from link-local sources).
 *
 * Host-side veth names are never reused (`vk<n>`), so a deleted pod's rule never matches a later
 * pod. A pod's veth is deleted with it (taking its host route); its namespace goes at teardown.
 *
 * @module
 */

import type { Topology } from "../netns.ts";

/** A pod's network as the helper made it. */
export interface PodNet {
  /** The topology host of the pod's namespace. */
  readonly host: string;
  readonly ip: string;
  /** The host-side veth on the node. */
  readonly veth: string;
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

  /** `index` N gives the pod CIDR `10.2.N.0/24`. */
  constructor(
    readonly topo: Topology,
    readonly node: string,
    readonly index: number,
    readonly dir: string,
  ) {}

  get cidr(): string {
    return `10.2.${this.index}.0/24`;
  }

  #init(): Promise<void> {
    return this.#ready ??= (async () => {
      const file = `${this.dir}/antispoof-${this.node}.nft`;
      await Deno.writeTextFile(file, TABLE);
      await this.topo.exec(this.node, ["nft", "-f", file]);
    })();
  }

  /** Creates a pod's namespace, veth, address, routes and anti-spoofing rule. */
  async add(): Promise<PodNet> {
    await this.#init();
    if (this.#next > 250) throw new Error(`pod CIDR ${this.cidr} of ${this.node} is exhausted`);
    const ip = `10.2.${this.index}.${this.#next++}`;
    const n = ++NodePodNetwork.#serial;
    const host = `pod${n}`, veth = `vk${n}`;
    await this.topo.addHost({ name: host });
    await this.topo.addLink({
      a: { host: this.node, ifname: veth },
      b: { host, ifname: "eth0", address: `${ip}/32` },
    });
    await this.topo.exec(this.node, ["sysctl", "-q", "-w", `net.ipv4.conf.${veth}.proxy_arp=1`]);
    await this.topo.addRoute({ host: this.node, to: `${ip}/32`, dev: veth });
    await this.topo.addRoute({ host, to: "default", dev: "eth0" });
    for (
      const rule of [
        ["ip", "saddr", ip, "counter", "accept"],
        ["ip", "saddr", "!=", ip, "counter", "drop"],
        // The pod has no IPv6 address of its own: only link-local and unspecified sources.
        ["ip6", "saddr", "!=", "{", "::,", "fe80::/10", "}", "counter", "drop"],
      ]
    ) {
      await this.topo.exec(this.node, [
        ...["nft", "add", "rule", "inet", "hf_antispoof", "pods", "iifname", veth],
        ...rule,
      ]);
    }
    return { host, ip, veth };
  }

  /** Removes a pod's veth (and with it the host route). */
  async remove(pod: PodNet): Promise<void> {
    await this.topo.exec(this.node, ["ip", "link", "del", pod.veth], { check: false });
  }

  /** Packets the anti-spoofing rules [accepted, dropped] on this node. */
  async antiSpoofCounts(): Promise<[number, number]> {
    await this.#init();
    const out = await this.topo.exec(this.node, ["nft", "list", "table", "inet", "hf_antispoof"]);
    let accepted = 0, dropped = 0;
    for (const m of out.stdout.matchAll(/counter packets (\d+) bytes \d+ (accept|drop)/g)) {
      if (m[2] === "accept") accepted += Number(m[1]);
      else dropped += Number(m[1]);
    }
    return [accepted, dropped];
  }
}
