/**
 * One container of the lab kubelet, run as `ip netns exec NS deno run -A _container.ts SPEC`:
 * `ip netns exec` gives it a mount namespace of its own (slave to the host's, `/sys` remounted for
 * the namespace), where it mounts the pod's volumes — a tmpfs on `/run` when a volume lives under
 * it (a container's `/run` is its own), then each volume bound on its mount path, and the lab's
 * `/etc/hosts` (cluster DNS names of Services) — and then runs the container's command with
 * exactly its environment. SIGTERM and SIGINT are passed on; it exits with the command's status.
 *
 * SPEC (JSON file): `{ argv, env, cwd, mounts: [{ source, target }], hosts, log, pidFile }`.
 *
 * @module
 */

interface Spec {
  readonly argv: readonly string[];
  readonly env: Record<string, string>;
  readonly cwd: string;
  readonly mounts: readonly { source: string; target: string }[];
  readonly hosts: string;
  /** Where the command's output goes (opened before anything is mounted). */
  readonly log: string;
  /** Where the command's process id is written (the kubelet kills it if this launcher dies). */
  readonly pidFile: string;
}

async function sh(argv: string[]): Promise<void> {
  const out = await new Deno.Command(argv[0]!, { args: argv.slice(1), stdout: "null" }).output();
  if (!out.success) {
    throw new Error(`${argv.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
}

const spec = JSON.parse(await Deno.readTextFile(Deno.args[0]!)) as Spec;
const log = await Deno.open(spec.log, { append: true, create: true });
const pidFile = await Deno.open(spec.pidFile, { write: true, create: true, truncate: true });
const note = (line: string) => log.write(new TextEncoder().encode(line + "\n"));
addEventListener("unhandledrejection", (e) => {
  note(`lab container launcher: ${e.reason}`);
});
if (spec.mounts.some((m) => m.target.startsWith("/run/"))) {
  await sh(["mount", "-t", "tmpfs", "-o", "size=16m,mode=755", "tmpfs", "/run"]);
}
await sh(["mount", "--bind", spec.hosts, "/etc/hosts"]);
// Sources live under /tmp: a volume mounted on /tmp goes last, or it would hide them.
const onTmp = (m: { target: string }) => m.target === "/tmp" || m.target.startsWith("/tmp/");
// What the command itself needs (its working directory, the deno binary: the checkout, which may
// itself live under /tmp, as a CI clone does): a volume mounted over one of them carries a bind of
// it at the same place inside, so the volume does not hide it.
const needed = [spec.cwd, spec.argv[0]!.slice(0, spec.argv[0]!.lastIndexOf("/"))];
const under = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);
for (const m of [...spec.mounts.filter((m) => !onTmp(m)), ...spec.mounts.filter(onTmp)]) {
  await Deno.mkdir(m.target, { recursive: true });
  const hidden = needed.filter((p) => p !== "" && under(p, m.target));
  for (const p of hidden) {
    const inside = `${m.source}${p.slice(m.target.length)}`;
    await Deno.mkdir(inside, { recursive: true });
    await sh(["mount", "--bind", p, inside]);
  }
  await sh(["mount", hidden.length > 0 ? "--rbind" : "--bind", m.source, m.target]);
}

const child = new Deno.Command(spec.argv[0]!, {
  args: spec.argv.slice(1),
  cwd: spec.cwd,
  env: spec.env,
  clearEnv: true,
  stdin: "null",
  stdout: "piped",
  stderr: "piped",
}).spawn();
await pidFile.write(new TextEncoder().encode(String(child.pid)));
pidFile.close();
const copy = async (from: ReadableStream<Uint8Array>) => {
  for await (const chunk of from) {
    for (let off = 0; off < chunk.length;) off += await log.write(chunk.subarray(off));
  }
};
const copied = Promise.all([copy(child.stdout), copy(child.stderr)]);
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  Deno.addSignalListener(sig, () => {
    try {
      child.kill(sig);
    } catch { /* gone */ }
  });
}
const status = await child.status;
await copied.catch(() => {});
Deno.exit(status.code === 0 && status.signal ? 128 : status.code);
