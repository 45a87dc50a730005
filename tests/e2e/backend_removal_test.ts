/**
 * When a backend leaves a service, Holdfast removes its flows everywhere (Redis and every LB
 * node's flow map) so its clients get a clean new choice, and every other flow keeps its backend.
 */
import { rootTest } from "../harness/mod.ts";
import { acceptedBy, backendAddress, Cluster, flowsOf } from "../../lab/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

rootTest(
  "flows: a removed backend's flows are purged on every LB node; other connections survive",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 2, backends: 3 });
    // Held 15 s: past the waits and the removal below (~2 s) with room for a loaded machine, so
    // be3's connections die while the client still holds them.
    const client = await cluster.startClient(60, 15_000);
    // Every connection open and logged by its backend, and backend 3's flows learned and shared
    // on both nodes: waited for (bounded, 15 s), not guessed as a second and a half.
    await client.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    const gone = backendAddress(3);
    const goneU32 = parseIpv4(gone);
    const accepted = () => [1, 2, 3].reduce((n, j) => n + acceptedBy(cluster, j).length, 0);
    const shared = () =>
      [1, 2].every((i) => flowsOf(cluster, i).some((f) => f.value.backend === goneU32));
    const ready = Date.now() + 15_000;
    for (let k = 0; k < 1500 && !(accepted() >= 60 && shared()) && Date.now() < ready; k++) {
      await sleep(10);
    }
    if (accepted() < 60) throw new Error(`only ${accepted()} of 60 connections accepted`);
    const onBe3 = new Set(acceptedBy(cluster, 3).map((peer) => Number(peer.split(":")[1])));
    for (const i of [1, 2]) {
      const flows = flowsOf(cluster, i);
      if (!flows.some((f) => f.value.backend === goneU32)) {
        throw new Error(`LB node ${i} has no flow to ${gone} before removal: nothing to test`);
      }
    }
    await cluster.removeBackend(3);
    // Bounded wait for the purge to reach both nodes.
    let left: number[] = [];
    const purgeBy = Date.now() + 15_000;
    for (let k = 0; k < 1500 && Date.now() < purgeBy; k++) {
      left = [1, 2].map((i) =>
        flowsOf(cluster, i).filter((f) => f.value.backend === goneU32).length
      );
      if (left.every((n) => n === 0)) break;
      await sleep(100);
    }
    if (left.some((n) => n > 0)) {
      throw new Error(
        `flows to removed backend ${gone} still mapped: ${left}`,
      );
    }
    const summary = await clientSummary(client, 30_000);
    const wrongDeaths = summary.deaths.filter((d) => !onBe3.has(d.port));
    if (wrongDeaths.length) {
      throw new Error(
        `connections not on the removed backend died: ${JSON.stringify(wrongDeaths.slice(0, 5))}`,
      );
    }
    if (summary.survived !== summary.connections - onBe3.size) {
      throw new Error(
        `expected ${
          summary.connections - onBe3.size
        } survivors (all but the ${onBe3.size} on be3), got ${summary.survived}`,
      );
    }
    for (const i of [1, 2]) {
      const others = flowsOf(cluster, i).filter((f) => f.value.backend !== goneU32).length;
      if (others === 0) throw new Error(`LB node ${i} lost the flows of the remaining backends`);
    }
  },
);

interface ReuseSummary {
  attempts: number;
  ok: number;
  failed: number;
  failures: { port: number; reason: string }[];
}

const REUSE = new URL("../../lab/clients/reuse_client.ts", import.meta.url).pathname;

rootTest(
  "flows: a client reusing its source ports after a backend's removal reaches a live backend",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 2, backends: 3 });
    const COUNT = 60;
    const reuse = async (): Promise<ReuseSummary> => {
      const client = cluster.topo.spawnDeno("client", REUSE, {
        args: [cluster.vip, String(cluster.port), "43000", String(COUNT)],
        permissions: ["--allow-net"],
      });
      return await clientSummary<ReuseSummary>(client, 60_000);
    };
    const first = await reuse();
    if (first.ok !== COUNT) throw new Error(`first round: ${JSON.stringify(first)}`);
    const onBe3 = acceptedBy(cluster, 3).length;
    if (onBe3 === 0) throw new Error("be3 accepted no connection: nothing to test");
    const goneU32 = parseIpv4(backendAddress(3));
    await sleep(500); // confirmed, shared and installed on both LB nodes
    await cluster.removeBackend(3);
    // Bounded wait for the purge to reach both nodes (the verdict is the reconnection below).
    for (let k = 0; k < 50; k++) {
      const left = [1, 2].map((i) =>
        flowsOf(cluster, i).filter((f) => f.value.backend === goneU32).length
      );
      if (left.every((n) => n === 0)) break;
      await sleep(100);
    }
    const again = await reuse();
    console.log(JSON.stringify({ onBe3, again, msg: "reconnected from the same ports" }));
    if (again.ok !== COUNT) {
      throw new Error(
        `${again.failed} of ${COUNT} reconnections from the same source ports failed ` +
          `(${onBe3} of the first round were on be3): ${
            JSON.stringify(again.failures.slice(0, 5))
          }`,
      );
    }
  },
);
