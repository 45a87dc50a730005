/**
 * Controller side: remove the flows of a backend that went away.
 *
 * @module
 */

import { formatIpv4, parseIpv4 } from "./flow.ts";
import type { FlowStore } from "./store.ts";
import { log } from "../log.ts";

/**
 * Removes every flow of LB IP `vip` that goes to `backendAddr` (dotted) and announces the
 * removals on the LB IP's stream, so every agent deletes them from its flow map and those clients
 * get a fresh Maglev choice; other flows stay. Returns how many flows were removed.
 *
 * @example
 * ```ts
 * import { MemoryFlowStore } from "./store.ts";
 * import { purgeBackendFlows } from "./purge.ts";
 * const store = new MemoryFlowStore();
 * await store.learn("10.0.100.1", [{ field: "0a00000100010050" + "06", backend: 0x0a000102, epoch: 0 }], {
 *   node: "lb-a", nowMs: Date.now(), idleTimeoutMs: 60_000,
 * });
 * const n = await purgeBackendFlows("10.0.100.1", "10.0.1.2", { store });
 * if (n !== 1) throw new Error(`purged ${n}`);
 * ```
 */
export async function purgeBackendFlows(
  vip: string,
  backendAddr: string,
  options: { store: FlowStore; node?: string },
): Promise<number> {
  const backend = parseIpv4(backendAddr);
  const gone = await options.store.purgeBackend(vip, backend, {
    node: options.node ?? "controller",
  });
  log.info("flows purged", {
    component: "flows",
    vip,
    backend: formatIpv4(backend),
    flows: gone.length,
  });
  return gone.length;
}
