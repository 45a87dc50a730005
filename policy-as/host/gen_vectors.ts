/**
 * Regenerates the golden vectors in `policy-as/vectors/` from the plain-TypeScript references:
 * `flow_hash.json` (docs/contracts.md; the BPF tests read it too), `maglev.json` and
 * `health.json`. Run only when a definition changes (together with every implementer):
 *
 * ```sh
 * deno run --allow-write=./policy-as/vectors policy-as/host/gen_vectors.ts
 * ```
 *
 * @module
 */
import { type HealthParams, newHealthRecord } from "./abi.ts";
import {
  flowHash6ClientIp,
  flowHash6FiveTuple,
  flowHashClientIp,
  flowHashFiveTuple,
} from "./flow_hash.ts";
import { healthStepTs } from "./health_ts.ts";
import type { MaglevBackend } from "./maglev_input.ts";
import { TsMaglevBuilder } from "./maglev_ts.ts";
import { tableDigest } from "./table_digest.ts";
import type { FlowHash6Vector, FlowHashVector, HealthVector, MaglevVector } from "./vectors.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Words } from "../../lib/ipv6.ts";

/** Deterministic xorshift32 so the vector set never depends on Math.random. */
function xorshift32(state: { s: number }): number {
  let x = state.s;
  x ^= x << 13;
  x >>>= 0;
  x ^= x >>> 17;
  x ^= x << 5;
  x >>>= 0;
  state.s = x;
  return x;
}

function dotted(v: number): string {
  return [(v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join(".");
}

/** Builds the flow-hash vector list: hand-picked edge cases, then pseudo-random ones. */
export function flowHashVectors(): FlowHashVector[] {
  const inputs: Array<Omit<FlowHashVector, "five_tuple" | "client_ip">> = [
    { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6, seed: 0 },
    { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 17, seed: 0 },
    { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40001, dport: 80, proto: 6, seed: 0 },
    { saddr: "10.0.0.2", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6, seed: 0 },
    { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6, seed: 1 },
    { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6, seed: 0xffffffff },
    { saddr: "0.0.0.0", daddr: "0.0.0.0", sport: 0, dport: 0, proto: 0, seed: 0 },
    {
      saddr: "255.255.255.255",
      daddr: "255.255.255.255",
      sport: 65535,
      dport: 65535,
      proto: 255,
      seed: 0xffffffff,
    },
    { saddr: "192.168.1.10", daddr: "172.16.0.5", sport: 65535, dport: 443, proto: 6, seed: 42 },
    { saddr: "127.0.0.1", daddr: "127.0.0.2", sport: 1, dport: 6080, proto: 17, seed: 0x9e3779b9 },
  ];
  const st = { s: 0x12345678 };
  for (let i = 0; i < 54; i++) {
    inputs.push({
      saddr: dotted(xorshift32(st)),
      daddr: dotted(xorshift32(st)),
      sport: xorshift32(st) & 0xffff,
      dport: xorshift32(st) & 0xffff,
      proto: i % 3 === 0 ? 17 : 6,
      seed: i % 4 === 0 ? 0 : xorshift32(st),
    });
  }
  return inputs.map((v) => {
    const saddr = parseIpv4(v.saddr);
    return {
      ...v,
      five_tuple: flowHashFiveTuple(
        { saddr, daddr: parseIpv4(v.daddr), sport: v.sport, dport: v.dport, proto: v.proto },
        v.seed,
      ),
      client_ip: flowHashClientIp(saddr, v.seed),
    };
  });
}

/** Builds the IPv6 flow-hash vector list: hand-picked edge cases, then pseudo-random ones. */
export function flowHash6Vectors(): FlowHash6Vector[] {
  const inputs: Array<Omit<FlowHash6Vector, "five_tuple" | "client_ip">> = [
    { saddr: "2001:db8::1", daddr: "2001:db8:100::1", sport: 40000, dport: 80, proto: 6, seed: 0 },
    { saddr: "2001:db8::1", daddr: "2001:db8:100::1", sport: 40000, dport: 80, proto: 17, seed: 0 },
    { saddr: "2001:db8::1", daddr: "2001:db8:100::1", sport: 40001, dport: 80, proto: 6, seed: 0 },
    { saddr: "2001:db8::2", daddr: "2001:db8:100::1", sport: 40000, dport: 80, proto: 6, seed: 0 },
    { saddr: "2001:db8::1", daddr: "2001:db8:100::1", sport: 40000, dport: 80, proto: 6, seed: 1 },
    {
      saddr: "2001:db8::1",
      daddr: "2001:db8:100::1",
      sport: 40000,
      dport: 80,
      proto: 6,
      seed: 0xffffffff,
    },
    { saddr: "::", daddr: "::", sport: 0, dport: 0, proto: 0, seed: 0 },
    {
      saddr: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      daddr: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
      sport: 65535,
      dport: 65535,
      proto: 255,
      seed: 0xffffffff,
    },
    { saddr: "fe80::1", daddr: "fd00::5", sport: 65535, dport: 443, proto: 6, seed: 42 },
    {
      saddr: "::ffff:10.0.0.1",
      daddr: "64:ff9b::a00:1",
      sport: 1,
      dport: 6080,
      proto: 17,
      seed: 7,
    },
  ];
  const st = { s: 0x9abcdef1 };
  const random6 = () => {
    const b = new Uint8Array(16);
    const v = new DataView(b.buffer);
    for (let i = 0; i < 4; i++) v.setUint32(4 * i, xorshift32(st));
    return formatIpv6(b);
  };
  for (let i = 0; i < 54; i++) {
    inputs.push({
      saddr: random6(),
      daddr: random6(),
      sport: xorshift32(st) & 0xffff,
      dport: xorshift32(st) & 0xffff,
      proto: i % 3 === 0 ? 17 : 6,
      seed: i % 4 === 0 ? 0 : xorshift32(st),
    });
  }
  return inputs.map((v) => {
    const saddr = ipv6Words(v.saddr);
    return {
      ...v,
      five_tuple: flowHash6FiveTuple(
        { saddr, daddr: ipv6Words(v.daddr), sport: v.sport, dport: v.dport, proto: v.proto },
        v.seed,
      ),
      client_ip: flowHash6ClientIp(saddr, v.seed),
    };
  });
}

/** Backend keys as the benchmark and the quality tests use them: `10.1.X.Y:8080`. */
export function benchBackends(n: number, weight: (i: number) => number = () => 1): MaglevBackend[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `10.1.${i >> 8}.${i & 255}:8080`,
    weight: weight(i),
  }));
}

/** Builds the Maglev vector list from the plain-TypeScript builder. */
export async function maglevVectors(): Promise<MaglevVector[]> {
  const cases: Array<{ name: string; m: number; backends: MaglevBackend[] }> = [
    { name: "empty", m: 251, backends: [] },
    {
      name: "three equal",
      m: 251,
      backends: [{ key: "a", weight: 1 }, { key: "b", weight: 1 }, { key: "c", weight: 1 }],
    },
    {
      name: "weighted with a zero weight",
      m: 1021,
      backends: Array.from({ length: 10 }, (_, i) => ({ key: `w${i}`, weight: i })),
    },
    { name: "largest M", m: 131071, backends: benchBackends(7) },
    { name: "weighted 100", m: 65537, backends: benchBackends(100, (i) => 1 + (i % 3)) },
    { name: "paper 1000", m: 65537, backends: benchBackends(1000) },
  ];
  const builder = new TsMaglevBuilder();
  const out: MaglevVector[] = [];
  for (const c of cases) {
    const table = builder.build(c.backends, c.m);
    const slots: Record<string, number> = {};
    for (const i of [0, 1, 2, c.m >> 1, c.m - 2, c.m - 1]) slots[String(i)] = table[i]!;
    out.push({ ...c, sha256: await tableDigest(table), slots });
  }
  return out;
}

/** Builds the health vectors from the plain-TypeScript step. */
export function healthVectors(): HealthVector[] {
  const params: HealthParams = { rise: 2, fall: 3, backoffBaseMs: 1000, backoffMaxMs: 8000 };
  const seqs: Array<{ name: string; probes: Array<[boolean, number]> }> = [
    { name: "new backend rises after 2 oks", probes: [[true, 0], [true, 100]] },
    {
      name: "active falls after 3 fails, held 1s",
      probes: [[true, 0], [true, 100], [false, 200], [false, 300], [false, 400], [true, 500], [
        true,
        600,
      ], [true, 1500]],
    },
    {
      name: "flapping backend: hold doubles per strike",
      probes: [
        [true, 0],
        [true, 1],
        [false, 10],
        [false, 11],
        [false, 12],
        [true, 1100],
        [true, 1200],
        [false, 1300],
        [false, 1301],
        [false, 1302],
        [true, 2400],
        [true, 2500],
        [true, 3400],
      ],
    },
    {
      name: "strikes forgiven after a stable max-backoff period",
      probes: [
        [true, 0],
        [true, 1],
        [false, 2],
        [false, 3],
        [false, 4],
        [true, 1100],
        [true, 1200],
        [true, 9300],
        [false, 9400],
        [false, 9401],
        [false, 9402],
        [true, 10500],
        [true, 10600],
      ],
    },
    {
      name: "a fail resets the rise count",
      probes: [[true, 0], [false, 1], [true, 2], [true, 3]],
    },
  ];
  return seqs.map(({ name, probes }) => {
    const rec = newHealthRecord();
    const steps = probes.map(([ok, now_ms]) => {
      healthStepTs(rec, { ok, nowMs: now_ms, params });
      return { ok, now_ms, expect: { ...rec } };
    });
    return { name, params, steps };
  });
}

if (import.meta.main) {
  const dir = new URL("../vectors/", import.meta.url);
  const flow = flowHashVectors();
  await Deno.writeTextFile(
    new URL("flow_hash.json", dir),
    `{ "version": 1, "vectors": [\n${flow.map((v) => "  " + JSON.stringify(v)).join(",\n")}\n] }\n`,
  );
  const flow6 = flowHash6Vectors();
  await Deno.writeTextFile(
    new URL("flow_hash6.json", dir),
    `{ "version": 1, "vectors": [\n${
      flow6.map((v) => "  " + JSON.stringify(v)).join(",\n")
    }\n] }\n`,
  );
  const maglev = await maglevVectors();
  await Deno.writeTextFile(
    new URL("maglev.json", dir),
    JSON.stringify({ version: 1, vectors: maglev }) + "\n",
  );
  const health = healthVectors();
  await Deno.writeTextFile(
    new URL("health.json", dir),
    JSON.stringify({ version: 1, vectors: health }, null, 1) + "\n",
  );
  console.log(JSON.stringify({
    level: "info",
    msg: "wrote policy vectors",
    flow_hash: flow.length,
    flow_hash6: flow6.length,
    maglev: maglev.length,
    health: health.length,
    dir: dir.pathname,
  }));
}
