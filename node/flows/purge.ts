/**
 * Controller side: remove the flows of a backend that went away.
 *
 * @module
 */

import type { FlowStore } from "./store.ts";
import { log } from "../../lib/log.ts";
import { formatIpv4, parseIpv4 } from "../../lib/ipv4.ts";

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

/** The part of a services config (controller/sources/file_source.ts) a purge needs. */
export interface ServicesView {
  readonly services: readonly {
    readonly name: string;
    readonly frontends: readonly { readonly address: string }[];
    readonly backends: readonly { readonly address: string }[];
  }[];
}

/**
 * Purges, on each LB IP of each service, the flows of backends (by address) that `previous` had
 * and `next` lacks — e.g. when a services file is reloaded. Added backends purge nothing: their
 * flows are new, existing flows keep their backend. Idempotent, so every LB node may call it.
 * Returns the number of flows removed.
 *
 * @example
 * ```ts
 * import { MemoryFlowStore } from "./store.ts";
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
  const ip = (address: string) => address.split(":")[0]!;
  const after = new Map<string, Set<string>>();
  for (const s of next.services) {
    const set = after.get(s.name) ?? new Set<string>();
    for (const b of s.backends) set.add(ip(b.address));
    after.set(s.name, set);
  }
  let removed = 0;
  for (const s of previous.services) {
    const vips = [...new Set(s.frontends.map((f) => ip(f.address)))];
    const gone = new Set(
      s.backends.map((b) => ip(b.address)).filter((b) => !after.get(s.name)?.has(b)),
    );
    for (const backend of gone) {
      for (const vip of vips) removed += await purgeBackendFlows(vip, backend, options);
    }
  }
  return removed;
}
