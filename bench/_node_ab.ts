/**
 * A/B of node_tc.o builds (bench:backend's per-packet method): each object's hf_node_in /
 * hf_node_out on the same fresh frames, interleaved call by call with the no-op floor, medians.
 * Run: `deno run -A bench/_node_ab.ts [--calls=C] NAME=DIR ...` (each DIR holds a node_tc.o).
 * Used to attribute bench:backend's `in`/`out` cost (bench/RESULTS.md "Node side").
 *
 * @module
 */
import { BpfObject, DEFAULT_OBJECT_DIR, NodeDatapath, PROTO, testRun } from "../node/bpf/mod.ts";
import { tcpFrame } from "../lab/packets.ts";
import { encapsulatedAny, tcpFrame6 } from "../lab/packets6.ts";
import { POD_VIP, POD_VIP6 } from "../lab/node_pods.ts";
import { median } from "./_stats.ts";

const calls = Number(Deno.args.find((a) => a.startsWith("--calls="))?.slice(8) ?? 20_000);
const variants = Deno.args.filter((a) => a.includes("=") && !a.startsWith("--"))
  .map((a) => a.split("=") as [string, string]);
if (variants.length === 0) variants.push(["current", DEFAULT_OBJECT_DIR]);

const CLIENT = "10.0.0.1", POD = "10.2.0.5", CLIENT6 = "2001:db8:a::1", POD6 = "2001:db8:2::5";
const PAYLOAD = new Uint8Array(64);
const enc = (inner: Uint8Array, pod: string) =>
  encapsulatedAny(inner, {
    outerSrc: pod.includes(":") ? "2001:db8:1::2" : "10.1.1.2",
    backend: pod,
    sport: 0xc123,
    dport: 6080,
    hash: 1,
  });
const FRAMES = {
  in4: enc(
    tcpFrame(CLIENT, POD_VIP, { sport: 40000, dport: 80, flags: 0x10, payload: PAYLOAD }),
    POD,
  ),
  out4: tcpFrame(POD, CLIENT, { sport: 8080, dport: 40000, flags: 0x10, payload: PAYLOAD }),
  in6: enc(
    tcpFrame6(CLIENT6, POD_VIP6, { sport: 40000, dport: 80, flags: 0x10, payload: PAYLOAD }),
    POD6,
  ),
  out6: tcpFrame6(POD6, CLIENT6, { sport: 8080, dport: 40000, flags: 0x10, payload: PAYLOAD }),
};

using floorObj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/tc_pass.o`);
const floor = floorObj.program("hf_tc_pass");
const dps = await Promise.all(variants.map(async ([name, dir]) => {
  const dp = await NodeDatapath.open({ pinDir: null, objectDir: dir });
  dp.configure({ encapPort: 6080, mssMax: 1432 });
  for (const [pod, vip] of [[POD, POD_VIP], [POD6, POD_VIP6]]) {
    dp.setFrontend({ pod: pod!, vip: vip!, port: 80, proto: PROTO.TCP, targetPort: 8080 });
  }
  testRun(dp.nodeIn, FRAMES.in4);
  testRun(dp.nodeIn, FRAMES.in6);
  return { name, dp };
}));
const out: Record<string, Record<string, number>> = {};
for (const frame of ["in4", "out4", "in6", "out6"] as const) {
  const f: number[] = [];
  const a: number[][] = dps.map(() => []);
  for (let i = 0; i < calls; i++) {
    f.push(testRun(floor, FRAMES[frame].slice()).durationNs);
    dps.forEach(({ dp }, j) => {
      const prog = frame.startsWith("in") ? dp.nodeIn : dp.nodeOut;
      a[j]!.push(testRun(prog, FRAMES[frame].slice()).durationNs);
    });
  }
  const fl = median(f);
  const row: Record<string, number> = { floor_ns: fl };
  dps.forEach(({ name }, j) => {
    row[name] = median(a[j]!);
    row[`${name}_x`] = +(median(a[j]!) / fl).toFixed(2);
  });
  out[frame] = row;
}
for (const { dp } of dps) dp[Symbol.dispose]();
console.log(JSON.stringify(out));
