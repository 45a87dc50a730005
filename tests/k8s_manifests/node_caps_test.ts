/**
 * The node agent runs with exactly the capabilities `k8s/node.yaml` grants (BPF, NET_ADMIN,
 * PERFMON) and needs each one: as uid 0 limited by `setpriv --bounding-set` to that list (what a
 * container runtime does with `drop: [ALL]` plus `add`), in a test network namespace, it loads
 * bpf/node_tc.o, pins its maps, attaches to the uplink, applies a model and pods and turns ready;
 * started again over its pins (a DaemonSet rollout) it adopts them and turns ready again. Without
 * any one of the three it does not start.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { one, readManifests } from "./_manifests.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const node = one(await readManifests(), "DaemonSet", "holdfast-node");
const CAPS: string[] = node.spec.template.spec.containers[0].securityContext.capabilities.add;

async function run(cmd: string, args: string[]): Promise<string> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(r.stdout) + new TextDecoder().decode(r.stderr);
  if (!r.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${text}`);
  return text;
}

/** Starts `main.ts node` with `caps` only, waits for ready (or exit), stops it; its output. */
async function startNode(netns: string, pinDir: string, dir: string, caps: string[]) {
  const bounding = ["-all", ...caps.map((c) => `+${c.toLowerCase()}`)].join(",");
  const child = new Deno.Command("nsenter", {
    args: [
      `--net=/run/netns/${netns}`,
      "setpriv",
      `--bounding-set=${bounding}`,
      "--inh-caps=-all",
      ...[Deno.execPath(), "run", "-P=node", "--no-prompt", "--quiet"],
      ...["--config", `${ROOT}deno.json`, `${ROOT}main.ts`, "node", "--node-name", "caps"],
      // No --uplink: the interface holding the node's address (veth0), as node.yaml does it.
      ...["--config", `${dir}/services.yaml`, "--pods", `${dir}/pods.yaml`],
      ...["--node-address", "10.9.9.1"],
      ...["--pin-dir", pinDir, "--listen", "none"],
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let text = "";
  const decoder = new TextDecoder();
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) text += decoder.decode(chunk, { stream: true });
  };
  const done = Promise.all([collect(child.stdout), collect(child.stderr)]);
  const exited = child.status.then(() => true);
  for (let i = 0; i < 150 && !text.includes('"msg":"ready"'); i++) { // at most 15 s
    if (await Promise.race([exited, new Promise<false>((r) => setTimeout(() => r(false), 100))])) {
      break;
    }
  }
  try {
    child.kill("SIGTERM");
  } catch { /* exited */ }
  await child.status;
  await done;
  const failures = text.split("\n").filter((l) => l.includes('"level":"error"'));
  return { ready: text.includes('"msg":"ready"'), failures, text };
}

rootTest("k8s/node.yaml capabilities: enough to start and restart, none to spare", async () => {
  assertEquals([...CAPS].sort(), ["BPF", "NET_ADMIN", "PERFMON"]);
  const netns = `hf-${Deno.pid}-nodecaps`;
  const pinDir = `/sys/fs/bpf/${netns}`;
  const dir = await Deno.makeTempDir({ prefix: `hf-${Deno.pid}-nodecaps-` });
  await Deno.writeTextFile(
    `${dir}/services.yaml`,
    `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP" }]
    backends: [{ address: "10.2.0.5:8080/TCP" }]
`,
  );
  await Deno.writeTextFile(`${dir}/pods.yaml`, "pods:\n  - { name: web-1, ips: [10.2.0.5] }\n");
  await run("ip", ["netns", "add", netns]);
  try {
    await run("ip", ["-n", netns, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1"]);
    for (const dev of ["veth0", "veth1"]) await run("ip", ["-n", netns, "link", "set", dev, "up"]);
    await run("ip", ["-n", netns, "addr", "add", "10.9.9.1/24", "dev", "veth0"]);
    const first = await startNode(netns, pinDir, dir, CAPS);
    assert(first.ready && first.failures.length === 0, JSON.stringify(first));
    assert(first.text.includes('"uplinks":["veth0"]'), `attached to veth0: ${first.text}`);
    const again = await startNode(netns, pinDir, dir, CAPS);
    assert(again.ready && again.failures.length === 0, JSON.stringify(again));
    assert(again.text.includes('"adopted":{"frontends":1'), again.text);
    for (const left of CAPS) {
      await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      const without = await startNode(netns, pinDir, dir, CAPS.filter((c) => c !== left));
      assert(!without.ready, `the node agent also starts without ${left}`);
    }
  } finally {
    await run("ip", ["netns", "del", netns]).catch(() => {});
    await Deno.remove(pinDir, { recursive: true }).catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
