/**
 * "When the docs say a flag exists, it must": every flag README.md, docs/*.md and k8s/README.md
 * give a command (read by tests/hygiene/_docs_flags.ts) is one its parser accepts; every command,
 * deno task, `./hf` subcommand, test group and permission set they name exists; the k8s/
 * manifests' and the controller's NAT pods' command lines parse; every option of a command is in
 * its `--help` text. A failure names the doc (or manifest) file and line.
 *
 * main.ts commands (and `deno task deploy`, `policy:swap`, `demo`) are checked against their
 * exported option tables; the other deno tasks' scripts (benchmarks, `image`, `kube:server`,
 * `chaos`) are run with `--help` (they must parse their command line before doing anything).
 */

import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { LineCounter, parseAllDocuments } from "yaml";
import { type CommandSpec, type OptionSpec, parseCommandLine } from "../../lib/args.ts";
import { COMMANDS } from "../../main.ts";
import { AGENT_COMMAND, readAgentArgs } from "../../node/agent_args.ts";
import { ANYCAST_COMMAND } from "../../node/anycast/main.ts";
import { EGRESS_COMMAND, readEgressArgs } from "../../node/egress/egress_args.ts";
import { NODE_COMMAND, readNodeArgs } from "../../node/backends/args.ts";
import { CONTROLLER_COMMAND } from "../../controller/k8s/main.ts";
import { STATUS_COMMAND } from "../../controller/status/main.ts";
import { CONTROL_PLANE_COMMAND } from "../../controller/main.ts";
import { DECAP_COMMAND } from "../../node/bpf/decap_main.ts";
import { XDP_PASS_COMMAND } from "../../node/bpf/xdp_pass_main.ts";
import { POLICY_COMMAND } from "../../policy-as/host/cli.ts";
import { DEMO_COMMAND } from "../../lab/demo.ts";
import { DEPLOY_COMMAND } from "../../scripts/deploy.ts";
import { POLICY_SWAP_COMMAND } from "../../scripts/policy_swap.ts";
import { deriveWorkload } from "../../controller/k8s/_egress_workload.ts";
import { type DocMentions, extractDocs, type FlagMention } from "./_docs_flags.ts";

const ROOT = new URL("../../", import.meta.url);
const read = (path: string) => Deno.readTextFileSync(new URL(path, ROOT));

type Spec = CommandSpec<OptionSpec>;
/** Each command's option table, by the name the docs use. */
const SPECS: Record<string, Spec> = {
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

/**
 * Options a command takes that its usage text may leave out, with the reason. (None today: every
 * option is in its `--help`.)
 */
const UNDOCUMENTED_OPTIONS: Record<string, string[]> = {};

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

const denoJson = JSON.parse(read("deno.json")) as {
  tasks: Record<string, string>;
  permissions: Record<string, unknown>;
};

/** `./hf`'s subcommands: the arms of its `case "$cmd"`. */
function hfCommands(): Set<string> {
  const text = read("hf");
  const body = text.slice(text.indexOf('case "$cmd" in'), text.indexOf("esac"));
  return new Set(
    [...body.matchAll(/^ {2}([a-z| -]+)\)/gm)].flatMap((m) =>
      m[1]!.split("|").map((s) => s.trim())
    ),
  );
}

/** scripts/test.sh's groups and options. */
function testSh(): { groups: Set<string>; options: Set<string> } {
  const text = read("scripts/test.sh");
  const groups = /^\s+(unit \|[a-z0-9 |]+)\) selected/m.exec(text)?.[1] ?? "";
  return {
    groups: new Set(groups.split("|").map((s) => s.trim())),
    options: new Set(["ok", "help"]),
  };
}

/** What a deno task runs last (the command its extra arguments go to). */
function taskTarget(task: string): { perms: string[]; script: string } | { bash: string } | null {
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

Deno.test("docs flags: every command, task, ./hf subcommand, test group and permission set named exists", () => {
  const hf = hfCommands(), groups = testSh().groups;
  const wrong: string[] = [];
  for (const n of allMentions().names) {
    const ok = n.kind === "main.ts"
      ? Object.hasOwn(COMMANDS, n.name)
      : n.kind === "task"
      ? Object.hasOwn(denoJson.tasks, n.name)
      : n.kind === "hf"
      ? hf.has(n.name)
      : n.kind === "hf test"
      ? groups.has(n.name)
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
  const run = async (perms: string[], script: string, args: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...perms, "--no-prompt", script, ...args],
      cwd: ROOT,
      stdin: "null",
      env: { NO_COLOR: "1" },
      signal: AbortSignal.timeout(120_000),
    }).output();
    const text = (b: Uint8Array) => new TextDecoder().decode(b);
    return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
  };
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
    const help = await run(target.perms, target.script, ["--help"]);
    if (help.code !== 0) {
      wrong.push(`${at(flags[0]!)}: ${target.script} --help: exit ${help.code} ${help.stderr}`);
      continue;
    }
    for (const flag of new Set(flags.map((f) => f.flag))) {
      const f = flags.find((m) => m.flag === flag)!;
      // Exit 0: a boolean option; "argument missing": one that takes a value.
      const r = await run(target.perms, target.script, ["--help", `--${flag}`]);
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

Deno.test("docs flags: every deno task answers --help (README: every command does)", () => {
  const wrong: string[] = [];
  for (const task of Object.keys(denoJson.tasks)) {
    const target = taskTarget(task);
    const ok = target === null
      ? false
      : "bash" in target
      ? read(target.bash).includes("--help")
      : target.script.startsWith("main.ts ")
      ? SPECS[target.script] !== undefined
      : read(target.script).includes("readCommandLine");
    if (!ok) wrong.push(`deno.json task ${task}: its script does not read its command line`);
  }
  assertEquals(wrong, [], wrong.join("\n"));
});

/** Whether usage text names `--flag` (not as the start of a longer flag). */
const mentions = (usage: string, flag: string) =>
  new RegExp(`(?<![\\w-])--${flag}(?![\\w-])`).test(usage);

Deno.test("docs flags: every option of a command is in its --help text", () => {
  const wrong: string[] = [];
  for (const [name, spec] of Object.entries(SPECS)) {
    for (const option of Object.keys(spec.options)) {
      if (UNDOCUMENTED_OPTIONS[name]?.includes(option)) continue;
      if (!mentions(spec.usage ?? "", option)) {
        wrong.push(`${name}: --${option} is not in its usage`);
      }
    }
  }
  assertEquals(wrong, [], wrong.join("\n"));
});

/** Kubernetes' `$(VAR)` in args, as the kubelet would expand them. */
const ENV: Record<string, string> = {
  NODE_NAME: "node-1",
  HOST_IPS: "10.0.0.1,fd00::1",
  POD_IP: "10.0.0.2",
  POD_NAME: "pod-1",
  POD_NAMESPACE: "holdfast-system",
  HOLDFAST_REDIS_PASSWORD: "secret",
};
const expand = (args: readonly string[]) =>
  args.map((a) => a.replace(/\$\(([A-Z_]+)\)/g, (m, v) => ENV[v] ?? m));

/** Parses a container's `main.ts CMD ARGS…` (fully, where the command's reader is pure). */
function checkContainer(command: unknown[], args: unknown[]): string | null {
  const perm = command.map(String).find((c) => c.startsWith("-P="))?.slice(3);
  if (perm !== undefined && !Object.hasOwn(denoJson.permissions, perm)) {
    return `permission set "${perm}" is not in deno.json`;
  }
  const [script, cmd, ...rest] = expand(args.map(String));
  if (script !== "main.ts") return null;
  const spec = SPECS[`main.ts ${cmd}`];
  if (!spec) return `main.ts has no command "${cmd}"`;
  try {
    const line = parseCommandLine(rest, spec);
    const readFile = () => "secret\n";
    if (cmd === "agent") readAgentArgs(line, { readFile });
    if (cmd === "node") readNodeArgs(line, { readFile });
    if (cmd === "egress") readEgressArgs(line);
  } catch (err) {
    return (err as Error).message;
  }
  return null;
}

Deno.test("docs flags: the k8s/ manifests' command lines parse", () => {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(new URL(dir, ROOT))) {
      if (e.isDirectory) walk(`${dir}${e.name}/`);
      else if (/\.ya?ml$/.test(e.name)) files.push(`${dir}${e.name}`);
    }
  };
  walk("k8s/");
  const wrong: string[] = [];
  let checked = 0;
  for (const file of files.sort()) {
    const lines = new LineCounter();
    for (const doc of parseAllDocuments(read(file), { lineCounter: lines })) {
      const visit = (node: unknown) => {
        if (node === null || typeof node !== "object") return;
        const items = "items" in node && Array.isArray(node.items) ? node.items : [];
        const get = (key: string) =>
          items.find((p: { key?: { value?: unknown } }) => p?.key?.value === key)?.value;
        const command = get("command"), args = get("args");
        if (command?.items && args?.items) {
          checked++;
          const problem = checkContainer(command.toJSON(), args.toJSON());
          const line = lines.linePos(args.range[0]).line;
          if (problem) wrong.push(`${file}:${line}: ${problem}`);
        }
        for (const item of items) {
          visit(item?.value ?? item);
        }
      };
      visit(doc.contents);
    }
  }
  assert(checked >= 4, `only ${checked} containers with args in k8s/`);
  assertEquals(wrong, [], wrong.join("\n"));
});

Deno.test("docs flags: the NAT pods the controller makes run a command line that parses", () => {
  const nat = {
    metadata: { namespace: "egress", name: "internet", uid: "u-1" },
    spec: { destinations: ["0.0.0.0/0"], addresses: ["203.0.113.10"], gateways: ["10.8.0.1"] },
  };
  const url = "redis://holdfast-redis.holdfast-system.svc:6379";
  for (
    const o of [
      { redisUrl: url },
      { redisUrl: url, redisUser: "holdfast", redisPasswordSecret: "holdfast-redis" },
    ]
  ) {
    const d = deriveWorkload(nat, o);
    assert("deployment" in d, JSON.stringify(d));
    const container = d.deployment.spec.template.spec.containers[0];
    const problem = checkContainer(container.command, container.args);
    assertEquals(problem, null, `controller/k8s/_egress_workload.ts: ${problem}`);
  }
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
