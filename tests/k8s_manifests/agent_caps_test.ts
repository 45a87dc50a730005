/**
 * The agent runs with exactly the capabilities `k8s/agent.yaml` grants (BPF, NET_ADMIN, PERFMON
 * for the datapath; NET_BIND_SERVICE for BGP only, proven in agent_bgp_caps_test.ts), and needs
 * each datapath one: as uid 0 limited by `setpriv --bounding-set` to that list (what a
 * container runtime does with `drop: [ALL]` plus `add`), in a test network namespace, it loads
 * the datapath, pins its maps and Maglev tables in bpffs, attaches XDP, turns ready and repairs
 * without error; stopped and started again over the maps it pinned (a DaemonSet rollout), it turns
 * ready again. Over maps pinned by a version that did not pin the Maglev tables (reachable only by
 * ID, which needs SYS_ADMIN) it comes up too: it rewrites those tables and says so. Its tables
 * are memory-mapped; over a hf_maglev pinned before that (a template without BPF_F_MMAPABLE) it
 * comes up too, writing them the old way. Without any one of the datapath's three it does not start.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";
import { one, readManifests } from "./_manifests.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const agent = one(await readManifests(), "DaemonSet", "holdfast-agent");
const CAPS: string[] = agent.spec.template.spec.containers[0].securityContext.capabilities.add;
/** What the datapath needs; NET_BIND_SERVICE (bird's TCP 179) is agent_bgp_caps_test.ts's. */
const DATAPATH_CAPS = CAPS.filter((c) => c !== "NET_BIND_SERVICE");

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

/** Runs `_old_maglev.ts COMMAND DIR` under the bpf permission set (FFI); its stdout. */
function oldMaglev(command: "pin-old" | "tables", pinDir: string): Promise<string> {
  return run("deno", [
    "run",
    "-P=bpf",
    "--no-prompt",
    "--quiet",
    "--config",
    `${ROOT}deno.json`,
    `${ROOT}tests/k8s_manifests/_old_maglev.ts`,
    command,
    pinDir,
  ]);
}

/** What one agent start showed: ready, any error or failed repair it logged, its output. */
interface Start {
  ready: boolean;
  failures: string[];
  text: string;
}

/** How long an agent may take to report ready (or to exit) before the start counts as failed. */
const READY_LIMIT_MS = 60_000;

/** Starts the agent with `caps` only, waits for ready (or exit), lets it repair, stops it. */
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
  /** True when the agent exited within `ms`. */
  const exitsWithin = async (ms: number) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        exited,
        new Promise<false>((r) => timer = setTimeout(() => r(false), ms)),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
  const ready = () => text.includes('"msg":"ready"');
  // Ready (1–2 s unloaded) or exited (a missing capability ends it at once), whichever comes
  // first; the limit only bounds a hang.
  const deadline = Date.now() + READY_LIMIT_MS;
  for (let i = 0; i < READY_LIMIT_MS / 50 && Date.now() < deadline && !ready(); i++) {
    if (await exitsWithin(50)) break;
  }
  // Ready: a few repair passes (every 200 ms) while it runs.
  if (ready()) await exitsWithin(1_000);
  try {
    child.kill("SIGTERM");
  } catch { /* exited */ }
  await child.status;
  await done;
  const failures = text.split("\n").filter((l) =>
    l.includes('"level":"error"') || l.includes("full reconciliation failed")
  );
  return { ready: text.includes('"msg":"ready"'), failures, text } satisfies Start;
}

rootTest(
  "k8s/agent.yaml capabilities: enough to start, repair and restart, none to spare",
  async () => {
    assertEquals([...CAPS].sort(), ["BPF", "NET_ADMIN", "NET_BIND_SERVICE", "PERFMON"]);
    const netns = `hf-${Deno.pid}-k8scaps`; // hf-PID-: a sweep by another run leaves it alone
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

      // Maps pinned by a version that did not pin the Maglev tables: without SYS_ADMIN they
      // cannot be opened by ID, so the agent writes them again (and pins them), still ready and
      // error-free; the next restart finds them pinned.
      await Deno.remove(`${pinDir}/hf_maglev_tables`, { recursive: true });
      const older = await startAgent(netns, pinDir, config, CAPS);
      assert(older.ready && older.failures.length === 0, JSON.stringify(older));
      assert(older.text.includes("Maglev tables unreadable"), older.text);
      const after = await startAgent(netns, pinDir, config, CAPS);
      assert(after.ready && after.failures.length === 0, JSON.stringify(after));
      assert(!after.text.includes("Maglev tables unreadable"), after.text);
      assertEquals(JSON.parse(await oldMaglev("tables", pinDir)), { "1": true }, "mmapable");

      // A hf_maglev pinned by a version before mmapable Maglev tables (its template without
      // BPF_F_MMAPABLE): the agent finds it out once and writes its tables the old way.
      await oldMaglev("pin-old", pinDir);
      const unmapped = await startAgent(netns, pinDir, config, CAPS);
      assert(unmapped.ready && unmapped.failures.length === 0, JSON.stringify(unmapped));
      assert(unmapped.text.includes("hf_maglev takes no memory-mapped tables"), unmapped.text);
      assertEquals(JSON.parse(await oldMaglev("tables", pinDir)), { "1": false }, "not mmapable");

      // Each of the datapath's three is needed: without any one the agent does not even start.
      for (const left of DATAPATH_CAPS) {
        const without = await startAndRestart(CAPS.filter((c) => c !== left));
        assert(!without.ok, `the agent also works without ${left}`);
        assert(!without.first.ready, `without ${left} it must not even start`);
      }
    } finally {
      await run("ip", ["netns", "del", netns]).catch(() => {});
      await Deno.remove(pinDir, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  },
);
