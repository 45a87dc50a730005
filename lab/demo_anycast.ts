/**
 * The demo's anycast chapter: three anycast nodes (the anycast lab, `anycast.ts`) each announce
 * the service's address to the router while a pod on them is ready, and echo on port 9000; long-
 * lived TCP connections from the client spread over the three by the router's ECMP. Node n1's pod
 * starts terminating, so n1 withdraws the address (a drain); its echo server keeps serving, as a
 * pod does through its grace period. With flow redirection (Holdfast, `main.ts anycast
 * --redirect`) n2 and n3 send the packets of the connections n1 owns back to n1 and every
 * connection goes on; plain anycast (what BGP alone gives) hands them to nodes with no socket for
 * them — and ECMP's rehash of the smaller set moves some between n2 and n3 too — which reset them.
 *
 * @module
 */
import { AnycastLab } from "./anycast.ts";
import { ECHO_PORT, ECHO_SERVICES } from "./_anycast_scale.ts";
import { REDIRECT_REDIS } from "./_anycast_redirect.ts";
import { clientSummary } from "./clients/summary.ts";
import { type DemoView, type ModeRow, waitingRows } from "./demo_view.ts";
import type { AnycastReport } from "./demo_report.ts";
import { abortable, Interrupted, latestProgress, sleep } from "./demo_lb.ts";

const ECHO = new URL("./clients/tcp_echo.ts", import.meta.url).pathname;
const HOLD = new URL("./clients/hold_client.ts", import.meta.url).pathname;
const NODES = ["n1", "n2", "n3"];
const gateway = (n: string) => `10.9.${n.slice(1)}.2`;

/** The table rows of the chapter, waiting until it runs. */
export function anycastRows(): ModeRow[] {
  return waitingRows(["anycast", "anycast-plain"]);
}

/**
 * Waits (bounded: 10 s) until the shared store holds a flow for each of `connections` — with
 * redirection a node can only send on the flows it finds there. Returns how many it holds.
 */
async function untilFlowsShared(lab: AnycastLab, connections: number): Promise<number> {
  let held = 0;
  const deadline = Date.now() + 10_000;
  for (let k = 0; k < 100 && Date.now() < deadline; k++) {
    const { stdout } = await lab.topo.exec("router", [
      "redis-cli",
      "-h",
      REDIRECT_REDIS.bind,
      "-p",
      String(REDIRECT_REDIS.port),
      "hlen",
      `hf:{${lab.vip}}:flows`,
    ], { check: false });
    held = Number(stdout.trim()) || 0;
    if (held >= connections) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return held;
}

/** Established connections to the echo port on each node (who owns what), by `ss`. */
async function ownedBy(lab: AnycastLab): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const n of NODES) {
    const { stdout } = await lab.topo.exec(n, [
      "ss",
      "-Htn",
      "state",
      "established",
      `( sport = :${ECHO_PORT} )`,
    ]);
    out[n] = stdout.split("\n").filter((l) => l.trim() !== "").length;
  }
  return out;
}

/**
 * Runs the drain with flow redirection, then without; updates `rows` (the chapter's two rows
 * among the view's) and returns what each saw. Stops when `signal` aborts.
 */
export async function anycastChapter(
  view: DemoView,
  rows: ModeRow[],
  options: { connections: number; quick: boolean; signal: AbortSignal },
): Promise<AnycastReport[]> {
  const out: AnycastReport[] = [];
  for (const redirect of [true, false]) {
    if (options.signal.aborted) throw new Interrupted("interrupted");
    out.push(await drain(view, rows, redirect, options));
  }
  return out;
}

async function drain(
  view: DemoView,
  rows: ModeRow[],
  redirect: boolean,
  options: { connections: number; quick: boolean; signal: AbortSignal },
): Promise<AnycastReport> {
  const { signal } = options;
  const mode = redirect ? "anycast" : "anycast-plain";
  const row = rows.find((r) => r.mode === mode)!;
  view.say(
    `[${mode}] building the anycast lab: a router, nodes n1, n2, n3 ` +
      (redirect ? "with flow redirection (flows shared through Redis)" : "without redirection"),
    { mode },
  );
  await using lab = await AnycastLab.create({
    nodes: 3,
    services: ECHO_SERVICES,
    redirect,
    // A drain is a withdrawal, not a failure: BFD only has to keep quiet on a loaded machine.
    bfd: { intervalMs: 300, multiplier: 5 },
  });
  if (signal.aborted) throw new Interrupted("interrupted");
  const route = await lab.watchRoute();
  for (const n of NODES) {
    const echo = lab.topo.spawnDeno(n, ECHO, {
      args: ["server", "0.0.0.0", String(ECHO_PORT)],
      permissions: ["--allow-net"],
      stderr: "null",
    });
    await echo.waitForLine((l) => l.includes("listening"));
    await lab.startPod(n, `default/web-${n.slice(1)}`, { port: 0 });
  }
  const all = NODES.map(gateway).sort().join();
  await abortable(route.until((g) => g.join() === all, 15_000), signal);
  const durationMs = options.quick ? 6_000 : 8_000;
  const hold = lab.topo.spawnDeno("client", HOLD, {
    args: [
      lab.vip,
      String(ECHO_PORT),
      String(options.connections),
      String(durationMs),
      "100",
      "250",
    ],
    permissions: ["--allow-net"],
    stderr: "null",
  });
  await abortable(
    hold.waitForLine((l) => l.includes('"msg":"connected"'), { timeoutMs: 30_000 }),
    signal,
  );
  row.state = "running";
  const t0 = Date.now();
  const samples: AnycastReport["samples"] = [];
  const sample = () => {
    const p = latestProgress(hold);
    if (!p) return;
    samples.push({ t: Date.now() - t0, ...p });
    Object.assign(row, p);
    view.rows(rows);
  };
  const sampler = setInterval(sample, 500);
  try {
    // Every connection's flow is confirmed (the client's ACK) and shared before n1 withdraws.
    await sleep(500, signal);
    const shared = redirect
      ? await abortable(untilFlowsShared(lab, options.connections), signal)
      : 0;
    const owned = await ownedBy(lab);
    view.step(
      mode,
      `anycast node n1 drains (its pod terminating: the address withdrawn) under ` +
        `${options.connections} connections (n1 ${owned.n1}, n2 ${owned.n2}, n3 ${owned.n3})`,
      redirect
        ? "The router sends n1's connections to n2 and n3; they look each flow up in the shared " +
          "store and send its packets on to n1, whose pod still serves them: nothing resets."
        : "Plain anycast (BGP alone): the router sends n1's connections to n2 and n3, which " +
          "hold no socket for them, and the smaller ECMP set moves others too: they reset.",
    );
    const drainAt = Date.now() - t0;
    const drainedAt = performance.now();
    await lab.updatePod("default/web-1", { terminating: true });
    const rest = ["n2", "n3"].map(gateway).sort().join();
    const routed = await abortable(route.until((g) => g.join() === rest, 15_000), signal);
    const withdrawnMs = Math.round(routed - drainedAt);
    const s = await abortable(clientSummary(hold, durationMs + 30_000), signal);
    Object.assign(row, {
      state: "done",
      connections: s.connections,
      alive: s.survived,
      stalled: 0,
      maxStallMs: s.max_stall_ms,
      families: `n1 withdrawn in ${withdrawnMs} ms`,
    });
    view.rows(rows);
    view.say(
      `[${mode}] ${s.survived} of ${s.connections} connections survived n1's drain; the router ` +
        `dropped n1 ${withdrawnMs} ms after its pod began terminating`,
      {
        mode,
        survived: s.survived,
        connections: s.connections,
        withdrawn_ms: withdrawnMs,
        flows_shared: shared,
      },
    );
    view.flush();
    return {
      mode,
      connections: s.connections,
      survived: s.survived,
      maxStallMs: s.max_stall_ms,
      owned,
      withdrawnMs,
      drainAt,
      samples,
    };
  } finally {
    clearInterval(sampler);
  }
}
