/**
 * Holdfast's command lines hold together: the k8s/ manifests' and the controller's NAT pods'
 * `main.ts CMD ARGS` parse (read fully where the reader is pure), every option of a command is in
 * its `--help` text, and every deno task's script reads its command line (so `--help` prints the
 * usage instead of running it). A failure names the file and line.
 */

import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { LineCounter, parseAllDocuments } from "yaml";
import { parseCommandLine } from "../../lib/args.ts";
import { readAgentArgs } from "../../node/lb/args.ts";
import { readEgressArgs } from "../../node/egress/egress_args.ts";
import { readNodeArgs } from "../../node/backends/args.ts";
import { deriveWorkload } from "../../controller/k8s/_egress_workload.ts";
import { denoJson, mentions, read, ROOT, SPECS, taskTarget } from "./_command_specs.ts";

/**
 * Options a command takes that its usage text may leave out, with the reason. (None today: every
 * option is in its `--help`.)
 */
const UNDOCUMENTED_OPTIONS: Record<string, string[]> = {};

Deno.test("command lines: every deno task answers --help (README: every command does)", () => {
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

Deno.test("command lines: every option of a command is in its --help text", () => {
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

Deno.test("command lines: the k8s/ manifests' command lines parse", () => {
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

Deno.test("command lines: the NAT pods the controller makes run a command line that parses", () => {
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
