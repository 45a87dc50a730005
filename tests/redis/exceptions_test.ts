/**
 * Exceptions-only flow sharing (`--flow-sharing exceptions`) against a real redis-server: flows
 * that every node's table places alike are stored (HSET, with their table's version in the value's
 * epoch slot) but not announced; exceptions are announced and installed; a node joining restores
 * the exceptions only; flow buckets (several hash tags per LB IP) behave alike.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { flush } from "../../node/lb/flows/_testing.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { datapathLearns, event, node, until, VIP } from "./_flow_nodes.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import type { TablePicker } from "../../node/lb/flows/exceptions.ts";
import { isFlowKey6 } from "../../node/bpf/flow.ts";
import { decodeFlowValue, flowValueVersion, vipKeys } from "../../node/lb/flows/schema.ts";
import { flowField } from "../../node/lb/flows/field.ts";

const PICKED = parseIpv4("10.0.1.2");
/** Every node's table picks 10.0.1.2 for every flow (version 77). */
const picker: TablePicker = {
  pick: (k) => isFlowKey6(k) ? undefined : { backend: PICKED, version: 77 },
};
const sharing = { sharing: "exceptions" as const, picker };

for (const buckets of [1, 4]) {
  Deno.test(`redis: exceptions mode stores every flow, announces and installs exceptions only (${buckets} bucket(s))`, async () => {
    using _logs = captureLogs();
    await using redis = await startRedis();
    const store = { buckets };
    await using a = await node("lb-a", redis, { ...sharing, store });
    await using b = await node("lb-b", redis, { ...sharing, store });
    const plain = Array.from({ length: 300 }, (_, i) => event(0x0a010000 + i, 40000, "10.0.1.2"));
    const odd = Array.from({ length: 5 }, (_, i) => event(0x0a020000 + i, 40000, "10.0.1.3"));
    for (const ev of [...plain, ...odd]) datapathLearns(a, ev);
    await flush(a.agent);
    await until("b installs the exceptions", () => odd.every((e) => b.table.get(e.key)));
    deepStrictEqual(b.table.size, odd.length, "b holds the exceptions only");
    // Every flow is in Redis, the plain ones with the table's version in the epoch slot.
    let stored = 0;
    for await (const page of a.store.scan(VIP)) stored += page.length;
    deepStrictEqual(stored, plain.length + odd.length, "every flow stored");
    if (buckets === 1) {
      const v = await redis.cli("HGET", vipKeys(VIP).flows, flowField(plain[0]!.key));
      deepStrictEqual(flowValueVersion(v), 77, v);
      deepStrictEqual(decodeFlowValue(v).backend, PICKED, "read as the previous release reads it");
    }
    // A joining node restores the exceptions only.
    await using c = await node("lb-c", redis, { ...sharing, store });
    deepStrictEqual(c.table.size, odd.length);
    for (const e of odd) deepStrictEqual(c.table.get(e.key)?.backend, e.backend);
    // And a node in mode all restores all (what is stored is complete).
    await using d = await node("lb-d", redis, { store });
    deepStrictEqual(d.table.size, plain.length + odd.length);
    ok(a.agent.ready && b.agent.ready);
  });
}
