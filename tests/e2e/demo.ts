/**
 * `main.ts demo` — foundation stage. Until the load-balancer datapath lands, the demo runs the
 * smallest honest end-to-end thing that exists: a virtual network of namespaces (client, router
 * with an ECMP route over two links, a server holding a service address on `lo`), and real TCP
 * connections from client to the service address. It says what it shows and cleans up.
 *
 * @module
 */
import { createTopology, requireRoot } from "../harness/mod.ts";

const ECHO = new URL("../fixtures/tcp_echo.ts", import.meta.url).pathname;

function say(msg: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ level: "info", ts: new Date().toISOString(), msg, ...fields }));
}

/** Runs the demo; returns an exit code. */
export async function main(_args: string[]): Promise<number> {
  if (!requireRoot()) return 1;
  say(
    "demo (foundation stage): real TCP through namespaces and an ECMP route; the LB datapath is not wired in yet",
  );
  await using topo = await createTopology({
    hosts: [
      { name: "demo-client" },
      {
        name: "demo-router",
        sysctls: { "net.ipv4.ip_forward": 1, "net.ipv4.fib_multipath_hash_policy": 1 },
      },
      { name: "demo-svc", loopback: ["10.0.100.1/32"] },
    ],
    links: [
      {
        a: { host: "demo-client", ifname: "eth0", address: "10.1.0.2/24" },
        b: { host: "demo-router", ifname: "c0", address: "10.1.0.1/24" },
      },
      {
        a: { host: "demo-router", ifname: "s0", address: "10.2.0.1/24" },
        b: { host: "demo-svc", ifname: "eth0", address: "10.2.0.2/24" },
      },
      {
        a: { host: "demo-router", ifname: "s1", address: "10.3.0.1/24" },
        b: { host: "demo-svc", ifname: "eth1", address: "10.3.0.2/24" },
      },
    ],
    routes: [
      { host: "demo-client", to: "default", via: "10.1.0.1" },
      { host: "demo-svc", to: "default", via: "10.2.0.1" },
      { host: "demo-router", to: "10.0.100.1/32", via: ["10.2.0.2", "10.3.0.2"] },
    ],
  });
  say("topology up", { hosts: topo.hosts.map((h) => topo.ns(h)) });
  const server = topo.spawnDeno("demo-svc", ECHO, {
    args: ["server", "10.0.100.1", "8080"],
    permissions: ["--allow-net"],
  });
  await server.waitForLine((l) => l.includes("listening"));
  say("service 10.0.100.1:8080 listening on lo of demo-svc");
  const out = await topo.exec("demo-client", [
    Deno.execPath(),
    "run",
    "--quiet",
    "--allow-net",
    ECHO,
    "client",
    "10.0.100.1",
    "8080",
    "100",
  ]);
  const summary = JSON.parse(out.stdout.trim().split("\n").at(-1) ?? "{}");
  say("connections finished", { ok: summary.ok, failed: summary.failed });
  return summary.ok === 100 ? 0 : 1;
}
