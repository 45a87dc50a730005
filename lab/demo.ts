/**
 * `./hf demo`: a virtual cluster in network namespaces — a client, a router running bird2 (ECMP
 * over what the LB nodes announce through BGP), three LB nodes running Holdfast's XDP load
 * balancer and agent (announcing the LB IPs once ready), three backends, Redis — dual stack: 40
 * long-lived TCP connections to the IPv4 LB IP and 40 to the IPv6 one, exchanging data every
 * 100 ms. While they run, two backends are added and LB node 1 is killed, then LB node 4 joins.
 * Holdfast keeps every connection of both families. Then the same story with flow sharing off
 * (Maglev only, what a stateless ECMP load balancer does) for comparison.
 * Each change is checked to have happened (route, processes, backend maps: `chaos_steps.ts`).
 *
 * Flags: `--verbose` shows every agent's log lines; `--connections N`.
 *
 * @module
 */
import { intOption, readCommandLine } from "../lib/args.ts";
import { rootMissingReason } from "./command.ts";
import { Disturbances } from "./chaos_steps.ts";
import { Cluster } from "./cluster.ts";
import { clientSummary } from "./clients/summary.ts";

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
    vip6: "[2001:db8:100::1]:8080",
  });
  await using cluster = await Cluster.create({ lbNodes: 3, backends: 3, flowSync, verbose });
  say(
    "cluster ready: lb1, lb2, lb3 announce 10.0.100.1 and 2001:db8:100::1 through BGP (a session " +
      "per family); the router ECMPs over them",
    { namespaces: cluster.topo.hosts.map((h) => cluster.topo.ns(h)) },
  );
  const clients = await Promise.all([
    cluster.startClient(connections, 10_000),
    cluster.startClient(connections, 10_000, { family: 6 }),
  ]);
  say(
    `${connections} IPv4 and ${connections} IPv6 connections open, each exchanging a message ` +
      "every 100 ms",
  );
  await sleep(1_500);
  const disturb = new Disturbances(cluster); // each step checks that it happened
  say("scaling backends 3 → 5 (the Maglev table changes on every LB node)");
  await disturb.addBackend(4);
  await disturb.addBackend(5);
  await sleep(500);
  say("killing LB node lb1: link down, agent killed, router withdraws it");
  await disturb.killLbNode(1);
  await sleep(1_000);
  say("LB node lb4 joins: it restores flows, then announces both LB IPs through BGP");
  await disturb.addLbNode(4);
  const [v4, v6] = await Promise.all(clients.map((c) => clientSummary(c, 40_000)));
  await disturb.settle();
  const failed = disturb.checks.filter((c) => !c.ok);
  say(
    `${
      disturb.checks.length - failed.length
    } of ${disturb.checks.length} checks saw the changes happen`,
    {
      failed,
    },
  );
  const summary = {
    connections: v4!.connections + v6!.connections,
    survived: v4!.survived + v6!.survived,
    max_stall_ms: Math.max(v4!.max_stall_ms, v6!.max_stall_ms),
  };
  say(
    `${mode}: ${v4!.survived} of ${v4!.connections} IPv4 and ${v6!.survived} of ` +
      `${v6!.connections} IPv6 connections survived`,
    { ...summary, ipv4_survived: v4!.survived, ipv6_survived: v6!.survived },
  );
  const families = `IPv4 ${v4!.survived}/${v4!.connections}, IPv6 ${v6!.survived}/${
    v6!.connections
  }`;
  return { ...summary, families, checked: failed.length === 0 };
}

/**
 * Runs the demo; returns an exit code: 0 when Holdfast kept every connection and every change was
 * seen to happen in both stories.
 */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, {
    command: "demo",
    usage: `usage: ./hf demo [--verbose] [--connections N]   (main.ts demo; as root)
  The dual-stack virtual cluster in network namespaces: N connections (40) per address family
  through LB node and backend changes, with flow sharing and without. --verbose: every agent's
  log lines.`,
    options: { verbose: { type: "boolean" }, connections: { type: "string" } },
  }, ({ values }) => ({
    verbose: values.verbose === true,
    connections: intOption(values, "connections", { default: 40, min: 1, max: 1000 }),
  }));
  if ("exit" in read) return read.exit;
  const { verbose, connections } = read.options;
  const missing = rootMissingReason();
  if (missing !== null) {
    console.error(`Cannot run the demo: it ${missing} (network namespaces and BPF)`);
    return 1;
  }
  const ours = await story(true, connections, verbose);
  const base = await story(false, connections, verbose);
  say("result", {
    holdfast: `${ours.survived}/${ours.connections} survived (${ours.families}), longest stall ` +
      `${ours.max_stall_ms} ms`,
    maglev_only: `${base.survived}/${base.connections} survived (${base.families})`,
  });
  return ours.survived === ours.connections && ours.checked && base.checked ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
