import {
  describeFlow,
  flowField,
  formatIpv4,
  makeFlowKey,
  parseFlowField,
  parseIpv4,
  readFlowEvent,
  readFlowKey,
  readFlowValue,
  writeFlowKey,
  writeFlowValue,
} from "./flow.ts";
import { BoundedQueue } from "./queue.ts";
import { decodeFlowValue, encodeFlowValue, vipKeys } from "./schema.ts";

function assertEquals(a: unknown, b: unknown) {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("IPv4 parses and formats; bad input is rejected with the value", () => {
  assertEquals(parseIpv4("10.0.0.1"), 0x0a000001);
  assertEquals(formatIpv4(0xc0a80101), "192.168.1.1");
  for (const bad of ["10.0.0", "10.0.0.256", "a.b.c.d"]) {
    let msg = "";
    try {
      parseIpv4(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    assertEquals(msg, `Cannot parse IPv4 address "${bad}"`);
  }
});

Deno.test("flow field round-trips in both key modes", () => {
  const t = { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6 };
  const five = makeFlowKey(t);
  assertEquals(flowField(five), "0a000001" + "9c40" + "0050" + "06");
  assertEquals(parseFlowField(flowField(five), five.daddr), five);
  const client = makeFlowKey(t, "client-ip");
  assertEquals(client.sport, 0);
  assertEquals(parseFlowField(flowField(client), client.daddr), client);
  assertEquals(describeFlow(five), "10.0.0.1:40000->10.0.100.1:80/6");
});

Deno.test("flow key, value and event byte layouts match docs/contracts.md", () => {
  const key = makeFlowKey({
    saddr: "10.0.0.1",
    daddr: "10.0.100.1",
    sport: 40000,
    dport: 80,
    proto: 6,
  });
  const buf = new Uint8Array(32);
  const view = new DataView(buf.buffer);
  writeFlowKey(view, 0, key);
  assertEquals([...buf.subarray(0, 16)], [
    10,
    0,
    0,
    1,
    10,
    0,
    100,
    1,
    0x9c,
    0x40,
    0,
    80,
    6,
    0,
    0,
    0,
  ]);
  assertEquals(readFlowKey(view, 0), key);
  writeFlowValue(view, 16, { backend: parseIpv4("10.0.1.2"), flags: 1, lastSeenNs: 5e9 });
  assertEquals([...buf.subarray(16, 24)], [10, 0, 1, 2, 1, 0, 0, 0]);
  assertEquals(readFlowValue(view, 16), { backend: 0x0a000102, flags: 1, lastSeenNs: 5e9 });
  // As an event: backend at 16 (network order), service id at 20, ts at 24 (host order).
  view.setUint32(20, 7, true);
  const ev = readFlowEvent(view);
  assertEquals([ev.backend, ev.serviceId, ev.tsNs], [0x0a000102, 7, 5e9]);
});

Deno.test("schema keys share the LB IP hash tag; values round-trip", () => {
  assertEquals(vipKeys("10.0.100.1"), {
    instance: "hf:{10.0.100.1}:instance",
    flows: "hf:{10.0.100.1}:flows",
    seen: "hf:{10.0.100.1}:seen",
    events: "hf:{10.0.100.1}:events",
  });
  assertEquals(encodeFlowValue(0x0a000102, 3), "0a000102:3");
  assertEquals(decodeFlowValue("0a000102:3"), { backend: 0x0a000102, epoch: 3 });
});

Deno.test("bounded queue dedupes, drops the oldest when full and counts it", () => {
  const q = new BoundedQueue<number>(2);
  q.push("a", 1);
  q.push("a", 2);
  assertEquals(q.size, 1);
  q.push("b", 3);
  assertEquals(q.push("c", 4), 1);
  assertEquals([q.size, q.dropped], [2, 1]);
  assertEquals(q.take(10), [["b", 3], ["c", 4]]);
  q.push("d", 5);
  assertEquals(q.requeue([["b", 3], ["d", 9]]), 0);
  assertEquals(q.take(10), [["d", 5], ["b", 3]]);
});
