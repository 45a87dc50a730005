/**
 * The config of an egress NAT: one JSON document, the same on every NAT pod, saying what the
 * Kubernetes `EgressNAT` object (k8s/crds/egressnats.yaml) says plus what a pod needs to reach
 * its peers. It comes from a file (`--config`, {@link readEgressConfig}) or from Redis, where the
 * controller publishes what it derives from the object (`controller/k8s/egress.ts`,
 * `--egress`). {@link parseEgressConfig} validates it; every error names the field. It lives in
 * `controller/` so the controller and the NAT pods' agents (`node/egress/`) share it.
 *
 * ```json
 * {
 *   "name": "default/egress",
 *   "destinations": ["198.18.0.0/24"],
 *   "addresses": [{ "address": "198.18.0.100", "gateway": "10.8.0.100" }],
 *   "sources": [{ "prefix": "10.8.0.11/32" }, { "prefix": "10.8.0.12/32", "address": "198.18.0.100" }],
 *   "peers": [{ "name": "nat1", "address": "10.8.0.21" }, { "name": "nat2", "address": "10.8.0.22" }],
 *   "interfaces": { "internal": "int0", "external": "ext0" },
 *   "healthCheck": { "intervalMs": 100, "multiplier": 3 },
 *   "ports": { "health": 7946, "sync": 7947 },
 *   "snatPorts": "10000-29999",
 *   "sync": true,
 *   "redis": "redis://10.8.0.254:6379"
 * }
 * ```
 *
 * A source without `address` is pinned to floating address `i mod N` (i its position in
 * `sources`): deterministic, so every pod writes the same SNAT rules.
 *
 * @module
 */

import { isIpv4, parseIpv4Cidr } from "../../lib/ipv4.ts";
import { redisUrlProblem } from "../../lib/redis_cluster.ts";
import { type EgressBgp, parseEgressBgp } from "./bgp_config.ts";

export type { EgressBgp } from "./bgp_config.ts";

/** One floating address and the internal gateway address that moves with it. */
export interface FloatingAddress {
  /** The SNAT (global) address, held as /32 on the external interface by its owner. */
  readonly address: string;
  /** The gateway address clients route through, held as /32 on the internal interface. */
  readonly gateway: string;
}

/** A client prefix and the floating address its traffic leaves with. */
export interface EgressSource {
  /** Client prefix, e.g. `10.8.0.0/26`. */
  readonly prefix: string;
  /** The floating address (one of `addresses[].address`). */
  readonly address: string;
}

/** A NAT pod of this egress NAT. */
export interface EgressPeer {
  /** Pod name (`--name` of its agent). */
  readonly name: string;
  /** Its cluster-internal address: heartbeats and conntrack sync go there. */
  readonly address: string;
}

/** A validated egress NAT configuration. */
export interface EgressConfig {
  /** `namespace/name` of the EgressNAT (the lease keys carry it). */
  readonly name: string;
  /** Destination prefixes reached through the NAT. */
  readonly destinations: readonly string[];
  readonly addresses: readonly FloatingAddress[];
  readonly sources: readonly EgressSource[];
  readonly peers: readonly EgressPeer[];
  readonly interfaces: { readonly internal: string; readonly external: string };
  readonly healthCheck: { readonly intervalMs: number; readonly multiplier: number };
  readonly ports: { readonly health: number; readonly sync: number };
  /** SNAT port range `LO-HI`, or undefined to let the kernel keep source ports. */
  readonly snatPorts?: string;
  /** Stream conntrack entries to peers (false = the baseline: takeover resets connections). */
  readonly sync: boolean;
  /** Redis URL of the leases (`--redis` overrides it). */
  readonly redis?: string;
  /** Announce the owned floating addresses over BGP (`bgp_config.ts`); absent: no BGP. */
  readonly bgp?: EgressBgp;
}

/** A configuration that cannot be used; the message names the file and field. */
export class EgressConfigError extends Error {
  /** `field` is the JSON path of the bad value, e.g. `addresses[1].gateway`. */
  constructor(readonly field: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "EgressConfigError";
  }
}

type Json = Record<string, unknown>;

function fail(field: string, why: string, value?: unknown): never {
  const got = value === undefined ? "" : `, got ${JSON.stringify(value)}`;
  throw new EgressConfigError(field, `field "${field}": ${why}${got}`);
}

function object(v: unknown, field: string): Json {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(field, "expected an object", v);
  return v as Json;
}

function array(v: unknown, field: string, min = 1): unknown[] {
  if (!Array.isArray(v) || v.length < min) {
    fail(field, `expected an array of at least ${min} element${min === 1 ? "" : "s"}`, v);
  }
  return v;
}

function string(v: unknown, field: string): string {
  if (typeof v !== "string" || v === "") fail(field, "expected a non-empty string", v);
  return v;
}

function ipv4(v: unknown, field: string): string {
  const s = string(v, field);
  if (!isIpv4(s)) fail(field, "expected an IPv4 address", s);
  return s;
}

function cidr(v: unknown, field: string): string {
  const s = string(v, field);
  try {
    parseIpv4Cidr(s);
  } catch (err) {
    fail(field, (err as Error).message);
  }
  return s;
}

function int(v: unknown, field: string, min: number, max: number, def?: number): number {
  if (v === undefined && def !== undefined) return def;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    fail(field, `expected an integer ${min}..${max}`, v);
  }
  return v;
}

function ifname(v: unknown, field: string, def: string): string {
  if (v === undefined) return def;
  const s = string(v, field);
  if (s.length > 15 || /[\s/]/.test(s)) fail(field, "expected an interface name", s);
  return s;
}

function unique(values: readonly string[], field: string): void {
  const seen = new Set<string>();
  values.forEach((v, i) => {
    if (seen.has(v)) fail(`${field}[${i}]`, "duplicate", v);
    seen.add(v);
  });
}

const KNOWN = new Set([
  "name",
  "destinations",
  "addresses",
  "sources",
  "peers",
  "interfaces",
  "healthCheck",
  "ports",
  "snatPorts",
  "sync",
  "redis",
  "bgp",
]);

/** Validates a parsed JSON document; throws {@link EgressConfigError} naming the field. */
export function parseEgressConfig(doc: unknown): EgressConfig {
  const root = object(doc, "(root)");
  for (const key of Object.keys(root)) if (!KNOWN.has(key)) fail(key, "unknown field");
  const name = string(root.name, "name");
  const destinations = array(root.destinations, "destinations").map((d, i) =>
    cidr(d, `destinations[${i}]`)
  );
  const addresses = array(root.addresses, "addresses").map((a, i): FloatingAddress => {
    const o = object(a, `addresses[${i}]`);
    return {
      address: ipv4(o.address, `addresses[${i}].address`),
      gateway: ipv4(o.gateway, `addresses[${i}].gateway`),
    };
  });
  unique(addresses.map((a) => a.address), "addresses.address");
  unique(addresses.map((a) => a.gateway), "addresses.gateway");
  const floating = new Set(addresses.map((a) => a.address));
  // Empty since v2 of the stored config: selectors that pick no pod yet (redis_config.ts).
  const sources = array(root.sources, "sources", 0).map((s, i): EgressSource => {
    const o = object(s, `sources[${i}]`);
    const address = o.address === undefined
      ? addresses[i % addresses.length]!.address
      : ipv4(o.address, `sources[${i}].address`);
    if (!floating.has(address)) {
      fail(`sources[${i}].address`, "expected one of addresses[].address", address);
    }
    return { prefix: cidr(o.prefix, `sources[${i}].prefix`), address };
  });
  const peers = array(root.peers, "peers").map((p, i): EgressPeer => {
    const o = object(p, `peers[${i}]`);
    const peerName = string(o.name, `peers[${i}].name`);
    if (!/^[a-z0-9][a-z0-9.-]{0,62}$/.test(peerName)) {
      fail(`peers[${i}].name`, "expected a pod name ([a-z0-9.-], at most 63)", peerName);
    }
    return { name: peerName, address: ipv4(o.address, `peers[${i}].address`) };
  });
  unique(peers.map((p) => p.name), "peers.name");
  unique(peers.map((p) => p.address), "peers.address");
  const ifs = root.interfaces === undefined ? {} : object(root.interfaces, "interfaces");
  const hc = root.healthCheck === undefined ? {} : object(root.healthCheck, "healthCheck");
  const ports = root.ports === undefined ? {} : object(root.ports, "ports");
  let snatPorts: string | undefined;
  if (root.snatPorts !== undefined) {
    snatPorts = string(root.snatPorts, "snatPorts");
    const m = /^(\d{1,5})-(\d{1,5})$/.exec(snatPorts);
    if (!m || Number(m[1]) < 1 || Number(m[2]) > 65535 || Number(m[1]) > Number(m[2])) {
      fail("snatPorts", "expected a port range LO-HI within 1..65535", snatPorts);
    }
  }
  if (root.sync !== undefined && typeof root.sync !== "boolean") {
    fail("sync", "expected true or false", root.sync);
  }
  const redis = root.redis === undefined ? undefined : string(root.redis, "redis");
  const redisProblem = redis === undefined ? null : redisUrlProblem(redis);
  if (redisProblem) fail("redis", redisProblem, redis);
  const bgp = root.bgp === undefined ? undefined : parseEgressBgp(root.bgp);
  if (bgp && "field" in bgp) fail(bgp.field, bgp.message);
  const config: EgressConfig = {
    name,
    destinations,
    addresses,
    sources,
    peers,
    interfaces: {
      internal: ifname(ifs.internal, "interfaces.internal", "int0"),
      external: ifname(ifs.external, "interfaces.external", "ext0"),
    },
    healthCheck: {
      intervalMs: int(hc.intervalMs, "healthCheck.intervalMs", 10, 10_000, 100),
      multiplier: int(hc.multiplier, "healthCheck.multiplier", 2, 50, 3),
    },
    ports: {
      health: int(ports.health, "ports.health", 1, 65535, 7946),
      sync: int(ports.sync, "ports.sync", 1, 65535, 7947),
    },
    snatPorts,
    sync: root.sync === undefined ? true : root.sync as boolean,
    redis,
    ...(bgp ? { bgp } : {}),
  };
  if (config.ports.health === config.ports.sync) {
    fail("ports.sync", "must differ from ports.health", config.ports.sync);
  }
  return config;
}

/** Reads and validates a config file; errors name the file and the field. */
export async function readEgressConfig(path: string): Promise<EgressConfig> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new Error(`Cannot read egress config "${path}": ${(err as Error).message}`, {
      cause: err,
    });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`Cannot read egress config "${path}": ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    return parseEgressConfig(doc);
  } catch (err) {
    if (!(err instanceof EgressConfigError)) throw err;
    throw new EgressConfigError(err.field, `Cannot use egress config "${path}": ${err.message}`, {
      cause: err,
    });
  }
}

/** The peer entry of pod `name`; throws naming the pods the config lists. */
export function selfPeer(config: EgressConfig, name: string): EgressPeer {
  const self = config.peers.find((p) => p.name === name);
  if (!self) {
    throw new EgressConfigError(
      "peers",
      `NAT pod "${name}" is not among the config's peers ${
        JSON.stringify(config.peers.map((p) => p.name))
      }`,
    );
  }
  return self;
}
