/**
 * The dual-stack virtual cluster (lab/cluster.ts, the default): the router learns the IPv6 LB
 * IP from every LB node over IPv6 BGP sessions and installs an IPv6 ECMP route beside the IPv4
 * one; IPv6 clients reach the IPv6 backends through the XDP LB (outer IPv6, decap on the backend,
 * DSR) while IPv4 clients use the IPv4 service; a killed LB node leaves both routes.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { acceptedBy, Cluster, lbAddress, lbAddress6, routeVias } from "../../lab/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";

rootTest(
  "dual-stack cluster: IPv6 ECMP route from BGP, IPv6 and IPv4 clients served side by side, both routes leave with a dead LB node",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 2, backends: 2 });
    ok(cluster.vip6 !== null, "the cluster is dual stack by default");
    const vias6 = await routeVias(cluster, 6);
    ok(
      vias6.join() === [lbAddress6(1), lbAddress6(2)].join(),
      `IPv6 route via ${JSON.stringify(vias6)}`,
    );

    const v4 = await cluster.startClient(20, 2_000);
    const v6 = await cluster.startClient(20, 2_000, { family: 6 });
    const [s4, s6] = await Promise.all([clientSummary(v4, 30_000), clientSummary(v6, 30_000)]);
    ok(s4.survived === 20, `IPv4 connections: ${JSON.stringify(s4)}`);
    ok(s6.survived === 20, `IPv6 connections: ${JSON.stringify(s6)}`);
    const peers = [1, 2].flatMap((j) => acceptedBy(cluster, j));
    const from6 = peers.filter((p) => p.startsWith("[2001:db8:1::2]:")).length;
    ok(from6 === 20, `backends saw ${from6} connections from the client's IPv6 address`);

    await cluster.killLbNode(1);
    ok((await routeVias(cluster, 4)).join() === lbAddress(2), "IPv4 route after the kill");
    ok((await routeVias(cluster, 6)).join() === lbAddress6(2), "IPv6 route after the kill");
  },
);
