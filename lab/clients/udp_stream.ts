/**
 * A UDP stream for egress tests, run inside a client namespace:
 *
 *     udp_stream.ts HOST PORT DURATION_MS [INTERVAL_MS=100] [STREAM=pid]
 *
 * From one socket (one source port for the whole run) sends `STREAM:SEQ` every INTERVAL_MS and
 * checks each echo. Prints `{"msg":"started"}` after the first echo, `{"msg":"resumed",...}` with
 * the wall-clock time (`at`, epoch ms) of the first echo after a silence longer than three
 * intervals, and after DURATION_MS one summary: sent, echoed, wrong (echoes that do not match a
 * sent datagram), max_gap_ms (longest silence between echoes) and last_echo_age_ms (0 = alive to
 * the end). SIGUSR1 ends the run early. Bounded by DURATION_MS (+2 s to see the first echo).
 *
 * @module
 */
import dgram from "node:dgram";

const [host = "", portText = "", durationText = "", intervalText = "100", stream = `${Deno.pid}`] =
  Deno.args;
const port = Number(portText);
const durationMs = Number(durationText);
const intervalMs = Number(intervalText);
if (!host || !(port > 0) || !(durationMs > 0) || !(intervalMs > 0)) {
  console.error(
    `usage: udp_stream.ts HOST PORT DURATION_MS [INTERVAL_MS] [STREAM], got ${
      JSON.stringify(Deno.args)
    }`,
  );
  Deno.exit(2);
}

const socket = dgram.createSocket("udp4");
let sent = 0, echoed = 0, wrong = 0, maxGapMs = 0;
let lastEcho = 0;
let started = false;
socket.on("message", (msg) => {
  const [id, seqText] = new TextDecoder().decode(msg).split(":");
  const seq = Number(seqText);
  if (id !== stream || !(seq >= 0 && seq < sent)) {
    wrong++;
    return;
  }
  const now = Date.now();
  if (!started) {
    started = true;
    console.log(JSON.stringify({ msg: "started", stream, at: now }));
  } else {
    const gap = now - lastEcho;
    maxGapMs = Math.max(maxGapMs, gap);
    if (gap > 3 * intervalMs) console.log(JSON.stringify({ msg: "resumed", at: now, gap_ms: gap }));
  }
  echoed++;
  lastEcho = now;
});
await new Promise<void>((resolve) => socket.connect(port, host, resolve));
const begin = Date.now();
let until = begin + durationMs;
const timer = setInterval(() => {
  socket.send(`${stream}:${sent++}`);
}, intervalMs);
await new Promise<void>((resolve) => {
  const early = () => {
    until = Date.now();
    end();
  };
  const end = () => {
    clearTimeout(full);
    Deno.removeSignalListener("SIGUSR1", early);
    resolve();
  };
  const full = setTimeout(end, durationMs);
  Deno.addSignalListener("SIGUSR1", early);
});
clearInterval(timer);
await new Promise((r) => setTimeout(r, Math.min(500, 5 * intervalMs)));
console.log(JSON.stringify({
  msg: "summary",
  stream,
  sent,
  echoed,
  wrong,
  max_gap_ms: maxGapMs,
  last_echo_age_ms: lastEcho === 0 ? durationMs : Math.max(0, until - lastEcho - intervalMs),
}));
socket.close();
