/**
 * `PeerHealth.setPeers` on loopback (what an agent run with `--egress` does when the controller's
 * config lists new NAT pods or drops one): a peer added while running gets heartbeats and comes up
 * once its own arrive; a peer removed while up is declared down (the ownership hears it) and its
 * heartbeats are ignored from then on.
 */
import { deepStrictEqual } from "node:assert/strict";
import dgram from "node:dgram";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { PeerHealth } from "../../node/egress/health.ts";
import { decodeHeartbeat, encodeHeartbeat } from "../../node/egress/_health_wire.ts";
import { waitFor } from "../../node/egress/_ownership_testing.ts";

Deno.test({
  name: "egress heartbeats: peers added and removed while running",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    using logs = captureLogs();
    const peer = dgram.createSocket("udp4"); // the test plays peer "b"
    let received = 0;
    peer.on("message", (m: Uint8Array) => {
      if (decodeHeartbeat(m)) received++;
    });
    await new Promise<void>((r) => peer.bind(0, "127.0.0.1", () => r()));
    const registry = new Registry();
    const health = new PeerHealth({
      self: "a",
      listen: { host: "127.0.0.1", port: 0 },
      peers: [],
      // Silence declares b down only after 1.5 s: a stall of this process under load does not add
      // a down and up to the exact list of changes below.
      intervalMs: 500,
      multiplier: 3,
      registry,
    });
    const changes: string[] = [];
    health.onChange((p, up) => changes.push(`${p} ${up ? "up" : "down"}`));
    await health.start();
    let seq = 0;
    const hb = () =>
      peer.send(
        encodeHeartbeat({ name: "b", seq: seq++, boot: "boot-1", draining: false }),
        health.port,
        "127.0.0.1",
      );
    const ignored = (reason: string) =>
      registry.counter("holdfast_egress_heartbeats_ignored_total", "", { labelNames: ["reason"] })
        .get({ reason });
    try {
      hb();
      await waitFor("b's heartbeat refused while unlisted", () => ignored("foreign") === 1);
      health.setPeers([{ name: "b", host: "127.0.0.1", port: peer.address().port }]);
      await waitFor("heartbeats to b", () => received >= 2);
      const beat = setInterval(hb, 20);
      try {
        await waitFor("b up", () => health.live().join() === "a,b");
        health.setPeers([]);
        deepStrictEqual(health.live(), ["a"]);
        deepStrictEqual(changes, ["b up", "b down"]);
        const before = ignored("foreign");
        await waitFor("b's heartbeats ignored again", () => ignored("foreign") > before);
      } finally {
        clearInterval(beat);
      }
      const down = logs.records.find((r) => r.msg === "peer down");
      deepStrictEqual(down?.why, "removed from the config");
    } finally {
      await health.stop();
      await new Promise<void>((r) => peer.close(() => r()));
    }
  },
});
