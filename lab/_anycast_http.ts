/**
 * The anycast lab's HTTP programs, run inside namespaces:
 *
 *     _anycast_http.ts pod NAME PORT              a pod: answers every request with its NAME
 *     _anycast_http.ts load URL DURATION_MS [INTERVAL_MS=20]
 *
 * `pod` prints `{"msg":"listening"}`; on SIGTERM it keeps serving (the grace period is the
 * caller's to end with SIGKILL) and logs it. `load` is an HTTP client: every INTERVAL_MS it
 * sends one GET on a new connection (`Connection: close`) without waiting for the previous
 * ones, fails a request on a network error, a non-200 or no answer within 3 s, and at the end
 * prints one summary line: requests, ok, failed, by_pod (answers per pod) and the first 20
 * failures with their time since the start. Bounded by DURATION_MS / INTERVAL_MS requests.
 *
 * @module
 */

const [mode = "", a = "", b = "", c = "20"] = Deno.args;

function pod(name: string, port: number): void {
  Deno.addSignalListener("SIGTERM", () => {
    console.log(JSON.stringify({ msg: "SIGTERM: still serving until killed", pod: name }));
  });
  Deno.serve({
    hostname: "0.0.0.0",
    port,
    onListen: () => console.log(JSON.stringify({ msg: "listening", pod: name, port })),
  }, () => new Response(name, { headers: { connection: "close" } }));
}

async function load(url: string, durationMs: number, intervalMs: number): Promise<void> {
  const started = performance.now();
  const byPod: Record<string, number> = {};
  const failures: { at_ms: number; reason: string }[] = [];
  let requests = 0, ok = 0, failed = 0;
  const one = async () => {
    const at = Math.round(performance.now() - started);
    requests++;
    try {
      const res = await fetch(url, {
        headers: { connection: "close" },
        signal: AbortSignal.timeout(3_000),
      });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      byPod[body] = (byPod[body] ?? 0) + 1;
      ok++;
    } catch (e) {
      failed++;
      if (failures.length < 20) failures.push({ at_ms: at, reason: (e as Error).message });
    }
  };
  console.log(JSON.stringify({ msg: "started" }));
  const inFlight: Promise<void>[] = [];
  const count = Math.floor(durationMs / intervalMs);
  for (let i = 0; i < count; i++) {
    inFlight.push(one());
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  await Promise.all(inFlight);
  console.log(JSON.stringify({ msg: "summary", requests, ok, failed, by_pod: byPod, failures }));
}

if (mode === "pod" && a && Number(b) > 0) pod(a, Number(b));
else if (mode === "load" && a && Number(b) > 0 && Number(c) > 0) {
  await load(a, Number(b), Number(c));
} else {
  console.error(`usage: _anycast_http.ts pod NAME PORT | load URL DURATION_MS [INTERVAL_MS]`);
  Deno.exit(2);
}
