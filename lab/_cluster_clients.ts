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

/** `count` long-lived connections to `vip`:`port` for `durationMs`; resolves once all are open. */
export async function startHoldClient(
  topo: Topology,
  target: { readonly vip: string; readonly port: number },
  count: number,
  durationMs: number,
): Promise<HostProcess> {
  const client = topo.spawnDeno("client", HOLD, {
    args: [target.vip, String(target.port), String(count), String(durationMs)],
    permissions: ["--allow-net"],
  });
  await client.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
  return client;
}

/**
 * A short connection to `vip`:`port` every `intervalMs` for `durationMs` (one line echoed
 * each); resolves once the loop started.
 */
export async function startConnectLoop(
  topo: Topology,
  target: { readonly vip: string; readonly port: number },
  durationMs: number,
  intervalMs: number,
): Promise<HostProcess> {
  const loop = topo.spawnDeno("client", LOOP, {
    args: [target.vip, String(target.port), String(durationMs), String(intervalMs)],
    permissions: ["--allow-net"],
  });
  await loop.waitForLine((l) => l.includes('"msg":"started"'), { timeoutMs: 30_000 });
  return loop;
}
