/**
 * README's first command as a person runs it: `./hf demo` in a terminal (tmux gives it one), in
 * its short mode. The live table renders, Deno prints no warning, Holdfast loses no connection in
 * any chapter (the LB story, egress, anycast; those that end with the backend that dies are counted
 * apart), the baselines lose some or not (ECMP decides) but every change is seen to happen, and
 * the report folder holds the JSON and a self-contained HTML page (its charts drawn with the run's
 * data: alive over time, losses, stalls per connection, LB nodes, takeovers). Ctrl-C in the
 * middle of a story leaves no namespace or process behind.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { listHfNamespaces, run } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";
import { launchChromium } from "../harness/browser.ts";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/**
 * A detached tmux session running `command` in a 160×50 terminal, on a tmux server of its own
 * (`-L`): no other tmux user is touched, and a server still exiting from an earlier session cannot
 * refuse this one ("server exited unexpectedly").
 */
class Terminal implements AsyncDisposable {
  readonly name = `hf-demo-test-${Deno.pid}-${Math.random().toString(36).slice(2, 8)}`;

  static async start(command: string): Promise<Terminal> {
    const t = new Terminal();
    // `; echo EXIT=$?; sleep 600`: the pane outlives the command so its screen can be read.
    await run([
      "tmux",
      "-L",
      t.name,
      "new-session",
      "-d",
      "-s",
      t.name,
      "-x",
      "160",
      "-y",
      "50",
      `cd ${ROOT} && ${command}; echo EXIT=$?; sleep 600`,
    ]);
    return t;
  }

  /** The screen and its scrollback, as text. */
  async screen(): Promise<string> {
    const { stdout } = await run([
      "tmux",
      "-L",
      this.name,
      "capture-pane",
      "-p",
      "-J",
      "-S",
      "-2000",
      "-t",
      this.name,
    ]);
    return stdout;
  }

  /** Polls the screen (bounded) until `want` matches; returns the screen. */
  async until(want: RegExp, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let text = "";
    for (let k = 0; k < 2_000 && Date.now() < deadline; k++) {
      text = await this.screen();
      if (want.test(text)) return text;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`Timed out after ${timeoutMs} ms waiting for ${want} on screen:\n${text}`);
  }

  async keys(...keys: string[]): Promise<void> {
    await run(["tmux", "-L", this.name, "send-keys", "-t", this.name, ...keys]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await run(["tmux", "-L", this.name, "kill-server"], { check: false });
    // The socket of a server that exited may stay behind; it is this test's own.
    const dir = `${Deno.env.get("TMUX_TMPDIR") ?? "/tmp"}/tmux-${Deno.uid()}`;
    await Deno.remove(`${dir}/${this.name}`).catch(() => {});
  }
}

/** The pid of the running `main.ts demo` started from this checkout, once it runs. */
async function demoPid(): Promise<number> {
  const { stdout } = await run(["ps", "-eo", "pid,args"]);
  const line = stdout.split("\n").find((l) => /deno run .*main\.ts demo --quick/.test(l));
  if (!line) throw new Error(`no demo process in:\n${stdout}`);
  return Number(line.trim().split(/\s+/)[0]);
}

/** The lab's namespaces of process `pid` (`hf-PID-…`) and the processes in them. */
async function labOf(pid: number): Promise<{ namespaces: string[]; pids: number[] }> {
  const namespaces = (await listHfNamespaces()).filter((n) => n.startsWith(`hf-${pid}-`));
  const pids: number[] = [];
  for (const ns of namespaces) {
    const { stdout } = await run(["ip", "netns", "pids", ns], { check: false });
    pids.push(...stdout.split("\n").map(Number).filter((n) => n > 0));
  }
  return { namespaces, pids };
}

/** What the demo's dashboard showed while polled: LB nodes up, backends quarantined. */
interface DashboardSeen {
  readings: number;
  lbNodesUp: Set<string>;
  quarantined: Set<string>;
  errors: string[];
}

/**
 * Polls the dashboard's `status.json` at `url` every 500 ms until `stop` aborts (bounded: 1,000
 * polls); the clusters come and go, so failed reads are only counted.
 */
async function watchDashboard(url: string, stop: AbortSignal): Promise<DashboardSeen> {
  const seen: DashboardSeen = {
    readings: 0,
    lbNodesUp: new Set(),
    quarantined: new Set(),
    errors: [],
  };
  for (let k = 0; k < 1_000 && !stop.aborted; k++) {
    try {
      const res = await fetch(`${url}/status.json`, { signal: AbortSignal.timeout(5_000) });
      if (res.ok) {
        const s = await res.json();
        seen.readings++;
        for (const n of s.nodes) if (n.up && n.role === "lb") seen.lbNodesUp.add(n.node);
        for (const b of s.backends) {
          if (b.health === "quarantined") seen.quarantined.add(b.address);
        }
      } else await res.body?.cancel();
    } catch (err) {
      if (seen.errors.length < 5) seen.errors.push(String(err));
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return seen;
}

rootTest("./hf demo --quick on a terminal: the live table, no warnings, the report", async () => {
  const out = await Deno.makeTempDir({ prefix: "hf-demo-report-" });
  const stop = new AbortController();
  try {
    await using term = await Terminal.start(`./hf demo --quick --out ${out}`);
    const start = await term.until(/dashboard: (http:\/\/127\.0\.0\.1:\d+\/dashboard)/, 120_000);
    const url = /dashboard: (http:\/\/127\.0\.0\.1:\d+\/dashboard)/.exec(start)![1]!;
    const dashboard = watchDashboard(url, stop.signal);
    const screen = await term.until(/EXIT=\d+/, 400_000);
    stop.abort();
    const seen = await dashboard;
    console.log(
      JSON.stringify({
        msg: "dashboard seen",
        ...seen,
        lbNodesUp: [...seen.lbNodesUp],
        quarantined: [...seen.quarantined],
      }),
    );
    // The LB story's nodes and the backend that died, as the page showed them while it ran.
    ok(seen.lbNodesUp.has("lb2") && seen.lbNodesUp.has("lb4"), JSON.stringify([...seen.lbNodesUp]));
    ok(
      seen.quarantined.has("10.3.3.2:8080/TCP"),
      `be3 never quarantined on the dashboard: ${
        JSON.stringify([...seen.quarantined])
      } ${seen.errors}`,
    );
    ok(/EXIT=0/.test(screen), `the demo failed:\n${screen}`);
    ok(!screen.includes("Warning"), `a warning on screen:\n${screen}`);
    ok(/mode\s+state\s+alive\s+lost\s+ended\s+stalled\s+longest stall/.test(screen), screen);
    // alive/connections, lost, ended (with the backend that died): nothing lost, the rest alive.
    const ours = /holdfast\s+done\s+(\d+)\/20\s+0\s+(\d+)\s/.exec(screen);
    ok(ours && Number(ours[1]) + Number(ours[2]) === 20, `Holdfast lost none:\n${screen}`);
    ok(
      /egress\s+done\s+10\/10\s+0\s.*UDP kept/.test(screen),
      `egress with sync kept all:\n${screen}`,
    );
    ok(
      /anycast\s+done\s+10\/10\s+0\s/.test(screen),
      `anycast with redirection kept all:\n${screen}`,
    );
    ok(/\[holdfast\] LB node lb1 dies/.test(screen) && /why|stateless|shared/.test(screen), screen);
    ok(/\[holdfast\] backend be3 dies: its health probes fail/.test(screen), screen);
    ok(/\[anycast\] anycast node n1 drains/.test(screen), screen);
    ok(screen.includes(`Report: ${out}/report.html`), screen);
    const report = JSON.parse(await Deno.readTextFile(`${out}/report.json`));
    deepStrictEqual(report.modes.map((m: { mode: string }) => m.mode), ["holdfast", "maglev-only"]);
    for (const m of report.modes) {
      ok(m.checks.length > 0 && m.checks.every((c: { ok: boolean }) => c.ok), JSON.stringify(m));
      ok(m.samples.length > 5, `${m.mode}: the clients' progress was sampled`);
      deepStrictEqual(m.steps.length, 5);
    }
    for (const f of report.modes[0].families) deepStrictEqual(f.survived + f.ended, f.connections);
    deepStrictEqual(report.egress.map((e: { mode: string }) => e.mode), [
      "egress",
      "egress-no-sync",
    ]);
    ok(report.egress[0].survived === report.egress[0].connections && report.egress[0].udpKept);
    deepStrictEqual(report.anycast.map((a: { mode: string }) => a.mode), [
      "anycast",
      "anycast-plain",
    ]);
    deepStrictEqual(report.anycast[0].survived, report.anycast[0].connections);
    ok(report.anycast.every((a: { samples: unknown[] }) => a.samples.length > 3), "sampled");
    const html = await Deno.readTextFile(`${out}/report.html`);
    ok(!/\b(src|href)=["']?https?:/.test(html), "the page loads nothing from elsewhere");
    // The page as a person sees it: headless Chromium draws both modes' lines and the steps.
    await using chromium = await launchChromium(60_000);
    const page = await chromium.context.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(`file://${out}/report.html`);
    for (const mode of ["holdfast", "maglev-only"]) {
      const d = await page.locator(`#alive-chart path.series[data-mode="${mode}"]`).getAttribute(
        "d",
      );
      ok(d && d.split("L").length > 5, `${mode}: a line of connections alive over time: ${d}`);
    }
    deepStrictEqual(await page.locator("#alive-chart line.step").count(), 5);
    deepStrictEqual(
      await page.locator("#loss-chart rect:not(.ended)").count(),
      8,
      "2 bars × 2 families × 2 modes",
    );
    deepStrictEqual(await page.locator("#anycast-chart rect").count(), 4, "2 bars × 2 modes");
    // The stall distribution counts every surviving connection of each mode once.
    for (const m of report.modes) {
      const counts = await page.locator(`#stall-chart rect.stall[data-mode="${m.mode}"]`)
        .evaluateAll((rs) => rs.map((r) => Number(r.getAttribute("data-count"))));
      const survived = m.families.reduce((a: number, f: { survived: number }) => a + f.survived, 0);
      deepStrictEqual(counts.reduce((a, c) => a + c, 0), survived, `${m.mode}: ${counts}`);
      ok(m.lbNodes.length > 5, `${m.mode}: the LB nodes' counters were read`);
    }
    // Which LB node carried what: every node of the story has a row; lb4 carried some after joining.
    const lbNodes = await page.locator("#lb-chart ~ table tr.lbnode").evaluateAll((rs) =>
      rs.map((r) => r.getAttribute("data-node"))
    );
    deepStrictEqual(lbNodes, ["lb1", "lb2", "lb3", "lb4"]);
    const lb4 = await page.locator('#lb-chart rect.lb[data-mode="holdfast"][data-node="lb4"]')
      .evaluateAll((rs) => rs.map((r) => Number(r.getAttribute("data-packets"))));
    ok(lb4.some((p) => p > 0), `lb4 carried packets after it joined: ${lb4}`);
    // The takeover times: 2 egress runs and 2 anycast runs, the measured ones drawn as numbers.
    const takeovers = await page.locator("#takeover-chart rect.takeover").evaluateAll((rs) =>
      rs.map((r) => [r.getAttribute("data-mode"), r.getAttribute("data-ms")])
    );
    deepStrictEqual(takeovers.map(([m]) => m), [
      "egress",
      "egress-no-sync",
      "anycast",
      "anycast-plain",
    ]);
    deepStrictEqual(takeovers[0]![1], String(report.egress[0].takeoverMs ?? ""));
    deepStrictEqual(takeovers[2]![1], String(report.anycast[0].withdrawnMs));
    const lost = await page.locator('tr.mode[data-mode="holdfast"] td.lost').textContent();
    deepStrictEqual(lost, "0");
    const anycast = await page.locator('tr.anycast[data-mode="anycast"] td.survived').textContent();
    deepStrictEqual(anycast, "10/10");
    const shot = Deno.env.get("HF_REPORT_SCREENSHOT") ??
      `${Deno.env.get("TMPDIR") ?? "/tmp"}/holdfast-demo-report.png`;
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`report screenshot: ${shot}`);
  } finally {
    stop.abort();
    await Deno.remove(out, { recursive: true });
  }
});

rootTest(
  "./hf demo: Ctrl-C during a story removes every namespace and process it made",
  async () => {
    let pid = 0;
    let made: { namespaces: string[]; pids: number[] } = { namespaces: [], pids: [] };
    {
      await using term = await Terminal.start("./hf demo --quick");
      await term.until(/connections open, each exchanging/, 300_000);
      pid = await demoPid();
      made = await labOf(pid);
      ok(made.namespaces.length >= 8 && made.pids.length > 0, JSON.stringify(made));
      await term.keys("C-c");
      const screen = await term.until(/EXIT=\d+/, 120_000);
      ok(/EXIT=130/.test(screen), `exit code after Ctrl-C:\n${screen}`);
      ok(screen.includes("stopped: everything the demo made is removed"), screen);
    }
    deepStrictEqual((await labOf(pid)).namespaces, [], "namespaces left behind");
    // A killed process may linger a moment as a zombie until init reaps it: poll, bounded.
    let alive: number[] = [];
    for (let k = 0; k < 100; k++) {
      alive = [];
      for (const p of [pid, ...made.pids]) {
        if ((await run(["kill", "-0", String(p)], { check: false })).code === 0) alive.push(p);
      }
      if (alive.length === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    deepStrictEqual(alive, [], "processes left behind");
  },
);
