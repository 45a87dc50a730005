/**
 * Client steering benchmark (`deno task bench:egress-steer`, issue 23 item 3), in network
 * namespaces (needs root): the routed egress lab (lab/egress_routed.ts) with CLIENT_NODES client
 * nodes (4; `--quick` 2), each running `main.ts node --egress-steer` with one client pod that
 * sends a UDP probe every 10 ms to the server, two NAT pods. ROUNDS times (20; `--quick` 3) the
 * owner dies (links down + SIGKILL), then returns and ownership settles. Per round:
 *
 * - repoint = the successor's `address assumed` log line → each node agent's `egress steering to
 *   owner` line naming it (the slowest node is the round's "every node repointed");
 * - lag = the owner-change entry's Redis time → applied on the node (`lag_ms` of that line);
 * - takeover = death (the start of the kill) → each client's first UDP echo that ends a silence
 *   begun before the owner's links were down (steering and the external side's gratuitous ARP
 *   both followed), and follow = `address assumed` → that echo.
 *
 * Times of different processes come from their log lines' wall clock (one machine). Last line:
 * one JSON object with p50/max of each.
 *
 * @module
 */

import { readCommandLineOrExit } from "../lib/args.ts";
import { measureSteering } from "./_egress_steer.ts";

const OPTIONS = {
  command: "bench:egress-steer",
  usage: `usage: deno task bench:egress-steer [--quick] [--rounds N] [--client-nodes N]
  Egress steering on a routed pod network (root): owner deaths, "address assumed" → every node
  agent repointed, and the takeover seen by UDP probes. --quick: 3 rounds, 2 client nodes.`,
  options: {
    quick: { type: "boolean" },
    rounds: { type: "string" },
    "client-nodes": { type: "string" },
  },
} as const;
const args = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => ({
  quick: values.quick === true,
  rounds: values.rounds === undefined ? undefined : Number(values.rounds),
  clientNodes: values["client-nodes"] === undefined ? undefined : Number(values["client-nodes"]),
}));
const ROUNDS = args.rounds ?? (args.quick ? 3 : 20);
const CLIENT_NODES = args.clientNodes ?? (args.quick ? 2 : 4);
if (!(ROUNDS >= 1 && ROUNDS <= 200) || !(CLIENT_NODES >= 1 && CLIENT_NODES <= 8)) {
  console.error("Cannot parse bench:egress-steer arguments: --rounds 1..200, --client-nodes 1..8");
  Deno.exit(2);
}

function note(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ msg, ...fields }));
}

const result = await measureSteering(ROUNDS, CLIENT_NODES, note);
console.log(JSON.stringify({ ...result, quick: args.quick }));
