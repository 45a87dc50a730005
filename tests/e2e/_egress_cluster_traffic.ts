/**
 * The egress cluster test's traffic (tests/e2e/_egress_cluster.ts): the server (TCP echo and UDP
 * echo), each client pod's long-lived TCP connections and UDP stream, the conntrack view of the
 * NAT pods (every live one holds every flow), and the end of the run (SIGUSR1: each client
 * finishes its exchange in flight and prints its summary).
 */

import { until } from "../harness/mod.ts";
import { Conntrack } from "../../node/conntrack/mod.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import type { HostProcess } from "../../lab/host_process.ts";
import { type Any, type EgressRig, HOLD_MS, TCP_PORT, UDP_PORT } from "./_egress_cluster_rig.ts";
import { diagnosis } from "./_egress_cluster_checks.ts";

const CLIENTS = new URL("../../lab/clients/", import.meta.url).pathname;

type ClientPod = EgressRig["plan"]["clients"][number];

/** The server and the clients' processes. */
export interface Traffic {
  readonly server: { readonly tcp: HostProcess; readonly udp: HostProcess };
  readonly clients: { c: ClientPod; tcp: HostProcess; udp: HostProcess }[];
}

/** Established TCP flows NATed to one of `floating` in namespace `ns`: flow → `addr:port`. */
export function natFlows(ns: string, floating: readonly string[]): Map<string, string> {
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

/** The server, then each client pod's TCP connections and UDP stream, all running. */
export async function startTraffic(rig: EgressRig): Promise<Traffic> {
  const { topo, kubelet, plan } = rig;
  const server = {
    tcp: topo.spawnDeno(plan.server.host, `${CLIENTS}tcp_echo.ts`, {
      args: ["server", plan.server.address, String(TCP_PORT)],
      permissions: ["--allow-net"],
    }),
    udp: topo.spawnDeno(plan.server.host, `${CLIENTS}udp_echo.ts`, {
      args: [plan.server.address, String(UDP_PORT)],
      permissions: ["--allow-net"],
    }),
  };
  const traffic: Traffic = { server, clients: [] };
  await server.tcp.waitForLine((l) => l.includes("listening"), { timeoutMs: 30_000 });
  await server.udp.waitForLine((l) => l.includes("listening"), { timeoutMs: 30_000 });
  for (const c of plan.clients) {
    const host = kubelet.podHost("holdfast-system", c.name)!;
    const tcp = topo.spawnDeno(host, `${CLIENTS}hold_client.ts`, {
      args: [plan.server.address, TCP_PORT, c.connections, HOLD_MS, 200].map(String),
      permissions: ["--allow-net"],
    });
    const udp = topo.spawnDeno(host, `${CLIENTS}udp_stream.ts`, {
      args: [plan.server.address, String(UDP_PORT), String(HOLD_MS), "100", c.name],
      permissions: ["--allow-net"],
    });
    traffic.clients.push({ c, tcp, udp });
  }
  for (const { tcp, udp } of traffic.clients) {
    await tcp.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 60_000 });
    await udp.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 30_000 });
  }
  return traffic;
}

/** Every live NAT pod holds every established flow with the owner's NAT address and port. */
export async function synced(rig: EgressRig, what: string): Promise<void> {
  const { floating, clients } = rig.plan;
  const total = clients.reduce((n, c) => n + c.connections, 0);
  let gap = "";
  await until(
    what,
    () => {
      const views = rig.live().map((p: Any) => ({
        pod: p.metadata.name,
        flows: natFlows(rig.topo.ns(rig.hostOf(p.metadata.name)), floating),
      }));
      const all = new Map<string, string>();
      for (const v of views) for (const [f, nat] of v.flows) all.set(f, nat);
      const missing = views.map((v) =>
        `${v.pod} misses ${[...all].filter(([f, nat]) => v.flows.get(f) !== nat).length}`
      );
      gap = `${all.size} flows; ${missing.join(", ")}`;
      return all.size >= total &&
        views.every((v) => [...all].every(([f, nat]) => v.flows.get(f) === nat));
    },
    30_000,
    200,
  ).catch(async (err) => {
    const steer = (await Promise.all(
      rig.plan.clients.map(async (c) =>
        (await rig.nodeAgentLog(c.node)).split("\n").filter((l) => l.includes("egress"))
          .slice(-8).map((l) => `${c.node}: ${l.slice(0, 300)}`)
      ),
    )).flat();
    const flows = rig.live().map((p: Any) => {
      const f = natFlows(rig.topo.ns(rig.hostOf(p.metadata.name)), floating);
      return `${p.metadata.name}: ${[...f].map(([k, v]) => `${k}=${v}`).join(" ")}`;
    });
    throw new Error(
      `${err}: ${gap}; owners ${JSON.stringify(rig.status().owners)}\n${flows.join("\n")}\n` +
        `${steer.join("\n")}\n${await diagnosis(rig, new Map())}`,
    );
  });
}

/**
 * Each client's summary after SIGUSR1. A TCP client whose connections all died has ended already
 * (its summary says so); one that ended because HOLD_MS passed would prove less than the steps
 * claim: an error.
 */
export async function endTraffic(traffic: Traffic, startedAt: number) {
  if (performance.now() - startedAt >= HOLD_MS - 1_000) {
    throw new Error(`the steps took longer than the clients hold (${HOLD_MS} ms): raise HOLD_MS`);
  }
  const signal = (p: HostProcess) => {
    try {
      p.child.kill("SIGUSR1");
    } catch { /* ended already (every connection died): its summary says so */ }
  };
  for (const { tcp, udp } of traffic.clients) [tcp, udp].forEach(signal);
  const out = [];
  for (const { c, tcp, udp } of traffic.clients) {
    const s = await clientSummary(tcp, 30_000);
    const u = await clientSummary<Record<string, number>>(udp, 30_000);
    out.push({ c, s, u });
  }
  return out;
}
