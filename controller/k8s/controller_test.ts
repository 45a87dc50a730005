/**
 * The reconcile loop on plain objects and the in-memory writer: what it writes, what it does
 * not write again, fencing, release of unclaimed Services and the config's condition.
 */
import { deepStrictEqual } from "node:assert/strict";
import { captureLogs } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { waitUntil } from "../../node/lb/_testing.ts";
import type { K8sEvent } from "../../node/lb/sources/k8s_source.ts";
import { LbController } from "./controller.ts";
import type { KubeObject, ResourceName } from "./objects.ts";
import { MemoryClusterWriter, mergeConditions, type ServiceStatus } from "./status.ts";

function cluster(objects: Partial<Record<ResourceName, KubeObject[]>>) {
  return { list: (r: ResourceName) => objects[r] ?? [] };
}

const pool = {
  metadata: { name: "blue", generation: 1, resourceVersion: "1" },
  spec: { blocks: [{ cidr: "10.0.100.0/30" }] },
};

function svc(name: string, cls = "holdfast.io/lb"): KubeObject {
  return {
    metadata: { name, namespace: "shop", uid: `uid-${name}`, resourceVersion: "5" },
    spec: { type: "LoadBalancer", loadBalancerClass: cls, ports: [{ port: 80, name: "http" }] },
  };
}

/** Applies the recorded status writes to the objects, as the API server would. */
function applyWrites(w: MemoryClusterWriter, objects: KubeObject[]): void {
  for (const r of w.writes) {
    if (r.op === "event") continue;
    const o = objects.find((x) => x.metadata?.name === r.target.name)!;
    if (r.op === "service") {
      const s = r.status as ServiceStatus;
      o.status = {
        loadBalancer: s.loadBalancer.ingress ? { ingress: s.loadBalancer.ingress } : {},
        ...(s.conditions ? { conditions: s.conditions } : {}),
      };
    } else o.status = { ...o.status, ...r.status };
  }
  w.writes.length = 0;
}

Deno.test("LbController: writes status, pool status and an Event once; the same cluster again writes nothing", async () => {
  const services = [svc("web")], pools = [structuredClone(pool)];
  const writer = new MemoryClusterWriter();
  const fed: K8sEvent[] = [];
  const metrics = new Registry(); // its own, not the process one (lib/metrics.ts style)
  const c = new LbController({
    view: cluster({ services, addresspools: pools }),
    writer,
    sink: { apply: (e) => fed.push(...e) },
    now: () => new Date("2026-01-01T00:00:00Z"),
    registry: metrics,
  });
  const first = await c.reconcile();
  const counter = (name: string) => metrics.counter(`holdfast_controller_${name}_total`, "");
  deepStrictEqual(
    [
      counter("reconciles").get(),
      counter("allocations").get(),
      counter("writes").get({ kind: "Event" }),
    ],
    [1, 1, 1],
  );
  deepStrictEqual(first.writes, 2);
  deepStrictEqual(writer.events(), ["AddressAllocated shop/web"]);
  const write = writer.writes.find((w) => w.op === "service")!;
  deepStrictEqual(write.op === "service" && write.status.loadBalancer.ingress, [
    { ip: "10.0.100.0", ipMode: "VIP" },
  ]);
  // The model sees the address before the status round-trip.
  deepStrictEqual(fed.map((e) => `${e.type} ${e.object.metadata?.name}`), ["add web"]);
  applyWrites(writer, [...services, ...pools]);
  const second = await new LbController({
    view: cluster({ services, addresspools: pools }),
    writer,
  }).reconcile();
  deepStrictEqual([second.writes, writer.writes.length], [0, 0]);
});

Deno.test("LbController: a follower writes nothing and feeds its tables from status", async () => {
  const services = [svc("web")];
  services[0]!.status = { loadBalancer: { ingress: [{ ip: "10.0.100.1", ipMode: "VIP" }] } };
  const writer = new MemoryClusterWriter();
  const fed: K8sEvent[] = [];
  const c = new LbController({
    view: cluster({ services, addresspools: [pool] }),
    writer,
    sink: { apply: (e) => fed.push(...e) },
    isLeader: () => false,
  });
  const r = await c.reconcile();
  deepStrictEqual([r.leader, writer.writes.length], [false, 0]);
  deepStrictEqual(
    (fed[0]?.object as KubeObject).status?.loadBalancer?.ingress?.[0]?.ip,
    "10.0.100.1",
  );
});

Deno.test("LbController: fencing — leadership lost between decision and write writes nothing", async () => {
  let leader = true;
  const writer = new MemoryClusterWriter();
  const c = new LbController({
    view: {
      list: (r) => {
        if (r === "services") leader = false; // lost right after the pass began
        return r === "services" ? [svc("web")] : r === "addresspools" ? [pool] : [];
      },
    },
    writer,
    isLeader: () => leader,
  });
  await c.reconcile();
  deepStrictEqual(writer.writes, []);
});

Deno.test("LbController: a Service that leaves the class has its address and condition cleared", async () => {
  const services = [svc("web")], pools = [structuredClone(pool)];
  const writer = new MemoryClusterWriter();
  const c = new LbController({ view: cluster({ services, addresspools: pools }), writer });
  await c.reconcile();
  applyWrites(writer, [...services, ...pools]);
  services[0]!.spec.loadBalancerClass = "other.io/lb";
  services[0]!.metadata!.resourceVersion = "6";
  await c.reconcile();
  const clear = writer.writes.find((w) => w.op === "service");
  deepStrictEqual(clear?.op === "service" && clear.status, {
    loadBalancer: { ingress: null },
    conditions: null,
  });
  deepStrictEqual(writer.events(), ["AddressReleased shop/web"]);
});

Deno.test("LbController: an invalid LoadBalancerConfig gets Ready=False and a ConfigInvalid Event", async () => {
  const config = {
    metadata: { name: "default", generation: 2, resourceVersion: "3" },
    spec: { maglevTableSize: 1000, loadBalancerClass: "holdfast.io/lb" },
  };
  const writer = new MemoryClusterWriter();
  const c = new LbController({ view: cluster({ loadbalancerconfigs: [config] }), writer });
  await c.reconcile();
  const w = writer.writes.find((x) => x.op === "object");
  const cond = w?.op === "object"
    ? (w.status.conditions as { status: string; reason: string }[])
    : [];
  deepStrictEqual([cond[0]?.status, cond[0]?.reason], ["False", "InvalidSpec"]);
  deepStrictEqual(writer.events(), ["ConfigInvalid default"]);
});

Deno.test("mergeConditions keeps lastTransitionTime while the status stays, and other types", () => {
  const t0 = "2026-01-01T00:00:00Z", now = new Date("2026-02-02T00:00:00Z");
  const current = [
    { type: "Ready", status: "True", reason: "Valid", message: "a", lastTransitionTime: t0 },
    { type: "Other", status: "True", reason: "X", message: "", lastTransitionTime: t0 },
  ];
  const same = mergeConditions(current, [
    { type: "Ready", status: "True", reason: "Valid", message: "b" },
  ], now);
  deepStrictEqual(same.map((c) => [c.type, c.message, c.lastTransitionTime]), [
    ["Other", "", t0],
    ["Ready", "b", t0],
  ]);
  const flipped = mergeConditions(current, [
    { type: "Ready", status: "False", reason: "InvalidBlock", message: "c" },
  ], now);
  deepStrictEqual(flipped[1]?.lastTransitionTime, "2026-02-02T00:00:00Z");
});

Deno.test("LbController: a failed write is retried, and a change does not wait out the backoff", async () => {
  using logs = captureLogs();
  const services = [svc("web")];
  const writer = new MemoryClusterWriter();
  writer.fail = new Error("API server away");
  let passes = 0;
  const c = new LbController({
    view: {
      list: (r) => {
        if (r === "services") passes++;
        return r === "services" ? services : r === "addresspools" ? [pool] : [];
      },
    },
    writer,
    debounceMs: 1,
    // A retry an hour away: the change below is written long before it (waits are 10 s at most).
    retry: { minMs: 3_600_000, maxMs: 3_600_000 },
  });
  try {
    c.trigger();
    // The first pass has failed its Event write (not a guess of how long that takes).
    await waitUntil(
      () => logs.records.some((r) => r.msg === "event not written" && r.retry === true),
      "the failed Event write",
    );
    deepStrictEqual(passes, 1);
    writer.fail = undefined;
    c.trigger(); // a change: runs now, not in an hour
    await waitUntil(() => writer.writes.length > 0, "the write after the change");
    deepStrictEqual(writer.events(), ["AddressAllocated shop/web"]);
  } finally {
    await c.stop();
  }
});
