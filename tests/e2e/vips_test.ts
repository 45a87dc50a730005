/**
 * The LB node's agent follows its config's LB IPs live (no `--vip`): a frontend IP added to the
 * services file is restored and followed, a removed one is no longer followed, and forwarding for
 * the original LB IP is untouched throughout.
 */
import { rootTest } from "../harness/mod.ts";
import { Cluster } from "../../lab/mod.ts";

const EXTRA_VIP = "10.0.100.7";

rootTest(
  "agent: LB IPs added to and removed from the services file are followed live",
  async () => {
    await using cluster = await Cluster.create({ lbNodes: 1, backends: 2 });
    const agent = cluster.lbNodes.get(1)!.agent!;
    const following = (vip: string, msg = "following LB IP") => (l: string) =>
      l.includes(`"msg":"${msg}"`) && l.includes(`"vip":"${vip}"`);
    // The first config's frontend, before ready.
    await agent.waitForLine(following(cluster.vip), { fromLine: 0, timeoutMs: 5_000 });

    const backends = [...cluster.backends.keys()].sort((a, b) => a - b).map((j) => ({
      address: `10.3.${j}.2:${cluster.port}/TCP`,
      portName: "http",
    }));
    const service = (name: string, vip: string) => ({
      name,
      flowKeyMode: "five-tuple",
      frontends: [{ address: `${vip}:${cluster.port}/TCP`, portName: "http" }],
      backends,
    });
    const write = async (services: unknown[]) => {
      const tmp = `${cluster.configPath}.tmp`;
      await Deno.writeTextFile(tmp, JSON.stringify({ services }, null, 2));
      await Deno.rename(tmp, cluster.configPath);
    };

    let from = agent.lineCount;
    await write([service("default/web", cluster.vip), service("default/extra", EXTRA_VIP)]);
    const added = await agent.waitForLine(following(EXTRA_VIP), {
      fromLine: from,
      timeoutMs: 10_000,
    });
    if (!added.includes('"restored":true')) throw new Error(`added LB IP not restored: ${added}`);

    from = agent.lineCount;
    await write([service("default/web", cluster.vip)]);
    await agent.waitForLine(following(EXTRA_VIP, "stopped following LB IP"), {
      fromLine: from,
      timeoutMs: 10_000,
    });

    const client = await cluster.startClient(10, 1_000);
    const line = await client.waitForLine((l) => l.includes('"msg":"summary"'), {
      timeoutMs: 20_000,
    });
    const summary = JSON.parse(line);
    if (summary.survived !== 10) throw new Error(`connections to ${cluster.vip}: ${line}`);
  },
);
