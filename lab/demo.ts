/**
 * `./hf demo`: Holdfast's capabilities in network namespaces, each against what a design without
 * it does, with real traffic. Three chapters:
 *
 * 1. The load-balancer story (`demo_lb.ts`): a virtual cluster — a client, a router running bird2
 *    (ECMP over what the LB nodes announce through BGP), three LB nodes running Holdfast's XDP
 *    load balancer and agent, three backends with health probing, Redis — dual stack, long-lived
 *    TCP connections to the IPv4 and the IPv6 LB IP. Backends scale 3 → 5, LB node 1 dies, LB
 *    node 4 joins, the policy module is swapped, backend 3 dies (health probes quarantine it).
 *    With flow sharing, then without (Maglev only, what a stateless ECMP load balancer does).
 * 2. Egress (`demo_egress.ts`): a NAT pod dies, with conntrack sync and without.
 * 3. Anycast (`demo_anycast.ts`): an anycast node drains, with flow redirection and without.
 *
 * Each change is checked to have happened (route, processes, maps: `chaos_steps.ts`). A person
 * sees a line per step with why it would break elsewhere and a live table of every mode
 * (`demo_view.ts`); at the end a summary and a report folder with `report.html` and `report.json`
 * (`demo_report.ts`). `--json` prints JSON lines instead. Ctrl-C stops the story and removes every
 * namespace and process it made.
 *
 * While the LB stories run, the controller's dashboard of their cluster is served on
 * `127.0.0.1` (`demo_dashboard.ts`); its URL is printed first.
 *
 * Flags: `--verbose` shows every agent's log lines; `--connections N`; `--quick`; `--json`;
 * `--out DIR`; `--dashboard-port PORT`.
 *
 * @module
 */
import { intOption, readCommandLine } from "../lib/args.ts";
import { rootMissingReason } from "./command.ts";
import { DemoView, type ModeRow, tableLines, waitingRows } from "./demo_view.ts";
import { type EgressReport, type ModeReport, writeReport } from "./demo_report.ts";
import { egressChapter, egressRows } from "./demo_egress.ts";
import { anycastChapter, anycastRows } from "./demo_anycast.ts";
import { Interrupted, lbStory } from "./demo_lb.ts";
import { DemoDashboard } from "./demo_dashboard.ts";

const USAGE = `usage: ./hf demo [--quick] [--json] [--out DIR] [--verbose] [--connections N]
                 [--dashboard-port PORT]
  (main.ts demo; as root) The dual-stack virtual cluster in network namespaces: N connections (40;
  10 with --quick) per address family through LB node and backend changes (a backend dies: health
  probes), with flow sharing and without; then an egress NAT pod dies under TCP connections and a
  UDP stream, with conntrack sync and without; then an anycast node drains under N connections,
  with flow redirection and without. A live table on a terminal, plain text otherwise; --json:
  JSON lines. The report (report.html, report.json) goes to DIR (default /tmp/holdfast-demo/TIME). --verbose: every
  agent's log lines. The dashboard of the LB stories' clusters is served on
  http://127.0.0.1:PORT/dashboard (9480; any free port when taken or 0). Ctrl-C stops and removes
  everything the demo made.`;

/** The `demo` command for lib/args.ts: its name, usage and options. */
export const DEMO_COMMAND = {
  command: "demo",
  usage: USAGE,
  options: {
    verbose: { type: "boolean" },
    quick: { type: "boolean" },
    json: { type: "boolean" },
    out: { type: "string" },
    connections: { type: "string" },
    "dashboard-port": { type: "string" },
  },
} as const;

/**
 * Runs the demo; returns an exit code: 0 when Holdfast lost no connection in any chapter (those
 * that ended with a dead backend apart) and every change was seen to happen in both LB stories,
 * 130 after Ctrl-C.
 */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, DEMO_COMMAND, ({ values }) => ({
    verbose: values.verbose === true,
    quick: values.quick === true,
    json: values.json === true,
    out: typeof values.out === "string" ? values.out : undefined,
    connections: intOption(values, "connections", {
      default: values.quick === true ? 10 : 40,
      min: 1,
      max: 1000,
    }),
    dashboardPort: intOption(values, "dashboard-port", { default: 9480, min: 0, max: 65535 }),
  }));
  if ("exit" in read) return read.exit;
  const { verbose, connections, quick, json } = read.options;
  const missing = rootMissingReason();
  if (missing !== null) {
    console.error(`Cannot run the demo: it ${missing} (network namespaces and BPF)`);
    return 1;
  }
  const started = new Date();
  const out = read.options.out ??
    `/tmp/holdfast-demo/${started.toISOString().replace(/[:.]/g, "-")}`;
  const view = new DemoView(DemoView.styleFor(json));
  const abort = new AbortController();
  const onInterrupt = () => {
    if (!abort.signal.aborted) {
      view.say("interrupted: removing the virtual cluster (its namespaces and processes)");
    }
    abort.abort();
  };
  Deno.addSignalListener("SIGINT", onInterrupt);
  Deno.addSignalListener("SIGTERM", onInterrupt);
  const rows: ModeRow[] = [
    ...waitingRows(["holdfast", "maglev-only"]),
    ...egressRows(),
    ...anycastRows(),
  ];
  const dashboard = DemoDashboard.pick(read.options.dashboardPort);
  view.say(`dashboard: ${dashboard.url} (live while the LB stories run)`, {
    dashboard: dashboard.url,
  });
  const ctx = { view, rows, connections, verbose, quick, signal: abort.signal, dashboard };
  try {
    const ours = await lbStory(true, ctx);
    const base = await lbStory(false, ctx);
    const egress: EgressReport[] = await egressChapter(view, rows, {
      connections,
      verbose,
      signal: abort.signal,
    });
    if (abort.signal.aborted) throw new Interrupted("interrupted");
    const anycast = await anycastChapter(view, rows, { connections, quick, signal: abort.signal });
    const path = await writeReport(out, {
      started: started.toISOString(),
      finished: new Date().toISOString(),
      modes: [ours, base],
      egress,
      anycast,
    });
    view.close();
    const sum = (m: ModeReport, f: (x: ModeReport["families"][number]) => number) =>
      m.families.reduce((a, x) => a + f(x), 0);
    const total = (m: ModeReport) => sum(m, (f) => f.connections);
    const ended = (m: ModeReport) => sum(m, (f) => f.ended);
    const lost = (m: ModeReport) => total(m) - sum(m, (f) => f.survived) - ended(m);
    const stall = Math.max(...ours.families.map((f) => f.maxStallMs));
    const [nat, noSync] = egress;
    const [redirect, plain] = anycast;
    if (view.style === "json") {
      view.say("result", {
        holdfast: `${lost(ours)}/${total(ours)} lost, ${ended(ours)} ended with their backend ` +
          `(${rows[0]!.families}), longest stall ${stall} ms`,
        maglev_only: `${lost(base)}/${total(base)} lost, ${ended(base)} ended with their backend ` +
          `(${rows[1]!.families})`,
        egress: `${nat?.survived}/${nat?.connections} survived with sync, ` +
          `${noSync?.survived}/${noSync?.connections} without`,
        anycast: `${redirect?.survived}/${redirect?.connections} survived with redirection, ` +
          `${plain?.survived}/${plain?.connections} without`,
        report: path,
      });
    } else {
      console.log(
        `\nHoldfast lost ${lost(ours)} of ${total(ours)} connections (${ended(ours)} ended with ` +
          `the backend that died); Maglev only lost ${lost(base)} of ${total(base)}. Through a ` +
          `NAT pod's death: ${nat?.survived} of ${nat?.connections} kept with conntrack sync, ` +
          `${noSync?.survived} of ${noSync?.connections} without. Through an anycast node's ` +
          `drain: ${redirect?.survived} of ${redirect?.connections} with flow redirection, ` +
          `${plain?.survived} of ${plain?.connections} without.\n` +
          `${tableLines(rows).join("\n")}\n\nReport: ${path}  (and report.json beside it)`,
      );
    }
    const checked = [ours, base].every((m) => m.checks.every((c) => c.ok));
    const natKept = nat !== undefined && nat.survived === nat.connections && nat.udpKept;
    const anycastKept = redirect !== undefined && redirect.survived === redirect.connections;
    return lost(ours) === 0 && checked && natKept && anycastKept ? 0 : 1;
  } catch (e) {
    if (e instanceof Interrupted || abort.signal.aborted) {
      view.close();
      view.say("stopped: everything the demo made is removed");
      return 130;
    }
    throw e;
  } finally {
    Deno.removeSignalListener("SIGINT", onInterrupt);
    Deno.removeSignalListener("SIGTERM", onInterrupt);
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
