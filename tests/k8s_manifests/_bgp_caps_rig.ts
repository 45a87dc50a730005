/**
 * The rig the BGP capability tests share: a router namespace running bird beside a node `n1`, the
 * node's BGP settings file, a process run in `n1` as uid 0 limited by `setpriv --bounding-set` to
 * given capabilities (what a container runtime does with `drop: [ALL]` plus `add`), and a bounded
 * poll of what the router saw.
 */
import { createTopology, type Topology } from "../../lab/netns.ts";
import { RouterBird } from "../../lab/_anycast_router.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const BFD = { intervalMs: 100, multiplier: 3 };

/** What the router saw of node n1, n1's bird log, and the process's output lines so far. */
export interface RouterView {
  established: boolean;
  routed: boolean;
  birdLog: string;
  lines: readonly string[];
}

/** A live rig: `dir` holds `bgp.json` (n1's BGP settings) and n1's bird directory `dir/bird`. */
export interface BgpCapsRig {
  readonly topo: Topology;
  readonly dir: string;
  /**
   * Runs `main.ts ARGS` in n1 under permission set `perm` with only `caps`, and every 100 ms (at
   * most `deadlineMs`) reads the router's view of `route` until `settled(view)` is true; then stops
   * it, kills its bird and returns the last view.
   */
  run(
    caps: readonly string[],
    perm: string,
    args: readonly string[],
    options: { route: string; deadlineMs: number; settled: (v: RouterView) => Promise<boolean> },
  ): Promise<RouterView>;
}

/** Builds the rig, hands it to `fn`, tears everything down afterwards. */
export async function withBgpCapsRig<R>(
  prefix: string,
  fn: (rig: BgpCapsRig) => Promise<R>,
): Promise<R> {
  const topo = await createTopology({
    hosts: [{ name: "router" }, { name: "n1" }],
    links: [{
      a: { host: "router", ifname: "r-n1", address: "10.9.1.1/24" },
      b: { host: "n1", ifname: "eth0", address: "10.9.1.2/24" },
    }],
  });
  const dir = await Deno.makeTempDir({ prefix });
  try {
    const router = await RouterBird.start(topo, "router", dir, {
      routerId: "10.9.1.1",
      bfd: BFD,
      peers: [{ name: "n1", address: "10.9.1.2", asn: 65101 }],
    });
    await Deno.writeTextFile(
      `${dir}/bgp.json`,
      JSON.stringify({
        routerId: "10.9.1.2",
        localAsn: 65101,
        prefixes: ["10.0.100.0/24"],
        peers: [{ address: "10.9.1.1", asn: 65000, bfd: BFD }],
      }),
    );
    return await fn({
      topo,
      dir,
      async run(caps, perm, args, { route, deadlineMs, settled }) {
        const bounding = ["-all", ...caps.map((c) => `+${c.toLowerCase()}`)].join(",");
        const proc = topo.spawn("n1", [
          "setpriv",
          `--bounding-set=${bounding}`,
          "--inh-caps=-all",
          Deno.execPath(),
          "run",
          `-P=${perm}`,
          "--no-prompt",
          "--quiet",
          "--config",
          CONFIG,
          MAIN,
          ...args,
        ]);
        let view: RouterView = { established: false, routed: false, birdLog: "", lines: [] };
        const deadline = Date.now() + deadlineMs;
        for (let i = 0; i < deadlineMs / 100 && Date.now() < deadline; i++) {
          await new Promise((r) => setTimeout(r, 100));
          // Routes first: a route read before the session line implies the session was up by
          // then (read the other way round, a session coming up between the two reads showed a
          // route with no Established session).
          const routes = (await router.birdc("show", "route")).stdout;
          const protocols = (await router.birdc("show", "protocols")).stdout;
          view = {
            lines: [...proc.lines],
            established: /hf_n1\s.*Established/.test(protocols),
            routed: routes.includes(route),
            birdLog: await Deno.readTextFile(`${dir}/bird/bird.log`).catch(() => ""),
          };
          if (await settled(view)) break;
        }
        await proc.stop("SIGTERM", 3_000);
        const pid = (await Deno.readTextFile(`${dir}/bird/bird.pid`).catch(() => "")).trim();
        if (/^\d+$/.test(pid)) await topo.exec("n1", ["kill", "-KILL", pid], { check: false });
        return view;
      },
    });
  } finally {
    await topo.destroy();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
