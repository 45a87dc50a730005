/**
 * The anycast lab's HTTP programs, run inside namespaces:
 *
 *     _anycast_http.ts pod NAME PORT              a pod: answers every request with its NAME
 *     _anycast_http.ts load URL DURATION_MS [INTERVAL_MS=20]
 *
 * `pod` prints `{"msg":"listening"}`; on SIGTERM it keeps serving (the grace period is the
 * caller's to end with SIGKILL) and logs it. `load` is an HTTP client: every INTERVAL_MS it
 * sends one GET on a new connection (`Connection: close`) without waiting for the previous
 * ones, fails a request on a network error, a non-200 or no answer within 3 s, prints one `done`
 * line per request as it ends (`sent_epoch_ms`, `ok`), and at the end one summary line:
 * requests, ok, failed, by_pod (answers per pod) and the first 20 failures with their time since
 * the start and, on the machine's wall clock (shared with the test), when they were sent and
 * when they failed. Sends DURATION_MS / INTERVAL_MS requests however slow the machine.
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
  const failures: {
    at_ms: number;
    reason: string;
    sent_epoch_ms: number;
    failed_epoch_ms: number;
  }[] = [];
  let requests = 0, ok = 0, failed = 0;
  const one = async () => {
    const at = Math.round(performance.now() - started);
    const sent = Date.now();
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
      console.log(JSON.stringify({ msg: "done", sent_epoch_ms: sent, ok: true }));
    } catch (e) {
      failed++;
      // fetch's own message is "fetch failed": the cause says which (reset, refused, …).
      const cause = (e as Error).cause as { code?: string; message?: string } | undefined;
      const reason = [(e as Error).message, cause?.code ?? cause?.message].filter(Boolean).join(
        ": ",
      );
      if (failures.length < 20) {
        failures.push({ at_ms: at, reason, sent_epoch_ms: sent, failed_epoch_ms: Date.now() });
      }
      console.log(JSON.stringify({ msg: "done", sent_epoch_ms: sent, ok: false }));
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
