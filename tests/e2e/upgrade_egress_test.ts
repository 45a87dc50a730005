/**
 * Upgrading egress NAT pods under traffic (issue 26): two NAT pods run the previous release
 * (`scripts/previous-release.txt`, built by `lab/previous_release.ts`); each is drained (SIGTERM:
 * planned handover) and started again on this build, one at a time, then rolled back the same way.
 * The pods of two releases share leases, heartbeats and the conntrack sync wire (the formats of
 * both: CHANGELOG.md). TCP connections and a UDP stream through both floating addresses survive
 * with the same source address and port, and no sample ever sees two pods holding an address.
 */
import { rootTest } from "../harness/mod.ts";
import { createEgressLab, type EgressLab } from "../../lab/egress.ts";
import { summary, waitForSuccessor } from "../../lab/egress_scenario.ts";
import { waitForStandbyFlows } from "../../lab/egress_checks.ts";
import { type PreviousRelease, previousRelease } from "../../lab/previous_release.ts";

const WAIT_MS = 15_000;
const DEAD_UDP_MS = 5_000;

/** Drains NAT pod `name` and starts it on `release` (undefined: this build); returns moves. */
async function roll(lab: EgressLab, name: string, release: PreviousRelease | undefined) {
  const held: number[] = [];
  for (const k of [0, 1]) if ((await lab.holders(k)).includes(name)) held.push(k);
  const code = await lab.drainNat(name);
  if (code !== 0) throw new Error(`${name} exited with ${code} after SIGTERM`);
  let moved = 0;
  for (const k of held) if ((await waitForSuccessor(lab, k, name, WAIT_MS)) !== name) moved++;
  lab.pods.get(name)!.release = release;
  await lab.startNat(name);
  await lab.settle();
  return moved;
}

rootTest(
  "upgrade: NAT pods rolled from the previous release to this build and back, one at a time; TCP and UDP keep their source, never two owners",
  async () => {
    const previous = await previousRelease();
    await using lab = await createEgressLab({ natPods: 2 });
    for (const pod of lab.pods.values()) pod.release = previous;
    await lab.startServer();
    await lab.startAll();
    await lab.settle();
    const holdMs = 6_000 + 4 * 9_000; // four rolls: drain, start, hand-back, settle
    const clients = [await lab.startTcp(0, 25, holdMs), await lab.startTcp(1, 25, holdMs)];
    const streams = [await lab.startUdp(0, holdMs), await lab.startUdp(1, holdMs)];
    for (const k of [0, 1]) await waitForStandbyFlows(lab, k, 25);
    let samples = 0, doubles = 0, polling = true;
    const poller = (async () => {
      for (let i = 0; polling && i < 100_000; i++) {
        const h = await Promise.all([lab.holders(0), lab.holders(1)]);
        samples++;
        if (h.some((x) => x.length > 1)) doubles++;
      }
    })();
    let moved = 0;
    const steps: string[] = [];
    try {
      for (const name of lab.pods.keys()) {
        moved += await roll(lab, name, undefined);
        steps.push(`${name} on this build`);
      }
      for (const name of lab.pods.keys()) {
        moved += await roll(lab, name, previous);
        steps.push(`${name} back on ${previous.version}`);
      }
    } finally {
      polling = false;
      await poller;
    }
    const tcp = await Promise.all(clients.map((c) => summary(c, holdMs + 30_000)));
    const udp = await Promise.all(streams.map((s) => summary(s, 15_000)));
    const sources = lab.server!.udp.lines.map((l) => JSON.parse(l))
      .filter((l) => l.msg === "udp source");
    console.log(JSON.stringify({ previous: previous.commit, steps, moved, samples, doubles, tcp }));
    const problems: string[] = [];
    if (moved === 0) problems.push("no address moved: the rolls did not reach the traffic");
    if (doubles > 0) problems.push(`${doubles} of ${samples} samples saw two holders`);
    for (const t of tcp) {
      if (t.survived !== t.connections) {
        problems.push(
          `${Number(t.connections) - Number(t.survived)} of ${t.connections} TCP connections ` +
            `lost: ${JSON.stringify(t.deaths)}`,
        );
      }
    }
    for (const u of udp) {
      if (Number(u.last_echo_age_ms) > DEAD_UDP_MS) {
        problems.push(`a UDP stream died: ${JSON.stringify(u)}`);
      }
    }
    for (const stream of ["egc1", "egc2"]) {
      const seen = sources.filter((l) => l.stream === stream).map((l) => l.from);
      if (seen.length !== 1) problems.push(`the server saw ${stream} from ${JSON.stringify(seen)}`);
    }
    if (problems.length) throw new Error(`egress upgrade:\n  ${problems.join("\n  ")}`);
  },
);
