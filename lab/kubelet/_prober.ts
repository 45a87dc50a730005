/**
 * The lab kubelet's prober on one node (run inside the node's network namespace, as a kubelet
 * probes from the host network): every 500 ms it reads TARGETS (`{ id: { kind: "http" | "tcp",
 * host, port, path? } }`), probes each (1 s timeout; HTTP: a status 200–399 succeeds) and writes
 * `{ id: { ok, fails } }` to RESULTS (`fails`: consecutive failures, which the kubelet compares
 * with the probe's `failureThreshold`; through a rename, so readers never see half a file). An
 * unreadable TARGETS keeps the previous targets.
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
let targets: Record<string, Target> = {};
const fails = new Map<string, number>();
for (let i = 0; i < 1_000_000; i++) {
  try {
    targets = JSON.parse(await Deno.readTextFile(targetsFile));
  } catch { /* not written yet: the previous targets */ }
  const ids = Object.keys(targets);
  const ok = await Promise.all(ids.map((id) => probe(targets[id]!)));
  const results = Object.fromEntries(ids.map((id, k) => {
    const n = ok[k] ? 0 : (fails.get(id) ?? 0) + 1;
    fails.set(id, n);
    return [id, { ok: ok[k], fails: n }];
  }));
  await Deno.writeTextFile(`${resultsFile}.tmp`, JSON.stringify(results));
  await Deno.rename(`${resultsFile}.tmp`, resultsFile);
  await new Promise((r) => setTimeout(r, 500));
}
