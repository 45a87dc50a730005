/**
 * The operator's picture of a Holdfast installation, built from where its data is: Redis (the LB
 * model the controller publishes, flows per LB IP, egress leases and configs, the LB nodes'
 * health reports; read through {@linkcode StatusStore}) and the nodes' `/metrics` (LB agents,
 * anycast agents, egress NAT pods; `holdfast_node_info` names each). {@linkcode buildStatus} is
 * pure: `main.ts status` prints its result, the dashboard serves it and diffs successive ones
 * into a timeline (`events.ts`).
 *
 * @module
 */

import { type Sample, samplesOf } from "../../lib/prom_text.ts";
import { splitHostPort } from "../../node/lb/tables/address.ts";
import type { ModelEntry } from "../model/schema.ts";
import { ABI_VERSION } from "../../policy-as/host/abi.ts";

/** The model as stored (`hf:model:{m}:*`). */
export interface StoredModel {
  readonly epoch: string;
  readonly rev: number;
  /** `namespace/name` → the entry's JSON. */
  readonly entries: ReadonlyMap<string, string>;
  /** SHA-256 of the model's policy module, "" when none. */
  readonly policySha: string;
}

/** Flows stored for one LB IP (`hf:{IP}:flows`). */
export interface LbIpFlows {
  readonly lbIp: string;
  readonly total: number;
  /** Backend IP → flows; only when the hash was small enough to walk (else empty). */
  readonly byBackend: Readonly<Record<string, number>>;
}

/** One egress address: its EgressNAT, and the lease on it if one is held. */
export interface EgressLeaseRow {
  /** `namespace/name` of the EgressNAT. */
  readonly egress: string;
  readonly address: string;
  /** Holder (`pod/boot`), null when free. */
  readonly holder: string | null;
  readonly epoch: number | null;
  readonly ttlMs: number | null;
}

/** A health report an LB node sent (the model's reports stream), oldest first. */
export interface StoredHealthReport {
  readonly node: string;
  readonly service: string;
  /** `IP:PORT` probed. */
  readonly backend: string;
  readonly state: "unhealthy" | "healthy";
}

/** Everything the status reads from Redis. */
export interface StoredState {
  readonly model: StoredModel;
  readonly flows: readonly LbIpFlows[];
  readonly egress: readonly EgressLeaseRow[];
  readonly reports: readonly StoredHealthReport[];
}

/** Where the stored state comes from: Redis (`redis_status_store.ts`) or memory (tests). */
export interface StatusStore {
  /** The stored state now; throws when the store cannot be reached. */
  read(): Promise<StoredState>;
  close(): Promise<void>;
}

/** One node's `/metrics`, scraped (or why not). */
export interface Scrape {
  readonly url: string;
  readonly samples: readonly Sample[] | null;
  readonly error?: string;
}

/** A node serving `/metrics`. */
export interface NodeRow {
  readonly url: string;
  /** Name from `holdfast_node_info`, else the URL's host. */
  readonly node: string;
  /** `lb`, `anycast`, `egress`, or `unknown`. */
  readonly role: string;
  readonly up: boolean;
  readonly error?: string;
  /** LB IPs it serves (LB nodes). */
  readonly lbIps: readonly string[];
  /** Digest of its serving policy module (LB nodes), "" when unknown. */
  readonly policy: string;
  /** Release and short commit from `holdfast_build_info` (`0.1.0 cbf7d7b5a029`), "" when absent. */
  readonly version: string;
}

/** An LB address: its frontends, the LB nodes serving (announcing) it, its stored flows. */
export interface AddressRow {
  readonly address: string;
  readonly frontends: readonly string[];
  readonly nodes: readonly string[];
  readonly flows: number;
}

/** A backend of a service. */
export interface BackendRow {
  readonly service: string;
  /** `IP:PORT/PROTO`. */
  readonly address: string;
  /** State in the model (`active`, `terminating`, `quarantined`). */
  readonly state: string;
  /** Health as the LB nodes judge it: `healthy`, `quarantined`, `new` or `unknown`. */
  readonly health: string;
  /** Node → its verdict (metrics where scraped, else the last report). */
  readonly healthBy: Readonly<Record<string, string>>;
  /** Stored flows to this backend's IP over the service's LB IPs. */
  readonly flows: number;
}

/** The whole picture at one moment. */
export interface StatusSnapshot {
  /** Unix ms when it was read. */
  readonly at: number;
  readonly redis: { readonly up: boolean; readonly error?: string };
  readonly model: { readonly epoch: string; readonly rev: number; readonly services: number };
  readonly policy: {
    /** SHA-256 of the model's module ("" none). */
    readonly model: string;
    /** ABI version the hosts speak. */
    readonly abi: number;
    /** What each LB node serves. */
    readonly nodes: readonly { readonly node: string; readonly digest: string }[];
  };
  readonly nodes: readonly NodeRow[];
  readonly addresses: readonly AddressRow[];
  readonly backends: readonly BackendRow[];
  readonly egress: readonly EgressLeaseRow[];
  readonly anycast: readonly { readonly address: string; readonly nodes: readonly string[] }[];
}

const EMPTY: StoredState = {
  model: { epoch: "", rev: 0, entries: new Map(), policySha: "" },
  flows: [],
  egress: [],
  reports: [],
};

function ipOf(address: string): string {
  try {
    return splitHostPort(address.split("/")[0]!).ip;
  } catch {
    return address;
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

const byText = (a: string, b: string) => a < b ? -1 : a > b ? 1 : 0;

/** `holdfast_build_info`'s release and short commit (a roll shows which node runs what). */
function buildVersion(samples: readonly Sample[]): string {
  const b = samplesOf(samples, "holdfast_build_info").find((x) => x.value === 1)?.labels;
  return b?.version ? `${b.version} ${(b.commit ?? "").slice(0, 12)}`.trim() : "";
}

/** A node's row from its scrape. */
function nodeRow(s: Scrape): NodeRow {
  const samples = s.samples ?? [];
  const info = samplesOf(samples, "holdfast_node_info").find((x) => x.value === 1);
  const on = (name: string) =>
    samplesOf(samples, name).filter((x) => x.value === 1).map((x) => x.labels.address ?? "");
  return {
    url: s.url,
    node: info?.labels.node ?? hostOf(s.url),
    role: info?.labels.role ?? "unknown",
    up: s.samples !== null,
    ...(s.error ? { error: s.error } : {}),
    lbIps: on("holdfast_agent_lb_ip").sort(byText),
    policy: samplesOf(samples, "holdfast_policy_module").find((x) => x.value === 1)?.labels
      .digest ?? "",
    version: buildVersion(samples),
  };
}

function parseEntry(json: string): ModelEntry | null {
  try {
    const e = JSON.parse(json) as ModelEntry;
    return Array.isArray(e.service?.frontends) && Array.isArray(e.backends) ? e : null;
  } catch {
    return null; // a bad entry is the agents' to log; the status shows the rest
  }
}

/** Health verdicts per `service|backend` → node → verdict. */
function healthVerdicts(
  entries: readonly ModelEntry[],
  stored: StoredState,
  scrapes: readonly Scrape[],
  nodes: readonly NodeRow[],
): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  const put = (key: string, node: string, verdict: string) => {
    const m = out.get(key) ?? {};
    m[node] = verdict;
    out.set(key, m);
  };
  // Reports first (last one wins), then metrics of scraped nodes override them.
  for (const r of stored.reports) {
    const e = entries.find((x) => x.service.name === r.service);
    const ip = ipOf(r.backend);
    for (const b of e?.backends ?? []) {
      if (ipOf(b.address) === ip) {
        put(`${r.service}|${b.address}`, r.node, r.state === "healthy" ? "healthy" : "quarantined");
      }
    }
  }
  scrapes.forEach((s, i) => {
    for (const x of samplesOf(s.samples ?? [], "holdfast_backend_health")) {
      if (x.value !== 1) continue;
      const v = x.labels.state === "active" ? "healthy" : x.labels.state ?? "unknown";
      put(`${x.labels.service}|${x.labels.backend}`, nodes[i]!.node, v);
    }
  });
  return out;
}

function summary(by: Record<string, string> | undefined): string {
  const v = Object.values(by ?? {});
  if (v.length === 0) return "unknown";
  if (v.includes("quarantined")) return "quarantined";
  return v.every((x) => x === "healthy") ? "healthy" : "new";
}

/** The snapshot of `stored` (null: Redis unreachable, `redisError` says why) and `scrapes`. */
export function buildStatus(
  stored: StoredState | null,
  scrapes: readonly Scrape[],
  options: { now?: number; redisError?: string } = {},
): StatusSnapshot {
  const st = stored ?? EMPTY;
  const nodes = scrapes.map(nodeRow);
  const entries = [...st.model.entries]
    .map(([, json]) => parseEntry(json))
    .filter((e): e is ModelEntry => e !== null)
    .sort((a, b) => byText(a.service.name, b.service.name));
  const flowsOf = new Map(st.flows.map((f) => [f.lbIp, f]));

  const addrs = new Map<string, { frontends: string[] }>();
  for (const e of entries) {
    for (const f of e.service.frontends) {
      const ip = ipOf(f.address);
      const a = addrs.get(ip) ?? { frontends: [] };
      a.frontends.push(`${f.address} ${e.service.name}`);
      addrs.set(ip, a);
    }
  }
  for (const n of nodes) {
    for (const ip of n.lbIps) if (!addrs.has(ip)) addrs.set(ip, { frontends: [] });
  }
  const addresses: AddressRow[] = [...addrs].sort(([a], [b]) => byText(a, b)).map(([ip, a]) => ({
    address: ip,
    frontends: a.frontends.sort(byText),
    nodes: nodes.filter((n) => n.up && n.lbIps.includes(ip)).map((n) => n.node).sort(byText),
    flows: flowsOf.get(ip)?.total ?? 0,
  }));

  const verdicts = healthVerdicts(entries, st, scrapes, nodes);
  const backends: BackendRow[] = entries.flatMap((e) => {
    const lbIps = [...new Set(e.service.frontends.map((f) => ipOf(f.address)))];
    return [...e.backends].sort((a, b) => byText(a.address, b.address)).map((b) => {
      const ip = ipOf(b.address);
      const by = verdicts.get(`${e.service.name}|${b.address}`) ?? {};
      return {
        service: e.service.name,
        address: b.address,
        state: b.state ?? "active",
        health: summary(by),
        healthBy: by,
        flows: lbIps.reduce((n, lb) => n + (flowsOf.get(lb)?.byBackend[ip] ?? 0), 0),
      };
    });
  });

  const anycast = new Map<string, string[]>();
  scrapes.forEach((s, i) => {
    for (const x of samplesOf(s.samples ?? [], "holdfast_anycast_address")) {
      if (x.value !== 1 || !x.labels.address) continue;
      anycast.set(x.labels.address, [...(anycast.get(x.labels.address) ?? []), nodes[i]!.node]);
    }
  });

  return {
    at: options.now ?? Date.now(),
    redis: stored ? { up: true } : { up: false, error: options.redisError ?? "not read" },
    model: { epoch: st.model.epoch, rev: st.model.rev, services: entries.length },
    policy: {
      model: st.model.policySha,
      abi: ABI_VERSION,
      nodes: nodes.filter((n) => n.policy !== "").map((n) => ({ node: n.node, digest: n.policy })),
    },
    nodes,
    addresses,
    backends,
    egress: [...st.egress].sort((a, b) =>
      byText(a.egress, b.egress) || byText(a.address, b.address)
    ),
    anycast: [...anycast].sort(([a], [b]) => byText(a, b))
      .map(([address, n]) => ({ address, nodes: n.sort(byText) })),
  };
}
