/**
 * The UDP side of the egress tests' external server: `udp_echo.ts HOST PORT` echoes every
 * datagram and prints `{"msg":"udp source","stream":ID,"from":"ADDR:PORT","seq":N}` when a
 * stream (the `ID:` before the sequence number) is first seen and whenever its source changes,
 * so a test can tell whether a NAT takeover kept the translated source address and port.
 *
 * @module
 */
import dgram from "node:dgram";

const [host = "0.0.0.0", portText = "8081"] = Deno.args;
const port = Number(portText);
if (!(port > 0)) {
  console.error(`usage: udp_echo.ts HOST PORT, got ${JSON.stringify(Deno.args)}`);
  Deno.exit(2);
}
const sources = new Map<string, string>();
const socket = dgram.createSocket("udp4");
socket.on("message", (msg, rinfo) => {
  const [stream = "", seq] = new TextDecoder().decode(msg).split(":");
  const from = `${rinfo.address}:${rinfo.port}`;
  if (sources.get(stream) !== from) {
    if (sources.size > 10_000) sources.clear();
    sources.set(stream, from);
    console.log(JSON.stringify({ msg: "udp source", stream, from, seq: Number(seq) }));
  }
  socket.send(msg, rinfo.port, rinfo.address);
});
socket.bind(port, host, () => console.log(JSON.stringify({ msg: "listening", host, port })));
