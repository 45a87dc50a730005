/**
 * The virtual cluster's client programs, started in its `client` namespace: long-lived
 * connections (`clients/hold_client.ts`) and short ones (`clients/connect_loop.ts`), to an IPv4
 * or an IPv6 LB IP.
 *
 * @module
 */
import type { HostProcess } from "./host_process.ts";
import type { Topology } from "./netns.ts";

const HOLD = new URL("./clients/hold_client.ts", import.meta.url).pathname;
const LOOP = new URL("./clients/connect_loop.ts", import.meta.url).pathname;
const UDP_STREAM = new URL("./clients/udp_stream.ts", import.meta.url).pathname;

/** An LB IP and port the clients connect to. */
export interface ClientTarget {
  readonly vip: string;
  readonly port: number;
}

/**
 * `count` long-lived connections to `vip`:`port` for `durationMs`; resolves once all are open.
 * With `progressMs` the client prints a `progress` line that often (`clients/hold_client.ts`).
 */
export function startHoldClient(
  topo: Topology,
  target: ClientTarget,
  count: number,
  durationMs: number,
  options: { progressMs?: number } = {},
): Promise<HostProcess> {
  const progress = options.progressMs ? [100, options.progressMs] : [];
  return start(topo, HOLD, [target, count, durationMs, ...progress], "connected");
}

/**
 * A short connection to `vip`:`port` every `intervalMs` for `durationMs` (one line echoed
 * each); resolves once the loop started.
 */
export function startConnectLoop(
  topo: Topology,
  target: ClientTarget,
  durationMs: number,
  intervalMs: number,
): Promise<HostProcess> {
  return start(topo, LOOP, [target, durationMs, intervalMs], "started");
}

/** Runs `script VIP PORT ARGS…` in `client` and waits (≤ 30 s) for its `{"msg":ready}` line. */
async function start(
  topo: Topology,
  script: string,
  [target, ...args]: [ClientTarget, ...number[]],
  ready: string,
): Promise<HostProcess> {
  const proc = topo.spawnDeno("client", script, {
    args: [target.vip, String(target.port), ...args.map(String)],
    permissions: ["--allow-net"],
  });
  await proc.waitForLine((l) => l.includes(`"msg":"${ready}"`), { timeoutMs: 30_000 });
  return proc;
}

/**
 * Starts `lab/clients/udp_stream.ts` in `client`: one source port for the whole run, a datagram
 * every `intervalMs`, each echo checked; waits (≤ 30 s) for its first echo.
 */
export function startUdpStream(
  topo: Topology,
  target: ClientTarget,
  durationMs: number,
  intervalMs: number,
): Promise<HostProcess> {
  return start(topo, UDP_STREAM, [target, durationMs, intervalMs], "started");
}
