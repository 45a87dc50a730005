/**
 * Flow redirection for anycast nodes end to end (docs/anycast.md "Flow redirection"): each node
 * runs `main.ts anycast --redirect` (hf_lb and decap on its eth0, flows shared through Redis in
 * the router namespace). What a user notices: long-lived TCP connections survive the router's
 * ECMP set changing 2 → 3 → 2 nodes with redirection on, and the same run without it loses some;
 * a drain under an HTTP load fails no request, and connections the draining node owns keep
 * working until its pod stops.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { ECHO_PORT, ECHO_SERVICES, holdAcrossScale } from "../../lab/_anycast_scale.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { untilNoOpenConnections } from "./_anycast_drain.ts";

const same = (want: string[]) => (g: string[]) => g.join() === [...want].sort().join();
const CONNECTIONS = 100;
/** Requests of the drain test's HTTP load (one every 20 ms; on a loaded machine it stretches). */
const REQUESTS = 300;
const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("../../lab/clients/hold_client.ts", import.meta.url).pathname;

rootTest(
  "anycast redirect: 100 long-lived connections survive 2 → 3 → 2 nodes; without it some are reset",
  async () => {
    const lost: Record<string, number> = {};
    for (const redirect of [true, false]) {
      await using lab = await AnycastLab.create({ nodes: 3, services: ECHO_SERVICES, redirect });
      const held = await holdAcrossScale(lab, CONNECTIONS);
      lost[redirect ? "redirect" : "plain"] = held.connections - held.survived;
      if (redirect) {
        ok(
          held.connections === CONNECTIONS && held.survived === CONNECTIONS,
          `with flow redirection ${held.connections - held.survived} of ${held.connections} ` +
            `connections died: ${JSON.stringify(held.deaths.slice(0, 5))}`,
        );
      }
    }
    console.log(JSON.stringify({ ...lost, msg: "long-lived connections lost, 2 → 3 → 2 nodes" }));
    // ECMP moves about half of the flows when the set changes (46–54 of 100 measured).
    ok(lost.plain! > 0, "plain anycast lost no connection: the scenario moved no flow");
  },
);

interface LoadSummary {
  requests: number;
  ok: number;
  failed: number;
  failures: { at_ms: number; reason: string }[];
}

rootTest(
  "anycast redirect: a drain under HTTP load fails no request; the draining node's connections last until its pod stops",
  async () => {
    await using lab = await AnycastLab.create({
      nodes: 3,
      services: ECHO_SERVICES,
      redirect: true,
      // Drains are withdrawals, not failures: BFD only has to keep quiet. At 100 ms × 3 a starved
      // machine let one session time out and the router had no route for an instant (a request
      // failed with "Network is unreachable").
      bfd: { intervalMs: 300, multiplier: 5 },
    });
    const route = await lab.watchRoute();
    // What happened when, printed if a request fails (CI saw 5 of 300 refused once, not since).
    const marks: { epoch_ms: number; what: string }[] = [];
    const mark = (what: string) => marks.push({ epoch_ms: Date.now(), what });
    for (const n of [1, 2, 3]) {
      await lab.startPod(`n${n}`, `default/web-${n}`);
      const echo = lab.topo.spawnDeno(`n${n}`, ECHO, {
        args: ["server", "0.0.0.0", String(ECHO_PORT)],
        permissions: ["--allow-net"],
      });
      await echo.waitForLine((l) => l.includes("listening"));
    }
    await route.until(same(["10.9.1.2", "10.9.2.2", "10.9.3.2"]));
    const load = lab.startLoad(REQUESTS * 20, 20);
    await load.waitForLine((l) => l.includes('"msg":"started"'));
    // Long-lived connections spread over the three nodes, about a third owned by n1.
    const hold = lab.topo.spawnDeno("client", HOLD, {
      args: [lab.vip, String(ECHO_PORT), "60", "2500", "50"],
      permissions: ["--allow-net"],
    });
    await hold.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 300));
    // n1 drains: withdrawn at once; its pod keeps serving its connections, which now land on
    // n2 and n3 and are redirected to n1, until the grace period ends and the pod stops.
    mark("web-1 terminating");
    await lab.updatePod("default/web-1", { terminating: true });
    await route.until(same(["10.9.2.2", "10.9.3.2"]), 15_000);
    mark("router: n2, n3");
    const held = await clientSummary(hold, 30_000);
    // The grace period ends once the requests in flight to the pod (redirected ones too) are
    // answered; then the pod stops and goes, as the kubelet ends it (its flows are purged: a
    // client reusing one of their 5-tuples reaches a node that serves, not the stopped pod).
    mark(`n1 idle: ${await untilNoOpenConnections(lab, "n1")}`);
    await lab.deletePod("default/web-1");
    mark("web-1 stopped and deleted");
    await new Promise((r) => setTimeout(r, 500)); // the load runs on two nodes for a while
    mark("web-2 terminating");
    await lab.updatePod("default/web-2", { terminating: true });
    await route.until(same(["10.9.3.2"]), 15_000);
    mark("router: n3");
    mark(`n2 idle: ${await untilNoOpenConnections(lab, "n2")}`);
    await lab.deletePod("default/web-2");
    mark("web-2 stopped and deleted");
    const summary = await clientSummary<LoadSummary>(load, 60_000);
    console.log(JSON.stringify({ ...summary, held, msg: "HTTP load and connections, drains" }));
    if (summary.failed > 0) {
      // The agents' address decisions beside the test's steps, in time order.
      const decisions = [...lab.nodes.values()].flatMap((node) =>
        node.agent.lines.filter((l) => /assuming address|forfeiting address|purged/.test(l))
          .map((l) => `${node.name} ${l}`)
      );
      // Which kernel answered with resets, and every route change the router saw.
      const rsts: Record<string, string> = {};
      for (const n of ["n1", "n2", "n3", "router"]) {
        const out = await lab.topo.exec(n, ["nstat", "-az", "TcpOutRsts", "TcpActiveOpens"]);
        rsts[n] = out.stdout.replace(/\s+/g, " ").trim();
      }
      const routes = route.monitor.lines.filter((l) => l.includes(lab.vip));
      console.log(
        JSON.stringify({
          msg: "drain timeline",
          marks,
          decisions,
          route: route.gateways,
          rsts,
          routes,
        }),
      );
    }
    ok(
      held.survived === held.connections,
      `${held.connections - held.survived} of ${held.connections} long-lived connections died ` +
        `while n1 drained: ${JSON.stringify(held.deaths.slice(0, 5))}`,
    );
    ok(
      summary.requests === REQUESTS,
      `${summary.requests} requests were sent, not ${REQUESTS}`,
    );
    ok(
      summary.failed === 0,
      `${summary.failed} requests failed: ${JSON.stringify(summary.failures.slice(0, 5))}`,
    );
  },
);
