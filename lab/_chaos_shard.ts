/**
 * The evidence that a Redis Cluster shard failover during chaos traffic cost no flow
 * (`Disturbances.killFlowMaster`, lab/chaos_steps.ts): read once the traffic is over, from where
 * an operator would look — each live agent's log lines and `/metrics`, its pinned flow map, and
 * the store.
 *
 * - some live agent logged `flow store unavailable` after the kill (the failover reached it);
 * - every live agent is back in sync (`holdfast_flow_store_up 1`; how long each was out of sync,
 *   from its log, is reported);
 * - the flows learned meanwhile were written back: `holdfast_flows_rewritten_total` summed over
 *   live agents, and `published` of their `flows restored` lines since the kill, above 0;
 * - every flow a live agent learned itself (not a peer's, not awaiting its event) of the IPv4 LB
 *   IP is in the store, over all its buckets.
 *
 * @module
 */
import type { Check } from "./chaos_steps.ts";
import type { Cluster } from "./cluster.ts";
import type { HostProcess } from "./host_process.ts";
import { agentHttp, flowsOf } from "./cluster_probe.ts";
import { FLOW_F_PEER, FLOW_F_UNSHARED } from "../node/bpf/flow.ts";
import { flowField } from "../node/lb/flows/field.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Bound on each wait below (agents back in sync, flows in the store), ms. */
const WAIT_MS = 30_000;

/** Lines `agent` printed from line `from` on (those still kept). */
function linesSince(agent: HostProcess, from: number): string[] {
  const offset = agent.lineCount - agent.lines.length;
  return agent.lines.slice(Math.max(0, from - offset));
}

/** Sum of a metric's samples (every label set) in a Prometheus text exposition. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) {
    sum += Number(m[1]);
  }
  return sum;
}

/**
 * The checks of a shard failover that began when each agent had printed `from.get(i)` lines
 * (agents started since count from their first line).
 */
export async function checkFailoverWritten(
  cluster: Cluster,
  from: ReadonlyMap<number, number>,
): Promise<Check[]> {
  const checks: Check[] = [];
  const live = [...cluster.lbNodes.values()].filter((n) => n.agent !== null);
  const noticed: string[] = [];
  /** Per agent, ms from its first `flow store unavailable` to its last `flow store available`. */
  const outageMs: Record<string, number> = {};
  let published = 0;
  for (const n of live) {
    const since = linesSince(n.agent!, from.get(n.index) ?? 0);
    const at = (msg: string) => since.filter((l) => l.includes(`"msg":"${msg}"`));
    const down = at("flow store unavailable")[0];
    const up = at("flow store available").at(-1);
    if (down) noticed.push(n.host);
    if (down && up) {
      outageMs[n.host] = Date.parse(JSON.parse(up).ts) - Date.parse(JSON.parse(down).ts);
    }
    for (const l of since) {
      if (l.includes('"msg":"flows restored"')) published += Number(JSON.parse(l).published) || 0;
    }
  }
  checks.push({
    what: "a live agent logged the shard failover (flow store unavailable)",
    ok: noticed.length > 0,
    seen: `${noticed.length} of ${live.length}: ${JSON.stringify(noticed)}`,
  });
  // Back in sync, then the count of flows written back by restores.
  let rewritten = 0;
  const down: string[] = [];
  for (const n of live) {
    let text = "";
    const deadline = Date.now() + WAIT_MS;
    for (let k = 0; k < 300 && Date.now() < deadline; k++) {
      text = await agentHttp(cluster, n.index, "/metrics").then((r) => r.body, () => "");
      if (metricSum(text, "holdfast_flow_store_up") === 1) break;
      await sleep(100);
    }
    if (metricSum(text, "holdfast_flow_store_up") !== 1) down.push(n.host);
    rewritten += metricSum(text, "holdfast_flows_rewritten_total");
  }
  checks.push({
    what: "every live agent back in sync with the store after the failover",
    ok: live.length > 0 && down.length === 0,
    seen: `not in sync: ${JSON.stringify(down)}; out of sync (ms): ${JSON.stringify(outageMs)}`,
  });
  checks.push({
    what: "flows learned during the failover written back (rewritten metric, flows restored)",
    ok: rewritten > 0 && published > 0,
    seen: `holdfast_flows_rewritten_total ${rewritten}, published ${published}`,
  });
  // Every flow a live agent learned itself is stored (a write in flight: bounded retries).
  for (const n of live) {
    let missing: string[] = [];
    let local = 0;
    const deadline = Date.now() + WAIT_MS;
    for (let k = 0; k < 100 && Date.now() < deadline; k++) {
      const fields = flowsOf(cluster, n.index)
        .filter((e) => (e.value.flags & (FLOW_F_PEER | FLOW_F_UNSHARED)) === 0)
        .map((e) => flowField(e.key));
      local = fields.length;
      missing = await cluster.store.missing(cluster.vip, fields);
      if (missing.length === 0) break;
      await sleep(300);
    }
    checks.push({
      what: `every flow ${n.host} learned is in the store after the failover`,
      ok: local > 0 && missing.length === 0,
      seen: `${local} learned, ${missing.length} missing ${JSON.stringify(missing.slice(0, 5))}`,
    });
  }
  return checks;
}
