/**
 * The dashboard while the demo runs: `http://127.0.0.1:PORT/dashboard` on the person's machine,
 * the controller's dashboard (`controller/status/`, docs/dashboard.md) over the LB story's cluster
 * — its Redis and its LB agents' `/metrics` — with the timeline of LB nodes leaving and joining,
 * the quarantine and the policy swap as they happen.
 *
 * Redis and the agents live in the cluster's namespaces, which the root namespace has no route
 * to (and gets none: nothing of the lab is routed into it). So the dashboard runs inside the
 * cluster's `ctl` namespace (`_demo_dashboard_server.ts`) and makes its listening socket in the
 * demo's namespace. Each LB story's cluster gets its own server ({@linkcode DemoDashboard.follow})
 * on the same port, stopped with the cluster; between them the page waits and reconnects.
 *
 * @module
 */
import type { Cluster } from "./cluster.ts";
import { lbAddress } from "./cluster.ts";

const SERVER = new URL("./_demo_dashboard_server.ts", import.meta.url).pathname;
/** The LB agents' metrics port; the demo's agents listen on every address of their node. */
export const AGENT_METRICS_PORT = 9470;
/** Agent flags for {@linkcode DemoDashboard}: `/metrics` reachable from `ctl`, not only lo. */
export const AGENT_LISTEN_ARGS = ["--listen", `0.0.0.0:${AGENT_METRICS_PORT}`];

/** The port the page is served on; each cluster's dashboard server listens there. */
export class DemoDashboard {
  private constructor(readonly port: number) {}

  /** Picks `port` (any free port when it is 0 or taken: another demo, a controller on 9480). */
  static pick(port: number): DemoDashboard {
    let probe: Deno.TcpListener;
    try {
      probe = Deno.listen({ hostname: "127.0.0.1", port });
    } catch (err) {
      if (!(err instanceof Deno.errors.AddrInUse)) throw err;
      probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    }
    const picked = (probe.addr as Deno.NetAddr).port;
    probe.close();
    return new DemoDashboard(picked);
  }

  /** The page's address. */
  get url(): string {
    return `http://127.0.0.1:${this.port}/dashboard`;
  }

  /**
   * Shows `cluster` from now on: starts its dashboard server in `ctl` (stopped with the cluster)
   * over its Redis, its services file and LB nodes 1–`lbNodes` (those not running show as down).
   * Resolves once it serves; returns false (the demo goes on without it) when it did not within
   * 20 s.
   */
  async follow(cluster: Cluster, lbNodes: number): Promise<boolean> {
    const agents = Array.from(
      { length: lbNodes },
      (_, k) => `http://${lbAddress(k + 1)}:${AGENT_METRICS_PORT}`,
    );
    const server = cluster.topo.spawnDeno("ctl", SERVER, {
      args: [
        `/proc/${Deno.pid}/ns/net`,
        String(this.port),
        cluster.store.url,
        agents.join(","),
        cluster.configPath,
      ],
      permissions: ["--allow-net", "--allow-read", "--allow-env", "--allow-ffi"],
      stderr: "null",
    });
    return await server.waitForLine((l) => l.includes('"msg":"listening"'), {
      timeoutMs: 20_000,
    }).then(() => true, () => false);
  }
}
