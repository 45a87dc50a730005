/**
 * "When the docs say a flag exists, it must": every flag README.md, docs/*.md and k8s/README.md
 * give a command (read by tests/hygiene/_docs_flags.ts) is one its parser accepts; every command,
 * deno task, `./hf` subcommand, test group, chaos scenario and permission set they name exists;
 * and every `--flag` anywhere in them is some command's. A failure names the doc file and line.
 * (The k8s/ manifests' command lines: tests/hygiene/command_lines_test.ts.)
 *
 * main.ts commands (and `deno task deploy`, `policy:swap`, `demo`) are checked against their
 * exported option tables; the other deno tasks' scripts (benchmarks, `image`, `kube:server`,
 * `chaos`) are run with `--help` (they must parse their command line before doing anything).
 */

import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { COMMANDS } from "../../main.ts";
import { type DocMentions, extractDocs, type FlagMention } from "./_docs_flags.ts";
import {
  denoJson,
  hfCommands,
  mentions,
  read,
  ROOT,
  runScript,
  type Spec,
  SPECS,
  taskTarget,
  testSh,
} from "./_command_specs.ts";

const DOCS = [
  "README.md",
  "k8s/README.md",
  ...[...Deno.readDirSync(new URL("docs/", ROOT))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`)
    .sort(),
];

function allMentions(): DocMentions {
  const all: DocMentions = { flags: [], names: [] };
  for (const file of DOCS) {
    const m = extractDocs(file, read(file));
    all.flags.push(...m.flags);
    all.names.push(...m.names);
  }
  return all;
}

/** The option table a mention's command is checked against, or a script to run. */
function resolve(command: string): { spec: Spec; where: string } | { task: string } | {
  options: Set<string>;
  where: string;
} {
  if (SPECS[command]) return { spec: SPECS[command]!, where: command };
  const hfTask: Record<string, string> = { "hf demo": "demo", "hf chaos": "chaos", "hf ok": "ok" };
  const task = command.startsWith("task ") ? command.slice(5) : hfTask[command];
  if (command === "hf test" || task === "ok" || task === "test") {
    return { options: testSh().options, where: "scripts/test.sh" };
  }
  if (task !== undefined) {
    const target = taskTarget(task);
    if (target && "script" in target && SPECS[target.script]) {
      return { spec: SPECS[target.script]!, where: target.script };
    }
    return { task };
  }
  return { options: new Set(), where: command };
}

const at = (m: { file: string; line: number }) => `${m.file}:${m.line}`;

Deno.test("docs flags: the extractor finds command lines (fixture and the real docs)", () => {
  const fixture = [
    "# Running `main.ts status`",
    "",
    "| flag     | meaning |",
    "| -------- | ------- |",
    "| `--json` | one JSON object |",
    "",
    "Run `main.ts agent --node-name lb1 --config F` (or `--model redis`) and `./hf test unit`.",
    "The file `controller/k8s/main.ts` adds `--redis`; `kubectl --context x`.",
    "",
    "```sh",
    "deno run -P=agent main.ts agent --vip 10.0.0.1 \\",
    "  --no-flow-sync   # --not-a-flag",
    "./hf bench flows --quick && main.ts decap --iface eth0 --mss=1400",
    "deno task deploy --image REF",
    "```",
    "",
    "```yaml",
    "args: [main.ts, agent, --in-yaml]",
    "```",
  ].join("\n");
  const m = extractDocs("fixture.md", fixture);
  const got = m.flags.map((f) => `${f.line} ${f.command} --${f.flag}`);
  assertEquals(got, [
    "5 main.ts status --json",
    "7 main.ts agent --node-name",
    "7 main.ts agent --config",
    "7 main.ts agent --model",
    "11 main.ts agent --vip",
    "12 main.ts agent --no-flow-sync",
    "13 task bench:flows --quick",
    "13 main.ts decap --iface",
    "13 main.ts decap --mss",
    "14 task deploy --image",
  ]);
  const names = m.names.map((n) => `${n.kind} ${n.name}`);
  assertEquals(names, [
    "main.ts status",
    "main.ts agent",
    "hf test",
    "hf test unit",
    "permission set agent",
    "main.ts agent",
    "hf bench",
    "task bench:flows",
    "main.ts decap",
    "task deploy",
  ]);
  // The real docs: many flags of many commands (a broken extractor finds few or none).
  const all = allMentions();
  const commands = new Set(all.flags.map((f) => f.command));
  assert(all.flags.length >= 120, `only ${all.flags.length} flags found in the docs`);
  assert(commands.size >= 15, `flags of only ${commands.size} commands: ${[...commands]}`);
  assert(all.names.length >= 200, `only ${all.names.length} names found in the docs`);
});

Deno.test("docs flags: every command, task, ./hf subcommand, test group, chaos scenario and permission set named exists", async () => {
  const hf = hfCommands(), groups = testSh().groups;
  const names = allMentions().names;
  // Chaos scenarios: the names `./hf chaos --help` lists.
  const chaos = names.some((n) => n.kind === "chaos scenario")
    ? await runScript(["-P=netns"], "lab/chaos.ts", ["--help"])
    : null;
  const wrong: string[] = [];
  for (const n of names) {
    const ok = n.kind === "main.ts"
      ? Object.hasOwn(COMMANDS, n.name)
      : n.kind === "main.ts policy"
      ? ["check", "swap"].includes(n.name) && mentions(SPECS["main.ts policy"]!.usage!, n.name, "")
      : n.kind === "task"
      ? Object.hasOwn(denoJson.tasks, n.name)
      : n.kind === "hf"
      ? hf.has(n.name)
      : n.kind === "hf test"
      ? groups.has(n.name)
      : n.kind === "chaos scenario"
      ? chaos !== null && chaos.code === 0 && mentions(chaos.stdout, n.name, "")
      : Object.hasOwn(denoJson.permissions, n.name);
    if (!ok) wrong.push(`${at(n)}: ${n.kind} "${n.name}" does not exist`);
  }
  assertEquals(wrong, [], wrong.join("\n"));
  // Every main.ts command has its option table here.
  for (const name of Object.keys(COMMANDS)) assert(SPECS[`main.ts ${name}`], name);
});

Deno.test("docs flags: every flag the docs give a command is one its parser accepts", () => {
  const wrong: string[] = [];
  for (const f of allMentions().flags) {
    const r = resolve(f.command);
    if ("task" in r) continue; // the next test runs those scripts
    const known = "spec" in r
      ? f.flag === "help" || Object.hasOwn(r.spec.options, f.flag)
      : r.options.has(f.flag);
    if (!known) wrong.push(`${at(f)}: ${f.command} --${f.flag}: not an option of ${r.where}`);
  }
  assertEquals(wrong, [], wrong.join("\n"));
});

Deno.test("docs flags: the deno tasks' scripts accept the flags the docs give them", async () => {
  const byTask = new Map<string, FlagMention[]>();
  for (const f of allMentions().flags) {
    const r = resolve(f.command);
    if ("task" in r) byTask.set(r.task, [...byTask.get(r.task) ?? [], f]);
  }
  const wrong: string[] = [];
  let checked = 0;
  for (const [task, flags] of byTask) {
    const target = taskTarget(task);
    if (target === null || !("script" in target)) {
      wrong.push(`${at(flags[0]!)}: deno task ${task}: not a deno run of a script`);
      continue;
    }
    // A script that does not read its command line would run for real with --help.
    if (!read(target.script).includes("readCommandLine")) {
      wrong.push(`${at(flags[0]!)}: ${target.script} (task ${task}) does not parse its arguments`);
      continue;
    }
    const help = await runScript(target.perms, target.script, ["--help"]);
    if (help.code !== 0) {
      wrong.push(`${at(flags[0]!)}: ${target.script} --help: exit ${help.code} ${help.stderr}`);
      continue;
    }
    for (const flag of new Set(flags.map((f) => f.flag))) {
      const f = flags.find((m) => m.flag === flag)!;
      // Exit 0: a boolean option; "argument missing": one that takes a value.
      const r = await runScript(target.perms, target.script, ["--help", `--${flag}`]);
      checked++;
      if (r.code !== 0 && !/argument missing/.test(r.stderr)) {
        wrong.push(`${at(f)}: deno task ${task} --${flag}: ${r.stderr.trim().split("\n").at(-1)}`);
      } else if (!mentions(help.stdout, flag)) {
        wrong.push(`${at(f)}: deno task ${task} --${flag}: not in ${target.script} --help`);
      }
    }
  }
  assertEquals(wrong, [], wrong.join("\n"));
  assert(checked >= 5, `only ${checked} flags of deno tasks checked`);
});

/** Flags of outside tools the docs quote (the catch-all below is about Holdfast's own). */
const OUTSIDE_FLAGS: Record<string, string[]> = {
  kubectl: ["server-side", "for", "from-literal", "field-selector", "cascade", "type"],
  deno: [
    "allow-all",
    "allow-run",
    "allow-ffi",
    "allow-net",
    "allow-read",
    "allow-write",
    "no-prompt",
  ],
  mmdebstrap: ["variant"],
  setpriv: ["bounding-set"],
  "apt-get": ["autoremove"],
  "redis-cli": ["pipe"],
  "redis-server": ["tls-port"],
};

Deno.test("docs flags: every --flag anywhere in the docs is one of some command (or a listed tool's)", () => {
  // Prose may name a flag far from its command: at least some command must take it.
  const known = new Set(Object.values(OUTSIDE_FLAGS).flat());
  for (const spec of Object.values(SPECS)) Object.keys(spec.options).forEach((o) => known.add(o));
  const scripts = Object.keys(denoJson.tasks).map(taskTarget).flatMap((t) =>
    t === null ? [] : "bash" in t ? [t.bash] : t.script.startsWith("main.ts") ? [] : [t.script]
  );
  for (const e of Deno.readDirSync(new URL("scripts/", ROOT))) {
    if (e.name.endsWith(".sh")) scripts.push(`scripts/${e.name}`);
  }
  for (const s of scripts) {
    for (const m of read(s).matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)) known.add(m[1]!);
  }
  known.add("help");
  const wrong: string[] = [];
  for (const file of DOCS) {
    read(file).split("\n").forEach((line, i) => {
      for (const m of line.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)) {
        if (!known.has(m[1]!)) wrong.push(`${file}:${i + 1}: --${m[1]} is no command's flag`);
      }
    });
  }
  assertEquals(wrong, [], wrong.join("\n"));
});
