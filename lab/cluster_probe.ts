/**
 * Reading what a virtual {@linkcode Cluster} is doing, from the places an operator would look: the
 * router's route, each LB node's agent (HTTP, log, pinned maps), the backends' accept logs, Redis.
 * The chaos scenarios use these to show that each disturbance really happened.
 *
 * @module
 */
import type { Cluster } from "./cluster.ts";
import { splitHostPort } from "../node/lb/tables/address.ts";
import {
  BpfError,
  BpfMap,
  decodeBackendValue,
  decodeServiceKey,
  ERRNO,
  FLOW_KEY_SIZE,
  FLOW_VALUE_SIZE,
  type FlowEntry,
  readFlowKey,
  readFlowValue,
  readU32Values,
  REASONS,
} from "../node/bpf/mod.ts";
import { countersByName } from "../node/bpf/datapath.ts";

/** The agents' HTTP port (node/lb/main.ts's default listen address). */
const AGENT_PORT = 9470;

/** Client addresses (`ip:port`) backend j accepted so far, from its server's log. */
export function acceptedBy(cluster: Cluster, j: number): string[] {
  const server = cluster.backends.get(j);
  if (!server) throw new Error(`No backend ${j} in the cluster`);
  return server.lines.filter((l) => l.includes('"accepted"')).map((l) =>
    JSON.parse(l).peer as string
  );
}

/** GET `path` from LB node i's agent (its listen address, inside the node's namespace). */
export async function agentHttp(
  cluster: Cluster,
  i: number,
  path: string,
): Promise<{ status: number; body: string }> {
  const code = `const r = await fetch("http://127.0.0.1:${AGENT_PORT}${path}"); ` +
    `console.log(JSON.stringify({status: r.status, body: await r.text()}));`;
  const out = await cluster.topo.exec(lbHost(cluster, i), [
    Deno.execPath(),
    "eval",
    "--quiet",
    "--no-prompt",
    `--allow-net=127.0.0.1:${AGENT_PORT}`,
    code,
  ]);
  return JSON.parse(out.stdout.trim().split("\n").at(-1)!);
}

/**
 * Packets LB node i's datapath has sent on to a backend so far (`tx_new`, `tx_hit`,
 * `tx_unconfirmed`, `tx_confirmed`, both families), read from its pinned `hf_reasons`: they survive
 * agent restarts and can be read while its agent is dead; 0 before the node first started.
 */
export function forwardedBy(cluster: Cluster, i: number): number {
  const path = `${cluster.bpffs(lbIndex(cluster, i))}/hf_reasons`;
  let map: BpfMap;
  try {
    map = BpfMap.fromPinned(path);
  } catch (e) {
    if (e instanceof BpfError && e.errno === ERRNO.ENOENT) return 0; // never started: no pins
    throw e;
  }
  using reasons = map;
  const c = countersByName(reasons, REASONS);
  return Number(c.tx_new + c.tx_hit + c.tx_unconfirmed + c.tx_confirmed);
}

/** LB node i's flow map as the datapath holds it (read through its pinned map). */
export function flowsOf(cluster: Cluster, i: number): FlowEntry[] {
  using map = BpfMap.fromPinned(`${cluster.bpffs(lbIndex(cluster, i))}/hf_flows`);
  const { keys, values, count } = map.lookupBatch();
  const keyView = new DataView(keys.buffer, keys.byteOffset, keys.byteLength);
  const valueView = new DataView(values.buffer, values.byteOffset, values.byteLength);
  const out: FlowEntry[] = [];
  for (let k = 0; k < count; k++) {
    out.push({
      key: readFlowKey(keyView, k * FLOW_KEY_SIZE),
      value: readFlowValue(valueView, k * FLOW_VALUE_SIZE),
    });
  }
  return out;
}

/** Backend addresses in LB node i's backend map (what its datapath can encapsulate to). */
export function backendsOf(cluster: Cluster, i: number): string[] {
  using map = BpfMap.fromPinned(`${cluster.bpffs(lbIndex(cluster, i))}/hf_backends`);
  const { values, count } = map.lookupBatch();
  const size = values.length / Math.max(count, 1);
  const out = new Set<string>();
  for (let k = 0; k < count; k++) {
    const { address } = decodeBackendValue(values.subarray(k * size, (k + 1) * size));
    if (address !== "0.0.0.0") out.add(address);
  }
  return [...out].sort();
}

/**
 * Backend addresses in LB node i's Maglev tables (what its datapath picks for new flows), sorted:
 * the backend IDs of {@linkcode maglevTablesOf} mapped through hf_backends.
 */
export function maglevBackendsOf(cluster: Cluster, i: number): string[] {
  const ids = new Set<number>();
  for (const slots of maglevTablesOf(cluster, i)) for (const id of slots) ids.add(id);
  ids.delete(0);
  // Only the IDs the tables name are looked up: hf_backends is an array of every possible ID
  // (65,536 by default), and reading and decoding all of it took ~50 ms a node.
  using backends = BpfMap.fromPinned(`${cluster.bpffs(lbIndex(cluster, i))}/hf_backends`);
  const key = new Uint8Array(4);
  const out = new Set<string>();
  for (const id of ids) {
    if (id >= backends.maxEntries) continue;
    new DataView(key.buffer).setUint32(0, id, true);
    const value = backends.lookup(key);
    if (value !== null) out.add(decodeBackendValue(value).address);
  }
  return [...out].sort();
}

/**
 * LB node i's Maglev tables as its datapath reads them: for each service entry of hf_services,
 * by service ID, the table hf_maglev holds at that ID (an inner map, opened by ID) as its slots'
 * backend IDs in slot order. A table no service entry names is never read by the datapath.
 */
export function maglevTablesOf(cluster: Cluster, i: number): Uint32Array[] {
  const dir = cluster.bpffs(lbIndex(cluster, i));
  // The service IDs from hf_services (a hash: its few entries) rather than a walk of all 4,096
  // slots of hf_maglev (a lookup each: ~15 ms a node, too slow to poll).
  const serviceIds = new Set<number>();
  {
    using services = BpfMap.fromPinned(`${dir}/hf_services`);
    const { values, count } = services.lookupBatch();
    const size = values.length / Math.max(count, 1);
    const view = new DataView(values.buffer, values.byteOffset, values.byteLength);
    for (let k = 0; k < count; k++) serviceIds.add(view.getUint32(k * size, true)); // service_id
  }
  using maglev = BpfMap.fromPinned(`${dir}/hf_maglev`);
  const tables: Uint32Array[] = [];
  for (const id of [...serviceIds].sort((a, b) => a - b)) {
    const k = new Uint8Array(4);
    new DataView(k.buffer).setUint32(0, id, true);
    // A map-in-map lookup from user space returns the inner map's ID. A table replaced between
    // the lookup and the open is gone (ENOENT): look its slot up again (bounded).
    let v = maglev.lookup(k), inner: BpfMap | null = null;
    for (let attempt = 0; inner === null && v !== null; attempt++) {
      try {
        inner = BpfMap.fromId(new DataView(v.buffer, v.byteOffset).getUint32(0, true));
      } catch (e) {
        if (!(e instanceof BpfError && e.errno === ERRNO.ENOENT) || attempt >= 20) throw e;
        v = maglev.lookup(k);
      }
    }
    if (inner === null) continue; // the table was deleted meanwhile
    using _inner = inner;
    tables.push(readU32Values(inner)); // a copy of the slots, through a mapping if mmapable
  }
  return tables;
}

/** Frontends in LB node i's service map as `IP:PORT/TCP` (or `/UDP`), sorted. */
export function frontendsOf(cluster: Cluster, i: number): string[] {
  using map = BpfMap.fromPinned(`${cluster.bpffs(lbIndex(cluster, i))}/hf_services`);
  const { keys, count } = map.lookupBatch();
  const size = keys.length / Math.max(count, 1);
  const out: string[] = [];
  for (let k = 0; k < count; k++) {
    const { address, port, proto } = decodeServiceKey(keys.subarray(k * size, (k + 1) * size));
    out.push(`${address}:${port}/${proto === 6 ? "TCP" : proto === 17 ? "UDP" : proto}`);
  }
  return out.sort();
}

/** Backend addresses (IPv6 without brackets) in the services file every agent follows. */
export async function configuredBackends(cluster: Cluster): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(cluster.configPath)) as {
    services: Array<{ backends: Array<{ address: string }> }>;
  };
  return config.services.flatMap((s) =>
    s.backends.map((b) => splitHostPort(b.address.split("/")[0]!).ip)
  ).sort();
}

/**
 * The router's next hops for the VIP (the LB nodes ECMP sends to), e.g. `["10.2.1.2"]`; with
 * `family` 6 for the IPv6 LB IP, e.g. `["2001:db8:2:1::2"]` (none when the cluster has none).
 */
export async function routeVias(cluster: Cluster, family: 4 | 6 = 4): Promise<string[]> {
  const vip = family === 6 ? cluster.vip6 : cluster.vip;
  if (vip === null) return [];
  const { stdout } = await cluster.topo.exec("router", [
    "ip",
    `-${family}`,
    "-j",
    "route",
    "show",
    vip,
  ]);
  const routes = JSON.parse(stdout || "[]") as Array<
    { gateway?: string; nexthops?: Array<{ gateway?: string }> }
  >;
  return routes.flatMap((r) => r.nexthops?.map((n) => n.gateway ?? "") ?? [r.gateway ?? ""])
    .filter((g) => g !== "").sort();
}

/**
 * Waits (≤ `timeoutMs`) until the router's next hops for the VIP (`family` 6: the IPv6 one) are
 * exactly `want` (what BGP installs from the LB nodes' announcements); throws naming what it saw
 * and the router's log.
 */
export async function waitRouteVias(
  cluster: Cluster,
  want: readonly string[],
  timeoutMs: number,
  family: 4 | 6 = 4,
): Promise<void> {
  const wanted = [...want].sort().join();
  const deadline = Date.now() + timeoutMs;
  let seen: string[] = [];
  for (let k = 0; k < 10_000 && Date.now() < deadline; k++) {
    seen = await routeVias(cluster, family);
    if (seen.join() === wanted) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(
    `The router's route to ${family === 6 ? cluster.vip6 : cluster.vip} goes through ${
      JSON.stringify(seen)
    } after ` +
      `${timeoutMs} ms, not [${wanted}] (router bird log: ${cluster.dir}/router.log)`,
  );
}

function lbIndex(cluster: Cluster, i: number): number {
  if (!cluster.lbNodes.has(i)) throw new Error(`No LB node ${i} in the cluster`);
  return i;
}

function lbHost(cluster: Cluster, i: number): string {
  const node = cluster.lbNodes.get(i);
  if (!node) throw new Error(`No LB node ${i} in the cluster`);
  return node.host;
}
