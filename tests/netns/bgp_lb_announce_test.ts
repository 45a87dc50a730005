/**
 * Stateful LB nodes announcing through BGP (`main.ts agent --bgp-config`): each node announces
 * its config's LB IP only once ready, the router ECMPs to both, and on SIGTERM a node withdraws
 * first — the router drops it while the agent still runs — and only then stops.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";

const SERVICES = `services:
  - name: default/demo
    flowKeyMode: five-tuple
    frontends: [{ address: 10.0.100.1:80/TCP, portName: http }]
    backends: [{ address: 10.3.1.2:8080/TCP, portName: http }]
`;

rootTest("bgp lb: LB nodes announce after ready and withdraw before they stop", async () => {
  const servicesFile = await Deno.makeTempFile({ prefix: "hf-bgp-lb-", suffix: ".yaml" });
  try {
    await Deno.writeTextFile(servicesFile, SERVICES);
    await using lab = await AnycastLab.create({ nodes: 2, stateful: { servicesFile } });
    const route = await lab.watchRoute("10.0.100.1");
    await route.until((g) => g.join() === "10.9.1.2,10.9.2.2", 10_000);
    const n1 = lab.nodes.get("n1")!.agent;
    const ready = n1.lines.findIndex((l) => l.includes('"msg":"ready"'));
    const announcing = n1.lines.findIndex((l) =>
      l.includes("announcing LB addresses") && l.includes("10.0.100.1")
    );
    ok(ready >= 0 && announcing > ready, "n1 announced before it was ready");
    // SIGTERM: the router drops n1 while its agent still runs, then the agent exits.
    const status = n1.child.status;
    let exited = false;
    status.then(() => exited = true);
    n1.child.kill("SIGTERM");
    await route.until((g) => g.join() === "10.9.2.2", 5_000);
    ok(!exited, "the agent exited before the router dropped its nexthop");
    await n1.waitForLine((l) => l.includes("withdrew LB addresses"));
    ok((await status).code === 0, "the agent did not stop cleanly");
  } finally {
    await Deno.remove(servicesFile).catch(() => {});
  }
});
