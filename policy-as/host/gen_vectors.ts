/**
 * Regenerates `policy-as/vectors/flow_hash.json` from the plain-TypeScript reference. Run only
 * when docs/contracts.md changes (together with every implementer):
 *
 * ```sh
 * deno run --allow-write=./policy-as/vectors policy-as/host/gen_vectors.ts
 * ```
 *
 * @module
 */
import { flowHashClientIp, flowHashFiveTuple, ipv4ToU32 } from "./flow_hash.ts";

/** One golden flow-hash vector, as stored in flow_hash.json (see docs/contracts.md). */
export interface FlowHashVector {
  saddr: string;
  daddr: string;
  sport: number;
  dport: number;
  proto: number;
  seed: number;
  five_tuple: number;
  client_ip: number;
}

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
    const saddr = ipv4ToU32(v.saddr);
    return {
      ...v,
      five_tuple: flowHashFiveTuple(
        { saddr, daddr: ipv4ToU32(v.daddr), sport: v.sport, dport: v.dport, proto: v.proto },
        v.seed,
      ),
      client_ip: flowHashClientIp(saddr, v.seed),
    };
  });
}

if (import.meta.main) {
  const vectors = flowHashVectors();
  const lines = vectors.map((v) => "  " + JSON.stringify(v));
  const text = `{ "version": 1, "vectors": [\n${lines.join(",\n")}\n] }\n`;
  const url = new URL("../vectors/flow_hash.json", import.meta.url);
  await Deno.writeTextFile(url, text);
  console.log(
    JSON.stringify({
      level: "info",
      msg: "wrote flow-hash vectors",
      count: vectors.length,
      path: url.pathname,
    }),
  );
}
