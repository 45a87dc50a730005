/**
 * Test topology of the conntrack and sync tests: a client, two NAT namespaces A and B with the
 * same nftables SNAT rule (to the floating address, ports 20000–29999), and a server.
 *
 *     cli eth0 10.8.0.11 ── int0 10.8.0.21 [nata] ext0 198.18.0.21 ── eth0 198.18.0.1 [srv]
 *     cli eth1 10.9.0.11 ── int0 10.9.0.21 [natb] ext0 198.19.0.21 ── eth1 198.19.0.1  lo 203.0.113.1
 *
 * The client reaches the server address through A, the server reaches the floating address
 * through A; {@linkcode routeThroughB} moves both routes to B and takes A's links down.
 *
 * @module
 */

import { createTopology, type HostProcess, type Topology } from "../../lab/mod.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import type { CtEntry } from "../../node/conntrack/mod.ts";

/** The server's address (on its loopback). */
export const SERVER = "203.0.113.1";
/** The floating SNAT address both NATs translate to. */
export const FLOATING = "198.18.0.100";
/** The client's source address. */
export const CLIENT = "10.8.0.11";
/** FLOATING as u32. */
export const FLOATING_U32 = parseIpv4(FLOATING);

const NFT = `table ip hf_ct_test {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.8.0.0/16 ip daddr ${SERVER} oifname "ext0" meta l4proto { tcp, udp } snat to ${FLOATING}:20000-29999
  }
}`;

/** Builds the topology with the SNAT rule in both NAT namespaces. */
export async function natPair(): Promise<Topology> {
  const fwd = { "net.ipv4.ip_forward": 1 };
  const topo = await createTopology({
    hosts: [
      { name: "cli" },
      { name: "nata", sysctls: fwd },
      { name: "natb", sysctls: fwd },
      { name: "srv", loopback: [`${SERVER}/32`] },
    ],
    links: [
      {
        a: { host: "cli", ifname: "eth0", address: `${CLIENT}/24` },
        b: { host: "nata", ifname: "int0", address: "10.8.0.21/24" },
      },
      {
        a: { host: "cli", ifname: "eth1", address: "10.9.0.11/24" },
        b: { host: "natb", ifname: "int0", address: "10.9.0.21/24" },
      },
      {
        a: { host: "nata", ifname: "ext0", address: "198.18.0.21/24" },
        b: { host: "srv", ifname: "eth0", address: "198.18.0.1/24" },
      },
      {
        a: { host: "natb", ifname: "ext0", address: "198.19.0.21/24" },
        b: { host: "srv", ifname: "eth1", address: "198.19.0.1/24" },
      },
    ],
    routes: [
      { host: "cli", to: `${SERVER}/32`, via: "10.8.0.21" },
      { host: "natb", to: "10.8.0.0/24", via: "10.9.0.11" },
      { host: "nata", to: `${SERVER}/32`, via: "198.18.0.1" },
      { host: "natb", to: `${SERVER}/32`, via: "198.19.0.1" },
      { host: "srv", to: `${FLOATING}/32`, via: "198.18.0.21" },
    ],
  });
  try {
    for (const nat of ["nata", "natb"]) {
      await topo.exec(nat, ["nft", "-f", "-"], { stdin: NFT });
      await topo.exec(nat, ["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_tcp_loose=0"]);
    }
  } catch (e) {
    await topo.destroy();
    throw e;
  }
  return topo;
}

/** Moves the client's and the server's routes to B, then takes A's links down. */
export async function routeThroughB(topo: Topology): Promise<void> {
  await topo.exec("cli", ["ip", "route", "replace", `${SERVER}/32`, "via", "10.9.0.21"]);
  await topo.exec("srv", ["ip", "route", "replace", `${FLOATING}/32`, "via", "198.19.0.21"]);
  await topo.setLink("nata", "int0", false);
  await topo.setLink("nata", "ext0", false);
}

/** Sends one UDP datagram from the client to the server (a conntrack entry through A). */
async function udpPing(topo: Topology, port: number): Promise<void> {
  await topo.exec("cli", ["bash", "-c", `echo ping > /dev/udp/${SERVER}/${port}`]);
}

const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("../../lab/clients/hold_client.ts", import.meta.url).pathname;

/**
 * An echo server on SERVER:8080 and one long-lived client connection through A exchanging a line
 * every 100 ms for `durationMs` (hold_client.ts: its last line is the survival summary), plus one
 * UDP datagram to SERVER:5353.
 */
export async function heldFlows(
  topo: Topology,
  durationMs: number,
): Promise<{ server: HostProcess; client: HostProcess }> {
  const server = topo.spawnDeno("srv", ECHO, {
    args: ["server", SERVER, "8080"],
    permissions: ["--allow-net"],
  });
  await server.waitForLine((l) => l.includes("listening"));
  const client = topo.spawnDeno("cli", HOLD, {
    args: [SERVER, "8080", "1", String(durationMs), "100"],
    permissions: ["--allow-net"],
  });
  await client.waitForLine((l) => l.includes('"connected"') && l.includes('"open":1'));
  await udpPing(topo, 5353);
  return { server, client };
}

/**
 * A synthetic SNAT'd entry number `i` from CLIENT+i to the server, translated to `addr`
 * (default FLOATING) port `natPortBase + i`; TCP ESTABLISHED unless `udp`.
 */
export function snatEntry(
  i: number,
  options: { addr?: number; udp?: boolean; sport?: number; dport?: number; natPortBase?: number } =
    {},
): CtEntry {
  const proto = options.udp ? 17 : 6;
  const addr = options.addr ?? FLOATING_U32, port = (options.natPortBase ?? 30_000) + i;
  const orig = {
    src: parseIpv4(CLIENT) + i,
    dst: parseIpv4(SERVER),
    proto: proto as 6 | 17,
    sport: options.sport ?? 50_000,
    dport: options.dport ?? 443,
  };
  return {
    orig,
    reply: { src: orig.dst, dst: addr, proto: orig.proto, sport: orig.dport, dport: port },
    status: options.udp ? 0x8 : 0x19e,
    timeoutS: 120,
    ...(options.udp ? {} : { tcpState: 3 }),
    natSrc: { addr, port },
  };
}
