/**
 * README's first command as a person runs it: `./hf demo` in a terminal (tmux gives it one), in
 * its short mode. The live table renders, Deno prints no warning, Holdfast keeps every connection,
 * the baseline loses some or not (ECMP decides) but every change is seen to happen, and the report
 * folder holds the JSON and a self-contained HTML page. Ctrl-C in the middle of a story leaves no
 * namespace or process behind.
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

rootTest("./hf demo --quick on a terminal: the live table, no warnings, the report", async () => {
  const out = await Deno.makeTempDir({ prefix: "hf-demo-report-" });
  try {
    await using term = await Terminal.start(`./hf demo --quick --out ${out}`);
    const screen = await term.until(/EXIT=\d+/, 400_000);
    ok(/EXIT=0/.test(screen), `the demo failed:\n${screen}`);
    ok(!screen.includes("Warning"), `a warning on screen:\n${screen}`);
    ok(/mode\s+state\s+alive\s+lost\s+stalled\s+longest stall/.test(screen), screen);
    ok(/holdfast\s+done\s+20\/20\s+0\s/.test(screen), `Holdfast kept every connection:\n${screen}`);
    ok(
      /egress\s+done\s+10\/10\s+0\s.*UDP kept/.test(screen),
      `egress with sync kept all:\n${screen}`,
    );
    ok(/\[holdfast\] LB node lb1 dies/.test(screen) && /why|stateless|shared/.test(screen), screen);
    ok(screen.includes(`Report: ${out}/report.html`), screen);
    const report = JSON.parse(await Deno.readTextFile(`${out}/report.json`));
    deepStrictEqual(report.modes.map((m: { mode: string }) => m.mode), ["holdfast", "maglev-only"]);
    for (const m of report.modes) {
      ok(m.checks.length > 0 && m.checks.every((c: { ok: boolean }) => c.ok), JSON.stringify(m));
      ok(m.samples.length > 5, `${m.mode}: the clients' progress was sampled`);
      deepStrictEqual(m.steps.length, 4);
    }
    for (const f of report.modes[0].families) deepStrictEqual(f.survived, f.connections);
    deepStrictEqual(report.egress.map((e: { mode: string }) => e.mode), [
      "egress",
      "egress-no-sync",
    ]);
    ok(report.egress[0].survived === report.egress[0].connections && report.egress[0].udpKept);
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
    deepStrictEqual(await page.locator("#alive-chart line.step").count(), 4);
    deepStrictEqual(
      await page.locator("#loss-chart rect").count(),
      8,
      "2 bars × 2 families × 2 modes",
    );
    const survived = await page.locator('tr.mode[data-mode="holdfast"] td.survived').textContent();
    deepStrictEqual(survived, "20/20");
    const shot = Deno.env.get("HF_REPORT_SCREENSHOT") ??
      `${Deno.env.get("TMPDIR") ?? "/tmp"}/holdfast-demo-report.png`;
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`report screenshot: ${shot}`);
  } finally {
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
