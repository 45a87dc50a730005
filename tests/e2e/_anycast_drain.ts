/**
 * Evidence that a draining anycast pod can stop without failing a request: once the router no
 * longer routes to the node, the requests still in flight to the pod are the node's open
 * connections to the pod's port.
 *
 * @module
 */
import type { AnycastLab } from "../../lab/anycast.ts";
import { until } from "../harness/until.ts";

/**
 * Waits until `node` has no connection to `port` half-open, established or waiting for the
 * server to close (answered and closed ones — FIN-WAIT, TIME-WAIT — no longer need the pod).
 * Returns false after `timeoutMs` rather than throwing: a connection left open then is one whose
 * packets went elsewhere, a failed request the caller's load summary reports.
 */
export async function untilNoOpenConnections(
  lab: AnycastLab,
  node: string,
  port = 80,
  timeoutMs = 15_000,
): Promise<boolean> {
  const open = async () =>
    (await lab.topo.exec(node, [
      "ss",
      "-Htn",
      "state",
      "syn-recv",
      "state",
      "established",
      "state",
      "close-wait",
      `( sport = :${port} )`,
    ])).stdout.trim();
  try {
    await until(
      `no open connection to port ${port} on ${node}`,
      async () => await open() === "",
      timeoutMs,
    );
    return true;
  } catch {
    console.error(`${node} still has connections to port ${port}:\n${await open()}`);
    return false;
  }
}
