/**
 * The egress cluster test's checks and diagnosis (tests/e2e/_egress_cluster.ts): after the
 * clients' summaries, every TCP connection survived (accepted once by the server, from its pod's
 * floating address), every UDP stream reached the server from one source address and port and
 * was alive to the end; on a loss, what the NAT pods decided and the router's session changes.
 */

import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { json, NS } from "./_egress_cluster_rig.ts";
import type { EgressRig } from "./_egress_cluster_rig.ts";
import type { endTraffic, Traffic } from "./_egress_cluster_traffic.ts";

type Summaries = Awaited<ReturnType<typeof endTraffic>>;

/** What the NAT pods decided and (BGP) the router's session changes, for a failure's message. */
export async function diagnosis(rig: EgressRig, gone: Map<string, string>): Promise<string> {
  const names = rig.natPods().map((p) => String(p.metadata.name));
  const decisions = await Promise.all(
    [...names, ...gone.keys()].map(async (name) => {
      const text = gone.get(name) ?? await rig.kubelet.logs(NS, name);
      return text.split("\n").filter((l) =>
        /"msg":"[^"]*(address|drain|peer|resync|dump|sync|bird|lease|daemon|BGP|assignment)/
          .test(l)
      ).map((l) => `${name}: ${l.slice(0, 300)}`);
    }),
  );
  const sessions = rig.mode !== "bgp"
    ? []
    : (await Deno.readTextFile(`${rig.cluster.dir}/router.log`).catch(() => ""))
      .split("\n").filter((l) => /hf_nat\d+.*(State changed|rror|eceived)/.test(l)).slice(-60);
  return [...decisions.flat(), ...sessions].join("\n");
}

/**
 * BGP: the router never listed two next hops for an address from `mark` on (planned handovers);
 * else an error with each route change's time and the NAT pods' announce/withdraw lines.
 */
export async function noDoubles(
  rig: EgressRig,
  mark: number[],
  gone: Map<string, string>,
  what: string,
): Promise<void> {
  const doubles = rig.doubles(mark);
  if (doubles.length === 0) return;
  const changes = rig.histories.flatMap((h) =>
    h.changes.map((c) => `${new Date(c.wall).toISOString()} ${h.prefix} via ${c.hops.join("+")}`)
  );
  const bgp = (await diagnosis(rig, gone)).split("\n").filter((l) =>
    /floating address (announced|withdrawn)|address (assumed|forfeited|released)|BGP session/.test(
      l,
    )
  );
  throw new Error(
    `${what}: the router listed two next hops: ${doubles.join(", ")}\n` +
      `${changes.join("\n")}\n${bgp.join("\n")}`,
  );
}

/**
 * The report (printed before any check), then the checks. `gone`: the logs of pods deleted
 * during the run, as last seen; `report`: what the scenarios add (owners, route doubles).
 */
export async function checkTraffic(
  rig: EgressRig,
  traffic: Traffic,
  summaries: Summaries,
  gone: Map<string, string>,
  report: Record<string, unknown>,
): Promise<void> {
  const { floating, clients } = rig.plan;
  const accepted = traffic.server.tcp.lines.map(json).filter((l) => l.msg === "accepted")
    .map((l) => String(l.peer));
  const udpSources = traffic.server.udp.lines.map(json).filter((l) => l.msg === "udp source");
  const full: Record<string, unknown> = {
    ...report,
    owners: rig.status().owners,
    routes: rig.histories.map((h) => ({ [h.prefix]: h.changes.map((c) => c.hops.join("+")) })),
    monitor: rig.monitor?.lines.filter((l) => floating.some((a) => l.includes(a))),
  };
  for (const { c, s, u } of summaries) full[c.name] = { tcp: s, udp: u };
  console.log(JSON.stringify(full));
  for (const { c, s, u } of summaries) {
    if (s.survived !== c.connections) {
      throw new Error(
        `${c.name}: TCP ${JSON.stringify(s)}; NAT pods:\n${await diagnosis(rig, gone)}`,
      );
    }
    ok(
      Number(u.last_echo_age_ms) < 5_000,
      `${c.name}: the UDP stream stopped ${JSON.stringify(u)}`,
    );
    const sources = udpSources.filter((l) => l.stream === c.name).map((l) => String(l.from));
    strictEqual(sources.length, 1, `${c.name}: the server saw its UDP stream from ${sources}`);
    ok(sources[0]!.startsWith(`${c.address}:`), `${c.name}: UDP from ${sources[0]}`);
  }
  // Each connection was accepted once (a reconnect would show), every one from a floating
  // address: nothing reached the server unsteered or unNATed.
  const total = clients.reduce((n, c) => n + c.connections, 0);
  strictEqual(accepted.length, total, JSON.stringify(accepted));
  deepStrictEqual(
    [...new Set(accepted.map((a) => a.slice(0, a.lastIndexOf(":"))))].sort(),
    [...floating].sort(),
  );
  strictEqual(new Set(accepted).size, accepted.length, "distinct source ports");
}
