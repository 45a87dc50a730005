/**
 * What an anycast node decides from: services in anycast mode (LB addresses, ports, a pod
 * selector) and the pods on this node (labels, ready, terminating). {@linkcode desiredAddresses}
 * is the whole decision, a pure function: an address is held exactly while at least one service
 * using it has a ready, non-terminating pod on this node that its selector matches.
 *
 * Selector semantics are Kubernetes': a Service selects pods of its own namespace;
 * `selector` is `Service.spec.selector` (a map, all pairs must match; absent or empty selects
 * nothing, as a Service without selector has no endpoints); `podSelector` is a full
 * `metav1.LabelSelector` (`matchLabels` + `matchExpressions`, lib/label_selector.ts). Both, when
 * given, must match.
 *
 * Shared addresses: several services may list one address (different ports); it is held while
 * any of them has a local ready pod. externalTrafficPolicy is inherently `Local`: traffic only
 * reaches nodes that announce, and a node announces only with a local ready pod.
 *
 * @module
 */

import {
  compileLabelSelector,
  type LabelMatcher,
  type LabelSelector,
} from "../../lib/label_selector.ts";

/** A service in anycast mode. */
export interface AnycastService {
  /** `namespace/name`. */
  readonly name: string;
  /** LB addresses (IPv4, or IPv6 held as a /128) the service is reachable at. */
  readonly addresses: readonly string[];
  /** `Service.spec.selector`: every pair must match (absent or empty: selects nothing). */
  readonly selector?: Readonly<Record<string, string>>;
  /** A full label selector, ANDed with `selector`. */
  readonly podSelector?: LabelSelector;
  /** Ports, informational (`80/TCP`): services sharing an address differ by port. */
  readonly ports?: readonly string[];
}

/** A pod as the node sees it. */
export interface LocalPod {
  /** `namespace/name`. */
  readonly name: string;
  /** The node it runs on (`spec.nodeName`). */
  readonly node: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The Ready condition is True. */
  readonly ready: boolean;
  /** Being deleted (`metadata.deletionTimestamp` set): forfeit now, it is still serving. */
  readonly terminating: boolean;
}

/** Why an address is held: the services that use it and their local serving pods. */
export interface Holding {
  readonly services: readonly string[];
  readonly pods: readonly string[];
}

/** Splits `namespace/name`. */
export function namespaceOf(name: string): string {
  const slash = name.indexOf("/");
  return slash < 0 ? "default" : name.slice(0, slash);
}

/** Compiles a service's selection of pods (namespace, `selector`, `podSelector`). */
export function compileServiceSelector(service: AnycastService): (pod: LocalPod) => boolean {
  const ns = namespaceOf(service.name);
  const hasMap = service.selector !== undefined && Object.keys(service.selector).length > 0;
  if (!hasMap && service.podSelector === undefined) return () => false;
  const byMap: LabelMatcher = hasMap
    ? compileLabelSelector({ matchLabels: { ...service.selector } })
    : () => true;
  const byExpr = compileLabelSelector(service.podSelector);
  return (pod) => namespaceOf(pod.name) === ns && byMap(pod.labels) && byExpr(pod.labels);
}

/** Whether a pod serves: on `node`, ready, not terminating. */
export function podServes(pod: LocalPod, node: string): boolean {
  return pod.node === node && pod.ready && !pod.terminating;
}

/**
 * The addresses this node must hold, each with the services using it and the local pods
 * serving it (sorted, so equal inputs give equal outputs).
 *
 * @example
 * ```ts
 * import { desiredAddresses } from "./model.ts";
 * const held = desiredAddresses("n1", [
 *   { name: "default/web", addresses: ["10.0.100.10"], selector: { app: "web" } },
 * ], [
 *   { name: "default/web-1", node: "n1", labels: { app: "web" }, ready: true, terminating: false },
 *   { name: "default/web-2", node: "n1", labels: { app: "web" }, ready: true, terminating: true },
 * ]);
 * if (held.get("10.0.100.10")?.pods.join() !== "default/web-1") throw new Error();
 * ```
 */
export function desiredAddresses(
  node: string,
  services: readonly AnycastService[],
  pods: readonly LocalPod[],
): Map<string, Holding> {
  const serving = pods.filter((p) => podServes(p, node));
  const held = new Map<string, { services: Set<string>; pods: Set<string> }>();
  for (const service of services) {
    const selects = compileServiceSelector(service);
    const matched = serving.filter(selects).map((p) => p.name);
    if (matched.length === 0) continue;
    for (const address of service.addresses) {
      const h = held.get(address) ?? { services: new Set(), pods: new Set() };
      h.services.add(service.name);
      for (const p of matched) h.pods.add(p);
      held.set(address, h);
    }
  }
  return new Map(
    [...held].sort(([a], [b]) => a.localeCompare(b)).map(([a, h]) => [a, {
      services: [...h.services].sort(),
      pods: [...h.pods].sort(),
    }]),
  );
}

/** The services a pod on `node` serves now (ready, not terminating): what it announces for. */
export function servingServices(
  node: string,
  services: readonly AnycastService[],
  pods: readonly LocalPod[],
): Set<string> {
  return new Set([...desiredAddresses(node, services, pods).values()].flatMap((h) => h.services));
}

/**
 * The addresses of services that select any pod on `node`, ready or not, terminating or not: the
 * node may still have connections to them (flow redirection keeps its flows of these; a drain
 * keeps them until the pod is gone).
 *
 * @example
 * ```ts
 * import { presentAddresses } from "./model.ts";
 * const svc = { name: "default/web", addresses: ["10.0.100.10"], selector: { app: "web" } };
 * const pod = { name: "default/web-1", node: "n1", labels: { app: "web" }, ready: false, terminating: true };
 * if (!presentAddresses("n1", [svc], [pod]).has("10.0.100.10")) throw new Error();
 * if (presentAddresses("n2", [svc], [pod]).size !== 0) throw new Error();
 * ```
 */
export function presentAddresses(
  node: string,
  services: readonly AnycastService[],
  pods: readonly LocalPod[],
): Set<string> {
  const local = pods.filter((p) => p.node === node);
  const out = new Set<string>();
  for (const service of services) {
    const selects = compileServiceSelector(service);
    if (local.some(selects)) { for (const a of service.addresses) out.add(a); }
  }
  return out;
}

/** Every address any anycast service uses (what the agent manages on `lo`). */
export function managedAddresses(services: readonly AnycastService[]): Set<string> {
  return new Set(services.flatMap((s) => s.addresses));
}
