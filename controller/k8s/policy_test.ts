import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { PolicyRejectedError } from "../../policy-as/host/mod.ts";
import { MemoryModelStore } from "../model/_memory_model_store.ts";
import { ModelPublisher } from "../model/publisher.ts";
import { sha256Hex } from "../model/schema.ts";
import type { KubeObject } from "./objects.ts";
import { PolicyChecker } from "./policy.ts";
import type { ClusterWriter, EventInput } from "./status.ts";

const configMap = (bytes: Uint8Array): KubeObject => ({
  metadata: { namespace: "holdfast-system", name: "holdfast-policy", uid: "u1" },
  binaryData: { "policy.wasm": btoa(String.fromCharCode(...bytes)) },
} as KubeObject);

Deno.test("policy checker → model: only accepted modules reach the publisher, each once; a rejected one leaves the model as it is", async () => {
  using _logs = captureLogs();
  const metrics = new Registry();
  const events: EventInput[] = [];
  const writer = { emitEvent: (e: EventInput) => void events.push(e) } as unknown as ClusterWriter;
  const good = new Uint8Array([1, 2, 3]), bad = new Uint8Array([6, 6, 6]);
  const checker = new PolicyChecker({
    writer,
    validate: (b) => {
      if (b[0] === 6) throw new PolicyRejectedError("vectors", "Policy module rejected: test");
      return Promise.resolve("digest");
    },
    registry: metrics, // its own, not the process one (lib/metrics.ts style)
  });
  const store = new MemoryModelStore();
  const pub = new ModelPublisher(store);
  await pub.replaceAll(new Map());
  // What main.ts controller wires: each accepted module to the running publisher.
  checker.onAccepted((p) => void pub.setPolicy(p));

  await checker.check([configMap(good)]);
  await checker.check([configMap(good)]);
  await checker.check([configMap(bad)]);
  await pub.flushPolicy();
  deepStrictEqual(events.map((e) => e.reason), ["PolicyValidated", "PolicyRejected"]);
  deepStrictEqual(checker.activeModule(), { sha256: await sha256Hex(good), wasm: good });
  deepStrictEqual([store.policy?.sha256, store.writes], [await sha256Hex(good), 1]);
  const validations = metrics.counter("holdfast_controller_policy_validations_total", "");
  deepStrictEqual(
    [validations.get({ result: "accepted" }), validations.get({ result: "rejected" })],
    [1, 1],
  );
});
