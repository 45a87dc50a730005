/**
 * An EgressNAT's `spec.sources`: client prefixes (non-pod clients) and pod selectors, resolved to
 * the pods' addresses. Pure: the reconciler hands it the informers' pods and namespaces.
 *
 * A source is either `{prefix, address?}` or `{podSelector?, namespaceSelector?, address?}` with
 * at least one selector (metav1.LabelSelector, as Cilium's egress gateway selects clients), read
 * as a NetworkPolicy peer of a namespaced object reads them:
 * - `podSelector` alone: the matching pods of the EgressNAT's namespace;
 * - `namespaceSelector` alone: every pod of the matching namespaces;
 * - both: the matching pods of the matching namespaces (`{}` matches everything).
 *
 * Selected: pods that have an address (`status.podIPs`, else `status.podIP`), have not ended
 * (phase neither Succeeded nor Failed), are not on the host network (their address is the
 * node's) and are not this EgressNAT's NAT pods. Each source is pinned to its `address`, else to
 * `addresses[i mod N]` (i its place in `spec.sources`), and every pod it selects leaves from that
 * address; a pod selected by two sources goes with the first.
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { isIpv6 } from "../../lib/ipv6.ts";
import {
  compileLabelSelector,
  type LabelMatcher,
  type LabelSelector,
} from "../../lib/label_selector.ts";
import type { EgressClient } from "../egress/clients.ts";
import type { KubeObject } from "./objects.ts";

/** A source spec entry that could not be read: the field and why. */
export class SourceSpecError extends Error {
  constructor(readonly field: string, why: string) {
    super(`field "${field}": ${why}`);
    this.name = "SourceSpecError";
  }
}

/** One read `spec.sources` entry. */
export type SourceEntry =
  | { readonly prefix: string; readonly address?: string }
  | {
    readonly pods: LabelMatcher;
    readonly namespaces: LabelMatcher | undefined;
    readonly address?: string;
  };

/** Whether `nat` selects clients by pod or namespace (its sources follow the pods). */
export function usesSelectors(nat: KubeObject): boolean {
  const sources = nat.spec?.sources;
  return Array.isArray(sources) &&
    sources.some((s) => s?.podSelector !== undefined || s?.namespaceSelector !== undefined);
}

function selector(v: unknown, field: string): LabelMatcher {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new SourceSpecError(field, "expected a label selector (matchLabels, matchExpressions)");
  }
  try {
    return compileLabelSelector(v as LabelSelector);
  } catch (err) {
    throw new SourceSpecError(field, (err as Error).message);
  }
}

/** Reads `spec.sources` (throws {@link SourceSpecError} naming the entry's field). */
export function readSources(sources: unknown): SourceEntry[] {
  if (!Array.isArray(sources)) {
    throw new SourceSpecError(
      "spec.sources",
      "required: client prefixes and/or pod and namespace selectors",
    );
  }
  return sources.map((s, i): SourceEntry => {
    const f = `spec.sources[${i}]`;
    if (typeof s !== "object" || s === null || Array.isArray(s)) {
      throw new SourceSpecError(f, "expected an object");
    }
    const address = s.address === undefined ? undefined : String(s.address);
    const selects = s.podSelector !== undefined || s.namespaceSelector !== undefined;
    if (s.prefix !== undefined && selects) {
      throw new SourceSpecError(
        f,
        "either prefix or podSelector/namespaceSelector, not both (use two entries)",
      );
    }
    if (s.prefix !== undefined) return { prefix: String(s.prefix), address };
    if (!selects) throw new SourceSpecError(f, "expected prefix, podSelector or namespaceSelector");
    return {
      pods: s.podSelector === undefined ? () => true : selector(s.podSelector, `${f}.podSelector`),
      namespaces: s.namespaceSelector === undefined
        ? undefined
        : selector(s.namespaceSelector, `${f}.namespaceSelector`),
      address,
    };
  });
}

/** A pod's addresses, IPv4 first (`status.podIPs`, else `status.podIP`), valid ones only. */
export function podAddresses(pod: KubeObject): string[] {
  const list: unknown[] = Array.isArray(pod.status?.podIPs)
    ? pod.status.podIPs.map((p: { ip?: unknown }) => p?.ip)
    : [pod.status?.podIP];
  const ips = [...new Set(list.filter((ip): ip is string => typeof ip === "string"))];
  return [...ips.filter(isIpv4), ...ips.filter(isIpv6)];
}

/** What the sources resolve to: the config's `sources` and the selected pods. */
export interface ResolvedSources {
  /** `{prefix, address}` in spec order, selected pods' IPv4 addresses as /32s. */
  readonly sources: { prefix: string; address?: string }[];
  /** Every selected pod with its addresses (both families), node and floating address. */
  readonly clients: EgressClient[];
}

/**
 * Resolves `entries` of EgressNAT `nat` over `pods` and `namespaces`; `floating` are its
 * addresses in spec order (an entry without `address` takes `floating[i mod N]`).
 */
export function resolveSources(
  nat: KubeObject,
  entries: readonly SourceEntry[],
  floating: readonly string[],
  pods: readonly KubeObject[],
  namespaces: readonly KubeObject[],
  natLabel: string,
): ResolvedSources {
  const ns = nat.metadata?.namespace ?? "", name = nat.metadata?.name ?? "";
  const nsLabels = new Map(namespaces.map((n) => [n.metadata?.name ?? "", n.metadata?.labels]));
  const live = pods.filter((p) =>
    p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed" &&
    p.spec?.hostNetwork !== true && podAddresses(p).length > 0 &&
    !(p.metadata?.namespace === ns && p.metadata?.labels?.[natLabel] === name)
  ).sort((a, b) => {
    const ka = `${a.metadata?.namespace}/${a.metadata?.name}`;
    const kb = `${b.metadata?.namespace}/${b.metadata?.name}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
  const sources: ResolvedSources["sources"] = [];
  const clients: EgressClient[] = [];
  const taken = new Set<string>();
  entries.forEach((e, i) => {
    const address = e.address ?? floating[i % Math.max(1, floating.length)];
    if ("prefix" in e) {
      sources.push({ prefix: e.prefix, ...(address !== undefined ? { address } : {}) });
      return;
    }
    for (const p of live) {
      const podNs = p.metadata?.namespace ?? "";
      const inNs = e.namespaces ? e.namespaces(nsLabels.get(podNs)) : podNs === ns;
      if (!inNs || !e.pods(p.metadata?.labels)) continue;
      const key = `${podNs}/${p.metadata?.name}`;
      if (taken.has(key)) continue;
      taken.add(key);
      const ips = podAddresses(p);
      for (const ip of ips.filter(isIpv4)) {
        sources.push({ prefix: `${ip}/32`, ...(address !== undefined ? { address } : {}) });
      }
      clients.push({
        pod: key,
        ...(typeof p.spec?.nodeName === "string" ? { node: p.spec.nodeName } : {}),
        ips,
        address: address ?? "",
      });
    }
  });
  return { sources, clients };
}
