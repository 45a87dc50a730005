/**
 * Flow redirection with an IPv6 anycast address (issue 27, part 1): a service with an IPv4 and an
 * IPv6 address under `main.ts anycast --redirect` on a dual-stack lab (lab/_anycast_ipv6.ts).
 * Before, the IPv6 address made every node refuse the whole state (decap's local LB IPs took
 * IPv4 only): nothing was announced, IPv4 included. Now both addresses are announced, and IPv6
 * connections are redirected like IPv4 ones: 60 long-lived IPv6 connections survive the router's
 * ECMP set changing 2 → 3 → 2 nodes (outer IPv4 to the owning node, inner IPv6 decapsulated).
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { ECHO_SERVICES_DUAL, holdAcrossScale } from "../../lab/_anycast_scale.ts";

const VIP6 = ECHO_SERVICES_DUAL[0]!.addresses[1]!;
const CONNECTIONS = 60;

rootTest(
  "anycast redirect, dual stack: both addresses announced; 60 IPv6 connections survive 2 → 3 → 2 nodes",
  async () => {
    await using lab = await AnycastLab.create({
      nodes: 3,
      services: ECHO_SERVICES_DUAL,
      redirect: true,
      ipv6: true,
    });
    const route4 = await lab.watchRoute(lab.vip);
    const held = await holdAcrossScale(lab, CONNECTIONS, VIP6);
    // The IPv4 address is announced by the same nodes (n1, n2 after n3 drained).
    await route4.until((g) => g.join() === "10.9.1.2,10.9.2.2", 5_000);
    for (const node of lab.nodes.values()) {
      const refused = node.agent.lines.find((l) => l.includes("cannot follow state file"));
      ok(refused === undefined, `${node.name} refused the state: ${refused}`);
      const ready = node.agent.lines.find((l) => l.includes('"msg":"flow redirection ready"'));
      ok(ready?.includes(VIP6), `${node.name} does not redirect ${VIP6}: ${ready}`);
    }
    console.log(JSON.stringify({ ...held, msg: "IPv6 long-lived connections, 2 → 3 → 2 nodes" }));
    ok(
      held.connections === CONNECTIONS && held.survived === CONNECTIONS,
      `with flow redirection ${held.connections - held.survived} of ${held.connections} IPv6 ` +
        `connections died: ${JSON.stringify(held.deaths.slice(0, 5))}`,
    );
  },
);
