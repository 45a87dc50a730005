/**
 * Evidence that a chaos run with `--flow-sharing exceptions` (lab/chaos.ts
 * `EXCEPTION_SCENARIOS`) shared exceptions only, read where an operator would look: each live
 * agent's `/metrics` and log lines. A run that passed while every flow was still announced, or
 * without any table change being handshaken, proves nothing about the mode.
 *
 * @module
 */

import type { Check } from "./chaos_steps.ts";
import type { Scenario } from "./chaos.ts";
import type { Cluster } from "./cluster.ts";
import { agentHttp } from "./cluster_probe.ts";
import { metricSum } from "./_chaos_shard.ts";

/**
 * Exceptions-only sharing (`--flow-sharing exceptions`, tests/e2e/exceptions_chaos_test.ts): the
 * disturbance that needs shared state most — backends change, then ECMP moves flows — for
 * Holdfast only, with checks that the mode was in force (lab/_chaos_exceptions.ts).
 */
export const EXCEPTION_SCENARIOS: readonly Scenario[] = [
  {
    name: "exceptions-backends-added-during-lb-changes",
    description: "--flow-sharing exceptions: 2 backends added to 3, then LB node 1 dies and LB " +
      "node 4 joins",
    start: { lbNodes: 3, backends: 3 },
    agentArgs: ["--flow-sharing", "exceptions"],
    steps: [
      ["addBackend", 4],
      ["addBackend", 5],
      ["sleep", 500],
      ["killLbNode", 1],
      ["addLbNode", 4],
    ],
  },
];

/**
 * Exceptions-only sharing through a Redis restart (`./hf chaos exceptions-redis-restarts`), not in
 * the test: on a busy 2-CPU machine its steps (Redis restart, two backends, a join) can outlast the
 * clients' traffic, leaving the joined node nothing to forward (a failed check, not a lost
 * connection) — twice in 11 runs, both with a CPU kept busy (4 such runs).
 */
const LAB_ONLY: readonly Scenario[] = [
  {
    name: "exceptions-redis-restarts",
    description: "--flow-sharing exceptions: Redis restarts empty; then backends scale 3 → 5 and " +
      "LB node 3 joins, restoring the exceptions from the refilled Redis",
    start: { lbNodes: 2, backends: 3 },
    agentArgs: ["--flow-sharing", "exceptions"],
    steps: [
      ["restartRedis"],
      ["sleep", 1_500],
      ["addBackend", 4],
      ["addBackend", 5],
      ["sleep", 500],
      ["addLbNode", 3],
    ],
  },
];

/** Every exceptions scenario: the tested ones and those run by hand. */
export const EXCEPTION_LAB_SCENARIOS: readonly Scenario[] = [...EXCEPTION_SCENARIOS, ...LAB_ONLY];

/** Sum of a metric's samples whose labels contain `label` (e.g. `why="table_change"`). */
function metricSumWhere(text: string, name: string, label: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, "gm"))) {
    if (m[1]!.includes(label)) sum += Number(m[2]);
  }
  return sum;
}

/**
 * The checks of exceptions-only sharing over the cluster's live agents (none unless `scenario`
 * gives the agents `--flow-sharing exceptions`).
 */
export async function checkExceptionsShared(
  cluster: Cluster,
  scenario: Scenario,
): Promise<Check[]> {
  if (!scenario.agentArgs?.includes("exceptions")) return [];
  const live = [...cluster.lbNodes.values()].filter((n) => n.agent !== null);
  const sums = { learned: 0, unannounced: 0, published: 0, moved: 0, installed: 0, handshakes: 0 };
  for (const n of live) {
    const text = await agentHttp(cluster, n.index, "/metrics").then((r) => r.body, () => "");
    sums.learned += metricSum(text, "holdfast_flows_learned_total");
    sums.unannounced += metricSum(text, "holdfast_flows_stored_unannounced_total");
    sums.published += metricSum(text, "holdfast_flow_exceptions_published_total");
    sums.moved += metricSumWhere(
      text,
      "holdfast_flow_exceptions_published_total",
      'why="table_change"',
    ) + metricSumWhere(text, "holdfast_flow_exceptions_installed_total", 'via="table_change"');
    sums.installed += metricSum(text, "holdfast_flows_installed_total");
    sums.handshakes += n.agent!.lines.filter((l) =>
      l.includes('"msg":"table change: flow exceptions exchanged"')
    ).length;
  }
  const seen = JSON.stringify(sums);
  return [
    {
      what: "exceptions mode: flows stored without being announced",
      ok: sums.unannounced > 0,
      seen,
    },
    {
      what: "exceptions mode: table changes handshaken, moved flows published or installed",
      ok: sums.handshakes > 0 && sums.moved > 0,
      seen,
    },
  ];
}
