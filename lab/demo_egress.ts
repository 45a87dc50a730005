/**
 * The demo's egress chapter: pods reach an external server through NAT pods that hold a floating
 * SNAT address (the egress lab, `egress.ts`). The NAT pod owning the address dies (links down +
 * SIGKILL) while long-lived TCP connections and a UDP stream run through it; its standby takes the
 * address over. With conntrack sync (Holdfast) the standby already holds every translation, so the
 * connections and the stream go on with the same source address and port; without sync (what a
 * floating address alone, keepalived-style, gives) the standby translates them anew and the server
 * resets them. Runs `egress_scenario.ts`'s failover once per mode.
 *
 * @module
 */
import { type DemoView, type ModeRow, waitingRows } from "./demo_view.ts";
import type { EgressReport } from "./demo_report.ts";
import { floatingAddress } from "./egress.ts";
import { runFailover } from "./egress_scenario.ts";

/** The table rows of the chapter, waiting until it runs. */
export function egressRows(): ModeRow[] {
  return waitingRows(["egress", "egress-no-sync"]);
}

/**
 * Runs the failover with sync, then without; updates `rows` (the two egress rows among the view's
 * rows) and returns what each saw. Stops before a mode when `signal` aborted.
 */
export async function egressChapter(
  view: DemoView,
  rows: ModeRow[],
  options: { connections: number; verbose: boolean; signal: AbortSignal },
): Promise<EgressReport[]> {
  const out: EgressReport[] = [];
  for (const sync of [true, false]) {
    if (options.signal.aborted) break;
    const mode = sync ? "egress" : "egress-no-sync";
    const row = rows.find((r) => r.mode === mode)!;
    row.state = "running";
    view.rows(rows);
    view.step(
      mode,
      `the NAT pod owning ${floatingAddress(0)} dies (links down, agent killed) under ` +
        `${options.connections} TCP connections and a UDP stream`,
      sync
        ? "Its standby already holds every translation (conntrack synced): the server sees the " +
          "same source address and port, nothing resets."
        : "A floating address alone (keepalived-style): the standby translates anew, the server " +
          "sees other ports and resets the connections.",
    );
    const r = await runFailover({
      how: "kill",
      sync,
      connections: options.connections,
      verbose: options.verbose,
    });
    const t = r.takeovers[0];
    const takeoverMs = t?.assumedAt != null ? t.assumedAt - t.diedAt : null;
    const udpKept = r.udpSources.length === 1 && r.udp.lastEchoAgeMs <= 1_000;
    Object.assign(row, {
      state: "done",
      connections: r.connections,
      alive: r.survived,
      maxStallMs: r.maxStallMs,
      families: `takeover ${takeoverMs ?? "?"} ms, UDP ${udpKept ? "kept" : "broken"}`,
    });
    view.rows(rows);
    view.say(
      `[${mode}] ${r.survived} of ${r.connections} TCP connections survived; the UDP stream ` +
        `${udpKept ? "kept its source" : "broke"}; takeover ${takeoverMs ?? "?"} ms`,
      { mode, survived: r.survived, connections: r.connections, takeover_ms: takeoverMs, udpKept },
    );
    view.flush();
    out.push({
      mode,
      connections: r.connections,
      survived: r.survived,
      maxStallMs: r.maxStallMs,
      takeoverMs,
      udpKept,
      udpSources: r.udpSources.length,
    });
  }
  return out;
}
