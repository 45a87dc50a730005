/**
 * The option tables of Holdfast's commands, and what deno.json, `./hf` and scripts/test.sh say
 * about tasks, subcommands and groups: shared by tests/hygiene/docs_flags_test.ts and
 * tests/hygiene/command_lines_test.ts.
 *
 * @module
 */

import type { CommandSpec, OptionSpec } from "../../lib/args.ts";
import { AGENT_COMMAND } from "../../node/lb/args.ts";
import { ANYCAST_COMMAND } from "../../node/anycast/main.ts";
import { EGRESS_COMMAND } from "../../node/egress/egress_args.ts";
import { NODE_COMMAND } from "../../node/backends/args.ts";
import { CONTROLLER_COMMAND } from "../../controller/k8s/main.ts";
import { STATUS_COMMAND } from "../../controller/status/main.ts";
import { CONTROL_PLANE_COMMAND } from "../../node/lb/dry_run.ts";
import { DECAP_COMMAND } from "../../node/bpf/decap_main.ts";
import { XDP_PASS_COMMAND } from "../../node/bpf/xdp_pass_main.ts";
import { POLICY_COMMAND } from "../../policy-as/host/cli.ts";
import { DEMO_COMMAND } from "../../lab/demo.ts";
import { DEPLOY_COMMAND } from "../../scripts/deploy.ts";
import { POLICY_SWAP_COMMAND } from "../../scripts/policy_swap.ts";

/** The repository root. */
export const ROOT = new URL("../../", import.meta.url);
/** A file of the repository, by its path from the root. */
export const read = (path: string) => Deno.readTextFileSync(new URL(path, ROOT));

/** One command's name, usage and options, as lib/args.ts takes them. */
export type Spec = CommandSpec<OptionSpec>;

/** Each command's option table, by the name the docs use. */
export const SPECS: Record<string, Spec> = {
  "main.ts": {
    command: "main.ts",
    usage:
      "usage: main.ts COMMAND [ARGS]   (main.ts COMMAND --help: its options; main.ts --version)",
    options: { version: { type: "boolean" } },
  },
  "main.ts agent": AGENT_COMMAND,
  "main.ts anycast": ANYCAST_COMMAND,
  "main.ts egress": EGRESS_COMMAND,
  "main.ts controller": CONTROLLER_COMMAND,
  "main.ts status": STATUS_COMMAND,
  "main.ts control-plane": CONTROL_PLANE_COMMAND,
  "main.ts node": NODE_COMMAND,
  "main.ts decap": DECAP_COMMAND,
  "main.ts xdp-pass": XDP_PASS_COMMAND,
  "main.ts policy": POLICY_COMMAND,
  "main.ts demo": DEMO_COMMAND,
  "task deploy": DEPLOY_COMMAND,
  "task policy:swap": POLICY_SWAP_COMMAND,
};

/** deno.json: its tasks and permission sets. */
export const denoJson = JSON.parse(read("deno.json")) as {
  tasks: Record<string, string>;
  permissions: Record<string, unknown>;
};

/** `./hf`'s subcommands: the arms of its `case "$cmd"`. */
export function hfCommands(): Set<string> {
  const text = read("hf");
  const body = text.slice(text.indexOf('case "$cmd" in'), text.indexOf("esac"));
  return new Set(
    [...body.matchAll(/^ {2}([a-z| -]+)\)/gm)].flatMap((m) =>
      m[1]!.split("|").map((s) => s.trim())
    ),
  );
}

/** scripts/test.sh's groups and options. */
export function testSh(): { groups: Set<string>; options: Set<string> } {
  const text = read("scripts/test.sh");
  const groups = /^\s+(unit \|[a-z0-9 |]+)\) selected/m.exec(text)?.[1] ?? "";
  return {
    groups: new Set(groups.split("|").map((s) => s.trim())),
    options: new Set(["ok", "help"]),
  };
}

/** What a deno task runs last (the command its extra arguments go to). */
export function taskTarget(
  task: string,
): { perms: string[]; script: string } | { bash: string } | null {
  const text = denoJson.tasks[task];
  if (text === undefined) return null;
  const last = text.split("&&").at(-1)!.trim().split(/\s+/);
  if (last[0] === "bash") return { bash: last[1]! };
  if (last[0] !== "deno" || last[1] !== "run") return null;
  const rest = last.slice(2);
  const at = rest.findIndex((t) => !t.startsWith("-"));
  const script = rest[at]!;
  if (script === "main.ts") return { perms: [], script: `main.ts ${rest[at + 1]}` };
  return { perms: rest.slice(0, at), script };
}

/** Whether usage text names `--flag` (`prefix` "--"; not as the start of a longer word). */
export const mentions = (usage: string, flag: string, prefix = "--") =>
  new RegExp(`(?<![\\w-])${prefix}${flag}(?![\\w-])`).test(usage);

/** Runs `deno run PERMS --no-prompt SCRIPT ARGS` from the root (at most 120 s). */
export async function runScript(
  perms: readonly string[],
  script: string,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...perms, "--no-prompt", script, ...args],
    cwd: ROOT,
    stdin: "null",
    env: { NO_COLOR: "1" },
    signal: AbortSignal.timeout(120_000),
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}
