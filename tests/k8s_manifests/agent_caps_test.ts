/**
 * The agent runs with exactly the capabilities `k8s/agent.yaml` grants, and needs each of them:
 * as uid 0 limited by `setpriv --bounding-set` to that list (what a container runtime does with
 * `drop: [ALL]` plus `add`), in a test network namespace, it loads the datapath, pins its maps in
 * bpffs, attaches XDP, turns ready and repairs without error; stopped and started again over the
 * maps it pinned (a DaemonSet rollout), it turns ready again. Without SYS_ADMIN the restart
 * fails (maps opened by ID); without NET_ADMIN, or without BPF or PERFMON once SYS_ADMIN (which
 * the kernel accepts in their place) is gone, it does not start.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { one, readManifests } from "./_manifests.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const agent = one(await readManifests(), "DaemonSet", "holdfast-agent");
const CAPS: string[] = agent.spec.template.spec.containers[0].securityContext.capabilities.add;

const SERVICES = `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP", portName: http }]
    backends: [{ address: "10.0.1.1:8080/TCP", portName: http }]
`;

async function run(cmd: string, args: string[]): Promise<string> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(r.stdout) + new TextDecoder().decode(r.stderr);
  if (!r.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${text}`);
  return text;
}

/** What one agent start showed: ready, and any error or failed repair it logged. */
interface Start {
  ready: boolean;
  failures: string[];
}

/** Starts the agent with `caps` only, waits for ready (or exit), lets it repair once, stops it. */
async function startAgent(netns: string, pinDir: string, config: string, caps: string[]) {
  const bounding = ["-all", ...caps.map((c) => `+${c.toLowerCase()}`)].join(",");
  const child = new Deno.Command("nsenter", {
    args: [
      `--net=/run/netns/${netns}`,
      "setpriv",
      `--bounding-set=${bounding}`,
      "--inh-caps=-all",
      Deno.execPath(),
      "run",
      "-P=agent",
      "--no-prompt",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}main.ts`,
      "agent",
      ...["--node-name", "caps", "--config", config, "--no-flow-sync", "--listen", "none"],
      ...["--pin-dir", pinDir, "--attach", "veth0", "--src-addr", "10.9.9.1"],
      ...["--encap-port", "6080", "--seed", "1", "--full-reconcile-interval-ms", "200"],
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
  let readyAt = 0;
  for (let i = 0; i < 150; i++) { // at most 15 s
    if (readyAt === 0 && text.includes('"msg":"ready"')) readyAt = i;
    if (readyAt > 0 && i - readyAt >= 8) break; // a few repair passes after ready
    if (await Promise.race([exited, new Promise<false>((r) => setTimeout(() => r(false), 100))])) {
      break;
    }
  }
  try {
    child.kill("SIGTERM");
  } catch { /* exited */ }
  await child.status;
  await done;
  const failures = text.split("\n").filter((l) =>
    l.includes('"level":"error"') || l.includes("full reconciliation failed")
  );
  return { ready: text.includes('"msg":"ready"'), failures } satisfies Start;
}

rootTest(
  "k8s/agent.yaml capabilities: enough to start, repair and restart, none to spare",
  async () => {
    assertEquals([...CAPS].sort(), ["BPF", "NET_ADMIN", "PERFMON", "SYS_ADMIN"]);
    const netns = `hf-k8scaps-${Deno.pid}`;
    const pinDir = `/sys/fs/bpf/${netns}`;
    const dir = await Deno.makeTempDir({ prefix: "hf-k8scaps-" });
    const config = `${dir}/services.yaml`;
    await Deno.writeTextFile(config, SERVICES);
    await run("ip", ["netns", "add", netns]);
    try {
      await run("ip", [
        "-n",
        netns,
        "link",
        "add",
        "veth0",
        "type",
        "veth",
        "peer",
        "name",
        "veth1",
      ]);
      for (const dev of ["veth0", "veth1"]) {
        await run("ip", [
          "-n",
          netns,
          "link",
          "set",
          dev,
          "up",
        ]);
      }
      await run("ip", ["-n", netns, "addr", "add", "10.9.9.1/24", "dev", "veth0"]);
      const fresh = async () => {
        await run("ip", ["-n", netns, "link", "set", "veth0", "xdp", "off"]);
        await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      };
      /** First start and a restart over its pins; true when both are ready without failures. */
      const startAndRestart = async (caps: string[]) => {
        await fresh();
        const first = await startAgent(netns, pinDir, config, caps);
        if (!first.ready || first.failures.length > 0) return { ok: false, first };
        const again = await startAgent(netns, pinDir, config, caps);
        return { ok: again.ready && again.failures.length === 0, first, again };
      };

      const all = await startAndRestart(CAPS);
      assert(all.ok, `with ${CAPS.join(",")}: ${JSON.stringify(all)}`);
      const link = await run("ip", ["-n", netns, "link", "show", "veth0"]);
      assert(link.includes("prog/xdp"), `XDP attached: ${link}`);

      // SYS_ADMIN only for BPF_MAP_GET_FD_BY_ID: the first start works, its repair and a restart
      // over its own pins do not.
      const noSysAdmin = await startAndRestart(CAPS.filter((c) => c !== "SYS_ADMIN"));
      assert(!noSysAdmin.ok && noSysAdmin.first.ready, JSON.stringify(noSysAdmin));
      assert(
        [...noSysAdmin.first.failures, ...(noSysAdmin.again?.failures ?? [])]
          .some((l) => l.includes("Cannot open map with id")),
        JSON.stringify(noSysAdmin),
      );
      // NET_ADMIN is needed in any case. SYS_ADMIN stands in for BPF and PERFMON in the kernel's
      // checks, so those two are shown needed without it: they are what remains once the agent
      // stops opening maps by ID.
      const needed = [
        ["NET_ADMIN"],
        ["BPF", "SYS_ADMIN"],
        ["PERFMON", "SYS_ADMIN"],
      ];
      for (const left of needed) {
        const without = await startAndRestart(CAPS.filter((c) => !left.includes(c)));
        assert(!without.ok, `the agent also works without ${left.join(", ")}`);
        assert(!without.first.ready, `without ${left.join(", ")} it must not even start`);
      }
    } finally {
      await run("ip", ["netns", "del", netns]).catch(() => {});
      await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  },
);
