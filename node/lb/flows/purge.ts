/**
 * Remove the flows of a backend that went away from a frontend — only that frontend's: another
 * service on the same LB IP (another port or protocol) keeps its flows to the same backend.
 *
 * @module
 */

import { parseAddr } from "../tables/address.ts";
import type { FlowStore, PurgeScope } from "./store.ts";
import { formatFrontend, type ServicesView, ServingBackends } from "./frontends.ts";
import { log } from "../../../lib/log.ts";
import { type FlowBackend, formatFlowAddress } from "../../bpf/flow.ts";
import { flowAddress } from "./field.ts";

export type { ServicesView } from "./frontends.ts";

/**
 * Removes every flow of frontend `frontend` (`IP:PORT/PROTO` or `[IPv6]:PORT/PROTO`) that goes to
 * `backendAddr` (dotted IPv4 or IPv6 text) and announces the removals on the LB IP's stream, so every agent deletes them from
 * its flow map and those clients get a fresh Maglev choice; other flows stay — those of other
 * frontends on the same LB IP too. Returns how many flows were removed.
 *
 * @example
 * ```ts
 * import { MemoryFlowStore } from "./_memory_store.ts";
 * import { purgeBackendFlows } from "./purge.ts";
 * const store = new MemoryFlowStore();
 * const field = "0a000001" + "9c40" + "0050" + "06"; // 10.0.0.1:40000 → port 80, TCP
 * await store.learn("10.0.100.1", [{ field, backend: 0x0a000102 }], {
 *   node: "lb-a", nowMs: Date.now(), idleTimeoutMs: 60_000,
 * });
 * const n = await purgeBackendFlows("10.0.100.1:80/TCP", "10.0.1.2", { store });
 * if (n !== 1) throw new Error(`purged ${n}`);
 * ```
 */
export async function purgeBackendFlows(
  frontend: string,
  backendAddr: string,
  options: { store: FlowStore; node?: string },
): Promise<number> {
  const a = parseAddr(frontend);
  // The LB IP as flows name it (RFC 5952 for IPv6: parseAddr insists on it).
  const scope = { vip: a.ip, port: a.port, proto: a.protocol === "TCP" ? 6 : 17 };
  return await purge(scope, flowAddress(backendAddr), options);
}

async function purge(
  scope: PurgeScope,
  backend: FlowBackend,
  options: { store: FlowStore; node?: string },
): Promise<number> {
  const gone = await options.store.purgeBackend(scope, backend, {
    node: options.node ?? "controller",
  });
  log.info("flows purged", {
    component: "flows",
    vip: scope.vip,
    frontend: formatFrontend({
      vip: flowAddress(scope.vip),
      port: scope.port,
      proto: scope.proto,
    }),
    backend: formatFlowAddress(backend),
    flows: gone.length,
  });
  return gone.length;
}

/**
 * Purges, on each frontend (LB IP, port, protocol), the flows of backends (by address) that
 * served it in `previous` and do not in `next` — e.g. when a services file is reloaded. Added
 * backends purge nothing: their flows are new, existing flows keep their backend. Idempotent, so
 * every LB node may call it. Returns the number of flows removed.
 *
 * @example
 * ```ts
 * import { MemoryFlowStore } from "./_memory_store.ts";
 * import { purgeRemovedBackends } from "./purge.ts";
 * const svc = (backends: string[]) => ({
 *   services: [{
 *     name: "default/web",
 *     frontends: [{ address: "10.0.100.1:80/TCP" }],
 *     backends: backends.map((b) => ({ address: `${b}:8080/TCP` })),
 *   }],
 * });
 * const n = await purgeRemovedBackends(svc(["10.0.1.2", "10.0.1.3"]), svc(["10.0.1.3"]), {
 *   store: new MemoryFlowStore(),
 * });
 * if (n !== 0) throw new Error(`nothing stored, purged ${n}`);
 * ```
 */
export async function purgeRemovedBackends(
  previous: ServicesView,
  next: ServicesView,
  options: { store: FlowStore; node?: string },
): Promise<number> {
  const before = new ServingBackends(previous);
  const after = new ServingBackends(next);
  let removed = 0;
  for (const [frontend, backends] of before.frontends()) {
    const still = after.backendsOf(frontend);
    const scope = {
      vip: formatFlowAddress(frontend.vip),
      port: frontend.port,
      proto: frontend.proto,
    };
    for (const backend of backends) {
      if (!still?.has(backend)) removed += await purge(scope, backend, options);
    }
  }
  return removed;
}
