/**
 * What `bench/synflood.ts` drives and reads: the SYN generator (bpf/xdp_synflood_gen.c), the LB
 * node's reason counters and flow map (its pinned maps), and redis-server's write counters.
 *
 * @module
 */

import type { Cluster } from "../lab/cluster.ts";
import type { Topology } from "../lab/netns.ts";
import {
  BpfMap,
  type BpfObject,
  type BpfProgram,
  FLOW_KEY_SIZE,
  PROTO,
  readFlowKey,
  REASONS,
  sumU64,
  testRun,
  u32,
} from "../node/bpf/mod.ts";
import { parseIpv4 } from "../lib/ipv4.ts";

/** Redis commands that change data, as Holdfast's stores use them (INFO commandstats names). */
const WRITE_COMMANDS = new Set([
  "set",
  "del",
  "unlink",
  "hset",
  "hdel",
  "xadd",
  "xtrim",
  "zadd",
  "zrem",
  "zremrangebyscore",
  "expire",
  "pexpire",
  "publish",
  "eval",
  "evalsha",
]);

/** The MAC address of `ifname` in `host`, as bytes. */
export async function macOf(topo: Topology, host: string, ifname: string): Promise<number[]> {
  const out = await topo.exec(host, ["cat", `/sys/class/net/${ifname}/address`]);
  const mac = out.stdout.trim().split(":").map((h) => parseInt(h, 16));
  if (mac.length !== 6 || mac.some((b) => !(b >= 0 && b <= 255))) {
    throw new Error(`Cannot read the MAC address of "${ifname}" in "${host}": "${out.stdout}"`);
  }
  return mac;
}

/** Loads the generator's template frame (its first 54 bytes) and source range (host order). */
export function setGeneratorTemplate(
  gen: BpfObject,
  frame: Uint8Array,
  base: number,
  mask: number,
): void {
  const be = (n: number) => {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, n >>> 0); // network order, as the packet holds it
    return b;
  };
  gen.map("hf_syn_cfg").update(u32(0), be(base));
  gen.map("hf_syn_cfg").update(u32(1), be(mask));
  gen.map("hf_syn_tmpl").update(u32(0), frame.slice(0, 54));
}

/** Sends `count` spoofed SYNs as live frames out of `ifindex` (the calling thread's netns). */
export function generateSyns(
  prog: BpfProgram,
  frame: Uint8Array,
  ifindex: number,
  count: number,
): void {
  const ctx = new Uint32Array(6); // struct xdp_md: data, data_end, data_meta, ingress_ifindex
  ctx[1] = frame.length;
  ctx[3] = ifindex;
  testRun(prog, frame, { repeat: count, ctxIn: new Uint8Array(ctx.buffer), liveFrames: true });
}

/** LB node 1's reason counters (pinned hf_reasons), summed over CPUs, by name. */
export function lbReasons(cluster: Cluster): Record<string, bigint> {
  using map = BpfMap.fromPinned(`${cluster.bpffs(1)}/hf_reasons`);
  const out: Record<string, bigint> = {};
  REASONS.forEach((name, i) => {
    const v = map.lookup(u32(i));
    out[name] = v === null ? 0n : sumU64(v);
  });
  return out;
}

/** Keys (as text) of LB node 1's hf_flows entries from `client` to the cluster's service. */
export function clientFlows(cluster: Cluster, client: string): Set<string> {
  using map = BpfMap.fromPinned(`${cluster.bpffs(1)}/hf_flows`);
  const { keys, count } = map.lookupBatch();
  const view = new DataView(keys.buffer, keys.byteOffset, keys.byteLength);
  const saddr = parseIpv4(client), daddr = parseIpv4(cluster.vip);
  const out = new Set<string>();
  for (let i = 0; i < count; i++) {
    const k = readFlowKey(view, i * FLOW_KEY_SIZE);
    if (
      k.saddr === saddr && k.daddr === daddr && k.dport === cluster.port && k.proto === PROTO.TCP
    ) {
      out.add(`${k.sport}`);
    }
  }
  return out;
}

/** redis-server's key changes (`rdb_changes_since_last_save`; it never saves here) and calls of
 * write commands so far. */
export async function redisWrites(
  cluster: Cluster,
): Promise<{ dirty: number; writeCommands: number }> {
  const out = await cluster.topo.exec("ctl", ["redis-cli", "-u", cluster.redis.url, "INFO", "all"]);
  let dirty = NaN, writeCommands = 0;
  for (const line of out.stdout.split(/\r?\n/)) {
    const d = /^rdb_changes_since_last_save:(\d+)/.exec(line);
    if (d) dirty = Number(d[1]);
    const c = /^cmdstat_([a-z|]+):calls=(\d+)/.exec(line);
    if (c && WRITE_COMMANDS.has(c[1]!)) writeCommands += Number(c[2]);
  }
  if (Number.isNaN(dirty)) throw new Error(`No rdb_changes_since_last_save in INFO: ${out.stdout}`);
  return { dirty, writeCommands };
}
