/**
 * The NAT pod's nftables ruleset, table `ip holdfast_egress`: the SNAT rule of every source
 * (`ip saddr SOURCE ip daddr @destinations oifname EXT snat to FLOATING`) and a drop of invalid
 * forwarded packets. It is installed on EVERY NAT pod from its start, owner or standby: the rule
 * enables conntrack and registers a nat-type chain in the namespace, which injected conntrack
 * entries need before traffic arrives (FINDINGS: conntrack injection). Installed atomically with
 * one `nft -f -` (create, delete, recreate in one transaction). The agent leaves it in place when
 * it stops (a late packet of a NATed flow must not leave untranslated, see agent.ts);
 * {@link removeEgressRules} is for tearing a pod's namespace down by hand.
 *
 * Invalid packets are dropped rather than forwarded: with `nf_conntrack_tcp_loose=0` a mid-stream
 * TCP segment of a flow this pod does not know is INVALID, and forwarding it would leak the
 * client's private source address to the destination.
 *
 * @module
 */

import type { EgressConfig } from "../../controller/egress/config.ts";
import { runCommand } from "./_command.ts";

/** The nftables table of the egress NAT. */
export const EGRESS_TABLE = "holdfast_egress";

/**
 * The ruleset script for `nft -f -`: replaces the table in one transaction.
 *
 * @example
 * ```ts
 * import { egressRuleset } from "./nft.ts";
 * import { parseEgressConfig } from "../../controller/egress/config.ts";
 * const text = egressRuleset(parseEgressConfig({
 *   name: "default/egress", destinations: ["198.18.0.0/24"],
 *   addresses: [{ address: "198.18.0.100", gateway: "10.8.0.100" }],
 *   sources: [{ prefix: "10.8.0.11/32" }], peers: [{ name: "nat1", address: "10.8.0.21" }],
 * }));
 * if (!text.includes('ip saddr 10.8.0.11/32 ip daddr @destinations oifname "ext0"')) throw new Error();
 * ```
 */
export function egressRuleset(config: EgressConfig): string {
  const ext = JSON.stringify(config.interfaces.external);
  const ports = config.snatPorts ? `:${config.snatPorts}` : "";
  const snat = config.sources.flatMap((s) => {
    const match = `ip saddr ${s.prefix} ip daddr @destinations oifname ${ext}`;
    return ports
      ? [
        `    ${match} meta l4proto { tcp, udp } snat to ${s.address}${ports}`,
        `    ${match} snat to ${s.address}`,
      ]
      : [`    ${match} snat to ${s.address}`];
  });
  return [
    `table ip ${EGRESS_TABLE} {}`,
    `delete table ip ${EGRESS_TABLE}`,
    `table ip ${EGRESS_TABLE} {`,
    `  set destinations {`,
    `    type ipv4_addr; flags interval;`,
    `    elements = { ${config.destinations.join(", ")} }`,
    `  }`,
    `  chain postrouting {`,
    `    type nat hook postrouting priority srcnat; policy accept;`,
    ...snat,
    `  }`,
    `  chain forward {`,
    `    type filter hook forward priority filter; policy accept;`,
    `    oifname ${ext} ct state invalid counter drop`,
    `    iifname ${ext} ct state invalid counter drop`,
    `  }`,
    `}`,
    "",
  ].join("\n");
}

/** Installs (or atomically replaces) the egress table in the current network namespace. */
export async function installEgressRules(config: EgressConfig): Promise<void> {
  await runCommand(["nft", "-f", "-"], { input: egressRuleset(config) });
}

/** Removes the egress table (absent is fine). */
export async function removeEgressRules(): Promise<void> {
  await runCommand(["nft", "delete", "table", "ip", EGRESS_TABLE], {
    allow: (stderr) => /No such file|does not exist/i.test(stderr),
  });
}
