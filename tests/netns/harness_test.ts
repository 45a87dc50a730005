import { rootTest } from "../harness/mod.ts";
import { createTopology, listHfNamespaces } from "../../lab/mod.ts";

const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;

rootTest(
  "topology: TCP crosses a router with an ECMP route, and teardown removes every namespace",
  async () => {
    let names: string[] = [];
    {
      await using topo = await createTopology({
        hosts: [
          { name: "client" },
          {
            name: "router",
            sysctls: { "net.ipv4.ip_forward": 1, "net.ipv4.fib_multipath_hash_policy": 1 },
          },
          { name: "srv", loopback: ["10.0.100.1/32"] },
        ],
        links: [
          {
            a: { host: "client", ifname: "eth0", address: "10.1.0.2/24" },
            b: { host: "router", ifname: "c0", address: "10.1.0.1/24" },
          },
          {
            a: { host: "router", ifname: "s0", address: "10.2.0.1/24" },
            b: { host: "srv", ifname: "eth0", address: "10.2.0.2/24" },
          },
          {
            a: { host: "router", ifname: "s1", address: "10.3.0.1/24" },
            b: { host: "srv", ifname: "eth1", address: "10.3.0.2/24" },
          },
        ],
        routes: [
          { host: "client", to: "default", via: "10.1.0.1" },
          { host: "srv", to: "default", via: "10.2.0.1" },
          { host: "router", to: "10.0.100.1/32", via: ["10.2.0.2", "10.3.0.2"] },
        ],
      });
      names = topo.hosts.map((h) => topo.ns(h));
      const route = await topo.exec("router", ["ip", "route", "show", "10.0.100.1"]);
      if ((route.stdout.match(/nexthop/g) ?? []).length !== 2) {
        throw new Error(
          `expected 2 nexthops: ${route.stdout}`,
        );
      }
      const server = topo.spawnDeno("srv", ECHO, {
        args: ["server", "10.0.100.1", "8080"],
        permissions: ["--allow-net"],
      });
      await server.waitForLine((l) => l.includes("listening"));
      const before = server.lineCount;
      const out = await topo.exec("client", [
        Deno.execPath(),
        "run",
        "--quiet",
        "--allow-net",
        ECHO,
        "client",
        "10.0.100.1",
        "8080",
        "20",
      ]);
      const summary = JSON.parse(out.stdout.trim().split("\n").at(-1)!);
      if (summary.ok !== 20) throw new Error(`expected 20 echoed connections, got ${out.stdout}`);
      // The server saw the client's real address (routed, not NATed).
      const accepted = await server.waitForLine((l) => l.includes("accepted"), {
        fromLine: before,
      });
      if (!accepted.includes("10.1.0.2:")) {
        throw new Error(
          `server saw ${accepted}, expected client 10.1.0.2`,
        );
      }
    }
    const left = (await listHfNamespaces()).filter((n) => names.includes(n));
    if (left.length) throw new Error(`namespaces left after teardown: ${left.join(", ")}`);
  },
);

rootTest(
  "topology: a daemon started in a namespace outside the topology's processes dies at teardown",
  async () => {
    // A daemon of its own session (as bird or redis-server daemonize) is not one of the
    // topology's children: teardown finds it by namespace. Under -P=netns Deno.kill is refused,
    // so this also proves the kill(1) path.
    let daemon: Deno.ChildProcess | undefined;
    try {
      {
        await using topo = await createTopology({ hosts: [{ name: "leftover" }] }, {
          sweep: false,
        });
        daemon = new Deno.Command("ip", {
          args: ["netns", "exec", topo.ns("leftover"), "sleep", "300"],
          stdout: "null",
          stderr: "null",
        }).spawn();
        const deadline = Date.now() + 5_000;
        while (Date.now() < deadline) {
          const pids = await topo.exec("leftover", ["ip", "netns", "pids", topo.ns("leftover")], {
            check: false,
          }).catch(() => ({ stdout: "" }));
          if (pids.stdout.trim() !== "") break;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      const status = await Promise.race([
        daemon.status,
        new Promise<null>((r) => setTimeout(() => r(null), 5_000)),
      ]);
      if (status === null) throw new Error("the daemon left in the namespace survived teardown");
      if (status.signal !== "SIGKILL") {
        throw new Error(`daemon ended with ${JSON.stringify(status)}, expected SIGKILL`);
      }
    } finally {
      try {
        daemon?.kill("SIGKILL");
      } catch { /* gone */ }
    }
  },
);
