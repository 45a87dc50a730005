/**
 * Every command README.md shows works as shown. The commands are read from README.md itself, so
 * the docs and this test cannot drift apart.
 *
 * Conventions the README keeps (README is the lead's; these are what this test relies on):
 * - Commands live in fenced blocks marked ` ```sh `; other blocks (output, YAML) are not read.
 * - A command is a line starting with `./hf ` or `deno run `; a trailing `\` continues it on the
 *   next line; ` # …` after it is a comment.
 * - A word in capitals (`NAME`, `ARGS`, `GROUP`) is a placeholder, not a literal argument.
 * - `deno run` commands run from the repository root, with a permission set from deno.json
 *   (`-P=NAME`) and `main.ts COMMAND`.
 *
 * How each is run (all with a deadline):
 * - `deno run -P=SET main.ts decap|xdp-pass|control-plane|policy …`: exactly as shown, inside a
 *   throwaway namespace with an `eth0` and an LB IP on `lo`; decap must leave its tc programs.
 * - `deno run -P=SET main.ts agent …`, and any `deno run` command with a placeholder: as shown
 *   plus `--help` (the agent runs until stopped and needs a Redis): the whole command line must
 *   parse, so every flag shown exists.
 * - `./hf deno ARGS` with `--version`; `./hf build`, any `./hf … --help` and `./hf bench NAME
 *   --quick` as shown; `./hf bench NAME` (a real name) with `--help`.
 * - Long ones (`./hf demo`, `./hf test`, `./hf ok`, `./hf chaos`, `./hf bench` with a
 *   placeholder) are not run here — CI runs `./hf test`, which covers them — but their
 *   subcommand must be one `./hf --help` lists, and `./hf test` groups must be ones
 *   `./hf test --help` lists.
 */

import { ok, strictEqual } from "node:assert/strict";
import { createTopology, type ExecResult, run, type Topology } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** One command from README.md: its words and the line it starts on. */
interface ReadmeCommand {
  readonly line: number;
  readonly words: string[];
  readonly text: string;
}

/** The commands in README.md's ```sh blocks (see the conventions above). */
export function readmeCommands(markdown: string): ReadmeCommand[] {
  const out: ReadmeCommand[] = [];
  const lines = markdown.split("\n");
  let inSh = false, fenced = false;
  let pending: { line: number; text: string } | null = null;
  for (const [i, raw] of lines.entries()) {
    const fence = /^\s*```(\S*)/.exec(raw);
    if (fence) {
      if (!fenced) inSh = fence[1] === "sh";
      fenced = !fenced;
      pending = null;
      continue;
    }
    if (!inSh || !fenced) continue;
    const content = raw.replace(/\s#\s.*$/, "").trim();
    const joined: string = pending ? `${pending.text} ${content}` : content;
    const start: number = pending?.line ?? i + 1;
    if (joined.endsWith("\\")) {
      pending = { line: start, text: joined.slice(0, -1).trim() };
      continue;
    }
    pending = null;
    if (/^(\.\/hf|deno run)(\s|$)/.test(joined)) {
      out.push({ line: start, words: joined.split(/\s+/), text: joined });
    }
  }
  return out;
}

const isPlaceholder = (w: string) => /^[A-Z][A-Z_]*$/.test(w);

/** `./hf` subcommands that take minutes; CI runs `./hf test`, which covers them. */
const LONG: Record<string, string> = {
  demo: "minutes of namespaces and traffic; the e2e group runs the same cluster",
  chaos: "minutes; the e2e group's chaos test runs the scenarios",
  test: "the whole suite; CI runs it",
  ok: "the unit group and gates; ./hf test runs them",
  bench: "minutes per benchmark; ./hf test's bench group runs each with --quick",
};

/** `main.ts` commands run exactly as shown inside the namespace; `agent` gets `--help`. */
const RUN_AS_SHOWN = new Set(["decap", "xdp-pass", "control-plane", "policy"]);

const text = (r: ExecResult) => `exit ${r.code}\n${r.stdout}\n${r.stderr}`;

async function hf(args: string[]): Promise<ExecResult> {
  return await run(["./hf", ...args], { check: false, timeoutMs: 300_000 });
}

async function checkHf(c: ReadmeCommand, hfHelp: string): Promise<string> {
  const [, sub, ...rest] = c.words;
  ok(sub !== undefined, `README line ${c.line}: "${c.text}" names no ./hf subcommand`);
  ok(
    new RegExp(`(^|[\\s|])${sub}(\\s|$)`, "m").test(hfHelp),
    `README line ${c.line}: "./hf ${sub}" is not in ./hf --help:\n${hfHelp}`,
  );
  const asShown = rest.includes("--help") || (sub === "bench" && rest.includes("--quick"));
  if (asShown && !rest.some(isPlaceholder)) {
    const r = await hf([sub, ...rest]);
    strictEqual(r.code, 0, `README line ${c.line}: ${text(r)}`);
    return "ran";
  }
  if (sub === "deno") {
    const r = await hf(["deno", ...rest.map((w) => isPlaceholder(w) ? "--version" : w)]);
    strictEqual(r.code, 0, `README line ${c.line}: ${text(r)}`);
    return "ran (placeholders → --version)";
  }
  if (sub === "build") {
    const r = await hf(["build", ...rest]);
    strictEqual(r.code, 0, `README line ${c.line}: ${text(r)}`);
    return "ran";
  }
  if (sub === "test") {
    const help = await hf(["test", "--help"]);
    strictEqual(help.code, 0, text(help));
    for (const group of rest.filter((w) => !w.startsWith("-") && !isPlaceholder(w))) {
      ok(help.stdout.includes(group), `README line ${c.line}: no test group "${group}"`);
    }
  }
  if (sub === "bench" && rest[0] !== undefined && !isPlaceholder(rest[0])) {
    const r = await hf(["bench", ...rest, "--help"]);
    strictEqual(r.code, 0, `README line ${c.line}: ${text(r)}`);
    return "ran with --help";
  }
  const reason = LONG[sub];
  ok(reason !== undefined, `README line ${c.line}: no rule for "./hf ${sub}"; add one here`);
  return `not run: ${reason}`;
}

async function checkDeno(c: ReadmeCommand, topo: Topology, sets: string[]): Promise<string> {
  const [, , ...args] = c.words; // after "deno run"
  const set = args.find((w) => w.startsWith("-P="))?.slice(3);
  ok(set !== undefined && sets.includes(set), `README line ${c.line}: no permission set "${set}"`);
  const mainAt = args.indexOf("main.ts");
  const command = args[mainAt + 1];
  ok(mainAt >= 0 && command !== undefined, `README line ${c.line}: not a main.ts command`);
  const argv = [Deno.execPath(), "run", ...args];
  if (command === "agent" || args.some(isPlaceholder)) {
    const r = await topo.exec("node", [...argv, "--help"], { check: false });
    strictEqual(r.code, 0, `README line ${c.line} with --help: ${text(r)}`);
    ok(r.stdout.includes("usage:"), `README line ${c.line}: no usage printed: ${text(r)}`);
    return "ran with --help (a daemon, or placeholders)";
  }
  ok(RUN_AS_SHOWN.has(command), `README line ${c.line}: no rule for "main.ts ${command}"`);
  const r = await topo.exec("node", argv, { check: false, timeoutMs: 120_000 });
  strictEqual(r.code, 0, `README line ${c.line}: ${text(r)}`);
  const iface = args.includes("--help") ? undefined : args[args.indexOf("--iface") + 1];
  if (command === "decap" && iface !== undefined && args.includes("--iface")) {
    const tc = await topo.exec("node", ["tc", "filter", "show", "dev", iface, "ingress"]);
    ok(tc.stdout.includes("hf_decap"), `README line ${c.line}: no hf_decap on ${iface}`);
  }
  return "ran in a namespace";
}

Deno.test("README's commands are found in its sh blocks", () => {
  const sample = [
    "```sh",
    "./hf demo     # the demo",
    "deno run -P=agent main.ts agent --node-name lb1 \\",
    "  --config s.yaml",
    "```",
    "```",
    "./hf not-a-command-block",
    "```",
  ].join("\n");
  const found = readmeCommands(sample).map((c) => `${c.line}: ${c.words.join(" ")}`);
  strictEqual(
    found.join("\n"),
    "2: ./hf demo\n3: deno run -P=agent main.ts agent --node-name lb1 --config s.yaml",
  );
});

rootTest("every command README.md shows works as shown", async () => {
  Deno.chdir(ROOT); // README's commands run from the repository root
  // HF_README: another file to check by the same rules (a draft of the README).
  const readme = Deno.env.get("HF_README") ?? `${ROOT}README.md`;
  const commands = readmeCommands(await Deno.readTextFile(readme));
  ok(commands.some((c) => c.words[0] === "./hf"), "README shows no ./hf command");
  ok(commands.some((c) => c.words[0] === "deno"), "README shows no deno run command");
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  const sets = Object.keys(config.permissions ?? {});
  const hfHelp = await hf(["--help"]);
  strictEqual(hfHelp.code, 0, text(hfHelp));

  await using topo = await createTopology({
    hosts: [{ name: "node", loopback: ["10.0.100.1/32"] }, { name: "peer" }],
    links: [{
      a: { host: "node", ifname: "eth0", address: "10.9.0.2/24" },
      b: { host: "peer", ifname: "eth0", address: "10.9.0.1/24" },
    }],
  });
  const report: string[] = [];
  for (const c of commands) {
    const how = c.words[0] === "./hf"
      ? await checkHf(c, hfHelp.stdout)
      : await checkDeno(c, topo, sets);
    report.push(`README:${c.line} ${c.text} — ${how}`);
  }
  console.log(report.join("\n"));
});
