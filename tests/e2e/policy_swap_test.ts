/**
 * Policy swaps in running agents (`--policy-follow PATH`; `main.ts policy swap FILE --active PATH`
 * installs a module there):
 *
 * - under load — 50 held connections and a new connection every 10 ms — a module with another
 *   table fill replaces every Maglev table on both LB nodes, then a rollback swap puts the old
 *   fill back: no connection fails (stored flows keep live ones on their backends, each table is
 *   replaced whole); a module failing validation written to PATH is rejected by every agent (log
 *   line, `holdfast_policy_rejections_total{reason}`) and the old one keeps serving;
 * - a stricter health module (twice the rise) changes when a recovered backend returns, without
 *   restarting the agents: the same outage ends after 4 good probes instead of 2.
 */
import { rootTest } from "../harness/mod.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import {
  agentHttp,
  BACKEND_HEALTH_PORT,
  backendAddress,
  Cluster,
  maglevBackendsOf,
  maglevTablesOf,
} from "../../lab/mod.ts";
import { installAtomically, main as policyCli } from "../../policy-as/host/cli.ts";
import { moduleDigest } from "../../policy-as/host/policy_module.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CONNECT_LOOP = new URL("../../lab/clients/connect_loop.ts", import.meta.url).pathname;
const build = (name: string) =>
  new URL(`../../policy-as/build/${name}.wasm`, import.meta.url).pathname;
const ALL = [1, 2, 3].map(backendAddress);

/** A cluster whose agents follow `<temp dir>/active.wasm`; removes the directory on dispose. */
async function followingCluster(
  options: { healthCheck?: Record<string, unknown> } = {},
): Promise<{ cluster: Cluster; active: string } & AsyncDisposable> {
  const dir = await Deno.makeTempDir({ prefix: "hf-policy-" });
  const active = `${dir}/active.wasm`;
  try {
    const cluster = await Cluster.create({
      lbNodes: 2,
      backends: 3,
      agentArgs: ["--policy-follow", active],
      ...options,
    });
    return {
      cluster,
      active,
      async [Symbol.asyncDispose]() {
        await cluster[Symbol.asyncDispose]();
        await Deno.remove(dir, { recursive: true });
      },
    };
  } catch (err) {
    await Deno.remove(dir, { recursive: true });
    throw err;
  }
}

/**
 * Waits (bounded) until `want(backends)` holds in every LB node's Maglev tables. What it waits
 * for takes well under a second; the bound is only how long a failure takes to say so.
 */
async function untilEveryNode(
  cluster: Cluster,
  want: (backends: string[]) => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const start = Date.now();
  let seen: string[][] = [];
  for (let k = 0; k < 10_000 && Date.now() - start < timeoutMs; k++) {
    seen = [...cluster.lbNodes.keys()].map((i) => maglevBackendsOf(cluster, i));
    if (seen.every(want)) return;
    await sleep(10);
  }
  throw new Error(`${what}: not on every LB node after ${timeoutMs} ms: ${JSON.stringify(seen)}`);
}

/** Every LB node's Maglev tables, one string of slots per table, in node order. */
function tables(cluster: Cluster): string[][] {
  return [...cluster.lbNodes.keys()].map((i) => maglevTablesOf(cluster, i).map((t) => t.join()));
}

/** Share of slots that differ between two snapshots of {@linkcode tables}. */
function movedShare(a: string[][], b: string[][]): number {
  let moved = 0, total = 0;
  for (const [n, node] of a.entries()) {
    for (const [t, table] of node.entries()) {
      const x = table.split(","), y = b[n]?.[t]?.split(",") ?? [];
      total += x.length;
      moved += x.filter((slot, k) => slot !== y[k]).length;
    }
  }
  return total === 0 ? 0 : moved / total;
}

/** Waits (bounded: 15 s, far above the usual fraction of a second) until `want` holds. */
async function untilTables(
  cluster: Cluster,
  want: (now: string[][]) => boolean,
  what: string,
): Promise<void> {
  const start = Date.now();
  for (let k = 0; k < 10_000 && Date.now() - start < 15_000; k++) {
    if (want(tables(cluster))) return;
    await sleep(10);
  }
  if (want(tables(cluster))) return;
  throw new Error(`${what}: not within 15 s`);
}

/** Each agent's line count now: where to look for what happens next. */
function marks(cluster: Cluster): Map<number, number> {
  return new Map([...cluster.lbNodes].map(([i, n]) => [i, n.agent!.lineCount]));
}

/** Waits for a line matching `match` from every agent after `since`; returns them parsed. */
function fromEveryAgent(
  cluster: Cluster,
  since: Map<number, number>,
  match: (line: Record<string, unknown>) => boolean,
  timeoutMs = 15_000,
): Promise<Record<string, unknown>[]> {
  return Promise.all([...cluster.lbNodes].map(async ([i, n]) => {
    const line = await n.agent!.waitForLine((l) => {
      if (!l.startsWith("{")) return false;
      return match(JSON.parse(l));
    }, { fromLine: since.get(i)!, timeoutMs });
    return JSON.parse(line) as Record<string, unknown>;
  }));
}

/** `main.ts policy swap FILE --active PATH`; returns its exit code. */
function policySwap(file: string, active: string): Promise<number> {
  return policyCli(["swap", file, "--active", active]);
}

/** Installs `name` through the CLI and waits until every agent has swapped to it. */
async function swapEverywhere(cluster: Cluster, active: string, name: string) {
  const since = marks(cluster);
  const digest = await moduleDigest(await Deno.readFile(build(name)));
  const code = await policySwap(build(name), active);
  if (code !== 0) throw new Error(`policy swap ${name} exited ${code}`);
  return await fromEveryAgent(
    cluster,
    since,
    (l) => l.msg === "policy swapped" && l.sha256 === digest,
  );
}

/** A Prometheus sample's value from `text` (NaN when absent). */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.slice(series.length + 1));
}

rootTest(
  "policy swap under load: another table fill and back, 50 held connections and a new one every 10 ms — none fails; a module failing validation is rejected and the old keeps serving",
  async () => {
    await using c = await followingCluster();
    const { cluster, active } = c;
    await untilEveryNode(cluster, (b) => ALL.every((a) => b.includes(a)), "all backends");
    const held = await cluster.startClient(50, 14_000);
    const loop = cluster.topo.spawnDeno("client", CONNECT_LOOP, {
      args: [cluster.vip, String(cluster.port), "12000", "10"],
      permissions: ["--allow-net"],
    });
    await loop.waitForLine((l) => l.includes('"msg":"started"'));

    const original = tables(cluster);
    await sleep(1_500);
    const rotated = await swapEverywhere(cluster, active, "fixtures/rotated_fill");
    for (const l of rotated) {
      if (l.tables_equal_reference !== false || !((l.rebuild_frontends as number) >= 1)) {
        throw new Error(`expected every table rebuilt with another fill: ${JSON.stringify(l)}`);
      }
    }
    // Rotated by half: nearly every slot of every node's table has another backend now.
    await untilTables(cluster, (now) => movedShare(original, now) > 0.5, "tables refilled");
    await sleep(1_500);
    await swapEverywhere(cluster, active, "release"); // a rollback is a swap
    await untilTables(cluster, (now) => movedShare(original, now) === 0, "tables rolled back");
    const release = await Deno.readFile(build("release"));

    await sleep(1_500);
    // `policy swap` validates first: it refuses the module and leaves the active file alone.
    const refused = await policySwap(build("fixtures/wrong_hash"), active);
    const releaseDigest = await moduleDigest(release);
    const installed = await moduleDigest(await Deno.readFile(active));
    if (refused !== 1 || installed !== releaseDigest) {
      throw new Error(`policy swap of a bad module: exit ${refused}, active file changed`);
    }
    // A bad module that reaches the file anyway (another tool, other vectors): agents reject it.
    const since = marks(cluster);
    await installAtomically(active, await Deno.readFile(build("fixtures/wrong_hash")));
    const rejected = await fromEveryAgent(cluster, since, (l) => l.msg === "policy rejected");
    for (const l of rejected) {
      if (l.reason !== "vectors" || l.serving !== releaseDigest) {
        throw new Error(
          `expected a rejection with the release module serving: ${JSON.stringify(l)}`,
        );
      }
    }
    for (const [i, node] of cluster.lbNodes) {
      const { body } = await agentHttp(cluster, i, "/metrics");
      const rejections = sample(body, 'holdfast_policy_rejections_total{reason="vectors"}');
      const swaps = sample(body, "holdfast_policy_swaps_total");
      // The counters agree with the log: at least the release module at start, the other fill
      // and the rollback were swapped in (a file event seen twice validates twice), and the
      // rejection is not counted as a swap.
      const logged = (msg: string) => node.agent!.lines.filter((l) => l.includes(msg)).length;
      const loggedSwaps = logged('"msg":"policy module swapped"');
      const loggedRejections = logged('"msg":"policy module rejected"');
      if (
        !(rejections >= 1) || rejections !== loggedRejections || !(swaps >= 3) ||
        swaps !== loggedSwaps
      ) {
        throw new Error(
          `LB node ${i}: metrics say ${rejections} rejections and ${swaps} swaps, the log ` +
            `${loggedRejections} and ${loggedSwaps}`,
        );
      }
    }

    const loopSummary = await clientSummary<
      { attempts: number; ok: number; failed: number; failures: unknown[] }
    >(loop, 30_000);
    const heldSummary = await clientSummary(held, 30_000);
    console.log(JSON.stringify({ msg: "policy swap under load", loopSummary, heldSummary }));
    if (loopSummary.failed !== 0 || loopSummary.ok !== loopSummary.attempts) {
      throw new Error(`new connections failed: ${JSON.stringify(loopSummary)}`);
    }
    if (heldSummary.connections !== 50 || heldSummary.survived !== 50) {
      throw new Error(`held connections died: ${JSON.stringify(heldSummary)}`);
    }
  },
);

rootTest(
  "policy swap: a stricter health module (twice the rise) makes a recovered backend wait for 4 good probes instead of 2, without restarting the agents",
  async () => {
    await using c = await followingCluster({
      healthCheck: {
        kind: "http",
        port: BACKEND_HEALTH_PORT,
        path: "/healthz",
        intervalMs: 100,
        timeoutMs: 100,
        rise: 2,
        fall: 3,
        backoffBaseMs: 200,
        backoffMaxMs: 2_000,
      },
    });
    const { cluster, active } = c;
    await untilEveryNode(cluster, (b) => ALL.every((a) => b.includes(a)), "all backends");
    const dead = backendAddress(3);
    const pids = [...cluster.lbNodes.values()].map((n) => n.agent!.pid);

    /** Backend 3's server dies and comes back; the good probes each node needed to return it. */
    const outage = async (): Promise<number[]> => {
      await cluster.backends.get(3)!.stop("SIGKILL");
      await untilEveryNode(cluster, (b) => !b.includes(dead), `${dead} out`);
      await sleep(1_000); // past the backoff hold (200 ms, then 400 ms): the rise alone decides
      const since = marks(cluster);
      await cluster.startBackendServer(3);
      await untilEveryNode(cluster, (b) => b.includes(dead), `${dead} back`);
      const healthy = new RegExp(`^backend ${dead}:${BACKEND_HEALTH_PORT} healthy: (\\d+) `);
      const lines = await fromEveryAgent(cluster, since, (l) => healthy.test(String(l.msg)));
      return lines.map((l) => Number(healthy.exec(String(l.msg))![1]));
    };

    const before = await outage();
    await swapEverywhere(cluster, active, "fixtures/strict_health");
    const after = await outage();
    console.log(JSON.stringify({ msg: "good probes to return", release: before, strict: after }));
    if (before.some((n) => n !== 2) || after.some((n) => n !== 4)) {
      throw new Error(
        `expected 2 good probes with release, 4 with strict_health: ${before} / ${after}`,
      );
    }
    const now = [...cluster.lbNodes.values()].map((n) => n.agent!.pid);
    if (now.join() !== pids.join()) throw new Error(`agents restarted: ${pids} → ${now}`);
  },
);
