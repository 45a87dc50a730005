/**
 * Upgrading anycast nodes with flow redirection under traffic (issue 26): three nodes run the
 * previous release (`scripts/previous-release.txt`, built by `lab/previous_release.ts`), each
 * agent is replaced (SIGTERM, as a DaemonSet rolls: it withdraws first) by this build, one node at
 * a time, then rolled back the same way. Nodes of both releases share flows and liveness records
 * through Redis and redirect moved flows to their owners: every held connection survives.
 */
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { ECHO_PORT, ECHO_SERVICES } from "../../lab/_anycast_scale.ts";
import { clientSummary } from "../../lab/clients/summary.ts";
import { previousRelease } from "../../lab/previous_release.ts";

const ECHO = new URL("../../lab/clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("../../lab/clients/hold_client.ts", import.meta.url).pathname;
const NODES = ["n1", "n2", "n3"];
/** How long the connections are held: past the six rolls (~15 s here, more on a busy machine). */
const HOLD_MS = 45_000;

rootTest(
  "upgrade: anycast nodes with redirection rolled from the previous release to this build and back, one at a time; held connections survive",
  async () => {
    const previous = await previousRelease();
    await using lab = await AnycastLab.create({
      nodes: 3,
      services: ECHO_SERVICES,
      redirect: true,
      release: previous,
    });
    const route = await lab.watchRoute();
    for (const [i, n] of NODES.entries()) {
      await lab.startPod(n, `default/web-${i + 1}`);
      const echo = lab.topo.spawnDeno(n, ECHO, {
        args: ["server", "0.0.0.0", String(ECHO_PORT)],
        permissions: ["--allow-net"],
      });
      await echo.waitForLine((l) => l.includes("listening"));
    }
    const all = ["10.9.1.2", "10.9.2.2", "10.9.3.2"].sort().join();
    await route.until((g) => g.join() === all, 15_000);
    const hold = lab.topo.spawnDeno("client", HOLD, {
      args: [lab.vip, String(ECHO_PORT), "60", String(HOLD_MS), "50"],
      permissions: ["--allow-net"],
    });
    await hold.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 300)); // every flow confirmed and shared
    const heldUntil = Date.now() + HOLD_MS - 300;
    const steps: string[] = [];
    for (const release of [null, previous] as const) {
      for (const n of NODES) {
        await lab.restartAgent(n, { signal: "SIGTERM", release });
        await route.until((g) => g.join() === all, 15_000);
        steps.push(`${n} on ${release ? release.version : "this build"}`);
      }
    }
    const rolledBeforeEnd = Date.now() < heldUntil;
    const held = await clientSummary(hold, HOLD_MS + 30_000);
    console.log(JSON.stringify({ previous: previous.commit, steps, rolledBeforeEnd, held }));
    if (held.survived !== held.connections) {
      throw new Error(
        `${held.connections - held.survived} of ${held.connections} connections lost while ` +
          `anycast nodes were rolled: ${JSON.stringify(held.deaths.slice(0, 5))}`,
      );
    }
    if (!rolledBeforeEnd) throw new Error(`the rolls outlasted the held connections: ${steps}`);
  },
);
