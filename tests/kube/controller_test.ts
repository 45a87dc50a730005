/**
 * The controller (`controller/k8s/`) against the Kubernetes API test server: addresses, status
 * conditions and Events for Services; pool conditions; release and reuse; a restart that writes
 * nothing; EndpointSlice states in the published model; `kubectl get svc`; and `main.ts
 * controller` as a process under `-P=controller`.
 */
import { deepStrictEqual, match, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { type ModelEntry, startModelPublisher } from "../../controller/model/mod.ts";
import { MemoryModelStore } from "../../controller/model/_memory_model_store.ts";
import { startController } from "../../controller/k8s/run.ts";
import { createAddressPool, kubeConfigFor } from "../../lab/kube/mod.ts";
import { kubectlEnv, waitFor } from "./_kubectl.ts";
import { startRedis } from "../../lab/redis_server.ts";

const CLASS = "holdfast.io/lb";
const custom = (kc: k8s.KubeConfig) => kc.makeApiClient(k8s.CustomObjectsApi);

function service(name: string, annotations: Record<string, string> = {}, port = 80) {
  return {
    namespace: "default",
    body: {
      metadata: { name, annotations },
      spec: { type: "LoadBalancer", loadBalancerClass: CLASS, ports: [{ port, name: "http" }] },
    },
  };
}

function slice(svc: string, endpoints: { ip: string; terminating?: boolean }[]) {
  return {
    namespace: "default",
    body: {
      metadata: { name: `${svc}-1`, labels: { "kubernetes.io/service-name": svc } },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: endpoints.map((e) => ({
        addresses: [e.ip],
        conditions: { ready: !e.terminating, serving: true, terminating: e.terminating ?? false },
      })),
    },
  };
}

interface Svc {
  status?: {
    loadBalancer?: { ingress?: { ip?: string }[] };
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

const ingress = (s: Svc) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);
const allocated = (s: Svc) =>
  s.status?.conditions?.find((c) => c.type === "holdfast.io/AddressAllocated");

/** events.k8s.io Events as `reason name`. */
async function eventReasons(kc: k8s.KubeConfig, namespace = "default"): Promise<string[]> {
  const list = await kc.makeApiClient(k8s.EventsV1Api).listNamespacedEvent({ namespace });
  return list.items.map((e) => `${e.reason} ${e.regarding?.name}`);
}

Deno.test("controller: a Service gets an address, a condition and an Event; kubectl shows it", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "blue", [{ cidr: "10.0.100.0/30" }]);
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  await core.createNamespacedService(service("web"));
  let svc: Svc = {};
  await waitFor("an address", async () => {
    svc = await core.readNamespacedServiceStatus({ name: "web", namespace: "default" });
    return ingress(svc).length > 0;
  });
  deepStrictEqual(ingress(svc), ["10.0.100.0"]);
  const cond = allocated(svc)!;
  deepStrictEqual([cond.status, cond.reason], ["True", "Allocated"]);
  deepStrictEqual(cond.message, 'Address 10.0.100.0 from pool "blue"');
  await waitFor("the Event", async () => (await eventReasons(kc)).includes("AddressAllocated web"));
  const table = await env.ok(["get", "svc", "web", "--no-headers"]);
  match(table, /^web\s+LoadBalancer\s+\S+\s+10\.0\.100\.0\s+80:\d+\/TCP/);
  const pools = await env.ok(["get", "hfpool", "blue", "--no-headers"]);
  match(pools, /^blue\s+4\s+1\s+3\s+True/);
});

Deno.test("controller: an exhausted pool fails one Service, another pool still allocates; an invalid pool is not Ready", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "a", [{ start: "10.0.1.1", stop: "10.0.1.1" }]);
  await createAddressPool(kc, "b", [{ cidr: "10.0.2.0/30" }]);
  await createAddressPool(kc, "c-bad", [{ cidr: "10.0.3.5/28" }]);
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  await core.createNamespacedService(service("first", { "holdfast.io/address-pool": "a" }));
  await waitFor(
    "first allocated",
    async () =>
      ingress(await core.readNamespacedServiceStatus({ name: "first", namespace: "default" }))
        .length === 1,
  );
  await core.createNamespacedService(service("second", { "holdfast.io/address-pool": "a" }));
  await core.createNamespacedService(service("third", { "holdfast.io/address-pool": "b" }));
  let second: Svc = {}, third: Svc = {};
  await waitFor("second fails, third allocates", async () => {
    second = await core.readNamespacedServiceStatus({ name: "second", namespace: "default" });
    third = await core.readNamespacedServiceStatus({ name: "third", namespace: "default" });
    return allocated(second) !== undefined && ingress(third).length === 1;
  });
  deepStrictEqual(ingress(second), []);
  deepStrictEqual([allocated(second)!.status, allocated(second)!.reason], [
    "False",
    "PoolExhausted",
  ]);
  deepStrictEqual(ingress(third), ["10.0.2.0"]);
  await waitFor(
    "AllocationFailed",
    async () => (await eventReasons(kc)).includes("AllocationFailed second"),
  );
  // deno-lint-ignore no-explicit-any
  const bad: any = await custom(kc).getClusterCustomObjectStatus({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "addresspools",
    name: "c-bad",
  });
  // deno-lint-ignore no-explicit-any
  const ready = bad.status.conditions.find((c: any) => c.type === "Ready");
  deepStrictEqual([ready.status, ready.reason], ["False", "InvalidBlock"]);
  // deno-lint-ignore no-explicit-any
  const exhausted: any = await custom(kc).getClusterCustomObjectStatus({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "addresspools",
    name: "a",
  });
  deepStrictEqual([exhausted.status.used, exhausted.status.available], [1, 0]);
  await waitFor("PoolInvalid", async () => (await eventReasons(kc)).includes("PoolInvalid c-bad"));
});

Deno.test("controller: a deleted Service's address is reused and its model entry goes; a restart writes nothing", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "blue", [{ start: "10.0.5.1", stop: "10.0.5.2" }]);
  const store = new MemoryModelStore();
  const names = () => [...store.entries.keys()].sort();
  {
    await using running = startController(kc, { identity: "controller-0" });
    await using pub = startModelPublisher(running.cp, store);
    await running.synced;
    await core.createNamespacedService(service("a"));
    await core.createNamespacedService(service("b", {}, 81));
    await waitFor("both in the model", () => names().join() === "default/a,default/b");
    await core.deleteNamespacedService({ name: "a", namespace: "default" });
    await waitFor("a gone from the model", () => names().join() === "default/b");
    await core.createNamespacedService(service("c", {}, 82));
    await waitFor(
      "c takes a's address",
      async () =>
        ingress(await core.readNamespacedServiceStatus({ name: "c", namespace: "default" }))
          .join() === "10.0.5.1",
    );
    await waitFor("c in the model", () => names().join() === "default/b,default/c");
    const entry = JSON.parse(store.entries.get("default/c")!) as ModelEntry;
    deepStrictEqual(entry.service.frontends?.map((f) => f.address), ["10.0.5.1:82/TCP"]);
    await waitFor(
      "AddressReleased a",
      async () => (await eventReasons(kc)).includes("AddressReleased a"),
    );
    await pub.stop();
  }
  // Restart: a new controller and publisher over the same cluster and store.
  const patchesBefore = env.server.requests.filter((r) => r.method !== "GET").length;
  const writesBefore = store.writes;
  const eventsBefore = (await eventReasons(kc)).length;
  await using running = startController(kc, { identity: "controller-1" });
  await using pub = startModelPublisher(running.cp, store);
  await running.synced;
  await pub.synced();
  await new Promise((r) => setTimeout(r, 200));
  const writes = env.server.requests.filter((r) => r.method !== "GET").slice(patchesBefore);
  deepStrictEqual(writes, [], "a restarted controller writes nothing to the API server");
  deepStrictEqual(store.writes, writesBefore, "nor to the model store");
  deepStrictEqual((await eventReasons(kc)).length, eventsBefore);
  for (const [name, ip] of [["b", "10.0.5.2"], ["c", "10.0.5.1"]] as const) {
    const s = await core.readNamespacedServiceStatus({ name, namespace: "default" });
    deepStrictEqual(ingress(s), [ip]);
  }
});

Deno.test("controller: a terminating endpoint is a terminating backend in the published model", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  await createAddressPool(kc, "blue", [{ cidr: "10.0.6.0/30" }]);
  const store = new MemoryModelStore();
  await using running = startController(kc, { identity: "controller-0" });
  await using _pub = startModelPublisher(running.cp, store);
  await running.synced;
  await core.createNamespacedService(service("web"));
  await discovery.createNamespacedEndpointSlice(
    slice("web", [{ ip: "10.244.0.10" }, { ip: "10.244.0.11" }]),
  );
  const states = () => {
    const raw = store.entries.get("default/web");
    if (!raw) return "";
    const e = JSON.parse(raw) as ModelEntry;
    return e.backends.map((b) => `${b.address} ${b.state ?? "active"}`).sort().join(", ");
  };
  await waitFor(
    "two active backends",
    () => states() === "10.244.0.10:8080/TCP active, 10.244.0.11:8080/TCP active",
  );
  await discovery.replaceNamespacedEndpointSlice({
    name: "web-1",
    ...slice("web", [{ ip: "10.244.0.10", terminating: true }, { ip: "10.244.0.11" }]),
  });
  await waitFor(
    "one terminating",
    () => states() === "10.244.0.10:8080/TCP terminating, 10.244.0.11:8080/TCP active",
  );
  await discovery.deleteNamespacedEndpointSlice({ name: "web-1", namespace: "default" });
  await waitFor("no backends", () => states() === "");
});

/** A `main.ts controller` process under `-P=controller` against `kubeconfig`. */
function spawnController(kubeconfig: string, identity: string, extra: string[] = []) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-P=controller",
      "--no-prompt",
      "main.ts",
      "controller",
      `--kubeconfig=${kubeconfig}`,
      `--identity=${identity}`,
      `--listen=127.0.0.1:${port}`,
      ...extra,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: r.status, text: await r.text() };
  };
  return {
    get,
    ready: () =>
      waitFor(`${identity} /readyz`, async () => {
        try {
          return (await get("/readyz")).status === 200;
        } catch {
          return false;
        }
      }, 20_000),
    /** Sends `signal`; returns the exit status and what it printed. */
    async stop(signal: Deno.Signal = "SIGTERM") {
      try {
        child.kill(signal);
      } catch { /* already gone */ }
      const status = await child.status;
      const [out, err] = await output;
      return { status, text: `${out}\n${err}` };
    },
  };
}

Deno.test("controller: main.ts controller runs under -P=controller, serves /readyz and /metrics", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: "holdfast-system" } } });
  await createAddressPool(kc, "blue", [{ cidr: "10.0.7.0/30" }]);
  const proc = spawnController(env.kubeconfig, "controller-test");
  let stopped: Awaited<ReturnType<typeof proc.stop>> | undefined;
  try {
    await proc.ready();
    await core.createNamespacedService(service("web"));
    await waitFor(
      "an address",
      async () =>
        ingress(await core.readNamespacedServiceStatus({ name: "web", namespace: "default" }))
          .join() === "10.0.7.0",
      10_000,
    );
    const metrics = (await proc.get("/metrics")).text;
    match(metrics, /holdfast_controller_allocations_total 1/);
    match(metrics, /holdfast_controller_informer_lists_total\{resource="services"\} 1/);
    deepStrictEqual((await proc.get("/healthz")).status, 200);
  } finally {
    stopped = await proc.stop();
  }
  ok(stopped.status.success, `controller exited ${stopped.status.code}:\n${stopped.text}`);
});

Deno.test("controller: with --redis it serves /dashboard: the model it published, live", async () => {
  await using redis = await startRedis();
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: "holdfast-system" } } });
  await createAddressPool(kc, "blue", [{ cidr: "10.0.8.0/30" }]);
  const proc = spawnController(env.kubeconfig, "dashboard-test", [`--redis=${redis.url}`]);
  let stopped: Awaited<ReturnType<typeof proc.stop>> | undefined;
  try {
    await proc.ready();
    await core.createNamespacedService(service("web"));
    await core.createNamespacedService(service("api"));
    const page = await proc.get("/dashboard");
    deepStrictEqual(page.status, 200);
    match(page.text, /<ol id="timeline"/);
    // The status the page is fed: the addresses the controller gave and published to Redis.
    await waitFor("both LB addresses on the dashboard", async () => {
      const s = JSON.parse((await proc.get("/dashboard/status.json")).text);
      const addresses = (s.addresses as { address: string }[]).map((a) => a.address).join();
      return s.redis.up === true && addresses === "10.0.8.0,10.0.8.1";
    }, 20_000);
    deepStrictEqual((await proc.get("/metrics")).status, 200);
  } finally {
    stopped = await proc.stop();
  }
  ok(stopped.status.success, `controller exited ${stopped.status.code}:\n${stopped.text}`);
});

Deno.test("controller: two replicas — one leads; killed, the other takes over and allocates nothing twice", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: "holdfast-system" } } });
  await createAddressPool(kc, "blue", [{ cidr: "10.0.9.0/29" }]);
  const timing = ["--lease-duration-ms=1500", "--renew-deadline-ms=1000", "--retry-period-ms=200"];
  const procs = new Map([
    ["replica-a", spawnController(env.kubeconfig, "replica-a", timing)],
    ["replica-b", spawnController(env.kubeconfig, "replica-b", timing)],
  ]);
  const leases = kc.makeApiClient(k8s.CoordinationV1Api);
  const holder = async () =>
    (await leases.readNamespacedLease({
      name: "holdfast-controller",
      namespace: "holdfast-system",
    }))
      .spec?.holderIdentity ?? "";
  const addresses = async () => {
    const list = await core.listNamespacedService({ namespace: "default" });
    return Object.fromEntries(list.items.map((s) => [s.metadata!.name!, ingress(s).join()]));
  };
  try {
    for (const p of procs.values()) await p.ready();
    for (const name of ["s1", "s2", "s3"]) await core.createNamespacedService(service(name));
    await waitFor(
      "three addresses",
      async () => Object.values(await addresses()).filter((a) => a !== "").length === 3,
      30_000,
    );
    const before = await addresses();
    const leader = await holder();
    ok(procs.has(leader), `a replica leads (holder "${leader}")`);
    await procs.get(leader)!.stop("SIGKILL"); // no release: the other must wait out the lease
    const killedAt = performance.now();
    await core.createNamespacedService(service("s4"));
    await waitFor(
      "s4 allocated by the new leader",
      async () => (await addresses()).s4 !== "",
      30_000, // the takeover itself takes about the 1.5 s lease; the figure is printed above
    );
    const takeoverMs = performance.now() - killedAt;
    console.log(JSON.stringify({ takeover_after_kill_ms: Math.round(takeoverMs), lease_ms: 1500 }));
    const after = await addresses();
    const other = [...procs.keys()].find((k) => k !== leader)!;
    deepStrictEqual(await holder(), other);
    deepStrictEqual({ ...after, s4: undefined }, { ...before, s4: undefined }, "nothing moved");
    deepStrictEqual(
      new Set(Object.values(after)).size,
      4,
      `no address twice: ${JSON.stringify(after)}`,
    );
  } finally {
    for (const p of procs.values()) await p.stop();
  }
});

Deno.test("controller: after 410 Gone the informers re-list: a Service created and one deleted during the outage are handled", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  await createAddressPool(kc, "blue", [{ start: "10.0.8.1", stop: "10.0.8.1" }]);
  await using running = startController(kc, {
    identity: "controller-0",
    backoff: { minMs: 10, maxMs: 100 },
  });
  await running.synced;
  await core.createNamespacedService(service("old"));
  await waitFor(
    "old allocated",
    async () =>
      ingress(await core.readNamespacedServiceStatus({ name: "old", namespace: "default" }))
        .join() === "10.0.8.1",
  );
  const lists = () =>
    env.server.requests.filter((r) =>
      r.path.startsWith("/api/v1/services") && !r.path.includes("watch=true")
    ).length;
  const listsBefore = lists();
  // While the watches are down, "old" goes and "new" comes; the history is compacted.
  const services = env.server.registry.find("", "v1", "services")!;
  env.server.endWatches();
  env.server.rest.delete(services, "default", "old");
  env.server.rest.create(services, "default", service("new").body, { manager: "test" });
  env.server.store.compact();
  await waitFor(
    "new takes old's address",
    async () =>
      ingress(await core.readNamespacedServiceStatus({ name: "new", namespace: "default" }))
        .join() === "10.0.8.1",
  );
  ok(lists() > listsBefore, "the informer listed Services again");
});

Deno.test("controller: the policy ConfigMap's module is validated; a bad one is a PolicyRejected Event", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const where = { namespace: "default", name: "holdfast-policy" };
  const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
  const good = await Deno.readFile("policy-as/build/release.wasm");
  await core.createNamespacedConfigMap({
    namespace: "default",
    body: { metadata: { name: where.name }, binaryData: { "policy.wasm": b64(good) } },
  });
  await using running = startController(kc, { identity: "controller-0", policyConfigMap: where });
  await running.synced;
  await waitFor(
    "PolicyValidated",
    async () => (await eventReasons(kc)).includes("PolicyValidated holdfast-policy"),
    20_000,
  );
  const accepted = running.policy!.active();
  await core.patchNamespacedConfigMap({
    name: where.name,
    namespace: "default",
    body: [{
      op: "replace",
      path: "/binaryData/policy.wasm",
      value: b64(new Uint8Array([0, 1, 2])),
    }],
  });
  await waitFor(
    "PolicyRejected",
    async () => (await eventReasons(kc)).includes("PolicyRejected holdfast-policy"),
    20_000,
  );
  deepStrictEqual(running.policy!.active(), accepted, "the accepted module stays active");
});

Deno.test("controller: a LoadBalancerConfig with a non-prime Maglev size is Ready=False; fixed, Ready=True", async () => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const kc = await kubeConfigFor(env.server);
  await env.ok(["apply", "--server-side", "-f", "k8s/loadbalancerconfig-default.yaml"]);
  await using running = startController(kc, { identity: "controller-0" });
  await running.synced;
  const ready = async () =>
    (await env.ok(["get", "hflbc", "default", "-o", "jsonpath={.status.conditions[0].reason}"]))
      .trim();
  await waitFor("Ready=True", async () => (await ready()) === "Valid");
  await env.ok([
    "patch",
    "hflbc",
    "default",
    "--type=merge",
    "-p",
    '{"spec":{"maglevTableSize":1000}}',
  ]);
  await waitFor("Ready=False", async () => (await ready()) === "InvalidSpec");
  const table = await env.ok(["get", "hflbc", "default", "--no-headers"]);
  match(table, /^default\s+Stateful\s+holdfast\.io\/lb\s+False/);
  await waitFor(
    "ConfigInvalid",
    async () => (await eventReasons(kc)).includes("ConfigInvalid default"),
  );
  await env.ok([
    "patch",
    "hflbc",
    "default",
    "--type=merge",
    "-p",
    '{"spec":{"maglevTableSize":16381}}',
  ]);
  await waitFor("Ready=True again", async () => (await ready()) === "Valid");
});
