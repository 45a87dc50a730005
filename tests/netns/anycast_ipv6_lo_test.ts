/**
 * `main.ts anycast` holds an IPv6 LB IP as a /128 on `lo` beside an IPv4 /32, exactly while a
 * ready local pod selects its service, and forfeits both when the pod stops being ready; `::1`
 * is never touched. The IPv6 address is written in another form in the state file and held in
 * RFC 5952 form, as `ip` lists it (what bird's `protocol direct` then announces over an IPv6
 * session, node/bgp). The agent runs in a namespace of its own (`ip netns exec`).
 */
import { ok as assert } from "node:assert/strict";
import { createTopology } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function state(ready: boolean): string {
  return JSON.stringify({
    services: [{
      name: "default/web",
      addresses: ["10.0.100.10", "2001:DB8:100:0::10"],
      ports: ["80/TCP"],
      selector: { app: "web" },
    }],
    pods: [{ name: "default/web-1", node: "n1", labels: { app: "web" }, ready }],
  });
}

rootTest(
  "anycast: an IPv6 LB IP is held as a /128 on lo beside the IPv4 /32 while a ready pod runs",
  async () => {
    await using topo = await createTopology({ hosts: [{ name: "n1" }], links: [] });
    const dir = await Deno.makeTempDir({ prefix: "hf-anycast6-" });
    const file = `${dir}/state.json`;
    try {
      await Deno.writeTextFile(file, state(true));
      const agent = topo.spawn("n1", [
        Deno.execPath(),
        ...["run", "-P=anycast", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
        ...[`${ROOT}main.ts`, "anycast", "--node", "n1", "--state", file, "--poll-ms", "100"],
      ]);
      const lo = async () => {
        const { stdout } = await topo.exec("n1", ["ip", "-j", "addr", "show", "dev", "lo"]);
        const links = JSON.parse(stdout) as { addr_info: { local: string; prefixlen: number }[] }[];
        return links.flatMap((l) => l.addr_info).map((a) => `${a.local}/${a.prefixlen}`).sort();
      };
      await agent.waitForLine((l) => l.includes("assuming address 2001:db8:100::10"), {
        timeoutMs: 20_000,
      });
      const held = await lo();
      for (const want of ["10.0.100.10/32", "2001:db8:100::10/128", "::1/128"]) {
        assert(held.includes(want), `lo holds ${want}: ${held}`);
      }
      await Deno.writeTextFile(file, state(false));
      await agent.waitForLine((l) => l.includes("forfeiting address 2001:db8:100::10"), {
        timeoutMs: 20_000,
      });
      const after = await lo();
      assert(!after.some((a) => a.startsWith("2001:db8:100::10")), `forfeited: ${after}`);
      assert(!after.includes("10.0.100.10/32") && after.includes("::1/128"), `lo: ${after}`);
      await agent.stop();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
