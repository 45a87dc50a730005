/**
 * Connections from chosen source ports, run inside a client namespace:
 *
 *     reuse_client.ts HOST PORT FIRST_SOURCE_PORT COUNT
 *
 * For each source port FIRST_SOURCE_PORT … FIRST_SOURCE_PORT+COUNT-1 (a few at a time) it
 * connects from that port (node:net `localPort`), sends one line, expects it echoed, and resets
 * the connection (RST: no TIME_WAIT, so the next run may use the same 5-tuple again). Run it twice
 * to reconnect from the same 5-tuples, as a client reusing its ports does. An attempt fails on a
 * refused or reset connect, EOF, a wrong echo, or no answer within 3 s. Prints one summary line:
 * attempts, ok, failed and the first 20 failures with their source port and reason. Bounded by
 * COUNT attempts of 3 s each.
 *
 * @module
 */
import net from "node:net";

const [host = "", portText = "", firstText = "", countText = ""] = Deno.args;
const port = Number(portText);
const first = Number(firstText);
const count = Number(countText);
if (!host || !(port > 0) || !(first > 1023) || !(count > 0) || first + count > 65536) {
  console.error(
    `usage: reuse_client.ts HOST PORT FIRST_SOURCE_PORT COUNT, got ${JSON.stringify(Deno.args)}`,
  );
  Deno.exit(2);
}
const TIMEOUT_MS = 3_000;
const PARALLEL = 8;

/** One connection from `localPort`: resolves with null when echoed, else the reason. */
function attempt(localPort: number): Promise<string | null> {
  return new Promise((resolve) => {
    const line = `${localPort}\n`;
    let got = "";
    let done = false;
    const socket = net.connect({ host, port, localPort });
    const finish = (reason: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.resetAndDestroy();
      resolve(reason);
    };
    const timer = setTimeout(() => finish("timeout"), TIMEOUT_MS);
    socket.setNoDelay(true);
    socket.on("connect", () => socket.write(line));
    socket.on("data", (d: Uint8Array) => {
      got += new TextDecoder().decode(d);
      if (got.length >= line.length) finish(got === line ? null : `wrong echo ${got.trim()}`);
    });
    socket.on("error", (e: Error & { code?: string }) => finish(e.code ?? e.message));
    socket.on("end", () => finish("eof"));
  });
}

const failures: { port: number; reason: string }[] = [];
let ok = 0;
let next = first;
async function worker(): Promise<void> {
  while (next < first + count) {
    const p = next++;
    const reason = await attempt(p);
    if (reason === null) ok++;
    else failures.push({ port: p, reason });
  }
}
await Promise.all(Array.from({ length: Math.min(PARALLEL, count) }, worker));
failures.sort((a, b) => a.port - b.port);
console.log(JSON.stringify({
  msg: "summary",
  attempts: count,
  ok,
  failed: failures.length,
  failures: failures.slice(0, 20),
}));
