/**
 * An LB node's agent as an operator sees it: ready only when serving, Prometheus metrics from
 * every part (datapath, control plane, flow sync), and a bad services file rejected with a clear
 * log line while the last good config keeps serving.
 */
import { rootTest } from "../harness/mod.ts";
import { agentHttp, Cluster } from "../../lab/mod.ts";

rootTest(
  "agent: /readyz, /metrics from datapath, control plane and flows; bad config keeps the last good one",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 1, backends: 2 });
    const ready = await agentHttp(cluster, 1, "/readyz");
    if (ready.status !== 200) throw new Error(`/readyz answered ${ready.status}: ${ready.body}`);

    const client = await cluster.startClient(10, 1_000);
    await client.waitForLine((l) => l.includes('"msg":"summary"'), { timeoutMs: 20_000 });
    const metrics = (await agentHttp(cluster, 1, "/metrics")).body;
    for (const name of ["holdfast_datapath_", "holdfast_lb_frontends", "holdfast_flows_"]) {
      if (!metrics.includes(name)) throw new Error(`/metrics has no ${name}* series`);
    }

    // A malformed file: the agent says so, naming the file, and keeps forwarding.
    const agent = cluster.lbNodes.get(1)!.agent!;
    const from = agent.lineCount;
    await Deno.writeTextFile(cluster.configPath, "services: [ {name: 42, frontends: nope} ]");
    const rejected = await agent.waitForLine((l) => l.includes("config rejected"), {
      fromLine: from,
    });
    if (!rejected.includes(cluster.configPath)) {
      throw new Error(`rejection does not name the file: ${rejected}`);
    }
    const after = await cluster.startClient(10, 1_000);
    const line = await after.waitForLine((l) => l.includes('"msg":"summary"'), {
      timeoutMs: 20_000,
    });
    const summary = JSON.parse(line);
    if (summary.survived !== 10) throw new Error(`connections after a bad config: ${line}`);
  },
);
