/**
 * Health probing end to end: real agents in namespaces probe the backends' `GET /healthz`
 * (every 100 ms, fall 3, rise 2); a dead or hung backend leaves every LB node's Maglev table
 * (read from the pinned maps), new connections all land on live backends, connections to the
 * other backends are untouched, and a resumed backend comes back after `rise` good probes.
 */
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import {
  acceptedBy,
  BACKEND_HEALTH_PORT,
  backendAddress,
  Cluster,
  maglevBackendsOf,
  run,
} from "../../lab/mod.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;

const INTERVAL_MS = 100;
const FALL = 3;
/**
 * Detection bound: only how long a failure takes to say so. Detection takes interval × fall plus
 * propagation (~300–400 ms); 15 s is far from it, so a loaded machine does not flip the verdict.
 * How fast detection is, is measured by `./hf bench health` (`detect_to_all_nodes_ms_*`).
 */
const DETECT_BOUND_MS = 15_000;

const HEALTH_CHECK = {
  kind: "http",
  port: BACKEND_HEALTH_PORT,
  path: "/healthz",
  intervalMs: INTERVAL_MS,
  timeoutMs: INTERVAL_MS,
  rise: 2,
  fall: FALL,
  backoffBaseMs: 200,
  backoffMaxMs: 2_000,
};

/** Waits (bounded) until `want(backends)` holds on every LB node; returns the time it took. */
async function untilEveryNode(
  cluster: Cluster,
  want: (backends: string[]) => boolean,
  what: string,
  timeoutMs: number,
): Promise<number> {
  const start = performance.now();
  let seen: string[][] = [];
  for (let k = 0; k < 10_000 && performance.now() - start < timeoutMs; k++) {
    seen = [...cluster.lbNodes.keys()].map((i) => maglevBackendsOf(cluster, i));
    if (seen.every(want)) return performance.now() - start;
    await sleep(10);
  }
  throw new Error(`${what}: not on every LB node after ${timeoutMs} ms: ${JSON.stringify(seen)}`);
}

/** Every agent's stdout lines (after `since`, a snapshot of {@linkcode lineCounts}). */
function agentLines(cluster: Cluster, since?: Map<number, number>): string[] {
  return [...cluster.lbNodes].flatMap(([i, n]) => n.agent?.lines.slice(since?.get(i) ?? 0) ?? []);
}

function lineCounts(cluster: Cluster): Map<number, number> {
  return new Map([...cluster.lbNodes].map(([i, n]) => [i, n.agent?.lines.length ?? 0]));
}

/** Waits (bounded: agents' stdout is read as it comes) for `text` from every LB node. */
async function assertDecisionLogged(
  cluster: Cluster,
  text: string | RegExp,
  since?: Map<number, number>,
): Promise<void> {
  let lines: string[] = [];
  for (let k = 0; k < 1500; k++) {
    lines = agentLines(cluster, since).filter((l) =>
      typeof text === "string" ? l.includes(text) : text.test(l)
    );
    if (lines.length >= cluster.lbNodes.size) return;
    await sleep(10);
  }
  const health = agentLines(cluster, since).filter((l) => l.includes('"component":"health"'));
  throw new Error(
    `expected "${text}" from every LB node, got ${lines.length} lines; health lines:\n${
      health.slice(-8).join("\n")
    }`,
  );
}

/** Opens `count` fresh connections from the client; all must echo. */
async function newConnections(cluster: Cluster, count: number): Promise<void> {
  const out = await cluster.topo.exec("client", [
    Deno.execPath(),
    "run",
    "--quiet",
    "--allow-net",
    ECHO,
    "client",
    cluster.vip,
    String(cluster.port),
    String(count),
  ]);
  const summary = JSON.parse(out.stdout.trim().split("\n").at(-1)!) as { ok: number };
  if (summary.ok !== count) throw new Error(`new connections: ${out.stdout.trim()}`);
}

rootTest(
  "health: a killed backend leaves every LB node's Maglev table after fall failed probes; others keep their connections",
  async () => {
    await using cluster = await Cluster.create({
      lbNodes: 2,
      backends: 3,
      healthCheck: HEALTH_CHECK,
    });
    const all = [1, 2, 3].map(backendAddress);
    await untilEveryNode(cluster, (b) => all.every((a) => b.includes(a)), "all backends", 15_000);
    const client = await cluster.startClient(60, 6_000);
    // Every connection open and logged by the backend that accepted it (not a guessed second).
    await client.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    const accepted = () => all.reduce((n, _, j) => n + acceptedBy(cluster, j + 1).length, 0);
    for (let k = 0; k < 1500 && accepted() < 60; k++) await sleep(10);
    if (accepted() < 60) throw new Error(`only ${accepted()} of 60 connections accepted`);
    const onBe3 = new Set(acceptedBy(cluster, 3).map((peer) => Number(peer.split(":")[1])));
    if (onBe3.size === 0) throw new Error("no connection on backend 3: nothing to test");

    console.log(JSON.stringify({ msg: "killing", at: new Date().toISOString() }));
    await cluster.backends.get(3)!.stop("SIGKILL");
    const dead = backendAddress(3);
    const tookMs = await untilEveryNode(
      cluster,
      (b) => !b.includes(dead) && b.length === 2,
      `backend ${dead} out of the tables`,
      DETECT_BOUND_MS,
    );
    console.log(JSON.stringify({ msg: "removed from every table", took_ms: Math.round(tookMs) }));
    await assertDecisionLogged(
      cluster,
      `backend ${dead}:${BACKEND_HEALTH_PORT} unhealthy: ${FALL} failed probes (connect refused)`,
    );
    await newConnections(cluster, 40);

    const summary = await clientSummary(client, 30_000);
    const wrongDeaths = summary.deaths.filter((d) => !onBe3.has(d.port));
    if (wrongDeaths.length) {
      throw new Error(
        `connections to live backends died: ${JSON.stringify(wrongDeaths.slice(0, 5))}`,
      );
    }
    if (summary.survived !== summary.connections - onBe3.size) {
      throw new Error(
        `expected ${summary.connections - onBe3.size} survivors, got ${summary.survived}`,
      );
    }
  },
);

rootTest(
  "health: a hung backend (SIGSTOP) is taken out by probe timeouts and back after rise once resumed",
  async () => {
    await using cluster = await Cluster.create({
      lbNodes: 2,
      backends: 3,
      healthCheck: HEALTH_CHECK,
    });
    const all = [1, 2, 3].map(backendAddress);
    await untilEveryNode(cluster, (b) => all.every((a) => b.includes(a)), "all backends", 15_000);
    const hung = backendAddress(2);
    const server = cluster.backends.get(2)!;
    let resumed = new Map<number, number>();
    await run(["kill", "-STOP", String(server.pid)]);
    try {
      await untilEveryNode(
        cluster,
        (b) => !b.includes(hung) && b.length === 2,
        `hung backend ${hung} out of the tables`,
        DETECT_BOUND_MS,
      );
      await assertDecisionLogged(
        cluster,
        `backend ${hung}:${BACKEND_HEALTH_PORT} unhealthy: ${FALL} failed probes (timeout)`,
      );
      await newConnections(cluster, 20);
    } finally {
      resumed = lineCounts(cluster);
      await run(["kill", "-CONT", String(server.pid)]);
    }
    await untilEveryNode(cluster, (b) => b.includes(hung), `resumed ${hung} back`, 15_000);
    // At least `rise` good probes (more while the policy's backoff hold lasts).
    await assertDecisionLogged(
      cluster,
      new RegExp(
        `backend ${hung}:${BACKEND_HEALTH_PORT} healthy: ([2-9]|\\d\\d+) successful probes`,
      ),
      resumed,
    );
  },
);
