/**
 * Shared by the IPv6 fixtures (tests/bpf/ipv6_fixtures_test.ts, ipv6_icmp_fixtures_test.ts): an
 * LB datapath with IPv6 frontends over a mix of IPv4 and IPv6 backends, the expected output of a
 * frame (encapsulated to the backend `table[flowHash6 % M]` names, over that backend's family),
 * and a runner that checks the verdict, the output frame and that exactly one reason counter
 * moved by one.
 *
 * @module
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import {
  Datapath,
  type FlowKey6,
  Ipv6Maps,
  type Reason,
  REASONS,
  SVC_F_CLIENT_IP,
  SVC_F_DRAINING,
  testRun,
  type TestRunResult,
} from "../../node/bpf/mod.ts";
import {
  encapSourcePort,
  flowHash6ClientIp,
  flowHash6FiveTuple,
} from "../../policy-as/host/flow_hash.ts";
import { encapsulatedAny } from "../../lab/packets6.ts";
import { hex } from "../../lab/packets.ts";
import { formatIpv6, ipv6Words } from "../../lib/ipv6.ts";

/** Flow hash seed of the fixtures' LB node. */
export const SEED = 0x1234;
/** The LB node's IPv4 address (outer source to IPv4 backends). */
export const LB_SRC = "10.1.1.2";
/** The LB node's IPv6 address (outer source to IPv6 backends). */
export const LB_SRC6 = "2001:db8:1::2";
/** Encapsulation port. */
export const ENCAP_PORT = 6080;
/** A well-behaved IPv6 client. */
export const CLIENT6 = "2001:db8:a::1";
/** Frontends: TCP 80 and UDP 53 five-tuple over a mixed table (MIXED7). */
export const VIP6 = "2001:db8:100::1";
/** TCP 80 client-ip (MIXED5). */
export const VIP6_CLIENT_IP = "2001:db8:100::2";
/** TCP 80, IPv6 backends only. */
export const VIP6_ONLY6 = "2001:db8:100::4";
/** TCP 80, IPv4 backends only. */
export const VIP6_ONLY4 = "2001:db8:100::5";
/** TCP 80 with 0 backends, a slot naming an unknown ID, an unset slot, no table. */
export const VIP6_NO_BACKENDS = "2001:db8:100::3";
export const VIP6_UNKNOWN_ID = "2001:db8:100::6";
export const VIP6_SLOT_ZERO = "2001:db8:100::7";
export const VIP6_NO_MAGLEV = "2001:db8:100::8";
/** TCP 80 (MIXED7) draining: no new TCP connection (HF_SVC_F_DRAINING). */
export const VIP6_DRAINING = "2001:db8:100::9";

/** Backend IDs → addresses: 1, 2 IPv4 (hf_backends), 3, 4 IPv6 (hf_backends6). */
export const BACKENDS: Record<number, string> = {
  1: "10.2.0.1",
  2: "10.2.0.2",
  3: "2001:db8:2::3",
  4: "2001:db8:2::4",
};
export const MIXED7 = new Uint32Array([1, 3, 2, 4, 3, 1, 4]);
export const MIXED5 = new Uint32Array([3, 1, 4, 2, 3]);
export const ONLY6 = new Uint32Array([3, 4, 3, 4, 3]);
export const ONLY4 = new Uint32Array([1, 2, 1, 2, 1]);

/** The tables by frontend VIP (TCP 80; UDP 53 of VIP6 uses MIXED7 too). */
const TABLES: Record<string, Uint32Array> = {
  [VIP6]: MIXED7,
  [VIP6_CLIENT_IP]: MIXED5,
  [VIP6_DRAINING]: MIXED7,
  [VIP6_ONLY6]: ONLY6,
  [VIP6_ONLY4]: ONLY4,
};

/** Writes the LB node's IPv6 source address (hf_config6); "::" clears it. */
export function configure6(dp: Datapath, srcAddr: string): void {
  new Ipv6Maps(dp.object).configure(srcAddr);
}

/** An LB datapath (not pinned) with the fixtures' settings, backends and IPv6 frontends;
 * `ringBytes` sizes the new-flow rings (default that of the datapath). */
export async function openFixtureLb6(options: { ringBytes?: number } = {}): Promise<Datapath> {
  const dp = await Datapath.open({ pinDir: null, ...options });
  dp.configure({ srcAddr: LB_SRC, encapPort: ENCAP_PORT, seed: SEED });
  configure6(dp, LB_SRC6);
  const lb = dp.lbMaps();
  const v6 = new Ipv6Maps(dp.object);
  for (const [id, address] of Object.entries(BACKENDS)) {
    if (address.includes(":")) v6.updateBackend(Number(id), address, 80);
    else await lb.updateBackend(Number(id), { address, port: 80 });
  }
  const svc = async (
    vip: string,
    port: number,
    proto: number,
    serviceId: number,
    table: Uint32Array | null,
    o: { clientIp?: boolean; backendCount?: number; draining?: boolean } = {},
  ) => {
    if (table) await lb.updateMaglev(serviceId, table);
    v6.updateService({ address: vip, port, protocol: proto === 6 ? "TCP" : "UDP" }, {
      serviceId,
      backendCount: o.backendCount ?? 2,
      flags: (o.clientIp ? SVC_F_CLIENT_IP : 0) | (o.draining ? SVC_F_DRAINING : 0),
      maglevSize: table?.length ?? 7,
    });
  };
  await svc(VIP6, 80, 6, 20, MIXED7);
  await svc(VIP6, 53, 17, 21, MIXED7);
  await svc(VIP6_CLIENT_IP, 80, 6, 22, MIXED5, { clientIp: true });
  await svc(VIP6_ONLY6, 80, 6, 24, ONLY6);
  await svc(VIP6_ONLY4, 80, 6, 25, ONLY4);
  await svc(VIP6_NO_BACKENDS, 80, 6, 23, MIXED7, { backendCount: 0 });
  await svc(VIP6_UNKNOWN_ID, 80, 6, 26, new Uint32Array(7).fill(8));
  await svc(VIP6_SLOT_ZERO, 80, 6, 27, new Uint32Array(7));
  await svc(VIP6_NO_MAGLEV, 80, 6, 28, null);
  await svc(VIP6_DRAINING, 80, 6, 29, MIXED7, { draining: true });
  return dp;
}

/** The flow of an Ethernet + IPv6 + TCP/UDP frame as the datapath keys it. */
export function flowOf(frame: Uint8Array, clientIp = false): FlowKey6 {
  const v = new DataView(frame.buffer, frame.byteOffset);
  return {
    saddr: formatIpv6(frame, 22),
    daddr: formatIpv6(frame, 38),
    sport: clientIp ? 0 : v.getUint16(54),
    dport: v.getUint16(56),
    proto: frame[20]!,
  };
}

/** The IPv6 flow hash of `key` (the TypeScript reference the WASM module and BPF are held to). */
export function hash6(key: FlowKey6, clientIp = false): number {
  return clientIp ? flowHash6ClientIp(ipv6Words(key.saddr), SEED) : flowHash6FiveTuple({
    saddr: ipv6Words(key.saddr),
    daddr: ipv6Words(key.daddr),
    sport: key.sport,
    dport: key.dport,
    proto: key.proto,
  }, SEED);
}

/** The backend Maglev picks for `key`: `table[hash6 % M]` of the frontend's table. */
export function maglevBackend(key: FlowKey6, clientIp = false): string {
  const table = TABLES[key.daddr]!;
  return BACKENDS[table[hash6(key, clientIp) % table.length]!]!;
}

/** Expected output for `frame` sent to `backend` (default: Maglev's pick) for flow `key`. */
export function expectEncap6(
  frame: Uint8Array,
  o: { key?: FlowKey6; backend?: string; clientIp?: boolean } = {},
): Uint8Array {
  const key = o.key ?? flowOf(frame, o.clientIp);
  const hash = hash6(key, o.clientIp);
  const backend = o.backend ?? maglevBackend(key, o.clientIp);
  return encapsulatedAny(frame, {
    outerSrc: backend.includes(":") ? LB_SRC6 : LB_SRC,
    backend,
    sport: encapSourcePort(hash),
    dport: ENCAP_PORT,
    hash,
  });
}

/** Number of entries in hf_flows6. */
export function flows6(dp: Datapath): number {
  return [...new Ipv6Maps(dp.object).flows()].length;
}

/** The backend hf_flows6 holds for `key`, or null. */
export function flowBackend6(dp: Datapath, key: FlowKey6): string | null {
  return new Ipv6Maps(dp.object).getFlow(key)?.backend ?? null;
}

/** One fixture: input, verdict, output ("unchanged", null = not checked), the one reason. */
export interface Fixture6 {
  readonly description: string;
  readonly input: Uint8Array | (() => Uint8Array);
  readonly verdict: number;
  readonly output: Uint8Array | "unchanged" | null | (() => Uint8Array);
  readonly reason: Reason;
  /** Counters moved besides the packet's reason, e.g. flow_shared when the flow is shared. */
  readonly also?: readonly Reason[];
  /** hf_flows6 entries the run adds (default: 1 with flow_shared in `also`, else 0). */
  readonly newFlows?: number;
  readonly before?: (dp: Datapath) => void;
  readonly after?: (dp: Datapath) => void;
}

/** Runs `f` through `run` (default: BPF_PROG_TEST_RUN of hf_lb) and checks it. */
export function runFixture6(
  dp: Datapath,
  f: Fixture6,
  run: (input: Uint8Array) => TestRunResult = (input) => testRun(dp.program, input),
): TestRunResult {
  f.before?.(dp);
  const input = typeof f.input === "function" ? f.input() : f.input;
  const flowsBefore = flows6(dp);
  const before = dp.reasons();
  const r = run(input);
  const after = dp.reasons();
  strictEqual(r.retval, f.verdict, `verdict of "${f.description}"`);
  const output = typeof f.output === "function" ? f.output() : f.output;
  if (output === "unchanged") strictEqual(hex(r.data), hex(input), "frame must pass untouched");
  else if (output !== null) strictEqual(hex(r.data), hex(output), "output frame");
  const moved = REASONS.filter((n) => after[n] !== before[n]).map((n) =>
    `${n}+${after[n] - before[n]}`
  );
  const expected = [f.reason, ...(f.also ?? [])];
  deepStrictEqual(
    moved,
    REASONS.filter((n) => expected.includes(n)).map((n) => `${n}+1`),
    "the packet's reason counter (and those of `also`) move by one, no other",
  );
  strictEqual(
    flows6(dp) - flowsBefore,
    f.newFlows ?? (f.also?.includes("flow_shared") ? 1 : 0),
    "hf_flows6 entries made",
  );
  f.after?.(dp);
  return r;
}
