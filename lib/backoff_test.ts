import { Backoff, backoffDelay, sleep } from "./backoff.ts";

Deno.test("backoff grows by its factor up to the cap; jitter only shortens a delay", () => {
  const b = new Backoff({ minMs: 10, maxMs: 50, jitter: 0 });
  const seen = Array.from({ length: 5 }, () => b.next());
  if (seen.join() !== "10,20,40,50,50") throw new Error(seen.join());
  for (let attempt = 1; attempt < 20; attempt++) {
    const d = backoffDelay(attempt, { minMs: 100, maxMs: 1000, jitter: 0.5 });
    const base = Math.min(1000, 100 * 2 ** (attempt - 1));
    if (d > base || d < base / 2) throw new Error(`attempt ${attempt}: ${d}`);
  }
  let threw = false;
  try {
    new Backoff({ minMs: 10, maxMs: 5 });
  } catch (e) {
    threw = e instanceof RangeError;
  }
  if (!threw) throw new Error("bad bounds accepted");
});

Deno.test("sleep ends early when its signal aborts", async () => {
  // Deterministic: an hour-long sleep that settles at all was aborted (and its timer cleared, or
  // the test's timer sanitizer would fail); no wall-clock figure is compared.
  const ac = new AbortController();
  const p = sleep(3_600_000, ac.signal);
  const reason = new Error("stop");
  ac.abort(reason);
  let err: unknown;
  await p.catch((e) => err = e);
  if (err !== reason) throw new Error(`sleep not aborted: ${err}`);
  // Aborted before it starts: rejects at once with the signal's reason.
  let early: unknown;
  await sleep(3_600_000, ac.signal).catch((e) => early = e);
  if (early !== reason) throw new Error(`sleep on an aborted signal: ${early}`);
});
