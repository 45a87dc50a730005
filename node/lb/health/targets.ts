/**
 * What this LB node probes: every backend of every service that has a `healthCheck`, from the
 * services config (file or model) the control plane was given.
 *
 * @module
 */
import { parseAddr } from "../tables/address.ts";
import type { HealthCheck } from "../sources/health_check.ts";

/** One backend of one service to probe. */
export interface HealthTarget {
  /** `namespace/name`. */
  readonly service: string;
  /** `IP:PORT/PROTO`, as the services config names it. */
  readonly backend: string;
  readonly portName: string;
  readonly weight?: number;
  /** Frontends (`IP:PORT/PROTO`) whose flows to this backend a quarantine purges. */
  readonly frontends: readonly string[];
  readonly check: HealthCheck;
  /** The backend's IP and the port probed (the check's port, or the backend's own). */
  readonly ip: string;
  readonly probePort: number;
}

/** The part of a services config health probing reads (`FileConfig` fits). */
export interface HealthView {
  readonly services: readonly {
    readonly name: string;
    readonly frontends: readonly { readonly address: string }[];
    readonly backends: readonly {
      readonly address: string;
      readonly portName?: string;
      readonly weight?: number;
    }[];
    readonly healthCheck?: HealthCheck;
  }[];
  readonly redirects?: readonly { readonly service: string; readonly target: string }[];
}

/** Key of a target: one probe loop per (service, backend). */
export function targetKey(t: Pick<HealthTarget, "service" | "backend">): string {
  return `${t.service}|${t.backend}`;
}

/**
 * The targets of `view`: entries of one service name are united (an entry may carry only
 * backends); a service's frontends include those of services redirected to it.
 *
 * @example
 * ```ts
 * import { healthTargets } from "./targets.ts";
 * import { HEALTH_CHECK_DEFAULTS } from "../sources/health_check.ts";
 * const t = healthTargets({
 *   services: [{
 *     name: "default/web",
 *     frontends: [{ address: "10.0.100.1:80/TCP" }],
 *     backends: [{ address: "10.1.0.3:8080/TCP" }],
 *     healthCheck: { ...HEALTH_CHECK_DEFAULTS, kind: "tcp" },
 *   }],
 * });
 * if (t[0]?.ip !== "10.1.0.3" || t[0]?.probePort !== 8080) throw new Error(JSON.stringify(t));
 * ```
 */
export function healthTargets(view: HealthView | null): HealthTarget[] {
  if (view === null) return [];
  const checks = new Map<string, HealthCheck>();
  const frontends = new Map<string, string[]>();
  for (const s of view.services) {
    if (s.healthCheck) checks.set(s.name, s.healthCheck);
    const list = frontends.get(s.name) ?? [];
    for (const f of s.frontends) if (!list.includes(f.address)) list.push(f.address);
    frontends.set(s.name, list);
  }
  for (const r of view.redirects ?? []) {
    const into = frontends.get(r.target);
    for (const f of frontends.get(r.service) ?? []) if (into && !into.includes(f)) into.push(f);
  }
  const out: HealthTarget[] = [];
  const seen = new Set<string>();
  for (const s of view.services) {
    const check = checks.get(s.name);
    if (!check) continue;
    for (const b of s.backends) {
      const key = targetKey({ service: s.name, backend: b.address });
      if (seen.has(key)) continue;
      seen.add(key);
      const a = parseAddr(b.address);
      out.push({
        service: s.name,
        backend: b.address,
        portName: b.portName ?? "",
        ...(b.weight !== undefined ? { weight: b.weight } : {}),
        frontends: frontends.get(s.name) ?? [],
        check,
        ip: a.ip,
        probePort: check.port || a.port,
      });
    }
  }
  return out;
}
