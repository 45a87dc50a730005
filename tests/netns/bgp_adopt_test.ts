/**
 * A restarted agent adopts the bird its killed predecessor left (node/bgp/bird.ts): one bird per
 * node afterwards, the router's session never flapped (its start time is unchanged) and the route
 * never left — for `main.ts anycast --bgp-config` (addresses on `lo`) and for stateful LB agents
 * (`main.ts agent --bgp-config`, static routes). A stale pid file starts a fresh bird.
 */
import { ok } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { sameSession } from "../../lab/_bird_session.ts";
import { run } from "../../lab/command.ts";

/**
 * BFD timers of these labs: wide (a peer is down after 10 s of silence), since failure detection
 * is not under test here and a short BFD window can expire on a loaded machine while an agent
 * starts, which would read as a flap; a restart caused by adoption (a reconfiguration) still
 * shows as a new session start time, and a killed bird ends its session at once without BFD.
 */
const BFD = { intervalMs: 1_000, multiplier: 10 };

/** Pids of bird processes in n1's namespace. */
async function birdsInN1(lab: AnycastLab): Promise<string[]> {
  const { stdout } = await run(["ip", "netns", "pids", lab.topo.ns("n1")], { check: false });
  const birds: string[] = [];
  for (const pid of stdout.split("\n").map((s) => s.trim()).filter((s) => /^\d+$/.test(s))) {
    const args = (await run(["ps", "-o", "args=", "-p", pid], { check: false })).stdout.trim();
    if (/^(\S*\/)?bird\s/.test(args)) birds.push(pid);
  }
  return birds;
}

async function restartAndCheck(lab: AnycastLab, vip: string, want: string): Promise<void> {
  const route = await lab.watchRoute(vip);
  await route.until((g) => g.join() === want);
  const before = await lab.sessionSince("n1");
  const pid = String(await lab.birdPid("n1"));
  ok((await birdsInN1(lab)).join() === pid, `not exactly bird ${pid} in n1 before`);
  const agent = await lab.restartAgent("n1");
  await agent.waitForLine((l) => l.includes('"msg":"adopted bird"') && l.includes(`"pid":${pid}`));
  const birds = await birdsInN1(lab);
  ok(birds.join() === pid, `n1 runs birds ${JSON.stringify(birds)}, wanted only ${pid}`);
  await new Promise((r) => setTimeout(r, 1_500)); // a flap would show by now (connect delay 1 s)
  const after = await lab.sessionSince("n1");
  if (!sameSession(after, before)) {
    // Name the cause (a BFD timeout under load reads differently from a reconfiguration).
    const log = await Deno.readTextFile(`${lab.dir}/router.log`).catch(() => "");
    const lines = log.split("\n").filter((l) => l.includes("hf_n1")).slice(-12).join("\n");
    throw new Error(
      `the router's session with n1 restarted on adoption (up at ${before}, then at ${after}):\n${lines}`,
    );
  }
  ok(route.gateways.join() === want, `route changed: ${route.gateways}`);
  ok(
    !route.monitor.lines.some((l) => l.startsWith(`Deleted ${vip}`)),
    "the route was withdrawn during the restart",
  );
  // The adopted bird is supervised: killed, it is started again and the node announces again.
  await lab.signalBird("n1", "KILL");
  await agent.waitForLine((l) => l.includes("bird exited unasked"), { timeoutMs: 5_000 });
  await agent.waitForLine((l) => l.includes('"msg":"bird started"'), { timeoutMs: 10_000 });
  await route.until((g) => g.join() === want, 10_000);
  ok((await birdsInN1(lab)).length === 1, "more than one bird after the restart");
}

rootTest("bgp adopt: a restarted anycast agent adopts its bird; no flap", async () => {
  await using lab = await AnycastLab.create({ nodes: 1, bfd: BFD });
  await lab.startPod("n1", "default/web-1");
  await restartAndCheck(lab, lab.vip, "10.9.1.2");
  // A stale pid file (the bird is gone, the pid reused by anything) starts a fresh bird.
  const birdDir = lab.nodes.get("n1")!.birdDir;
  await lab.signalBird("n1", "STOP"); // keep the supervisor from restarting it under us…
  const agent = lab.nodes.get("n1")!.agent;
  await agent.stop("SIGKILL");
  await lab.signalBird("n1", "KILL");
  await Deno.writeTextFile(`${birdDir}/bird.pid`, `${Deno.pid}\n`); // a live pid, not a bird
  const next = await lab.restartAgent("n1");
  await next.waitForLine((l) => l.includes("stale bird pid file"));
  await next.waitForLine((l) => l.includes('"msg":"bird started"'));
  ok((await birdsInN1(lab)).length === 1, "not one bird after a stale pid file");
});

const SERVICES = `services:
  - name: default/demo
    flowKeyMode: five-tuple
    frontends: [{ address: 10.0.100.1:80/TCP, portName: http }]
    backends: [{ address: 10.3.1.2:8080/TCP, portName: http }]
`;

rootTest("bgp adopt: a restarted LB agent adopts its bird; the LB IP stays announced", async () => {
  const servicesFile = await Deno.makeTempFile({ prefix: "hf-bgp-adopt-", suffix: ".yaml" });
  try {
    await Deno.writeTextFile(servicesFile, SERVICES);
    await using lab = await AnycastLab.create({ nodes: 1, bfd: BFD, stateful: { servicesFile } });
    await restartAndCheck(lab, "10.0.100.1", "10.9.1.2");
  } finally {
    await Deno.remove(servicesFile).catch(() => {});
  }
});
