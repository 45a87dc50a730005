/**
 * The lab kubelet's prober on one node (run inside the node's network namespace, as a kubelet
 * probes from the host network): every 500 ms it reads TARGETS (`{ id: { kind: "http" | "tcp",
 * host, port, path? } }`), probes each (1 s timeout; HTTP: a status 200–399 succeeds) and writes
 * `{ id: boolean }` to RESULTS (through a rename, so readers never see half a file).
 *
 * usage: deno run --allow-net --allow-read --allow-write _prober.ts TARGETS RESULTS
 *
 * @module
 */

interface Target {
  readonly kind: "http" | "tcp";
  readonly host: string;
  readonly port: number;
  readonly path?: string;
}

async function probe(t: Target): Promise<boolean> {
  if (t.kind === "tcp") {
    const timer = new Promise<null>((r) => setTimeout(() => r(null), 1_000));
    const conn = await Promise.race([Deno.connect({ hostname: t.host, port: t.port }), timer])
      .catch(() => null);
    if (conn === null) return false;
    conn.close();
    return true;
  }
  const host = t.host.includes(":") ? `[${t.host}]` : t.host;
  try {
    const res = await fetch(`http://${host}:${t.port}${t.path ?? "/"}`, {
      signal: AbortSignal.timeout(1_000),
    });
    await res.body?.cancel();
    return res.status >= 200 && res.status < 400;
  } catch {
    return false;
  }
}

const [targetsFile, resultsFile] = Deno.args as [string, string];
for (let i = 0; i < 1_000_000; i++) {
  let targets: Record<string, Target> = {};
  try {
    targets = JSON.parse(await Deno.readTextFile(targetsFile));
  } catch { /* not written yet */ }
  const ids = Object.keys(targets);
  const ok = await Promise.all(ids.map((id) => probe(targets[id]!)));
  await Deno.writeTextFile(
    `${resultsFile}.tmp`,
    JSON.stringify(Object.fromEntries(ids.map((id, k) => [id, ok[k]]))),
  );
  await Deno.rename(`${resultsFile}.tmp`, resultsFile);
  await new Promise((r) => setTimeout(r, 500));
}
