/**
 * Foundation acceptance: two namespaces joined by a veth pair, the counting XDP program built from
 * bpf/ with Debian clang, loaded and attached (native mode, inside the server's namespace) through
 * the libbpf FFI layer, real TCP between a server and a client — and the packet counts in the map
 * match what the interface received.
 */

import { strictEqual } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { createTopology } from "../../lab/netns.ts";
import {
  attachXdp,
  BpfObject,
  DEFAULT_OBJECT_DIR,
  sumU64,
  u32,
  xdpProgramId,
} from "../../node/bpf/mod.ts";

const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const CONNECTIONS = 20;

async function rxPackets(
  topo: { exec(h: string, a: string[]): Promise<{ stdout: string }> },
  host: string,
): Promise<bigint> {
  const out = await topo.exec(host, ["ip", "-j", "-s", "link", "show", "eth0"]);
  const link = JSON.parse(out.stdout)[0] as { stats64: { rx: { packets: number } } };
  return BigInt(link.stats64.rx.packets);
}

rootTest("XDP counting program sees every packet of real TCP between two namespaces", async () => {
  await using topo = await createTopology({
    hosts: [
      { name: "a", sysctls: { "net.ipv6.conf.all.disable_ipv6": 1 } },
      { name: "b", sysctls: { "net.ipv6.conf.all.disable_ipv6": 1 } },
    ],
    links: [{
      a: { host: "a", ifname: "eth0", address: "10.20.0.1/24" },
      b: { host: "b", ifname: "eth0", address: "10.20.0.2/24" },
    }],
  });
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_count.o`);
  const counts = obj.map("hf_count");
  const xdp = attachXdp(obj.program("hf_xdp_count"), "eth0", {
    netns: topo.ns("b"),
    mode: "native",
  });
  strictEqual(
    xdpProgramId("eth0", { netns: topo.ns("b") }) > 0,
    true,
    "a program is attached in b",
  );
  const rxBefore = await rxPackets(topo, "b");

  const server = topo.spawnDeno("b", ECHO, {
    args: ["server", "10.20.0.2", "8080"],
    permissions: ["--allow-net"],
  });
  await server.waitForLine((l) => l.includes("listening"));
  const out = await topo.exec("a", [
    Deno.execPath(),
    "run",
    "--quiet",
    "--allow-net",
    ECHO,
    "client",
    "10.20.0.2",
    "8080",
    String(CONNECTIONS),
  ]);
  const summary = JSON.parse(out.stdout.trim().split("\n").pop()!) as {
    ok: number;
    failed: number;
  };
  strictEqual(summary.ok, CONNECTIONS, `all connections echoed: ${out.stdout}`);
  await server.stop();
  await new Promise((r) => setTimeout(r, 200)); // let the last FIN/ACKs land

  const read = (i: number) => sumU64(counts.lookup(u32(i))!);
  // Bracket the map read between two interface reads: a stray frame (ARP) may land meanwhile.
  let all = 0n, tcp = 0n, rxDelta = 0n, rxAfter = 0n;
  for (let attempt = 0; attempt < 5; attempt++) {
    rxDelta = (await rxPackets(topo, "b")) - rxBefore;
    all = read(0);
    tcp = read(1);
    rxAfter = (await rxPackets(topo, "b")) - rxBefore;
    if (rxDelta === rxAfter) break;
  }
  console.log(
    JSON.stringify({
      level: "info",
      msg: "xdp counts",
      all: String(all),
      tcp: String(tcp),
      rxDelta: String(rxDelta),
    }),
  );
  // per connection at least: SYN, ACK, data, ACK of the echo, FIN, ACK reach b
  strictEqual(tcp >= BigInt(CONNECTIONS * 4), true, `TCP frames counted: ${tcp}`);
  strictEqual(all, rxDelta, "XDP saw exactly the frames the interface received");
  xdp.detach();
  strictEqual(xdpProgramId("eth0", { netns: topo.ns("b") }), 0, "detached");
});
