/**
 * IPv6 flows are shared like IPv4 ones (docs/contracts.md "Flow sharing"): in the dual-stack
 * virtual cluster (lab/cluster.ts: two LB nodes with real XDP and agents, real Redis, bird ECMP),
 * IPv6 connections learned by LB node 1 are stored under the IPv6 LB IP and installed on node 2
 * with the peer flag; then a backend joins (Maglev moves part of the hash space) and node 1
 * dies, so every connection goes through node 2 — and each keeps its backend: the flow, not
 * Maglev, decides. Last, the IPv6 service is switched to the backends' IPv4 addresses (outer
 * IPv4, decap back to IPv6): such flows are shared too, their IPv4 backend in the flow value.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { acceptedBy, backendAddress, Cluster } from "../../lab/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { BpfMap } from "../../node/bpf/mod.ts";
import { BpfFlowTable6 } from "../../node/bpf/flow_table.ts";
import { FLOW_F_PEER, formatFlowAddress } from "../../node/bpf/flow.ts";
import type { AnyFlowValue } from "../../node/bpf/flow.ts";
import type { FlowKey6 } from "../../node/bpf/structs6.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** LB node i's IPv6 flow map (its pinned hf_flows6). */
function flows6Of(cluster: Cluster, i: number): { key: FlowKey6; value: AnyFlowValue }[] {
  using map = BpfMap.fromPinned(`${cluster.bpffs(i)}/hf_flows6`);
  return [...new BpfFlowTable6(map).entries()];
}

/** Polls `cond` every 100 ms, at most `ms`; throws naming `what`. */
async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** The client's ports of connections backend j accepted from the IPv6 client. */
function ports6(cluster: Cluster, j: number): Set<number> {
  return new Set(
    acceptedBy(cluster, j).filter((p) => p.startsWith("[")).map((p) => Number(p.split("]:")[1])),
  );
}

rootTest(
  "IPv6 flow sharing: connections learned on LB node 1 keep their backends through node 2 after a backend joins and node 1 dies",
  async (t) => {
    await using cluster = await Cluster.create({ lbNodes: 2, backends: 3 });
    const vip6 = cluster.vip6;
    ok(vip6 !== null, "the cluster is dual stack");
    const held = await cluster.startClient(40, 12_000, { family: 6 });

    await t.step(
      "flows learned by node 1 are stored in Redis and installed on node 2",
      async () => {
        // ECMP spreads the connections over both nodes: node 1 learned some of them.
        let learned1: { key: FlowKey6; value: AnyFlowValue }[] = [];
        await until("node 2 holds every flow node 1 learned", () => {
          learned1 = flows6Of(cluster, 1).filter((f) => (f.value.flags & FLOW_F_PEER) === 0);
          const on2 = new Map(flows6Of(cluster, 2).map((f) => [flowField(f.key), f.value]));
          return learned1.length > 0 && learned1.every((f) => {
            const peer = on2.get(flowField(f.key));
            return peer !== undefined && (peer.flags & FLOW_F_PEER) !== 0 &&
              peer.backend === f.value.backend;
          });
        });
        // Each node writes its flows in bursts of its own: wait (bounded) for both nodes' bursts.
        let stored = 0;
        await until(`Redis holding all 40 IPv6 flows of ${vip6}`, async () => {
          stored = Number(await cluster.redis.cli("hlen", `hf:{${vip6}}:flows`));
          return stored >= 40;
        });
        const one = learned1[0]!;
        const value = await cluster.redis.cli("hget", `hf:{${vip6}}:flows`, flowField(one.key));
        ok(
          /^[0-9a-f]{32}:\d+$/.test(value.trim()),
          `stored value "${value.trim()}" names the IPv6 backend ${
            formatFlowAddress(one.value.backend)
          }`,
        );
      },
    );

    await t.step(
      "backend 4 joins and node 1 dies: every held connection keeps its backend",
      async () => {
        await cluster.addBackend(4);
        // Maglev really moved: new IPv6 connections reach the new backend.
        await until("new connections reach backend 4", async () => {
          const probe = await cluster.startClient(20, 300, { family: 6 });
          await clientSummary(probe, 20_000);
          return ports6(cluster, 4).size > 0;
        }, 20_000);
        await cluster.killLbNode(1);
        // A held connection Maglev now sends elsewhere would be reset there and die.
        const summary = await clientSummary(held, 40_000);
        ok(
          summary.survived === summary.connections && summary.connections === 40,
          `held IPv6 connections: ${JSON.stringify(summary)}`,
        );
      },
    );

    await t.step(
      "an IPv6 frontend over IPv4 backends: flows shared with their IPv4 backend",
      async () => {
        const file = JSON.parse(await Deno.readTextFile(cluster.configPath));
        const web6 = file.services.find((s: { name: string }) => s.name === "default/web6");
        web6.backends = [2, 3, 4].map((j) => ({
          address: `${backendAddress(j)}:${cluster.port}/TCP`,
          portName: "http",
        }));
        const tmp = `${cluster.configPath}.tmp`;
        await Deno.writeTextFile(tmp, JSON.stringify(file));
        await Deno.rename(tmp, cluster.configPath);
        await cluster.addLbNode(1); // node 1 back: restores before it announces
        const v4backends = new Set([2, 3, 4].map((j) => parseIpv4(backendAddress(j))));
        const client = await cluster.startClient(30, 6_000, { family: 6 });
        await until("node 2 holds node 1's IPv6 flows to IPv4 backends", () => {
          const mine = flows6Of(cluster, 1).filter((f) =>
            (f.value.flags & FLOW_F_PEER) === 0 && v4backends.has(f.value.backend as number)
          );
          const on2 = new Set(
            flows6Of(cluster, 2).filter((f) => (f.value.flags & FLOW_F_PEER) !== 0)
              .map((f) => `${flowField(f.key)}=${f.value.backend}`),
          );
          return mine.length > 0 &&
            mine.every((f) => on2.has(`${flowField(f.key)}=${f.value.backend}`));
        }, 20_000);
        const summary = await clientSummary(client, 30_000);
        ok(summary.survived === 30, `IPv6 over IPv4 backends: ${JSON.stringify(summary)}`);
      },
    );
  },
);
