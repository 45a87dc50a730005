/**
 * What `deno task deploy` waits for: CRDs Established before objects of their kinds, and
 * Deployments and DaemonSets rolled out (their generation observed, every replica updated and
 * available).
 *
 * @module
 */
import type * as k8s from "@kubernetes/client-node";
import { sleep } from "../lib/backoff.ts";
import { displayName, header, type Manifest } from "./_deploy_manifests.ts";

/** Waits (at most 60 s) until every CRD among `objects` is Established. */
export async function waitEstablished(
  client: k8s.KubernetesObjectApi,
  objects: readonly Manifest[],
  note: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (const crd of objects.filter((o) => o.kind === "CustomResourceDefinition")) {
    // Bounded by the deadline: a CRD that never becomes Established is an error.
    while (true) {
      const now = await client.read(header(crd)) as Manifest;
      const established = (now.status?.conditions ?? []).some((c: Manifest) =>
        c.type === "Established" && c.status === "True"
      );
      if (established) break;
      if (Date.now() > deadline) {
        throw new Error(`Cannot deploy: CRD "${crd.metadata.name}" not Established within 60 s`);
      }
      note(`waiting for CRD ${crd.metadata.name} to be Established`);
      await sleep(250);
    }
  }
}

/** Whether a Deployment or DaemonSet has rolled out its current generation. */
function rolledOut(obj: Manifest): { done: boolean; text: string } {
  const s = obj.status ?? {};
  const generation = obj.metadata?.generation ?? 0;
  const observed = (s.observedGeneration ?? -1) >= generation;
  if (obj.kind === "Deployment") {
    const want = obj.spec?.replicas ?? 1;
    const ready = s.availableReplicas ?? 0;
    const done = observed && (s.updatedReplicas ?? 0) >= want && ready >= want;
    return { done, text: `${ready}/${want} available` };
  }
  const want = s.desiredNumberScheduled ?? 0;
  const ready = s.numberAvailable ?? 0;
  const done = observed && (s.updatedNumberScheduled ?? 0) >= want && ready >= want;
  return { done, text: `${ready}/${want} available` };
}

/** Waits until every Deployment and DaemonSet among `objects` rolled out; throws at the deadline. */
export async function waitRollouts(
  client: k8s.KubernetesObjectApi,
  objects: readonly Manifest[],
  timeoutMs: number,
  note: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "DaemonSet");
  for (const w of workloads) {
    let state = { done: false, text: "" };
    while (Date.now() <= deadline) {
      state = rolledOut(await client.read(header(w)) as Manifest);
      if (state.done) break;
      await sleep(Math.min(500, Math.max(0, deadline - Date.now())));
    }
    if (!state.done) {
      throw new Error(
        `Cannot finish the deploy: ${displayName(w)} did not roll out within ${
          timeoutMs / 1000
        } s (${state.text || "no status"})`,
      );
    }
    note(`${displayName(w)} rolled out (${state.text})`);
  }
}
