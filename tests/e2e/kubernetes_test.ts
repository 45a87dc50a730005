/**
 * Holdfast driven by Kubernetes objects, end to end: the API test server (`lab/kube/`) and
 * `main.ts controller` run in the virtual cluster's `ctl` namespace beside its Redis; the LB
 * nodes' agents run `--model redis` with real XDP. A Service of class `holdfast.io/lb` gets the
 * address the router sends to the LB nodes, every node's maps carry it, and a client's TCP
 * connections through the router reach the backends of its EndpointSlice. An endpoint that
 * turns not ready (a readiness blip), then terminating, gets no new connections while its live
 * ones continue; once removed from the slice its flows are purged.
 *
 * Everything Kubernetes-side lives inside the `ctl` namespace (the API server listens on its
 * loopback; kubectl runs there through `ip netns exec`), so no traffic leaves the test's
 * namespaces and the root namespace needs no route into the lab.
 */
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import {
  acceptedBy,
  backendAddress,
  backendsOf,
  Cluster,
  flowsOf,
  frontendsOf,
} from "../../lab/mod.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { agentsCaughtUp, KubeSide, modelEntryOf, waitUntil } from "./_kube_side.ts";

const REPO = new URL("../../", import.meta.url).pathname;
const ECHO = `${REPO}lab/clients/tcp_echo.ts`;
const HOLD = `${REPO}lab/clients/hold_client.ts`;

/** The EndpointSlice of service `web`: backend j → its state. */
function slice(endpoints: ReadonlyMap<number, "ready" | "notReady" | "terminating">) {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "web-1",
      namespace: "default",
      labels: { "kubernetes.io/service-name": "web" },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: [...endpoints].map(([j, state]) => ({
      addresses: [backendAddress(j)],
      conditions: state === "ready"
        ? { ready: true, serving: true, terminating: false }
        : state === "notReady"
        ? { ready: false, serving: false, terminating: false }
        : { ready: false, serving: true, terminating: true },
    })),
  };
}

/** The backend states of `default/web` in the model the controller published to Redis. */
async function modelBackends(cluster: Cluster): Promise<string[]> {
  const entry = await modelEntryOf(cluster);
  return (entry?.backends ?? []).map((b) => `${b.address} ${b.state ?? "active"}`).sort();
}

/** Client ports of connections backend j accepted. */
const portsOn = (cluster: Cluster, j: number) =>
  new Set(acceptedBy(cluster, j).map((peer) => Number(peer.split(":")[1])));

rootTest(
  "kubernetes: a LoadBalancer Service gets its address, reaches every LB node's maps and carries TCP; a not-ready or terminating endpoint keeps its connections, a removed one's flows are purged",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 0, backends: 3, model: "redis" });
    const kube = new KubeSide(cluster);
    await kube.startApiServer();
    // The pool is exactly the address the router sends to the LB nodes.
    await kube.createPoolAndService([`${cluster.vip}/32`]);
    type State = "ready" | "notReady" | "terminating";
    const all = new Map<number, State>([[1, "ready"], [2, "ready"], [3, "ready"]]);
    await kube.kubectl(["create", "-f", "-"], slice(all));
    await kube.startController();

    // Status: the address and the condition.
    type Svc = {
      status?: {
        loadBalancer?: { ingress?: { ip?: string }[] };
        conditions?: { type: string; status: string; reason: string }[];
      };
    };
    let svc: Svc = {};
    await waitUntil("the Service's address", async () => {
      svc = await kube.json<Svc>(["get", "service", "web", "-n", "default"]);
      return (svc.status?.loadBalancer?.ingress ?? []).length > 0;
    }, 30_000);
    const ips = svc.status!.loadBalancer!.ingress!.map((i) => i.ip);
    if (ips.join() !== cluster.vip) throw new Error(`Service got ${ips}, want ${cluster.vip}`);
    const cond = svc.status?.conditions?.find((c) => c.type === "holdfast.io/AddressAllocated");
    if (cond?.status !== "True") {
      throw new Error(`AddressAllocated condition is ${JSON.stringify(cond)}, want True`);
    }
    const wantBackends = [1, 2, 3].map((j) => `${backendAddress(j)}:8080/TCP active`);
    await waitUntil(
      "the model in Redis",
      async () => (await modelBackends(cluster)).join() === wantBackends.join(),
    );

    // LB nodes start on the published model; every node's maps carry the frontend and backends.
    await cluster.addLbNode(1);
    await cluster.addLbNode(2);
    for (const i of [1, 2]) {
      const fes = frontendsOf(cluster, i);
      if (!fes.includes(`${cluster.vip}:${cluster.port}/TCP`)) {
        throw new Error(`LB node ${i}'s service map holds ${fes}, not ${cluster.vip}`);
      }
      const bes = backendsOf(cluster, i);
      const want = [1, 2, 3].map(backendAddress).sort();
      if (bes.join() !== want.join()) {
        throw new Error(`LB node ${i}'s backends ${bes}, want ${want}`);
      }
    }

    // Real TCP from the client through the router and the LB nodes, echoed by the backends.
    const echo = async (count: number) => {
      const { stdout } = await cluster.topo.exec("client", [
        Deno.execPath(),
        "run",
        "--quiet",
        "--no-prompt",
        "--allow-net",
        ECHO,
        "client",
        cluster.vip,
        String(cluster.port),
        String(count),
      ], { timeoutMs: 40_000 });
      return JSON.parse(stdout.trim().split("\n").at(-1)!) as { ok: number; failed: number };
    };
    const counts = () => [1, 2, 3].map((j) => acceptedBy(cluster, j).length);
    /** Opens `count` new connections; returns how many each backend accepted. */
    const spread = async (count: number) => {
      const c0 = counts();
      const result = await echo(count);
      if (result.ok !== count) {
        throw new Error(`${count} connections through the LBs: ${JSON.stringify(result)}`);
      }
      let got: number[] = [];
      await waitUntil(`${count} accepts`, () => {
        got = counts().map((n, k) => n - c0[k]!);
        return got.reduce((a, n) => a + n, 0) >= count;
      }, 10_000);
      return got;
    };
    // Every backend gets some of 20 connections (Maglev over three: each misses all 20 with
    // probability (2/3)^20 ≈ 0.03%), so "none on backend 3" below means something.
    const first = await spread(20);
    if (first.some((n) => n === 0)) throw new Error(`20 connections spread ${first}`);

    // Held connections: A covers the terminating phase, B lasts through the removal.
    const hold = async (count: number, ms: number) => {
      const p = cluster.topo.spawnDeno("client", HOLD, {
        args: [cluster.vip, String(cluster.port), String(count), String(ms)],
        permissions: ["--allow-net"],
      });
      await p.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
      return p;
    };
    const newOn3 = (since: Set<number>) => [...portsOn(cluster, 3)].filter((p) => !since.has(p));
    // Accept lines the three backends logged so far: a hold's connections are all logged once
    // this grew by its count (waited for, bounded, not guessed as half a second).
    const accepts = () => [1, 2, 3].reduce((n, j) => n + acceptedBy(cluster, j).length, 0);
    const before3 = portsOn(cluster, 3);
    const accepted0 = accepts();
    const holdA = await hold(16, 25_000);
    await waitUntil("A's accepts logged", () => accepts() >= accepted0 + 16);
    const afterA = portsOn(cluster, 3);
    const holdB = await hold(16, 40_000);
    await waitUntil("B's accepts logged", () => accepts() >= accepted0 + 32);
    for (const [name, held] of [["A", newOn3(before3)], ["B", newOn3(afterA)]] as const) {
      if (held.length === 0) {
        throw new Error(`no connection of ${name} on backend 3: nothing to test`);
      }
    }

    // Backend 3 not ready (its readiness probe failed once): no new connections to it, its held
    // ones keep working (checked with A's below) — then ready again.
    const notReady = new Map(all).set(3, "notReady");
    await kube.kubectl(["replace", "-f", "-"], slice(notReady));
    await waitUntil(
      "backend 3 quarantined in the model",
      async () =>
        (await modelBackends(cluster)).includes(`${backendAddress(3)}:8080/TCP quarantined`),
    );
    await agentsCaughtUp(cluster);
    const whileNotReady = await spread(20);
    if (whileNotReady[2] !== 0) {
      throw new Error(`not-ready backend 3 accepted ${whileNotReady[2]} of 20 new connections`);
    }
    await kube.kubectl(["replace", "-f", "-"], slice(all));
    await waitUntil(
      "backend 3 active again in the model",
      async () => (await modelBackends(cluster)).includes(`${backendAddress(3)}:8080/TCP active`),
    );

    // Backend 3 terminating: no new connections to it; its held ones keep working.
    const terminating = new Map(all).set(3, "terminating");
    await kube.kubectl(["replace", "-f", "-"], slice(terminating));
    await waitUntil(
      "backend 3 terminating in the model",
      async () =>
        (await modelBackends(cluster)).includes(`${backendAddress(3)}:8080/TCP terminating`),
    );
    await agentsCaughtUp(cluster);
    const fresh = await spread(20);
    if (fresh[2] !== 0) {
      throw new Error(`terminating backend 3 accepted ${fresh[2]} of 20 new connections`);
    }
    const summaryA = await clientSummary(holdA, 50_000);
    if (summaryA.survived !== summaryA.connections) {
      throw new Error(
        `held connections died while backend 3 was not ready or terminating: ${
          JSON.stringify(summaryA.deaths.slice(0, 5))
        }`,
      );
    }

    // Backend 3 removed from the slice: its flows are purged on every LB node.
    const gone = parseIpv4(backendAddress(3));
    for (const i of [1, 2]) {
      if (!flowsOf(cluster, i).some((f) => f.value.backend === gone)) {
        throw new Error(`LB node ${i} has no flow to backend 3 before its removal`);
      }
    }
    const onBe3B = portsOn(cluster, 3);
    await kube.kubectl(
      ["replace", "-f", "-"],
      slice(new Map<number, State>([[1, "ready"], [2, "ready"]])),
    );
    let left: number[] = [];
    await waitUntil("backend 3's flows purged", () => {
      left = [1, 2].map((i) => flowsOf(cluster, i).filter((f) => f.value.backend === gone).length);
      return left.every((n) => n === 0);
    }, 15_000).catch((err) => {
      throw new Error(`flows to backend 3 still mapped on the LB nodes: ${left}`, { cause: err });
    });
    const purgeLogged = [...cluster.lbNodes.values()].some((n) =>
      n.agent?.lines.some((l) =>
        l.includes('"flows purged"') && l.includes(`"backend":"${backendAddress(3)}"`)
      )
    );
    if (!purgeLogged) throw new Error('no agent logged "flows purged" for backend 3');
    const summaryB = await clientSummary(holdB, 70_000);
    const wrong = summaryB.deaths.filter((d) => !onBe3B.has(d.port));
    if (wrong.length) {
      throw new Error(`connections to backends 1 and 2 died: ${JSON.stringify(wrong.slice(0, 5))}`);
    }
  },
);
