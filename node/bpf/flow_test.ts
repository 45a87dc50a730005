import { deepStrictEqual } from "node:assert/strict";
import {
  describeFlow,
  makeFlowKey,
  readFlowEvent,
  readFlowKey,
  readFlowValue,
  writeFlowKey,
  writeFlowValue,
} from "./flow.ts";
import { BoundedQueue } from "../lb/flows/queue.ts";
import { flowField, parseFlowField } from "../lb/flows/field.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";

Deno.test("flow field round-trips in both key modes", () => {
  const t = { saddr: "10.0.0.1", daddr: "10.0.100.1", sport: 40000, dport: 80, proto: 6 };
  const five = makeFlowKey(t);
  deepStrictEqual(flowField(five), "0a000001" + "9c40" + "0050" + "06");
  deepStrictEqual(parseFlowField(flowField(five), five.daddr), five);
  const client = makeFlowKey(t, "client-ip");
  deepStrictEqual(client.sport, 0);
  deepStrictEqual(parseFlowField(flowField(client), client.daddr), client);
  deepStrictEqual(describeFlow(five), "10.0.0.1:40000->10.0.100.1:80/6");
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
  deepStrictEqual([...buf.subarray(0, 16)], [
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
  deepStrictEqual(readFlowKey(view, 0), key);
  writeFlowValue(view, 16, { backend: parseIpv4("10.0.1.2"), flags: 1, lastSeenNs: 5e9 });
  deepStrictEqual([...buf.subarray(16, 24)], [10, 0, 1, 2, 1, 0, 0, 0]);
  deepStrictEqual(readFlowValue(view, 16), { backend: 0x0a000102, flags: 1, lastSeenNs: 5e9 });
  // As an event: backend at 16 (network order), service id at 20, ts at 24 (host order).
  view.setUint32(20, 7, true);
  const ev = readFlowEvent(view);
  deepStrictEqual([ev.backend, ev.serviceId, ev.tsNs], [0x0a000102, 7, 5e9]);
});

Deno.test("bounded queue is FIFO, drops the oldest when full and counts it", () => {
  const q = new BoundedQueue<number>(5, { chunkSize: 2 });
  for (let i = 1; i <= 4; i++) deepStrictEqual(q.push(i), 0);
  deepStrictEqual(q.take(3), [1, 2, 3]);
  for (let i = 5; i <= 8; i++) q.push(i);
  deepStrictEqual([q.size, q.dropped], [5, 0]);
  deepStrictEqual(q.push(9), 1);
  deepStrictEqual([q.size, q.dropped], [5, 1]);
  const batch = q.take(2); // [5, 6]
  deepStrictEqual(batch, [5, 6]);
  q.push(10);
  deepStrictEqual(q.requeue(batch), 1); // 6 entries for 5 places: the oldest (5) goes
  deepStrictEqual(q.take(10), [6, 7, 8, 9, 10]);
  deepStrictEqual([q.size, q.dropped], [0, 2]);
});
