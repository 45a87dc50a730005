/**
 * IPv6 LB IPs through BGP, with real bird on both ends: an LB agent (`main.ts agent
 * --bgp-config`, in-memory datapath) whose services file has an IPv4 and an IPv6 frontend peers
 * with a router over one IPv4 and one IPv6 session (a session per family,
 * node/bgp/bird_config.ts). Once ready it announces both; the router's kernel gets the /128 via
 * the node's global IPv6 address (not its link-local one) beside the /32; on SIGTERM both are
 * withdrawn before the agent exits. An IPv6 address outside the settings' prefixes is never
 * announced.
 */
import { ok } from "node:assert/strict";
import { rootTest, until } from "../harness/mod.ts";
import { createTopology } from "../../lab/netns.ts";
import { RouterBird } from "../../lab/_anycast_router.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const BFD = { intervalMs: 100, multiplier: 3 };
const VIP = "10.0.100.1";
const VIP6 = "2001:db8:100::1";
/** Outside the node's IPv6 prefix: the export gate must keep it out. */
const STRAY6 = "2001:db8:200::1";
const SERVICES = `services:
  - name: default/web
    frontends: ["${VIP}:80/TCP"]
    backends: ["10.3.1.2:80/TCP"]
  - name: default/web6
    frontends: ["[${VIP6}]:80/TCP"]
    backends: ["[2001:db8:3:1::2]:80/TCP"]
  - name: default/stray6
    frontends: ["[${STRAY6}]:80/TCP"]
    backends: ["[2001:db8:3:1::2]:80/TCP"]
`;

/** The router's kernel route to `prefix` ("" when none). */
async function route(
  router: RouterBird,
  family: "-4" | "-6",
  prefix: string,
): Promise<string> {
  const r = await router.topo.exec(router.host, ["ip", family, "-o", "route", "show", prefix]);
  return r.stdout.trim();
}

rootTest(
  "bgp ipv6: an LB agent announces its IPv6 LB IP over an IPv6 session once ready (global next hop) and withdraws it on stop",
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "hf-bgp-ipv6-" });
    await using topo = await createTopology({
      hosts: [
        { name: "router", sysctls: { "net.ipv6.conf.all.forwarding": 1 } },
        { name: "n1" },
      ],
      links: [{
        a: { host: "router", ifname: "r-n1", address: "10.9.1.1/24" },
        b: { host: "n1", ifname: "eth0", address: "10.9.1.2/24" },
      }],
    });
    for (
      const [host, dev, address] of [["router", "r-n1", "2001:db8:9:1::1/64"], [
        "n1",
        "eth0",
        "2001:db8:9:1::2/64",
      ]]
    ) {
      await topo.exec(host!, ["ip", "-6", "addr", "add", address!, "dev", dev!, "nodad"]);
    }
    try {
      await Deno.mkdir(`${dir}/router`);
      const router = await RouterBird.start(topo, "router", `${dir}/router`, {
        routerId: "10.9.1.1",
        bfd: BFD,
        peers: [
          { name: "n1", address: "10.9.1.2", asn: 65101 },
          { name: "n1", address: "2001:db8:9:1::2", asn: 65101 },
        ],
      });
      await Deno.writeTextFile(`${dir}/services.yaml`, SERVICES);
      await Deno.writeTextFile(
        `${dir}/bgp.json`,
        JSON.stringify({
          routerId: "10.9.1.2",
          localAsn: 65101,
          prefixes: ["10.0.0.0/8", "2001:db8:100::/48"],
          peers: [
            { address: "10.9.1.1", asn: 65000, bfd: BFD },
            { address: "2001:db8:9:1::1", asn: 65000, bfd: BFD },
          ],
        }),
      );
      const agent = topo.spawnDeno("n1", MAIN, {
        args: [
          ...["agent", "--node-name", "n1", "--config", `${dir}/services.yaml`],
          ...["--datapath", "memory", "--src-addr", "10.9.1.2", "--no-flow-sync"],
          ...["--health", "off", "--listen", "none"],
          ...["--bgp-config", `${dir}/bgp.json`, "--bgp-dir", `${dir}/n1.bird`],
        ],
        permissions: ["-P=agent"], // the agent's permission set (deno.json), as operators run it
      });
      await agent.waitForLine((l) => l.includes('"msg":"ready"'), { timeoutMs: 20_000 });
      await until(
        "the router's IPv6 route to the LB IP through n1's global address",
        async () => (await route(router, "-6", VIP6)).includes("via 2001:db8:9:1::2"),
      );
      await until("the IPv4 route too", async () => (await route(router, "-4", VIP)) !== "");
      const ready = agent.lines.findIndex((l) => l.includes('"msg":"ready"'));
      const announcing = agent.lines.findIndex((l) =>
        l.includes("announcing LB addresses") && l.includes(VIP6)
      );
      ok(ready >= 0 && announcing > ready, "n1 announced its IPv6 LB IP before it was ready");
      ok(
        (await route(router, "-6", STRAY6)) === "",
        `an IPv6 LB IP outside the prefixes reached the router: ${await route(
          router,
          "-6",
          STRAY6,
        )}`,
      );
      const protocols = (await router.birdc("show", "protocols")).stdout;
      ok(/hf_n1_v6\s+BGP.*Established/.test(protocols), `IPv6 session: ${protocols}`);

      // SIGTERM: both routes withdrawn while the agent still runs, then it exits cleanly.
      const status = agent.child.status;
      let exited = false;
      status.then(() => exited = true);
      agent.child.kill("SIGTERM");
      await until(
        "both routes withdrawn",
        async () =>
          (await route(router, "-6", VIP6)) === "" && (await route(router, "-4", VIP)) === "",
        5_000,
      );
      ok(!exited, "the agent exited before the router dropped its IPv6 route");
      ok((await status).code === 0, "the agent did not stop cleanly");
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);
