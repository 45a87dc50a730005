/**
 * Script tests for the control plane: txtar archives whose comment is a list of commands run
 * against a fresh control plane over in-memory maps, with inputs and expectations inline.
 *
 * Line prefixes: `*` retries the command until it passes (5 s), `!` expects it to fail.
 * Commands:
 *
 * | command | does |
 * |---|---|
 * | `k8s/add FILE...`, `k8s/update FILE...`, `k8s/delete FILE...` | Service/EndpointSlice YAML (multi-doc) through the k8s source |
 * | `k8s/forget FILE...` | remove from the fake API server without an event (deleted while down) |
 * | `k8s/synced` | the k8s source finished its initial sync (pruning may start) |
 * | `file/load FILE` | load a file-source config |
 * | `source/backends SOURCE SERVICE FILE` | set SOURCE's backends of SERVICE (YAML list) |
 * | `source/service SOURCE FILE` | upsert a service (YAML ServiceInput) as SOURCE |
 * | `source/delete SOURCE` | remove every row of SOURCE |
 * | `redirect/set SERVICE TARGET`, `redirect/remove SERVICE` | local-redirect override |
 * | `db/insert TABLE FILE`, `db/delete TABLE FILE` | raw rows (YAML list), bypassing the Writer |
 * | `db/show TABLE` | print a table to stdout |
 * | `db/cmp TABLE FILE` | compare a printed table with FILE (cells, ignoring alignment) |
 * | `maps/dump` | print the maps to stdout |
 * | `maps/summary` | services with backend addresses and slot counts (ID-independent) |
 * | `maps/faults RATE` | fail RATE (0..1) of map operations |
 * | `maps/delete service ADDR`, `maps/delete maglev ID`, `maps/delete backend ID` | delete an entry behind the reconciler's back |
 * | `maps/set backend ID IP:PORT` | change a backend entry behind the reconciler's back |
 * | `maps/check` | no ordering-invariant breach so far |
 * | `reconciled` | wait until the reconciler is idle |
 * | `reconcile/full` | trigger a full reconciliation (prune, verify, repair) |
 * | `clock/advance SECONDS` | advance the test clock that stamps statuses (the `Since` column) |
 * | `restart` | new control plane over the same maps; sources resync from their inputs |
 * | `metrics` | print reconciler metrics to stdout |
 * | `cmp stdout FILE` | last stdout equals FILE |
 * | `stdout REGEX` | last stdout matches REGEX |
 * | `log REGEX` | some log line (JSON) since the script started matches REGEX |
 *
 * Statuses are stamped by a test clock that stands still unless `clock/advance` moves it, so
 * printed ages are stable.
 *
 * @module
 */

import { captureLogs } from "../../../lib/log.ts";
import { runCommand } from "./_commands.ts";
import { ScriptEnv, type ScriptOptions } from "./_env.ts";
import { parseTxtar } from "./txtar.ts";

export type { ScriptOptions };

/** A script line failed: the message names the line, why, and the last stdout. */
class ScriptError extends Error {
  override name = "ScriptError";
}

/** Runs one txtar script; throws a ScriptError naming the failing line. */
export async function runScript(text: string, options: ScriptOptions = {}): Promise<void> {
  const ar = parseTxtar(text);
  using logs = captureLogs();
  const env = new ScriptEnv(ar.files, options, logs.records);
  await env.start();
  try {
    const lines = ar.comment.split("\n");
    for (let n = 0; n < lines.length; n++) {
      const raw = lines[n]!.trim();
      if (raw === "" || raw.startsWith("#")) continue;
      let line = raw, retry = false, negate = false;
      if (line.startsWith("* ")) (retry = true), (line = line.slice(2).trim());
      if (line.startsWith("! ")) (negate = true), (line = line.slice(2).trim());
      const words = line.split(/\s+/);
      const deadline = Date.now() + (retry && options.update ? 1000 : 5000);
      for (;;) {
        let err: unknown = null;
        env.lastChance = !retry || Date.now() + 20 >= deadline;
        try {
          await runCommand(env, words);
        } catch (e) {
          err = e;
        }
        const ok = negate ? err !== null : err === null;
        if (ok) break;
        if (retry && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        const why = negate
          ? "expected failure, but it succeeded"
          : (err instanceof Error ? err.message : String(err));
        throw new ScriptError(`line ${n + 1}: ${raw}\n${why}\n--- last stdout ---\n${env.stdout}`);
      }
    }
  } finally {
    await env.stop();
  }
}
