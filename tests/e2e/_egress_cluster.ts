/**
 * The egress NAT cluster test (issue 23, docs/egress.md "In Kubernetes" and "Steering client
 * pods"), shared by `egress_cluster_test.ts` (floating addresses on the external segment, moved by
 * gratuitous ARP) and `egress_cluster_bgp_test.ts` (the server behind the router, which learns the
 * floating addresses over BGP from their owner). `deno task deploy` installs Holdfast (the node
 * agent DaemonSet runs with `--egress-steer`); kubectl applies one EgressNAT with two floating
 * addresses, client pods by pod selector and three NAT pods on the nodes labelled for egress.
 * Every piece runs as the manifests and the controller's Deployment declare it, in the lab
 * kubelet (lab/kubelet/):
 *
 * ```
 *  w1, w2, w6, w7: client pods ─┐                ┌─ w3/w4/w5: NAT pods  eth0 (pod network: decap)
 *                               └─ router (routed ┘      ext0 (secondary network "wan") ─┐
 *                                   pod CIDRs) ─ w0 ─ wan bridge ─ ext 198.18.0.1 (garp) ─┘
 *                                   └─ x0 ─ far 203.0.113.2 (bgp server)
 * ```
 *
 * The pod network is routed per node (no shared L2 between client and NAT pods): the client
 * nodes' agents encapsulate the client pods' packets to the destinations to the owner NAT pod's
 * pod address, the owner decapsulates on `eth0` (`interfaces.internal: eth0`) and SNATs out of
 * `ext0`, a second interface the pods get from `spec.podAnnotations` (Multus'
 * `k8s.v1.cni.cncf.io/networks: wan@ext0`, as the lab CNI reads it); the replies it de-NATs
 * leave `eth0` with the server's source, which the node's anti-spoofing lets through because of
 * Calico's `cni.projectcalico.org/allowedSourcePrefixes` annotation. The router reaches the
 * server either way, so a client packet that is not steered reaches the server with its pod
 * address: the server's log of sources would show it.
 *
 * Four client pods on four nodes (two per address) hold 50 TCP connections and a UDP stream each.
 * Then, one after the other: the owner of the first address loses its node (links down, every
 * process SIGKILLed); the owner of the second address is frozen (SIGSTOP of every process of the
 * pod, bird included) and later continued; the owner of the first address is deleted (SIGTERM:
 * planned handover; the Deployment makes a new pod); the Deployment is rolled (a changed
 * `spec.podAnnotations`: one new pod at a time, each old one handing over on SIGTERM). After
 * each, the owners settle, the client nodes steer to them and (BGP) the router routes each
 * address via its owner only; from the delete on, never via two pods at once (a dead or frozen
 * pod's route is left to the router's BFD, reported). At the end every connection survived with
 * the same translated source address and port (`_egress_cluster_checks.ts`).
 *
 * Files: `_egress_cluster_rig.ts` (the cluster, the plan, the views and waits),
 * `_egress_cluster_traffic.ts` (server, clients, conntrack), `_egress_cluster_checks.ts`.
 */

import { deepStrictEqual, ok } from "node:assert/strict";
import { until } from "../harness/mod.ts";
import { type Any, type EgressClusterMode, EgressRig, NS } from "./_egress_cluster_rig.ts";
import { endTraffic, startTraffic, synced, type Traffic } from "./_egress_cluster_traffic.ts";
import { checkTraffic, noDoubles } from "./_egress_cluster_checks.ts";

export type { EgressClusterMode };

const ready = (p: Any) =>
  (p.status?.conditions ?? []).some((c: Any) => c.type === "Ready" && c.status === "True");

/** The test's body; `rootTest` it. */
export async function egressClusterTest(t: Deno.TestContext, mode: EgressClusterMode) {
  await using rig = await EgressRig.start(t, mode);
  const [A, B] = rig.plan.floating as [string, string];
  const gone = new Map<string, string>(); // deleted pods' logs, as last seen
  const report: Record<string, unknown> = {};

  await rig.step("deno task deploy", async () => {
    const out = await rig.cluster.deploy(["--timeout", "240"]);
    ok(out.includes("deployment.apps/holdfast-controller rolled out"), out);
  });

  await rig.step(
    "client pods on four nodes; the EgressNAT; three NAT pods own the addresses",
    async () => {
      const podType = rig.cluster.kube.registry.find("", "v1", "pods")!;
      for (const c of rig.plan.clients) {
        rig.cluster.kube.rest.create(podType, NS, {
          metadata: { name: c.name, labels: { "egress-client": c.group } },
          spec: {
            nodeName: c.node,
            containers: [{ name: "idle", image: "holdfast:dev", command: ["sleep", "3600"] }],
          },
        }, { manager: "test" });
      }
      await rig.routerPeersNatPods();
      await rig.kubectl(["apply", "--server-side", "-f", "-"], [rig.plan.nat]);
      await until(
        "three ready NAT pods on three nodes",
        () => {
          const r = rig.natPods().filter(ready);
          return r.length === 3 && new Set(r.map((p: Any) => p.spec.nodeName)).size === 3;
        },
        240_000,
        500,
      );
      await rig.settled("start");
      await rig.watchRoutes();
    },
  );

  let traffic: Traffic | undefined, trafficAt = 0;
  await rig.step("TCP connections and a UDP stream from each client pod", async () => {
    trafficAt = performance.now();
    traffic = await startTraffic(rig);
  });

  await rig.step(
    "the owner of the first address loses its node (links down + SIGKILL)",
    async () => {
      await synced(rig, "every NAT pod holds every flow (conntrack sync)");
      const first = rig.ownerOf(A)!;
      const node = rig.podOf(first).spec.nodeName;
      const control = rig.pods().filter((p) =>
        p.spec.nodeName === node && /^holdfast-(redis|controller)/.test(p.metadata.name)
      ).map((p) => p.metadata.name);
      deepStrictEqual(control, [], `${node} runs the control plane`);
      rig.dead.add(node);
      await rig.cluster.killNode(node);
      report.killed = first;
      report.afterKill = await rig.newOwner(A, [first]);
      await rig.settled("after the node death");
    },
  );

  await rig.step(
    "the owner of the second address is frozen (SIGSTOP), then continued",
    async () => {
      await synced(rig, "the live NAT pods hold every flow");
      const frozen = rig.ownerOf(B)!;
      ok((await rig.signalPod(frozen, "STOP")) > 0, `no process in ${frozen}`);
      try {
        report.frozen = frozen;
        report.afterFreeze = await rig.newOwner(B, [frozen]);
        await rig.routesFollowOwners("the router's routes follow the owners while frozen");
        await rig.steersToOwner(B);
      } finally {
        await rig.signalPod(frozen, "CONT");
      }
      // Continued, it forfeits; as assigned owner it gets its address back by planned handover
      // once it is ready again (BGP: a session established).
      await rig.settled("after the continue");
    },
  );

  // Never two next hops at once from here: planned handovers only (docs/egress.md "BGP mode").
  const mark = rig.routeMark();
  report.deathAndFreezeDoubles = rig.doubles([], mark);

  await rig.step(
    "the owner of the first address is deleted (SIGTERM: planned handover)",
    async () => {
      await synced(rig, "the live NAT pods hold every flow");
      const owner = rig.ownerOf(A)!;
      const before = new Set(rig.natPods().map((p) => p.metadata.name));
      const logs = () => rig.kubelet.logs(NS, owner).catch(() => "");
      const early = await logs();
      await rig.kubectl(["delete", "pod", owner, "-n", NS, "--wait=false"]);
      report.deleted = owner;
      report.afterDelete = await rig.newOwner(A, [owner]);
      gone.set(owner, (await logs()) || early);
      await until("the deleted pod is gone", () => rig.podOf(owner) === undefined, 60_000, 250);
      await until(
        "the Deployment's new NAT pod is ready",
        () => rig.live().some((p) => !before.has(p.metadata.name) && ready(p)),
        120_000,
        250,
      );
      await rig.settled("after the delete and the new pod");
      await noDoubles(rig, mark, gone, "planned handovers");
    },
  );

  await rig.step("the Deployment is rolled (a changed spec.podAnnotations)", async () => {
    await synced(rig, "the live NAT pods hold every flow");
    const old = new Set(rig.natPods().map((p) => String(p.metadata.name)));
    const annotations = { ...rig.plan.nat.spec.podAnnotations, "example.com/rolled": "1" };
    await rig.kubectl([
      ...["patch", "egressnat", "internet", "-n", NS, "--type", "merge"],
      ...["-p", JSON.stringify({ spec: { podAnnotations: annotations } })],
    ]);
    await until(
      "every NAT pod replaced, three new ones ready",
      async () => {
        for (const p of rig.natPods()) {
          const name = String(p.metadata.name);
          if (old.has(name) && p.metadata.deletionTimestamp && !rig.dead.has(p.spec.nodeName)) {
            gone.set(name, await rig.kubelet.logs(NS, name).catch(() => gone.get(name) ?? ""));
          }
        }
        const live = rig.live();
        const oldLeft = rig.natPods().filter((p) =>
          old.has(p.metadata.name) && !p.metadata.deletionTimestamp &&
          !rig.dead.has(p.spec.nodeName)
        );
        return oldLeft.length === 0 && live.length === 3 &&
          live.every((p) => !old.has(p.metadata.name) && ready(p));
      },
      240_000,
      500,
    );
    await rig.settled("after the roll");
    report.afterRoll = [A, B].map((a) => rig.ownerOf(a));
    await noDoubles(rig, mark, gone, "planned handovers");
  });

  await rig.step("every connection survived with the same source address and port", async () => {
    const summaries = await endTraffic(traffic!, trafficAt);
    report.doubles = rig.doubles();
    await checkTraffic(rig, traffic!, summaries, gone, report);
  });
}
