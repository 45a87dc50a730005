/**
 * The egress lab's addresses and the config its NAT pods share (`lab/egress.ts`).
 *
 * @module
 */
import type { EgressLabOptions } from "./egress.ts";

/** The external server's address (the destination). */
export const SERVER = "198.18.0.1";
/** TCP echo port of the server. */
export const TCP_PORT = 8080;
/** UDP echo port of the server. */
export const UDP_PORT = 8081;
/** The lab Redis's address on the internal segment. */
export const REDIS_ADDR = "10.8.0.254";
const LAB_BGP = { localAsn: 65100, peers: [{ address: SERVER, asn: 65000, bfd: true }] };

/** Floating address k. */
export function floatingAddress(k: number): string {
  return `198.18.0.${100 + k}`;
}

/** Gateway address of floating address k. */
export function gatewayAddress(k: number): string {
  return `10.8.0.${100 + k}`;
}

/** The egress config the lab's NAT pods share. */
export function labEgressConfig(options: EgressLabOptions): Record<string, unknown> {
  const n = options.natPods ?? 2, m = options.addresses ?? 2;
  return {
    name: "lab/egress",
    destinations: ["198.18.0.0/24"],
    addresses: Array.from({ length: m }, (_, k) => ({
      address: floatingAddress(k),
      gateway: gatewayAddress(k),
    })),
    sources: Array.from({ length: m }, (_, k) => ({ prefix: `10.8.0.${11 + k}/32` })),
    peers: Array.from(
      { length: n },
      (_, i) => ({ name: `nat${i + 1}`, address: `10.8.0.${21 + i}` }),
    ),
    healthCheck: options.healthCheck ?? { intervalMs: 100, multiplier: 3 },
    // A port range the clients' ephemeral ports are outside of: a NAT pod that did not get the
    // entry picks another port, so a takeover without sync cannot look like it survived.
    snatPorts: "10000-29999",
    sync: options.sync ?? true,
    redis: `redis://${REDIS_ADDR}:6379`,
    ...(options.bgp ? { bgp: LAB_BGP } : {}),
  };
}
