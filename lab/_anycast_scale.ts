/**
 * Long-lived TCP connections across an anycast membership change, shared by the redirect test
 * (tests/e2e/anycast_redirect_test.ts) and `bench:anycast`: echo servers on port 9000 in three
 * node namespaces, pods on n1 and n2, CONNECTIONS connections from the client, then n3 gains a
 * ready pod (2 → 3 nexthops) and drains (3 → 2). Without flow redirection the router's ECMP moves
 * about half of them to a node with no socket for them, which resets them.
 *
 * @module
 */

import type { AnycastLab } from "./anycast.ts";
import type { AnycastService } from "../node/anycast/model.ts";
import { clientSummary, type HoldSummary } from "./clients/summary.ts";
import { anycastNode6 } from "./_anycast_ipv6.ts";

const ECHO = new URL("./clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("./clients/hold_client.ts", import.meta.url).pathname;

/** The port the echo pods listen on. */
export const ECHO_PORT = 9000;

/** The lab's service with the echo port too (flow redirection programs the ports it lists). */
export const ECHO_SERVICES: readonly AnycastService[] = [{
  name: "default/web",
  addresses: ["10.0.100.10"],
  ports: ["80/TCP", `${ECHO_PORT}/TCP`],
  selector: { app: "web" },
}];

/** {@linkcode ECHO_SERVICES} with an IPv6 address too, for a dual-stack lab (`ipv6: true`). */
export const ECHO_SERVICES_DUAL: readonly AnycastService[] = [{
  ...ECHO_SERVICES[0]!,
  addresses: ["10.0.100.10", "2001:db8:100::10"],
}];

/**
 * Runs the 2 → 3 → 2 scenario on a 3-node lab made with {@linkcode ECHO_SERVICES} (or
 * {@linkcode ECHO_SERVICES_DUAL} with `vip` its IPv6 address: the connections and the route
 * watched are then IPv6); returns the hold client's summary (connections, survived, deaths).
 */
export async function holdAcrossScale(
  lab: AnycastLab,
  connections: number,
  vip = lab.vip,
): Promise<HoldSummary> {
  const v6 = vip.includes(":");
  const gw = (i: number) => v6 ? anycastNode6(i) : `10.9.${i}.2`;
  const route = await lab.watchRoute(vip);
  for (const n of ["n1", "n2", "n3"]) {
    const echo = lab.topo.spawnDeno(n, ECHO, {
      args: ["server", v6 ? "::" : "0.0.0.0", String(ECHO_PORT)],
      permissions: ["--allow-net"],
    });
    await echo.waitForLine((l) => l.includes("listening"));
  }
  await lab.startPod("n1", "default/web-1", { port: 0 });
  await lab.startPod("n2", "default/web-2", { port: 0 });
  await lab.startPod("n3", "default/web-3", { port: 0, ready: false });
  await route.until((g) => g.join() === [gw(1), gw(2)].sort().join(), 10_000);
  const hold = lab.topo.spawnDeno("client", HOLD, {
    args: [vip, String(ECHO_PORT), String(connections), "3000", "50"],
    permissions: ["--allow-net"],
  });
  await hold.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
  // Every connection's flow is confirmed (the client's ACK) and shared before membership moves.
  await new Promise((r) => setTimeout(r, 300));
  await lab.updatePod("default/web-3", { ready: true });
  await route.until((g) => g.length === 3, 5_000);
  await new Promise((r) => setTimeout(r, 1_000));
  await lab.updatePod("default/web-3", { terminating: true });
  await route.until((g) => g.length === 2, 5_000);
  return await clientSummary(hold, 20_000);
}
