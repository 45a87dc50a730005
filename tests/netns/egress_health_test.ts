/**
 * Heartbeats between two real processes (`node/egress/_health_main.ts`) in two namespaces joined
 * by a veth pair: a SIGSTOPped peer is declared down like a dead one, within interval × multiplier
 * (plus timer slack); SIGCONT brings it back up, and the resumed process does not declare its
 * own peer down for its stall; SIGKILL → down; a restarted peer (new boot id) → up.
 */
import { assert } from "../../controller/_testing.ts";
import { rootTest } from "../harness/mod.ts";
import { createTopology, type Topology } from "../../lab/netns.ts";
import type { HostProcess } from "../../lab/host_process.ts";

const MAIN = new URL("../../node/egress/_health_main.ts", import.meta.url).pathname;
const INTERVAL_MS = 100;
const MULTIPLIER = 3;
const DETECT_MS = INTERVAL_MS * MULTIPLIER;

function start(topo: Topology, self: string, own: string, peer: string, peerIp: string) {
  return topo.spawnDeno(self, MAIN, {
    args: [
      "--self",
      self,
      "--listen",
      `${own}:7946`,
      "--peer",
      `${peer}=${peerIp}:7946`,
      "--interval-ms",
      String(INTERVAL_MS),
      "--multiplier",
      String(MULTIPLIER),
    ],
    permissions: ["--allow-net"],
  });
}

/** Sleeps a random part of an interval, so a signal does not land just after a heartbeat. */
function randomPhase(): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * INTERVAL_MS));
}

function record(line: string): Record<string, unknown> {
  return JSON.parse(line) as Record<string, unknown>;
}

/** Waits for `msg` about `peer` in `proc`'s log from line `from`; returns the record. */
async function seen(proc: HostProcess, msg: string, peer: string, from: number) {
  const line = await proc.waitForLine((l) => {
    if (!l.startsWith("{")) return false;
    const r = record(l);
    return r.msg === msg && r.peer === peer;
  }, { fromLine: from, timeoutMs: 5_000 });
  return record(line);
}

rootTest(
  "egress heartbeats: SIGSTOP and SIGKILL are detected within interval × multiplier",
  async () => {
    await using topo = await createTopology({
      hosts: [{ name: "hb1" }, { name: "hb2" }],
      links: [{
        a: { host: "hb1", ifname: "eth0", address: "10.99.0.1/24" },
        b: { host: "hb2", ifname: "eth0", address: "10.99.0.2/24" },
      }],
    });
    const one = start(topo, "hb1", "10.99.0.1", "hb2", "10.99.0.2");
    let two = start(topo, "hb2", "10.99.0.2", "hb1", "10.99.0.1");
    await seen(one, "peer up", "hb2", 0);
    await seen(two, "peer up", "hb1", 0);

    const detections: number[] = [];
    for (let round = 0; round < 3; round++) {
      const from = one.lineCount;
      const fromTwo = two.lineCount;
      await randomPhase();
      const t0 = performance.now();
      const signalledAt = Date.now();
      two.child.kill("SIGSTOP");
      const down = await seen(one, "peer down", "hb2", from);
      const wall = performance.now() - t0;
      const silent = Number(down.since_last_heartbeat_ms);
      detections.push(wall);
      const logged = Date.parse(String(down.ts)) - signalledAt;
      console.log(
        `round ${round}: seen after ${
          Math.round(wall)
        } ms, logged after ${logged} ms, silent ${silent} ms`,
      );
      // Declared down once 3 intervals passed without a heartbeat, not much later (timer slack).
      assert(silent >= DETECT_MS && silent < DETECT_MS + 100, `silent for ${silent} ms`);
      assert(wall < DETECT_MS + 700, `SIGSTOP seen after ${wall} ms`);
      await new Promise((r) => setTimeout(r, 300));
      two.child.kill("SIGCONT");
      await seen(one, "peer up", "hb2", from);
      await new Promise((r) => setTimeout(r, 2 * DETECT_MS));
      const spurious = two.lines.slice(fromTwo - two.lineCount).filter((l) =>
        l.includes('"peer down"')
      );
      assert(spurious.length === 0, `resumed process declared its peer down: ${spurious}`);
    }

    let from = one.lineCount;
    await randomPhase();
    let t0 = performance.now();
    two.child.kill("SIGKILL");
    await seen(one, "peer down", "hb2", from);
    detections.push(performance.now() - t0);
    await two.stop("SIGKILL", 500);

    // A restart (new boot id) is a peer coming up.
    from = one.lineCount;
    two = start(topo, "hb2", "10.99.0.2", "hb1", "10.99.0.1");
    await seen(one, "peer up", "hb2", from);
    from = one.lineCount;
    t0 = performance.now();
    await two.stop("SIGTERM", 2_000);
    await seen(one, "peer down", "hb2", from);
    console.log(
      `detection (SIGSTOP ×3, SIGKILL, SIGTERM), ms from signal to the log line: ${
        [...detections, performance.now() - t0].map(Math.round).join(", ")
      }`,
    );
  },
);
