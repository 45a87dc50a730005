/**
 * The optional IPv6 flow-hash exports of a policy module (`flow_hash6_5tuple`,
 * `flow_hash6_client_ip`; docs/contracts.md "IPv6") held to their golden vectors
 * (`policy-as/vectors/flow_hash6.json`), as the IPv4 hash is held to its own: the BPF program
 * computes the IPv6 hash, so a swapped module may not change it. A module exports both or
 * neither; one without them stays valid (modules built before IPv6), and the host then answers
 * with the TypeScript reference (`flow_hash.ts`).
 *
 * @module
 */
import { OPTIONAL_EXPORTS } from "./abi.ts";
import type { PolicyModule } from "./policy_module.ts";
import type { FlowHash6Vector } from "./vectors.ts";
import { ipv6Words } from "../../lib/ipv6.ts";

/**
 * Why a module's exports break the IPv6 flow-hash rule (one without the other, or not a
 * function), or null. `exports` maps export names to their WASM kinds.
 */
export function flowHash6ExportsProblem(exports: ReadonlyMap<string, string>): string | null {
  const names = Object.keys(OPTIONAL_EXPORTS);
  const present = names.filter((n) => exports.has(n));
  if (present.length === 0) return null;
  for (const name of present) {
    const kind = exports.get(name);
    if (kind !== "function") return `export "${name}" is a ${kind}, expected a function`;
  }
  if (present.length < names.length) {
    const missing = names.filter((n) => !exports.has(n));
    return `it exports "${present.join('", "')}" without "${missing.join('", "')}": ` +
      `the IPv6 flow hash is both exports or neither`;
  }
  return null;
}

/** `flow_hash6_5tuple` argument lists for the pre-flight (`s0..s3, d0..d3, sport, dport, proto, seed`). */
export function flowHash6PreflightArgs(vectors: readonly FlowHash6Vector[]): number[][] {
  return vectors.map((v) => [
    ...ipv6Words(v.saddr),
    ...ipv6Words(v.daddr),
    v.sport,
    v.dport,
    v.proto,
    v.seed,
  ]);
}

/**
 * The first golden vector the module's IPv6 flow hash disagrees with, as a message naming the
 * vector and both values, or null. Only for a module with the exports (`hasFlowHash6`).
 */
export function flowHash6Violation(
  policy: PolicyModule,
  vectors: readonly FlowHash6Vector[],
): string | null {
  for (const v of vectors) {
    const saddr = ipv6Words(v.saddr);
    const tuple = {
      saddr,
      daddr: ipv6Words(v.daddr),
      sport: v.sport,
      dport: v.dport,
      proto: v.proto,
    };
    const five = policy.flowHash6FiveTuple(tuple, v.seed);
    if (five !== v.five_tuple) {
      return `IPv6 five-tuple flow hash of [${v.saddr}]:${v.sport} → [${v.daddr}]:${v.dport}/` +
        `${v.proto} seed ${v.seed} is ${five}, the vectors say ${v.five_tuple}`;
    }
    const client = policy.flowHash6ClientIp(saddr, v.seed);
    if (client !== v.client_ip) {
      return `IPv6 client-ip flow hash of ${v.saddr} seed ${v.seed} is ${client}, the vectors ` +
        `say ${v.client_ip}`;
    }
  }
  return null;
}
