/**
 * A throwaway Redis Cluster for tests and benches: `masters` masters with `replicas` replicas
 * each (default three and one), each node a `lab/redis_server.ts` server (same temp dirs and
 * pidfiles, so the test sweep cleans them up) started with `--cluster-enabled yes`, joined by
 * `redis-cli --cluster create … --cluster-replicas N --cluster-yes`. Waits (bounded) until every
 * node reports `cluster_state:ok`. A short `cluster-node-timeout` (default 1000 ms) makes a
 * killed master's replica take over within a few seconds; `cluster-require-full-coverage no`
 * keeps the other shards serving meanwhile (what docs/operators.md recommends).
 *
 * @example
 * ```ts ignore
 * await using cluster = await startRedisCluster();
 * const store = connectRedisStore({ url: cluster.url }); // redis+cluster://127.0.0.1:P,…
 * const victim = await cluster.masterOf("hf:{10.0.100.1}:flows");
 * await cluster.kill(victim); // SIGKILL, then waits for its replica to be promoted
 * ```
 *
 * @module
 */
import { run } from "./command.ts";
import { freePort, type RedisServer, startRedis } from "./redis_server.ts";

/** Options of {@linkcode startRedisCluster}. */
export interface StartRedisClusterOptions {
  /** Masters (default 3; Redis needs at least 3). */
  readonly masters?: number;
  /** Replicas per master (default 1). */
  readonly replicas?: number;
  /** `cluster-node-timeout`, ms (default 1000). */
  readonly nodeTimeoutMs?: number;
  /** Run every node inside this network namespace, listening on `bind` (ports 7000 and up). */
  readonly netns?: string;
  /** Address to listen on (default 127.0.0.1). */
  readonly bind?: string;
  /** Bound on each wait for the cluster to be healthy, ms (default 30,000). */
  readonly readyTimeoutMs?: number;
}

/** One node's view from `CLUSTER NODES`. */
export interface ClusterNodeInfo {
  readonly id: string;
  readonly port: number;
  readonly master: boolean;
  readonly failed: boolean;
  /** Slot ranges served (masters), e.g. `0-5460`. */
  readonly slots: readonly string[];
}

/** A running throwaway Redis Cluster. */
export class RedisCluster implements AsyncDisposable {
  constructor(readonly nodes: readonly RedisServer[], readonly options: StartRedisClusterOptions) {}

  /** `redis+cluster://` with every node as a seed. */
  get url(): string {
    const host = this.options.bind ?? "127.0.0.1";
    return `redis+cluster://${this.nodes.map((n) => `${host}:${n.port}`).join(",")}`;
  }

  /** Nodes whose process runs. */
  get running(): RedisServer[] {
    return this.nodes.filter((n) => n.pid !== null);
  }

  /** `CLUSTER NODES` as seen by a running node. */
  async topology(): Promise<ClusterNodeInfo[]> {
    const node = this.running[0];
    if (!node) throw new Error("No Redis Cluster node is running");
    return parseClusterNodes(await node.cli("cluster", "nodes"));
  }

  /** The running server that is the master of `key`'s slot. */
  async masterOf(key: string): Promise<RedisServer> {
    const node = this.running[0]!;
    const slot = Number((await node.cli("cluster", "keyslot", key)).trim());
    for (const n of await this.topology()) {
      if (!n.master || n.failed) continue;
      const serves = n.slots.some((r) => {
        const [a, b = a] = r.split("-").map(Number) as [number, number?];
        return slot >= a && slot <= b!;
      });
      if (serves) {
        const server = this.nodes.find((s) => s.port === n.port);
        if (server) return server;
      }
    }
    throw new Error(`No master serves slot ${slot} (key "${key}")`);
  }

  /**
   * Waits until every running node says `cluster_state:ok`, `masters` healthy masters serve
   * the slots, none of them a stopped node, and every running replica's link to its master is up.
   */
  async waitHealthy(timeoutMs = this.options.readyTimeoutMs ?? 30_000): Promise<void> {
    const want = this.options.masters ?? 3;
    const deadline = Date.now() + timeoutMs;
    let last = "";
    for (let i = 0; i < 100_000 && Date.now() < deadline; i++) {
      try {
        const states = await Promise.all(this.running.map((n) => n.cli("cluster", "info")));
        const ok = states.every((s) => /cluster_state:ok/.test(s));
        const live = new Set(this.running.map((n) => n.port));
        const masters = (await this.topology()).filter((n) =>
          n.master && !n.failed && n.slots.length > 0 && live.has(n.port)
        );
        // Replicas in sync (else a master killed now leaves an empty replica to promote).
        const repl = await Promise.all(this.running.map((n) => n.cli("info", "replication")));
        const syncing = repl.filter((r) =>
          /role:slave/.test(r) && !/master_link_status:up/.test(r)
        ).length;
        if (ok && masters.length === want && syncing === 0) return;
        last = `${states.filter((s) => !/cluster_state:ok/.test(s)).length} nodes not ok, ` +
          `${masters.length}/${want} live masters with slots, ${syncing} replicas syncing`;
      } catch (err) {
        last = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`Redis Cluster not healthy within ${timeoutMs} ms: ${last}`);
  }

  /**
   * Moves the slot of `key` (with its keys) to master `to`, the way `redis-cli --cluster reshard`
   * does: IMPORTING/MIGRATING, MIGRATE in pages, then SETSLOT NODE on every master. Clients see
   * ASK while it moves and MOVED after.
   */
  async migrateSlotOf(key: string, to: RedisServer): Promise<void> {
    const from = await this.masterOf(key);
    if (from === to) return;
    const slot = (await from.cli("cluster", "keyslot", key)).trim();
    const topo = await this.topology();
    const id = (s: RedisServer) => topo.find((t) => t.port === s.port)!.id;
    await to.cli("cluster", "setslot", slot, "importing", id(from));
    await from.cli("cluster", "setslot", slot, "migrating", id(to));
    const host = this.options.bind ?? "127.0.0.1";
    for (let page = 0; page < 10_000; page++) {
      const keys = (await from.cli("cluster", "getkeysinslot", slot, "100")).split("\n")
        .filter((k) => k !== "");
      if (keys.length === 0) break;
      await from.cli("migrate", host, String(to.port), "", "0", "5000", "KEYS", ...keys);
    }
    for (const m of topo.filter((t) => t.master && !t.failed)) {
      const server = this.nodes.find((n) => n.port === m.port && n.pid !== null);
      if (server) await server.cli("cluster", "setslot", slot, "node", id(to));
    }
  }

  /** SIGKILLs `node` and waits until its replica took its slots over. */
  async kill(node: RedisServer): Promise<void> {
    await node.stop("SIGKILL");
    await this.waitHealthy();
  }

  /** Stops every node and removes their directories. */
  async [Symbol.asyncDispose](): Promise<void> {
    await Promise.all(this.nodes.map((n) => n[Symbol.asyncDispose]()));
  }
}

/** Parses `CLUSTER NODES` output. */
export function parseClusterNodes(text: string): ClusterNodeInfo[] {
  const out: ClusterNodeInfo[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const port = Number(/:(\d+)@/.exec(f[1]!)?.[1]);
    const flags = f[2]!.split(",");
    out.push({
      id: f[0]!,
      port,
      master: flags.includes("master"),
      failed: flags.includes("fail") || flags.includes("fail?"),
      slots: f.slice(8).filter((s) => /^\d+(-\d+)?$/.test(s)),
    });
  }
  return out;
}

/** Starts a Redis Cluster; dispose it to stop every node. */
export async function startRedisCluster(
  options: StartRedisClusterOptions = {},
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const bind = options.bind ?? "127.0.0.1";
  const nodes: RedisServer[] = [];
  const cluster = new RedisCluster(nodes, options);
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      nodes.push(
        await startRedis({
          bind,
          port: options.netns ? 7000 + i : freePort(),
          ...(options.netns ? { netns: options.netns } : {}),
          extraArgs: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            String(options.nodeTimeoutMs ?? 1000),
            "--cluster-require-full-coverage",
            "no",
            "--cluster-replica-validity-factor",
            "0",
            "--repl-diskless-sync-delay",
            "0",
          ],
        }),
      );
    }
    const where = options.netns ? ["ip", "netns", "exec", options.netns] : [];
    await run([
      ...where,
      "redis-cli",
      "--cluster",
      "create",
      ...nodes.map((n) => `${bind}:${n.port}`),
      "--cluster-replicas",
      String(replicas),
      "--cluster-yes",
    ], { timeoutMs: 30_000 });
    await cluster.waitHealthy();
  } catch (err) {
    await cluster[Symbol.asyncDispose]();
    throw err;
  }
  return cluster;
}
