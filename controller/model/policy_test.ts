import { deepStrictEqual, ok } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { MemoryModelStore } from "./_memory_model_store.ts";
import { MODEL_YAML, startTestAgent, startTestController, waitUntil } from "./_testing.ts";
import { ModelPublisher } from "./publisher.ts";
import { type ModelPolicy, sha256Hex } from "./schema.ts";

async function policyOf(bytes: number[]): Promise<ModelPolicy> {
  const wasm = new Uint8Array(bytes);
  return { sha256: await sha256Hex(wasm), wasm };
}

Deno.test("model policy: published once per module (rev++ and a stream entry), not again after a restart", async () => {
  const store = new MemoryModelStore();
  const a = await policyOf([0, 97, 115, 109, 1]), b = await policyOf([0, 97, 115, 109, 2]);
  using _logs = captureLogs();
  const pub = new ModelPublisher(store, { registry: new Registry() });
  deepStrictEqual(await pub.setPolicy(a), false, "before the first full sync: held back");
  deepStrictEqual(store.writes, 0);
  await pub.replaceAll(new Map());
  deepStrictEqual(store.policy?.sha256, a.sha256, "the full sync writes the pending module");
  deepStrictEqual(store.stream.at(-1), {
    id: store.stream.at(-1)!.id,
    rev: 1,
    epoch: store.epochToken,
    op: "policy",
    service: "",
    sha256: a.sha256,
  });
  deepStrictEqual(await pub.setPolicy(a), false, "same module: no write");
  deepStrictEqual(await pub.setPolicy(b), true);
  deepStrictEqual([store.rev, store.writes, store.policy?.sha256], [2, 2, b.sha256]);

  // A restarted controller (new publisher) with the same module writes nothing.
  const again = new ModelPublisher(store, { registry: new Registry() });
  await again.setPolicy(b);
  await again.replaceAll(new Map());
  deepStrictEqual([store.rev, store.writes], [2, 2]);
});

Deno.test("model policy: a publisher that may not write (lost its lease) writes no module", async () => {
  const store = new MemoryModelStore();
  let leader = true;
  using _logs = captureLogs();
  const pub = new ModelPublisher(store, { registry: new Registry(), canWrite: () => leader });
  await pub.replaceAll(new Map());
  leader = false;
  const err = await pub.setPolicy(await policyOf([1, 2, 3])).catch((e) => e as Error);
  ok(err instanceof Error && /not allowed to write/.test(err.message), String(err));
  deepStrictEqual([store.policy, store.writes], [null, 0]);
});

Deno.test("model policy: an agent's source hands each new module to onPolicy once, at the snapshot and on change", async () => {
  const store = new MemoryModelStore();
  const a = await policyOf([9, 9, 9]), b = await policyOf([8, 8]);
  using logs = captureLogs();
  await using ctl = await startTestController(store, MODEL_YAML);
  ctl.pub.setPolicy(a);
  await waitUntil(() => store.policy?.sha256 === a.sha256, "module a published");
  const seen: string[] = [];
  await using agent = await startTestAgent(store, {
    onPolicy: (p) => void seen.push(p.sha256),
  });
  await agent.source.ready();
  await waitUntil(() => seen.length === 1, "module a handed over at the snapshot");
  ctl.pub.setPolicy(b);
  await waitUntil(() => seen.length === 2, "module b handed over on change");
  ctl.file.load(MODEL_YAML + "  - name: default/x\n    frontends: [10.0.100.7:80/TCP]\n");
  await waitUntil(() => agent.source.view?.services.length === 3, "a service change after it");
  deepStrictEqual(seen, [a.sha256, b.sha256], "each module once; a service change hands none");
  // A corrupt module (bytes not matching its sha256) is not handed over.
  await store.writePolicy(store.epochToken, { sha256: "00".repeat(32), wasm: new Uint8Array([1]) });
  await waitUntil(
    () => logs.records.some((r) => r.msg === "policy module in the model is corrupt, ignored"),
    "corrupt module logged",
  );
  deepStrictEqual(seen.length, 2);
});
