/**
 * One active health probe of one backend from this LB node: a TCP connect, or an HTTP/1.0
 * `GET path` whose status line must carry the expected status. Bounded by the check's timeout
 * (connect and answer together); never throws — the result says what happened in the words a
 * log line uses (`connect refused`, `timeout`, `status 503`).
 *
 * @module
 */
import type { HealthCheck } from "../sources/health_check.ts";
import { joinHostPort } from "../tables/address.ts";

/** What one probe found. */
export interface ProbeResult {
  readonly ok: boolean;
  /** `ok`, `connect refused`, `timeout`, `unreachable`, `status N`, `bad response`, `error: …`. */
  readonly reason: string;
}

/** Where a probe goes: the backend's IP and the port probed. */
export interface ProbeTarget {
  readonly ip: string;
  readonly port: number;
}

/** A probe function; the checker takes one so tests can stand in for the network. */
export type Prober = (
  target: ProbeTarget,
  check: HealthCheck,
  signal?: AbortSignal,
) => Promise<ProbeResult>;

const MAX_STATUS_LINE = 1024;
const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Probes `target` as `check` says (TCP connect or HTTP GET), within `check.timeoutMs`.
 *
 * @example
 * ```ts ignore
 * const r = await probe({ ip: "10.1.0.3", port: 8080 }, { ...HEALTH_CHECK_DEFAULTS, kind: "tcp" });
 * if (!r.ok) console.log(r.reason); // "connect refused"
 * ```
 */
export async function probe(
  target: ProbeTarget,
  check: HealthCheck,
  signal?: AbortSignal,
): Promise<ProbeResult> {
  const timeout = AbortSignal.timeout(check.timeoutMs);
  const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let conn: Deno.TcpConn | undefined;
  try {
    conn = await Deno.connect({ hostname: target.ip, port: target.port, signal: abort });
    if (check.kind === "tcp") return { ok: true, reason: "ok" };
    return await httpStatus(conn, target, check, abort);
  } catch (e) {
    if (timeout.aborted) return { ok: false, reason: "timeout" };
    return { ok: false, reason: describe(e) };
  } finally {
    try {
      conn?.close();
    } catch { /* closed by the abort */ }
  }
}

async function httpStatus(
  conn: Deno.TcpConn,
  target: ProbeTarget,
  check: HealthCheck,
  abort: AbortSignal,
): Promise<ProbeResult> {
  // The abort closes the connection, which ends a read or write waiting on it.
  const onAbort = () => {
    try {
      conn.close();
    } catch { /* closed */ }
  };
  abort.addEventListener("abort", onAbort, { once: true });
  try {
    const host = joinHostPort(target.ip, target.port); // an IPv6 host in brackets (RFC 7230)
    await conn.write(
      enc.encode(`GET ${check.path} HTTP/1.0\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
    );
    const buf = new Uint8Array(MAX_STATUS_LINE);
    let got = 0;
    // Bounded: each read adds at least one byte, at most MAX_STATUS_LINE of them.
    while (got < buf.length) {
      const n = await conn.read(buf.subarray(got));
      if (n === null) break;
      got += n;
      if (buf.subarray(0, got).includes(10)) break; // the status line is in
    }
    const line = dec.decode(buf.subarray(0, got)).split("\r\n")[0]!.split("\n")[0]!;
    const m = /^HTTP\/\d(?:\.\d)? (\d{3})\b/.exec(line);
    if (!m) return { ok: false, reason: "bad response" };
    const status = Number(m[1]);
    return status === check.expectStatus
      ? { ok: true, reason: "ok" }
      : { ok: false, reason: `status ${status}` };
  } finally {
    abort.removeEventListener("abort", onAbort);
  }
}

function describe(e: unknown): string {
  if (e instanceof Deno.errors.ConnectionRefused) return "connect refused";
  if (e instanceof Deno.errors.ConnectionReset) return "connection reset";
  if (e instanceof Deno.errors.TimedOut) return "timeout";
  const msg = e instanceof Error ? e.message : String(e);
  if (/unreachable/i.test(msg)) return "unreachable";
  return `error: ${msg.slice(0, 120)}`;
}
