/**
 * New connections at a steady rate, run inside a client namespace:
 *
 *     connect_loop.ts HOST PORT DURATION_MS [INTERVAL_MS=10] [EXCHANGES=1] [GAP_MS=0]
 *
 * Every INTERVAL_MS for DURATION_MS it starts a connection (without waiting for the previous
 * ones) that sends one numbered line, expects it echoed and closes; with EXCHANGES > 1 it does
 * that many exchanges GAP_MS apart before closing (a connection that outlives a moment, e.g. a
 * NAT handover, in which it was opened). An attempt fails on a refused
 * or reset connect, EOF, a wrong echo, or no answer within 3 s. Prints `{"msg":"started"}`, then
 * once every attempt has ended one summary line: attempts, ok, failed, max_ms (slowest good
 * exchange), unreachable (of the failed: the connect was refused by an ICMP net/host unreachable,
 * i.e. a router had no route at that instant — ENETUNREACH, EHOSTUNREACH) and the first 20
 * failures with their time since the start and reason. Bounded by
 * DURATION_MS / INTERVAL_MS attempts, at most 500 in flight, and DURATION_MS + 3 s.
 *
 * @module
 */
const [
  host = "",
  portText = "",
  durationText = "",
  intervalText = "10",
  exchangesText = "1",
  gapText = "0",
] = Deno.args;
const port = Number(portText);
const durationMs = Number(durationText);
const intervalMs = Number(intervalText);
const exchanges = Number(exchangesText);
const gapMs = Number(gapText);
if (
  !host || !(port > 0) || !(durationMs > 0) || !(intervalMs > 0) ||
  !(Number.isInteger(exchanges) && exchanges >= 1 && exchanges <= 100) || !(gapMs >= 0)
) {
  console.error(
    "usage: connect_loop.ts HOST PORT DURATION_MS [INTERVAL_MS] [EXCHANGES 1-100] [GAP_MS], " +
      `got ${JSON.stringify(Deno.args)}`,
  );
  Deno.exit(2);
}
const ATTEMPT_TIMEOUT_MS = 3_000 + (exchanges - 1) * gapMs;
const MAX_IN_FLIGHT = 500;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** One connection: connect, one line out, the same line back, close. Resolves with its ms. */
async function attempt(seq: number, signal: AbortSignal): Promise<number> {
  const started = performance.now();
  const connecting = Deno.connect({ hostname: host, port });
  const aborted = new Promise<never>((_, reject) =>
    signal.addEventListener("abort", () => reject(new Error("timed out")), { once: true })
  );
  aborted.catch(() => {});
  const conn = await Promise.race([connecting, aborted]).catch((err) => {
    connecting.then((c) => c.close(), () => {}); // a connect that completes after the timeout
    throw err;
  });
  const onAbort = () => conn.close();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const buf = new Uint8Array(256);
    for (let x = 0; x < exchanges; x++) {
      if (x > 0) await new Promise((r) => setTimeout(r, gapMs));
      const msg = `connect_loop ${seq} ${x}\n`;
      await conn.write(enc.encode(msg));
      let got = "";
      while (got.length < msg.length) {
        const n = await conn.read(buf);
        if (n === null) throw new Error(`EOF after ${JSON.stringify(got)} (exchange ${x})`);
        got += dec.decode(buf.subarray(0, n));
      }
      if (got !== msg) throw new Error(`wrong echo ${JSON.stringify(got)}`);
    }
    return performance.now() - started;
  } finally {
    signal.removeEventListener("abort", onAbort);
    try {
      conn.close();
    } catch { /* closed by the timeout */ }
  }
}

const start = performance.now();
const total = Math.ceil(durationMs / intervalMs);
const failures: { at_ms: number; reason: string }[] = [];
let ok = 0, failed = 0, unreachable = 0, maxMs = 0, inFlight = 0;
const running: Promise<void>[] = [];
console.log(JSON.stringify({ msg: "started", attempts: total, interval_ms: intervalMs }));
for (let seq = 0; seq < total; seq++) {
  const wait = start + seq * intervalMs - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const at = Math.round(performance.now() - start);
  if (inFlight >= MAX_IN_FLIGHT) {
    failed++;
    if (failures.length < 20) failures.push({ at_ms: at, reason: "too many in flight" });
    continue;
  }
  inFlight++;
  const timeout = AbortSignal.timeout(ATTEMPT_TIMEOUT_MS);
  running.push(
    attempt(seq, timeout).then(
      (ms) => {
        ok++;
        maxMs = Math.max(maxMs, ms);
      },
      (err: Error) => {
        failed++;
        if (/\(os error (101|113)\)/.test(err.message)) unreachable++;
        const reason = timeout.aborted ? `no answer in ${ATTEMPT_TIMEOUT_MS} ms` : err.message;
        if (failures.length < 20) failures.push({ at_ms: at, reason: `${err.name}: ${reason}` });
      },
    ).finally(() => inFlight--),
  );
}
await Promise.all(running);
console.log(JSON.stringify({
  msg: "summary",
  attempts: total,
  ok,
  failed,
  unreachable,
  max_ms: Math.round(maxMs),
  failures,
}));
