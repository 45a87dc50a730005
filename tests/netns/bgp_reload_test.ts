/**
 * The node's BGP settings change while it announces: `birdc configure` applies them without a
 * session flap (the router's session keeps its start time, the route never leaves), a bad peer
 * is refused with a log line naming it while the good peer keeps announcing, and a config bird
 * would refuse keeps the running one.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { sameSession } from "../../lab/_bird_session.ts";

rootTest(
  "bgp: a reload adds peers without a flap; a bad peer is named and the rest announces",
  async () => {
    await using lab = await AnycastLab.create({ nodes: 1 });
    const route = await lab.watchRoute();
    await lab.startPod("n1", "default/web-1");
    await route.until((g) => g.join() === "10.9.1.2");
    const before = await lab.sessionSince("n1");
    const agent = lab.nodes.get("n1")!.agent;
    const from = agent.lineCount;
    const path = `${lab.dir}/n1.bgp.json`;
    const settings = JSON.parse(await Deno.readTextFile(path));
    settings.communities = ["65000:100"];
    settings.peers.push({ address: "10.9.1.300", asn: 65000 }, { address: "10.9.1.7", asn: 0 });
    settings.peers.push({ address: "10.9.1.9", asn: 65009 }); // valid, never answers
    await Deno.writeTextFile(`${path}.tmp`, JSON.stringify(settings));
    await Deno.rename(`${path}.tmp`, path);
    await agent.waitForLine((l) => l.includes('"msg":"bird reconfigured"'), { fromLine: from });
    for (const bad of ["10.9.1.300", "10.9.1.7"]) {
      await agent.waitForLine(
        (l) => l.includes("BGP peer refused") && l.includes(`"peer":"${bad}"`),
        {
          fromLine: from,
        },
      );
    }
    const node = await lab.topo.exec("n1", [
      "birdc",
      "-s",
      `${lab.nodes.get("n1")!.birdDir}/bird.ctl`,
      "show",
      "protocols",
    ]);
    ok(
      node.stdout.includes("hf_peer_10_9_1_9"),
      `the good new peer is not configured:\n${node.stdout}`,
    );
    ok(!node.stdout.includes("10_9_1_7"), `the bad peer was configured:\n${node.stdout}`);
    // The community reached the router on the same session: no flap, the route stayed.
    await lab.untilCommunity("10.0.100.10/32", "65000:100");
    ok(
      sameSession(await lab.sessionSince("n1"), before),
      "the router's session with n1 restarted on reload",
    );
    ok(route.gateways.join() === "10.9.1.2", `route changed: ${route.gateways}`);
    ok(
      !route.monitor.lines.some((l) => l.startsWith("Deleted 10.0.100.10")),
      "the route was withdrawn during the reload",
    );

    // A node-wide error (a bad router id) is refused whole; bird keeps the running config.
    const from2 = agent.lineCount;
    await Deno.writeTextFile(`${path}.tmp`, JSON.stringify({ ...settings, routerId: "nope" }));
    await Deno.rename(`${path}.tmp`, path);
    await agent.waitForLine(
      (l) => l.includes("cannot follow BGP config") && l.includes("$.routerId"),
      {
        fromLine: from2,
      },
    );
    ok(
      sameSession(await lab.sessionSince("n1"), before),
      "the session restarted after a refused config",
    );
  },
);
