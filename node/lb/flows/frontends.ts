/**
 * Which backends serve which frontend, as the control plane was given them (a services config):
 * the trust boundary for flows read from the shared store — a flow is installed only if its
 * backend serves its frontend here — and the scope of a backend purge.
 *
 * @module
 */

import { parseAddr } from "../tables/address.ts";
import { type AnyFlowKey, type FlowBackend, formatFlowAddress } from "../../bpf/flow.ts";
import { flowAddress } from "./field.ts";

/** The part of a services config (node/lb/sources/file_source.ts `FileConfig`) flows need. */
export interface ServicesView {
  readonly services: readonly {
    readonly name: string;
    readonly frontends: readonly { readonly address: string }[];
    readonly backends: readonly { readonly address: string }[];
  }[];
  /** Local-redirect overrides: frontends of `service` are served by `target`'s backends too. */
  readonly redirects?: readonly { readonly service: string; readonly target: string }[];
}

/**
 * A frontend as flows see it: LB IP (host-order u32 for IPv4, RFC 5952 text for IPv6), port, IP
 * protocol number.
 */
export interface Frontend {
  readonly vip: number | string;
  readonly port: number;
  readonly proto: number;
}

const PROTO_NUMBER = { TCP: 6, UDP: 17 } as const;

/** `10.0.100.1:80/TCP` (or `[2001:db8:100::1]:80/TCP`) for logs. */
export function formatFrontend(f: Frontend): string {
  const proto = f.proto === 6 ? "TCP" : f.proto === 17 ? "UDP" : String(f.proto);
  const ip = formatFlowAddress(f.vip);
  return `${typeof f.vip === "string" ? `[${ip}]` : ip}:${f.port}/${proto}`;
}

/** Why a flow is refused: its frontend is unknown here, or its backend does not serve it. */
export type Rejection = "unknown_frontend" | "backend_not_serving";

/**
 * Frontend → serving backend addresses (by IP: the flow map stores the backend IP only), built
 * from a {@link ServicesView}, IPv4 and IPv6 frontends and backends alike (an IPv6 frontend may
 * be served by IPv4 backends). Every listed backend serves, whatever its state (active,
 * terminating, quarantined): existing connections may still go to a draining backend. Service
 * entries of one name are united (an entry may carry only backends), and a redirected
 * service's frontends are served by the target's backends as well.
 *
 * @example
 * ```ts
 * import { ServingBackends } from "./frontends.ts";
 * const serving = new ServingBackends({
 *   services: [{
 *     name: "default/web",
 *     frontends: [{ address: "10.0.100.1:80/TCP" }, { address: "[2001:db8:100::1]:80/TCP" }],
 *     backends: [{ address: "10.0.1.2:8080/TCP" }],
 *   }],
 * });
 * const key = { saddr: 0x0a000001, daddr: 0x0a006401, sport: 4000, dport: 80, proto: 6 };
 * if (serving.check(key, 0x0a000102) !== null) throw new Error("a serving backend is refused");
 * if (serving.check(key, 0x0a000909) !== "backend_not_serving") throw new Error("accepted");
 * const key6 = { saddr: "2001:db8::5", daddr: "2001:db8:100::1", sport: 4000, dport: 80, proto: 6 };
 * if (serving.check(key6, 0x0a000102) !== null) throw new Error("IPv4 backend of v6 refused");
 * ```
 */
export class ServingBackends {
  /** LB IP → (port << 8 | proto) → backend IPs. */
  readonly #byVip = new Map<number | string, Map<number, Set<FlowBackend>>>();

  /** An index of `view` (null: no config, every frontend unknown). */
  constructor(view: ServicesView | null) {
    if (view === null) return;
    const backendsByName = new Map<string, Set<FlowBackend>>();
    for (const s of view.services) {
      const set = backendsByName.get(s.name) ?? new Set<FlowBackend>();
      for (const b of s.backends) set.add(flowAddress(parseAddr(b.address).ip));
      backendsByName.set(s.name, set);
    }
    const targets = new Map<string, string>();
    for (const r of view.redirects ?? []) targets.set(r.service, r.target);
    for (const s of view.services) {
      const own = backendsByName.get(s.name)!;
      const target = targets.get(s.name);
      const redirected = target === undefined ? undefined : backendsByName.get(target);
      for (const f of s.frontends) {
        const a = parseAddr(f.address);
        const vip = flowAddress(a.ip);
        let ports = this.#byVip.get(vip);
        if (!ports) this.#byVip.set(vip, ports = new Map());
        const slot = (a.port << 8) | PROTO_NUMBER[a.protocol];
        let set = ports.get(slot);
        if (!set) ports.set(slot, set = new Set());
        for (const b of own) set.add(b);
        for (const b of redirected ?? []) set.add(b);
      }
    }
  }

  /** Backends serving `vip:port/proto`, or undefined when no such frontend is configured. */
  backendsOf(f: Frontend): ReadonlySet<FlowBackend> | undefined {
    return this.#byVip.get(f.vip)?.get((f.port << 8) | f.proto);
  }

  /** Null when `backend` serves the flow's frontend, else why not. */
  check(key: AnyFlowKey, backend: FlowBackend): Rejection | null {
    const set = this.#byVip.get(key.daddr)?.get((key.dport << 8) | key.proto);
    if (set === undefined) return "unknown_frontend";
    return set.has(backend) ? null : "backend_not_serving";
  }

  /** Every frontend with its serving backends. */
  *frontends(): Iterable<[Frontend, ReadonlySet<FlowBackend>]> {
    for (const [vip, ports] of this.#byVip) {
      for (const [slot, set] of ports) yield [{ vip, port: slot >>> 8, proto: slot & 255 }, set];
    }
  }
}

/**
 * Backends that served some frontend in `before` and do not serve it in `after` (a backend that
 * moved to another frontend only counts for the one it left). Empty when a change only adds.
 */
export function backendsLeaving(
  before: ServingBackends | ServicesView | null,
  after: ServingBackends | ServicesView | null,
): Set<FlowBackend> {
  const b = before instanceof ServingBackends ? before : new ServingBackends(before);
  const a = after instanceof ServingBackends ? after : new ServingBackends(after);
  const left = new Set<FlowBackend>();
  for (const [frontend, backends] of b.frontends()) {
    const still = a.backendsOf(frontend);
    for (const x of backends) if (!still?.has(x)) left.add(x);
  }
  return left;
}
