/**
 * The egress lab's addresses and the config its NAT pods share (`lab/egress.ts`).
 *
 * @module
 */
import type { EgressLabOptions } from "./egress.ts";
import type { HostProcess } from "./host_process.ts";
import type { Topology } from "./netns.ts";

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

const CLIENTS = new URL("./clients/", import.meta.url).pathname;

/**
 * Starts the external server's TCP and UDP echo in `host` (both egress labs: the shared
 * segment's and the routed one's); resolves once both listen.
 */
export async function startEchoServer(
  topo: Topology,
  o: { host?: string; server?: string; tcpPort?: number; udpPort?: number } = {},
): Promise<{ tcp: HostProcess; udp: HostProcess }> {
  const host = o.host ?? "ext", server = o.server ?? SERVER;
  const tcp = topo.spawnDeno(host, `${CLIENTS}tcp_echo.ts`, {
    args: ["server", server, String(o.tcpPort ?? TCP_PORT)],
    permissions: ["--allow-net"],
  });
  const udp = topo.spawnDeno(host, `${CLIENTS}udp_echo.ts`, {
    args: [server, String(o.udpPort ?? UDP_PORT)],
    permissions: ["--allow-net"],
  });
  await tcp.waitForLine((l) => l.includes("listening"));
  await udp.waitForLine((l) => l.includes("listening"));
  return { tcp, udp };
}
