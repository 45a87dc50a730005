/**
 * Feeds the controller's own LB tables (through {@linkcode K8sSource}) from the cluster view,
 * level-triggered: each pass compares claimed Services (with the addresses the allocator just
 * decided applied to their status, so frontends do not wait for the status round-trip) and their
 * EndpointSlices with what was fed last time, and applies only the difference in one batch.
 *
 * A family's frontend takes its family's slices: an EndpointSlice of a family the Service has no
 * address of (a PreferDualStack Service that got only its IPv4 address, while Kubernetes keeps an
 * IPv6 slice for it) is not fed, so its IPv4 frontend is not handed IPv6 backends; it is fed once
 * the Service has an address of that family. A Service with no address yet gets every slice.
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import type { K8sEvent } from "../../node/lb/sources/k8s_source.ts";
import { convertService, SERVICE_NAME_LABEL } from "../../node/lb/sources/k8s_convert.ts";
import { keyOf, type KubeObject } from "./objects.ts";

/** What the feed writes to: {@linkcode K8sSource} fits. */
export interface ModelSink {
  apply(events: readonly K8sEvent[]): void;
}

/** A claimed Service and the addresses it should show (undefined: as its status shows). */
export interface FedService {
  readonly object: KubeObject;
  readonly addresses?: readonly string[];
}

/** The LoadBalancerConfig's per-Service defaults (see `_config.ts`). */
export interface FeedDefaults {
  readonly flowKey?: "client-ip";
  readonly maglevSize?: number;
}

/**
 * The Service as the conversion should read it: the allocator's addresses in its status, and the
 * config's defaults as annotations where the Service sets none (its own always win; a Service
 * with `sessionAffinity: ClientIP` is keyed per client anyway).
 */
function prepared(
  svc: KubeObject,
  addresses: readonly string[] | undefined,
  defaults: FeedDefaults,
): KubeObject {
  const annotations = { ...svc.metadata?.annotations };
  if (defaults.flowKey && annotations["holdfast.io/flow-key"] === undefined) {
    annotations["holdfast.io/flow-key"] = defaults.flowKey;
  }
  if (defaults.maglevSize && annotations["holdfast.io/maglev-size"] === undefined) {
    annotations["holdfast.io/maglev-size"] = String(defaults.maglevSize);
  }
  return {
    ...svc,
    metadata: { ...svc.metadata, annotations },
    ...(addresses === undefined ? {} : {
      status: {
        ...svc.status,
        loadBalancer: { ingress: addresses.map((ip) => ({ ip, ipMode: "VIP" })) },
      },
    }),
  };
}

/** What of a Service the conversion reads, as a comparable string. */
function serviceFingerprint(svc: KubeObject): string {
  return JSON.stringify([
    svc.metadata?.annotations ?? {},
    svc.spec ?? {},
    (svc.status?.loadBalancer?.ingress ?? []).map((i: { ip?: string }) => i.ip),
  ]);
}

/** Level-triggered feed of Services and EndpointSlices into a {@linkcode ModelSink}. */
export class SourceFeed {
  readonly #services = new Map<string, string>();
  /** Families of the frontends of each Service fed as its fingerprint says (no re-conversion). */
  readonly #families = new Map<string, Set<string>>();
  /** slice key → resourceVersion fed. */
  readonly #slices = new Map<string, { rv: string; object: KubeObject }>();
  /** Claimed Services left out because they cannot be converted: key → the error's message. */
  readonly problems = new Map<string, string>();

  constructor(readonly sink: ModelSink, readonly logger: Logger) {}

  /** Applies the difference between `services` (claimed only) + `slices` and the last pass. */
  sync(
    services: readonly FedService[],
    slices: readonly KubeObject[],
    defaults: FeedDefaults = {},
  ): number {
    const events: K8sEvent[] = [];
    const claimed = new Set<string>();
    /** Families of each claimed Service's frontends (IPv6 frontends are `[IPv6]:PORT/PROTO`). */
    const families = new Map<string, Set<string>>();
    for (const { object, addresses } of services) {
      const svc = prepared(object, addresses, defaults);
      const key = keyOf(svc);
      const fp = serviceFingerprint(svc);
      const before = this.#services.get(key);
      const known = before === fp ? this.#families.get(key) : undefined;
      if (known !== undefined) {
        // What the conversion reads is as fed: same frontends, nothing to convert or write.
        families.set(key, known);
        claimed.add(key);
        continue;
      }
      try {
        // A Service that cannot be converted is left out, and said so.
        const { frontends } = convertService(svc);
        const fams = new Set(frontends.map((f) => f.address[0] === "[" ? "IPv6" : "IPv4"));
        families.set(key, fams);
        this.#families.set(key, fams);
        this.problems.delete(key);
      } catch (err) {
        this.problems.set(key, (err as Error).message);
        this.#families.delete(key);
        if (before !== "invalid") {
          this.logger.warn("service left out of the model", { service: key, error: String(err) });
          if (before !== undefined) events.push({ type: "delete", object: svc });
          this.#services.set(key, "invalid");
        }
        continue;
      }
      claimed.add(key);
      if (before === fp) continue;
      events.push({
        type: before === undefined || before === "invalid" ? "add" : "update",
        object: svc,
      });
      this.#services.set(key, fp);
    }
    const passed = new Set(services.map((s) => keyOf(s.object)));
    for (const [key, fp] of this.#services) {
      if (passed.has(key)) continue;
      this.#services.delete(key);
      this.#families.delete(key);
      this.problems.delete(key);
      if (fp === "invalid") continue;
      const slash = key.indexOf("/");
      const metadata = { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
      events.push({ type: "delete", object: { kind: "Service", metadata } });
    }
    const seen = new Set<string>();
    for (const slice of slices) {
      const svcName = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
      const svcKey = `${slice.metadata?.namespace ?? "default"}/${svcName}`;
      if (!svcName || !claimed.has(svcKey)) continue;
      const fams = families.get(svcKey);
      if (fams && fams.size > 0 && !fams.has(slice.addressType ?? "IPv4")) continue;
      const key = keyOf(slice), rv = slice.metadata?.resourceVersion ?? "";
      seen.add(key);
      const before = this.#slices.get(key);
      if (before?.rv === rv) continue;
      events.push({ type: before ? "update" : "add", object: { kind: "EndpointSlice", ...slice } });
      this.#slices.set(key, { rv, object: slice });
    }
    for (const [key, { object }] of this.#slices) {
      if (seen.has(key)) continue;
      events.push({ type: "delete", object: { kind: "EndpointSlice", ...object } });
      this.#slices.delete(key);
    }
    if (events.length > 0) this.sink.apply(events);
    return events.length;
  }
}
