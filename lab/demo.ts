/**
 * `./hf demo`: a virtual cluster in network namespaces — a client, an ECMP router, three LB
 * nodes running Holdfast's XDP load balancer and agent, three backends, Redis — and 40 long-lived
 * TCP connections exchanging data every 100 ms. While they run, two backends are added and LB
 * node 1 is killed, then LB node 4 joins. Holdfast keeps every connection. Then the same story
 * with flow sharing off (Maglev only, what a stateless ECMP load balancer does) for comparison.
 *
 * Flags: `--verbose` shows every agent's log lines; `--connections N`.
 *
 * @module
 */
import { rootMissingReason } from "./command.ts";
import { Cluster } from "./cluster.ts";

function say(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(
    JSON.stringify({
      ts: new Date().toISOString(),
      level: "info",
      component: "demo",
      msg,
      ...fields,
    }),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function story(flowSync: boolean, connections: number, verbose: boolean) {
  const mode = flowSync ? "holdfast" : "maglev-only";
  say(`building the virtual cluster (${mode})`, {
    lb_nodes: 3,
    backends: 3,
    vip: "10.0.100.1:8080",
  });
  await using cluster = await Cluster.create({ lbNodes: 3, backends: 3, flowSync, verbose });
  say("cluster ready: router ECMPs 10.0.100.1 over lb1, lb2, lb3", {
    namespaces: cluster.topo.hosts.map((h) => cluster.topo.ns(h)),
  });
  const client = await cluster.startClient(connections, 10_000);
  say(`${connections} connections open, each exchanging a message every 100 ms`);
  await sleep(1_500);
  say("scaling backends 3 → 5 (the Maglev table changes on every LB node)");
  await cluster.addBackend(4);
  await cluster.addBackend(5);
  await sleep(500);
  say("killing LB node lb1: link down, agent killed, router withdraws it");
  await cluster.killLbNode(1);
  await sleep(1_000);
  say("LB node lb4 joins the ECMP group");
  await cluster.addLbNode(4);
  const line = await client.waitForLine((l) => l.includes('"msg":"summary"'), {
    timeoutMs: 40_000,
  });
  const summary = JSON.parse(line);
  say(`${mode}: ${summary.survived} of ${summary.connections} connections survived`, {
    connections: summary.connections,
    survived: summary.survived,
    max_stall_ms: summary.max_stall_ms,
  });
  return summary as { connections: number; survived: number; max_stall_ms: number };
}

/** Runs the demo; returns an exit code (0 when Holdfast kept every connection). */
export async function main(args: string[]): Promise<number> {
  const missing = rootMissingReason();
  if (missing !== null) {
    console.error(`Cannot run the demo: it ${missing} (network namespaces and BPF)`);
    return 1;
  }
  const verbose = args.includes("--verbose");
  const at = args.indexOf("--connections");
  const connections = at >= 0 ? Number(args[at + 1]) : 40;
  const ours = await story(true, connections, verbose);
  const base = await story(false, connections, verbose);
  say("result", {
    holdfast:
      `${ours.survived}/${ours.connections} survived, longest stall ${ours.max_stall_ms} ms`,
    maglev_only: `${base.survived}/${base.connections} survived`,
  });
  return ours.survived === ours.connections ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
