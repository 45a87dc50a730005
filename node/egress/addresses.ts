/**
 * The floating addresses on a NAT pod's interfaces: the owner of floating address k holds it as a
 * /32 on the external interface and its gateway address as a /32 on the internal interface, and
 * announces both with gratuitous ARP; nothing else moves. Clients route the destinations through
 * the gateway address, the destinations answer the floating address: one GARP on each segment
 * and both follow the new owner.
 *
 * Changes go through one `ip -batch -` per call (both addresses in one process start).
 *
 * @module
 */

import { ipv4Bytes } from "../../lib/ipv4.ts";
import type { EgressConfig, FloatingAddress } from "../../controller/egress/config.ts";
import { runCommand } from "./_command.ts";
import { sendGratuitousArp } from "./_garp.ts";

/** Interface names of a NAT pod. */
export type EgressInterfaces = EgressConfig["interfaces"];

/** `ip` errors that mean "already gone". */
function alreadyGone(stderr: string): boolean {
  return stderr.split("\n").filter((l) => l.trim() !== "").every((l) =>
    /Cannot assign requested address|Address not found|Command failed -:\d+/.test(l)
  );
}

/** Adds the floating address (external) and its gateway (internal) as /32s, idempotently. */
export async function addFloating(fa: FloatingAddress, ifs: EgressInterfaces): Promise<void> {
  await runCommand(["ip", "-batch", "-"], {
    input: `addr replace ${fa.address}/32 dev ${ifs.external}\n` +
      `addr replace ${fa.gateway}/32 dev ${ifs.internal}\n`,
  });
}

/** Removes the floating address and its gateway (absent is fine). */
export async function removeFloating(fa: FloatingAddress, ifs: EgressInterfaces): Promise<void> {
  await runCommand(["ip", "-force", "-batch", "-"], {
    input: `addr del ${fa.address}/32 dev ${ifs.external}\n` +
      `addr del ${fa.gateway}/32 dev ${ifs.internal}\n`,
    allow: alreadyGone,
  });
}

/**
 * Announces the gateway on the internal segment and (unless `external` is false: BGP mode, the
 * routers learn the owner from its announcement) the floating address on the external one, with
 * one gratuitous ARP each.
 */
export function announceFloating(
  fa: FloatingAddress,
  ifs: EgressInterfaces,
  external = true,
): void {
  if (external) sendGratuitousArp(ifs.external, ipv4Bytes(fa.address));
  sendGratuitousArp(ifs.internal, ipv4Bytes(fa.gateway));
}

/**
 * The configured floating addresses this namespace holds now (either half on its interface), from
 * `Deno.networkInterfaces()`.
 */
export function heldFloating(config: EgressConfig): FloatingAddress[] {
  const have = new Set(
    Deno.networkInterfaces().filter((i) => i.family === "IPv4").map((i) =>
      `${i.name}/${i.address}`
    ),
  );
  const ifs = config.interfaces;
  return config.addresses.filter((fa) =>
    have.has(`${ifs.external}/${fa.address}`) || have.has(`${ifs.internal}/${fa.gateway}`)
  );
}
