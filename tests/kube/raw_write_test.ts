/**
 * `KubeClusterWriter`'s writes through `controller/k8s/_raw_write.ts` against the Kubernetes API
 * test server: a status merge patch lands with the controller as its field manager, a stale
 * resourceVersion is refused with 409 as an error `_write_retry.ts` reads (no retry), a missing
 * Service is a 404, an Event is stored with a MicroTime; and, against a loopback stand-in that
 * answers 429 with `Retry-After`, the retry reads the status and the header.
 */
import { deepStrictEqual, equal, match, ok, rejects } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { KubeClusterWriter } from "../../controller/k8s/kube_writer.ts";
import { ApiWriteError } from "../../controller/k8s/_raw_write.ts";
import {
  retryableWrite,
  retryAfterMs,
  statusOf,
  withRetry,
} from "../../controller/k8s/_write_retry.ts";
import { kubeConfigFor, startKubeServer } from "../../lab/kube/mod.ts";

const status = {
  loadBalancer: { ingress: [{ ip: "10.0.100.1", ipMode: "VIP" as const }] },
  conditions: [{
    type: "holdfast.io/AddressAllocated",
    status: "True" as const,
    reason: "Allocated",
    message: "10.0.100.1 from pool blue",
    lastTransitionTime: "2026-11-29T15:00:00Z",
  }],
};

Deno.test("raw writes: status patch, stale precondition, missing object, Event", async () => {
  await using kube = await startKubeServer({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(kube);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const created = await core.createNamespacedService({
    namespace: "default",
    body: {
      metadata: { name: "web" },
      spec: { type: "LoadBalancer", ports: [{ port: 80, name: "http" }] },
    },
  });
  const writer = new KubeClusterWriter(kc, "controller-0");
  try {
    const rv = created.metadata!.resourceVersion!;
    const target = { kind: "Service" as const, namespace: "default", name: "web" };
    await writer.patchServiceStatus({ ...target, resourceVersion: rv }, status);
    const svc = await core.readNamespacedServiceStatus({ namespace: "default", name: "web" });
    deepStrictEqual(svc.status?.loadBalancer?.ingress?.map((i) => i.ip), ["10.0.100.1"]);
    equal(svc.status?.conditions?.[0]?.reason, "Allocated");
    ok(
      svc.metadata?.managedFields?.some((f) =>
        f.manager === "holdfast-controller" && f.subresource === "status"
      ),
      "the status is managed by the controller's field manager",
    );

    // Written over a version that is gone: 409, final (a precondition: no retry in place).
    const stale = await writer.patchServiceStatus({ ...target, resourceVersion: rv }, status)
      .then(() => undefined, (e) => e);
    ok(stale instanceof ApiWriteError, String(stale));
    equal(statusOf(stale), 409);
    equal(retryableWrite(stale, false), false);
    match((stale.body as { reason?: string }).reason ?? "", /Conflict/);

    await rejects(
      writer.patchServiceStatus({ ...target, name: "nope" }, status),
      (e) => statusOf(e) === 404,
    );

    await writer.emitEvent({
      regarding: { ...target, uid: svc.metadata?.uid },
      type: "Normal",
      reason: "AddressAllocated",
      note: "allocated 10.0.100.1 from pool blue",
      action: "Allocate",
    });
    const events = await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({
      namespace: "default",
    });
    equal(events.items.length, 1);
    const e = events.items[0]!;
    equal(e.reason, "AddressAllocated");
    equal(e.reportingController, "holdfast.io/controller");
    equal(e.reportingInstance, "controller-0");
    equal(e.regarding?.uid, svc.metadata?.uid);
    ok(e.eventTime !== undefined, "eventTime set");
  } finally {
    writer.close();
  }
});

Deno.test("raw writes: 429 with Retry-After is retried after it", async () => {
  let calls = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    calls++;
    return calls === 1
      ? Response.json({ kind: "Status", code: 429, reason: "TooManyRequests", message: "slow" }, {
        status: 429,
        headers: { "Retry-After": "2" },
      })
      : Response.json({ kind: "Service" });
  });
  try {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{
        name: "c",
        server: `http://127.0.0.1:${server.addr.port}`,
        skipTLSVerify: true,
      }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const writer = new KubeClusterWriter(kc, "controller-0");
    const waits: number[] = [];
    try {
      const retries = await withRetry(
        () =>
          writer.patchServiceStatus({ kind: "Service", namespace: "default", name: "web" }, status),
        { sleep: (ms) => (waits.push(ms), Promise.resolve()) },
      );
      equal(retries, 1);
      deepStrictEqual(waits, [2000]);
      equal(calls, 2);
    } finally {
      writer.close();
    }
    // The error itself, as the retry saw it.
    calls = 0;
    const writer2 = new KubeClusterWriter(kc, "controller-0");
    try {
      const err = await writer2.patchServiceStatus(
        { kind: "Service", namespace: "default", name: "web" },
        status,
      ).then(() => undefined, (e) => e);
      equal(statusOf(err), 429);
      equal(retryAfterMs(err), 2000);
    } finally {
      writer2.close();
    }
  } finally {
    await server.shutdown();
  }
});
