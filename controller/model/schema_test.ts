import { deepStrictEqual } from "node:assert/strict";
import { hashTag } from "../../lib/redis_cluster.ts";
import { modelKeys } from "./schema.ts";
import { reportsKey } from "./reports.ts";
import { RedisLeaseStore } from "../egress/lease.ts";
import { egressConfigKey } from "../egress/redis_config.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";

Deno.test("model, reports, egress lease and config keys: one hash tag each (one cluster slot)", () => {
  // The model's scripts take every model key; reports live beside them.
  const model = [...Object.values(modelKeys("p")), reportsKey("p")];
  deepStrictEqual(new Set(model.map(hashTag)), new Set(["m"]));
  // An EgressNAT's lease scripts take lease, epoch and want; its config shares their tag.
  const leases = new RedisLeaseStore({} as RedisConnection, "ns/nat");
  const keys = [...Object.values(leases.keys("198.18.0.1")), egressConfigKey("ns/nat")];
  deepStrictEqual(new Set(keys.map(hashTag)), new Set(["ns/nat"]));
});
