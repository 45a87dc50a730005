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
 *  w1: client pod a ─┐                   ┌─ w3/w4/w5: NAT pods  eth0 (pod network: decap)
 *  w2: client pod b ─┴─ router (routed ──┘            ext0 (secondary network "wan") ─┐
 *                        pod CIDRs)  ─ w0 ─ wan bridge ─ ext 198.18.0.1 (garp server) ─┘
 *                          └─ x0 ─ far 203.0.113.2 (bgp server)
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
 * Two client pods (one per address) hold 25 TCP connections and a UDP stream each. The owner of
 * the first address loses its node (links down, every process SIGKILLed), then its successor's
 * pod is deleted (SIGTERM: planned handover to the third NAT pod): every connection survives
 * with the same translated source address and port. With BGP, the router's route to each
 * floating address goes via its owner's `ext0` after each step.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { until } from "../harness/mod.ts";
import {
  EXTERNAL_SERVER,
  FAR_NET,
  FAR_SERVER,
  startKubeletCluster,
  WAN_NET,
  WAN_ROUTER,
} from "../../lab/kubelet/cluster.ts";
import { routeGateways, ROUTER_ASN } from "../../lab/_anycast_router.ts";
import { RouteHistory } from "../../lab/egress_bgp.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { Conntrack } from "../../node/conntrack/mod.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import type { HostProcess } from "../../lab/host_process.ts";

const CLIENTS = new URL("../../lab/clients/", import.meta.url).pathname;
const NS = "holdfast-system"; // the Secret holdfast-redis is there already
// Off w1 and w2, where the lab scheduler puts Redis and the controller (lowest names first): the
// node that dies must not take the control plane with it (Redis is one pod in the manifests).
const NAT_NODES = ["w3", "w4", "w5"];
const TCP_PORT = 8080, UDP_PORT = 8081, PER_POD = 25, HOLD_MS = 75_000;
const NAT_ASN = 65200;

/** How the floating addresses reach the server's network. */
export type EgressClusterMode = "garp" | "bgp";

function plan(mode: EgressClusterMode) {
  const bgp = mode === "bgp";
  // GARP: on the server's segment; BGP: outside every segment, reachable only by the routes.
  const floating = bgp ? ["192.0.2.100", "192.0.2.101"] : ["198.18.0.100", "198.18.0.101"];
  const destinations = bgp ? FAR_NET : WAN_NET;
  /** Client pod → its node and its floating address (sources entry i → addresses[i]). */
  const clients = [
    { name: "client-a", node: "w1", group: "a", address: floating[0]! },
    { name: "client-b", node: "w2", group: "b", address: floating[1]! },
  ];
  const nat = {
    apiVersion: "holdfast.io/v1alpha1",
    kind: "EgressNAT",
    metadata: { name: "internet", namespace: NS },
    spec: {
      destinations: [destinations],
      addresses: floating,
      // The internal gateways serve clients on a shared segment; here nothing routes through them.
      gateways: ["10.8.0.100", "10.8.0.101"],
      sources: clients.map((c) => ({ podSelector: { matchLabels: { "egress-client": c.group } } })),
      replicas: 3,
      nodeSelector: { "holdfast.io/egress-node": "true" },
      podAnnotations: {
        "k8s.v1.cni.cncf.io/networks": "wan@ext0",
        "cni.projectcalico.org/allowedSourcePrefixes": JSON.stringify([destinations]),
      },
      interfaces: { internal: "eth0", external: "ext0" },
      ...(bgp
        ? {
          bgp: {
            localAsn: NAT_ASN,
            peers: [{
              address: WAN_ROUTER,
              asn: ROUTER_ASN,
              bfd: { intervalMs: 100, multiplier: 3 },
            }],
          },
        }
        : {}),
    },
  };
  return {
    floating,
    clients,
    nat,
    server: bgp ? { host: "far", address: FAR_SERVER } : { host: "ext", address: EXTERNAL_SERVER },
  };
}

// deno-lint-ignore no-explicit-any
type Any = any;

function json(line: string): Record<string, unknown> {
  try {
    return JSON.parse(line);
  } catch {
    return {};
  }
}

/** Established TCP flows NATed to one of `floating` in namespace `ns`: flow → `addr:port`. */
function natFlows(ns: string, floating: readonly string[]): Map<string, string> {
  const ct = Conntrack.open({ netns: ns });
  try {
    const out = new Map<string, string>();
    for (const e of ct.dump({ natSrcAddrs: new Set(floating.map(parseIpv4)) })) {
      if (e.orig.proto !== 6 || e.tcpState !== 3 || !e.natSrc) continue;
      const o = e.orig;
      out.set(
        `${formatIpv4(o.src)}:${o.sport}>${formatIpv4(o.dst)}:${o.dport}`,
        `${formatIpv4(e.natSrc.addr)}:${e.natSrc.port}`,
      );
    }
    return out;
  } finally {
    ct.close();
  }
}

/** The test's body; `rootTest` it. */
export async function egressClusterTest(t: Deno.TestContext, mode: EgressClusterMode) {
  {
    const { floating: FLOATING, clients: CLIENT_PODS, nat: NAT, server: SERVER } = plan(mode);
    await using cluster = await startKubeletCluster({
      extraWorkers: 3,
      wan: true,
      nodeLabels: Object.fromEntries(
        NAT_NODES.map((n) => [n, { "holdfast.io/egress-node": "true" }]),
      ),
    });
    const { kube, topo, kubelet } = cluster;
    const kubectl = (args: string[], stdin?: unknown[]) =>
      topo.exec("w1", [
        ...["kubectl", "--kubeconfig", cluster.kubeconfig, `--cache-dir=${cluster.dir}/kcache`],
        ...args,
      ], { stdin: stdin?.map((x) => JSON.stringify(x)).join("\n"), timeoutMs: 30_000 });
    const pods = () => kube.store.list("/pods", NS) as Any[];
    const natPods = () =>
      pods().filter((p) => p.metadata.labels?.["holdfast.io/egress"] === "internet");
    const podOf = (name: string) => pods().find((p) => p.metadata.name === name);
    const ready = (p: Any) =>
      (p.status?.conditions ?? []).some((c: Any) => c.type === "Ready" && c.status === "True");
    const status = (): Any =>
      (kube.store.get("holdfast.io/egressnats", NS, "internet") as Any)?.status ?? {};
    const ownerOf = (address: string): string | undefined =>
      (status().owners ?? []).find((o: Any) => o.address === address)?.pod;
    /** BGP: the router's route to each floating address goes via its owner's ext0 (only). */
    const routesFollowOwners = async (what: string) => {
      if (mode !== "bgp") return;
      let seen = "";
      await until(
        what,
        async () => {
          const out = await topo.exec("router", ["ip", "-o", "-4", "route", "show"]);
          const views: string[] = [];
          let good = true;
          for (const a of FLOATING) {
            const line = out.stdout.split("\n").find((l) => routeGateways(l, a) !== null);
            const via = line ? routeGateways(line, a)! : [];
            const owner = ownerOf(a);
            const host = owner ? kubelet.podHost(NS, owner) : undefined;
            const ext = host
              ? (await topo.exec(host, ["ip", "-4", "-o", "addr", "show", "dev", "ext0"])).stdout
              : "";
            const own = /inet (198\.18\.0\.\d+)\/24/.exec(ext)?.[1];
            views.push(`${a} via ${via.join("+") || "none"} (owner ${owner} at ${own})`);
            // The owner as the status says, alive: not a dead node's pod nor the deleted one.
            const alive = live().some((p: Any) => p.metadata.name === owner);
            good &&= alive && own !== undefined && via.length === 1 && via[0] === own;
          }
          seen = views.join("; ");
          return good;
        },
        30_000,
        100,
      ).catch((err) => {
        throw new Error(`${err}: ${seen}`);
      });
    };
    const nodeAgentLog = (node: string) => {
      const p = pods().find((p) =>
        p.metadata.labels?.["app.kubernetes.io/name"] === "holdfast-node" &&
        p.spec.nodeName === node && !p.metadata.deletionTimestamp
      );
      return p ? kubelet.logs(NS, p.metadata.name) : Promise.resolve("");
    };
    const natLogs = async () =>
      (await Promise.all(
        natPods().map(async (p: Any) =>
          `${p.metadata.name} (${p.spec.nodeName}):\n` +
          (await kubelet.logs(NS, p.metadata.name)).split("\n").slice(-12).join("\n")
        ),
      )).join("\n---\n");
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };
    const dead = new Set<string>();
    /** BGP: the router's routes to the floating addresses, every change. */
    const histories: RouteHistory[] = [];
    let monitor: HostProcess | undefined;
    const doubles = (from: number[] = []) =>
      histories.flatMap((h, i) =>
        h.doubles().filter((c) => h.changes.indexOf(c) >= (from[i] ?? 0)).map((c) =>
          `${h.prefix} via ${c.hops.join("+")}`
        )
      );
    const live = () =>
      natPods().filter((p) => !dead.has(p.spec.nodeName) && !p.metadata.deletionTimestamp);

    await step("deno task deploy", async () => {
      const out = await cluster.deploy(["--timeout", "240"]);
      ok(out.includes("deployment.apps/holdfast-controller rolled out"), out);
    });

    await step(
      "client pods on w1 and w2; the EgressNAT; three NAT pods own the two addresses",
      async () => {
        const podType = kube.registry.find("", "v1", "pods")!;
        for (const c of CLIENT_PODS) {
          kube.rest.create(podType, NS, {
            metadata: { name: c.name, labels: { "egress-client": c.group } },
            spec: {
              nodeName: c.node,
              containers: [{ name: "idle", image: "holdfast:dev", command: ["sleep", "3600"] }],
            },
          }, { manager: "test" });
        }
        if (mode === "bgp") {
          // The router peers with the addresses the NAT pods get on wan (the lab's IPAM hands out
          // .21 upwards: three pods and the replacement of a deleted one).
          await cluster.router.setPeers([
            ...cluster.router.peers,
            ...[21, 22, 23, 24, 25].map((i) => ({
              name: `nat${i}`,
              address: `198.18.0.${i}`,
              asn: NAT_ASN,
            })),
          ]);
        }
        await kubectl(["apply", "--server-side", "-f", "-"], [NAT]);
        await until(
          "three ready NAT pods on three nodes",
          () => {
            const r = natPods().filter(ready);
            return r.length === 3 && new Set(r.map((p: Any) => p.spec.nodeName)).size === 3;
          },
          240_000,
          500,
        );
        await until(
          "both addresses owned (status.owners, Ready=True)",
          () => {
            const s = status();
            const r = (s.conditions ?? []).find((c: Any) => c.type === "Ready");
            return FLOATING.every((a) => ownerOf(a) !== undefined) && r?.status === "True";
          },
          60_000,
          500,
        ).catch(async (err) => {
          throw new Error(`${err}; status ${JSON.stringify(status())}; logs:\n${await natLogs()}`);
        });
        await routesFollowOwners("the router routes each floating address to its owner");
        if (mode === "bgp") {
          // Every change of the router's routes from now on (lab/egress_bgp.ts).
          monitor = topo.spawn("router", ["ip", "-o", "monitor", "route"]);
          await new Promise((r) => setTimeout(r, 100)); // listening before the snapshot
          for (const a of FLOATING) {
            const h = new RouteHistory(a, monitor, []);
            const now = await topo.exec("router", ["ip", "-4", "-o", "route", "show", `${a}/32`]);
            h.changes[0] = {
              at: performance.now(),
              wall: Date.now(),
              hops: (routeGateways(now.stdout, a) ?? []).sort(),
            };
            histories.push(h);
          }
        }
      },
    );

    await step("the client nodes' agents steer their client pods to the owners", async () => {
      for (const c of CLIENT_PODS) {
        const ip = podOf(c.name)?.status?.podIP;
        await until(
          `${c.node} steers ${c.name} (${ip})`,
          async () => {
            const lines = (await nodeAgentLog(c.node)).split("\n").map(json);
            return lines.some((l) => l.msg === "egress client steered" && l.ip === ip);
          },
          60_000,
          250,
        ).catch(async (err) => {
          throw new Error(
            `${err}; ${c.node}'s agent:\n${(await nodeAgentLog(c.node)).slice(-3000)}`,
          );
        });
      }
    });

    const server = {
      tcp: topo.spawnDeno(SERVER.host, `${CLIENTS}tcp_echo.ts`, {
        args: ["server", SERVER.address, String(TCP_PORT)],
        permissions: ["--allow-net"],
      }),
      udp: topo.spawnDeno(SERVER.host, `${CLIENTS}udp_echo.ts`, {
        args: [SERVER.address, String(UDP_PORT)],
        permissions: ["--allow-net"],
      }),
    };
    const clients: { c: typeof CLIENT_PODS[number]; tcp: HostProcess; udp: HostProcess }[] = [];
    await step(`${PER_POD} TCP connections and a UDP stream from each client pod`, async () => {
      await server.tcp.waitForLine((l) => l.includes("listening"), { timeoutMs: 30_000 });
      await server.udp.waitForLine((l) => l.includes("listening"), { timeoutMs: 30_000 });
      for (const c of CLIENT_PODS) {
        const host = kubelet.podHost(NS, c.name)!;
        const tcp = topo.spawnDeno(host, `${CLIENTS}hold_client.ts`, {
          args: [SERVER.address, TCP_PORT, PER_POD, HOLD_MS, 200].map(String),
          permissions: ["--allow-net"],
        });
        const udp = topo.spawnDeno(host, `${CLIENTS}udp_stream.ts`, {
          args: [SERVER.address, String(UDP_PORT), String(HOLD_MS), "100", c.name],
          permissions: ["--allow-net"],
        });
        await tcp.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 60_000 });
        await udp.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 30_000 });
        clients.push({ c, tcp, udp });
      }
    });

    /** Every live NAT pod holds every established flow with the owner's NAT address and port. */
    const synced = async (what: string) => {
      let gap = "";
      await until(
        what,
        () => {
          const views = live().map((p: Any) => ({
            pod: p.metadata.name,
            flows: natFlows(topo.ns(kubelet.podHost(NS, p.metadata.name)!), FLOATING),
          }));
          const all = new Map<string, string>();
          for (const v of views) for (const [f, nat] of v.flows) all.set(f, nat);
          const missing = views.map((v) =>
            `${v.pod} misses ${[...all].filter(([f, nat]) => v.flows.get(f) !== nat).length}`
          );
          gap = `${all.size} flows; ${missing.join(", ")}`;
          return all.size >= PER_POD * CLIENT_PODS.length &&
            views.every((v) => [...all].every(([f, nat]) => v.flows.get(f) === nat));
        },
        30_000,
        200,
      ).catch((err) => {
        throw new Error(`${err}: ${gap}`);
      });
    };

    const address = FLOATING[0]!;
    let first = "", second = "";
    await step("the owner of the first address loses its node (links down + SIGKILL)", async () => {
      await synced("every NAT pod holds every flow (conntrack sync)");
      first = ownerOf(address)!;
      const node = podOf(first).spec.nodeName;
      const control = pods().filter((p) =>
        p.spec.nodeName === node && /^holdfast-(redis|controller)/.test(p.metadata.name)
      ).map((p) => p.metadata.name);
      deepStrictEqual(control, [], `${node} runs the control plane`);
      dead.add(node);
      await cluster.killNode(node);
      await until(
        `${address} owned by another pod`,
        () => {
          const o = ownerOf(address);
          return o !== undefined && o !== first;
        },
        30_000,
        100,
      );
      second = ownerOf(address)!;
      await routesFollowOwners("the router's routes follow the owners after the node death");
      for (const c of CLIENT_PODS.filter((c) => c.address === address)) {
        await until(
          `${c.node}'s agent steers to ${second}`,
          async () => {
            const lines = (await nodeAgentLog(c.node)).split("\n").map(json);
            return lines.some((l) =>
              l.msg === "egress steering to owner" && l.address === address && l.pod === second
            );
          },
          30_000,
          100,
        );
      }
    });

    let third = "", secondLog = "", handoverFrom: number[] = [];
    await step("the new owner's pod is deleted (SIGTERM: planned handover)", async () => {
      await synced("the live NAT pods hold every flow");
      // Never two next hops at once from here (a planned handover, docs/egress.md "BGP mode").
      // A node's death may show both for up to BFD detection − lease ttl: reported only.
      handoverFrom = histories.map((h) => h.doubles() && h.changes.length); // read up to now
      await kubectl(["delete", "pod", second, "-n", NS, "--wait=false"]);
      await until(
        `${address} owned by a third pod`,
        () => {
          const o = ownerOf(address);
          return o !== undefined && o !== first && o !== second;
        },
        60_000,
        100,
      ).catch(async (err) => {
        throw new Error(`${err}; status ${JSON.stringify(status())}; logs:\n${await natLogs()}`);
      });
      third = ownerOf(address)!;
      secondLog = await kubelet.logs(NS, second);
      await routesFollowOwners("the router's routes follow the owners after the delete");
      deepStrictEqual(doubles(handoverFrom), [], "two next hops during the planned handover");
      for (const c of CLIENT_PODS.filter((c) => c.address === address)) {
        await until(
          `${c.node}'s agent steers to ${third}`,
          async () => {
            const lines = (await nodeAgentLog(c.node)).split("\n").map(json);
            return lines.some((l) =>
              l.msg === "egress steering to owner" && l.address === address && l.pod === third
            );
          },
          30_000,
          100,
        );
      }
      await until("the deleted pod is gone", () => podOf(second) === undefined, 60_000, 250);
      // The clients were still holding when all that was done (else the test proves nothing).
      for (const { c, tcp, udp } of clients) {
        ok(
          ![...tcp.lines, ...udp.lines].some((l) => l.includes('"msg":"summary"')),
          `${c.name}'s clients ended before the handovers were done: raise HOLD_MS`,
        );
      }
    });

    await step("every connection survived with the same source address and port", async () => {
      const accepted = server.tcp.lines.map(json).filter((l) => l.msg === "accepted")
        .map((l) => String(l.peer));
      const udpSources = server.udp.lines.map(json).filter((l) => l.msg === "udp source");
      const report: Record<string, unknown> = {
        first,
        second,
        third,
        owners: status().owners,
        // A node's death leaves its route to the router's BFD (docs/egress.md "BGP mode").
        // And the planned handover's (from the delete on, a rebalance to the new pod included).
        ...(mode === "bgp" ? { doubles: doubles(), handoverDoubles: doubles(handoverFrom) } : {}),
        routes: histories.map((h) => ({ [h.prefix]: h.changes.map((c) => c.hops.join("+")) })),
        monitor: monitor?.lines.filter((l) => FLOATING.some((a) => l.includes(a))),
      };
      const summaries = [];
      for (const { c, tcp, udp } of clients) {
        const s = await clientSummary(tcp, HOLD_MS + 60_000);
        const u = await clientSummary<Record<string, number>>(udp, HOLD_MS + 30_000);
        report[c.name] = { tcp: s, udp: u };
        summaries.push({ c, s, u });
      }
      console.log(JSON.stringify(report));
      // What the NAT pods decided, for a failure's diagnosis (the deleted pod's as last seen).
      const decisions = [...natPods().map((p: Any) => p.metadata.name), "deleted"].map(
        async (name) => {
          const text = name === "deleted" ? secondLog : await kubelet.logs(NS, name);
          return text.split("\n").filter((l) =>
            /"msg":"[^"]*(address|drain|peer|resync|dump|sync|bird|lease|daemon)/.test(l)
          ).map((l) => `${name}: ${l.slice(0, 300)}`);
        },
      );
      // BGP: the router's session changes (a NAT pod's bird killed and restarted shows here).
      const sessions = async () =>
        mode !== "bgp" ? [] : (await Deno.readTextFile(`${cluster.dir}/router.log`).catch(() => ""))
          .split("\n").filter((l) => /hf_nat\d+.*(State changed|rror|eceived)/.test(l)).slice(-60);
      const why = async () =>
        [...(await Promise.all(decisions)).flat(), ...(await sessions())].join("\n");
      for (const { c, s, u } of summaries) {
        if (s.survived !== PER_POD) {
          throw new Error(`${c.name}: TCP ${JSON.stringify(s)}; NAT pods:\n${await why()}`);
        }
        ok(
          Number(u.last_echo_age_ms) < 5_000,
          `${c.name}: the UDP stream stopped ${JSON.stringify(u)}`,
        );
        const sources = udpSources.filter((l) => l.stream === c.name).map((l) => String(l.from));
        strictEqual(sources.length, 1, `${c.name}: the server saw its UDP stream from ${sources}`);
        ok(sources[0]!.startsWith(`${c.address}:`), `${c.name}: UDP from ${sources[0]}`);
      }
      // Each connection was accepted once (a reconnect would show), every one from a floating
      // address: nothing reached the server unsteered or unNATed.
      strictEqual(accepted.length, PER_POD * CLIENT_PODS.length, JSON.stringify(accepted));
      deepStrictEqual(
        [...new Set(accepted.map((a) => a.slice(0, a.lastIndexOf(":"))))].sort(),
        [...FLOATING].sort(),
      );
      strictEqual(new Set(accepted).size, accepted.length, "distinct source ports");
    });
  }
}
