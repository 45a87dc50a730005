/**
 * Leader election (controller/k8s/leader.ts) on a Lease of the Kubernetes API test server,
 * through the real client-node: one leader at a time, takeover once the lease has passed after a
 * crash (never before), a leader cut off from the API server steps down before anyone else leads,
 * and a released Lease is taken at the follower's next try.
 *
 * No verdict depends on how fast the machine is: waits end on the event and are bounded by
 * {@link LIMIT_MS}; only orderings and lower bounds are asserted (durations are printed).
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { kubeConfigFor, type KubeServer, startKubeServer } from "../../lab/kube/mod.ts";
import { Registry } from "../../lib/metrics.ts";
import { captureLogs } from "../../lib/log.ts";
import { sleep } from "../../lib/backoff.ts";
import {
  type LeaderElection,
  type LeaseApi,
  startLeaderElection,
} from "../../controller/k8s/leader.ts";

/** Short timings, for the tests where the lease must run out. */
const TIMING = { leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 200 };
/**
 * Long timings, for the tests where it must not: a leader keeps the Lease however slow the
 * machine, and a takeover within {@link LIMIT_MS} can only come from a release.
 */
const LONG = { leaseDurationMs: 30_000, renewDeadlineMs: 20_000, retryPeriodMs: 200 };
/** The bound of every wait for an election event (they take well under a second unloaded). */
const LIMIT_MS = 15_000;

/** A Lease API whose calls can be made to fail (crash) or hang (partition) on demand. */
class FaultyApi implements LeaseApi {
  /** `late`: writes are served at once, but their answers arrive `lateMs` later. */
  mode: "ok" | "fail" | "hang" | "late" = "ok";
  lateMs = 0;
  /** performance.now() when the last successful write was sent (it landed after that). */
  lastWriteSentAt = 0;
  constructor(readonly api: k8s.CoordinationV1Api) {}
  async #gate<T>(call: () => Promise<T>, write = false): Promise<T> {
    if (this.mode === "fail") throw new Error("connection refused (test)");
    if (this.mode === "hang") return await new Promise<T>(() => {});
    const sentAt = performance.now();
    const answer = await call();
    if (write) this.lastWriteSentAt = Math.max(this.lastWriteSentAt, sentAt);
    if (this.mode === "late" && write) await sleep(this.lateMs);
    return answer;
  }
  readNamespacedLease(p: k8s.CoordinationV1ApiReadNamespacedLeaseRequest) {
    return this.#gate(() => this.api.readNamespacedLease(p));
  }
  createNamespacedLease(p: k8s.CoordinationV1ApiCreateNamespacedLeaseRequest) {
    return this.#gate(() => this.api.createNamespacedLease(p), true);
  }
  replaceNamespacedLease(p: k8s.CoordinationV1ApiReplaceNamespacedLeaseRequest) {
    return this.#gate(() => this.api.replaceNamespacedLease(p), true);
  }
}

interface Candidate {
  readonly id: string;
  readonly api: FaultyApi;
  readonly election: LeaderElection;
  readonly metrics: Registry;
  readonly started: number[];
  readonly stopped: number[];
}

async function candidates(
  kube: KubeServer,
  ids: string[],
  timing: typeof TIMING = TIMING,
): Promise<Candidate[]> {
  const kc = await kubeConfigFor(kube);
  return ids.map((id) => {
    const api = new FaultyApi(kc.makeApiClient(k8s.CoordinationV1Api));
    const metrics = new Registry();
    const started: number[] = [];
    const stopped: number[] = [];
    const election = startLeaderElection(api, {
      namespace: "default",
      name: "holdfast-controller",
      identity: id,
      metrics,
      ...timing,
    }, {
      onStartedLeading: () => void started.push(performance.now()),
      onStoppedLeading: () => void stopped.push(performance.now()),
    });
    return { id, api, metrics, election, started, stopped };
  });
}

/** Samples every 10 ms until `until` is true (or `ms` pass): never two leaders at once. */
async function watchLeaders(
  all: Candidate[],
  until: () => boolean,
  ms = LIMIT_MS,
): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const leaders = all.filter((c) => c.election.isLeader()).map((c) => c.id);
    ok(leaders.length <= 1, `two leaders at once: ${leaders.join(", ")}`);
    if (until()) return;
    await sleep(10);
  }
  throw new Error(`condition not met within ${ms} ms`);
}

/** Samples every 10 ms for `ms`: never two leaders at once. */
async function sampleFor(all: Candidate[], ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const leaders = all.filter((c) => c.election.isLeader()).map((c) => c.id);
    ok(leaders.length <= 1, `two leaders at once: ${leaders.join(", ")}`);
    await sleep(10);
  }
}

async function stopAll(all: Candidate[]) {
  for (const c of all) {
    c.api.mode = "ok";
    await c.election.stop();
  }
}

Deno.test("leader: two candidates, exactly one leader at every sampled moment", async () => {
  using logs = captureLogs();
  await using kube = await startKubeServer();
  const all = await candidates(kube, ["a", "b"], LONG);
  try {
    await watchLeaders(all, () => all.some((c) => c.election.isLeader()));
    const first = all.find((c) => c.election.isLeader())!;
    const other = all.find((c) => c !== first)!;
    await watchLeaders(all, () => other.election.leader() === first.id);
    // Keep sampling for several renew periods: leadership stays put and never doubles.
    await sampleFor(all, 1_500);
    ok(first.election.isLeader(), "the leader keeps the Lease while it renews");
    deepStrictEqual(other.election.leader(), first.id, "the follower observed the leader");
    deepStrictEqual(first.metrics.gauge("holdfast_controller_leader", "").get(), 1);
    deepStrictEqual(other.metrics.gauge("holdfast_controller_leader", "").get(), 0);
    ok(
      logs.records.some((r) =>
        r.msg === "new leader observed" && r.identity === other.id && r.leader === first.id
      ),
      "the follower logs the leader it observed",
    );
  } finally {
    await stopAll(all);
  }
});

Deno.test("leader: a crashed leader's Lease is taken once the lease has passed, not before", async () => {
  using logs = captureLogs();
  await using kube = await startKubeServer();
  const all = await candidates(kube, ["a", "b"]);
  try {
    await watchLeaders(all, () => all.some((c) => c.election.isLeader()));
    const leader = all.find((c) => c.election.isLeader())!;
    const follower = all.find((c) => c !== leader)!;
    // Let the follower see the Lease, then crash the leader: its calls fail from now on.
    await watchLeaders(all, () => follower.election.leader() === leader.id);
    const crashedAt = performance.now();
    leader.api.mode = "fail";
    await watchLeaders(all, () => follower.election.isLeader());
    console.error(`takeover after a crash: ${(follower.started[0]! - crashedAt).toFixed(0)} ms`);
    // The follower counts the lease from when it saw the last renew, which landed after it was
    // sent: it may take over a full lease after that send at the earliest.
    const early = follower.started[0]! - (leader.api.lastWriteSentAt + TIMING.leaseDurationMs);
    ok(early >= 0, `took over ${(-early).toFixed(0)} ms before the lease passed`);
    ok(leader.stopped[0]! <= follower.started[0]!, "the old leader stepped down first");
    ok(logs.records.some((r) => r.msg === "became leader" && r.identity === follower.id));
  } finally {
    await stopAll(all);
  }
});

Deno.test("leader: a leader cut off from the API server steps down before the other leads", async () => {
  using logs = captureLogs();
  await using kube = await startKubeServer();
  const all = await candidates(kube, ["a", "b"]);
  try {
    await watchLeaders(all, () => all.some((c) => c.election.isLeader()));
    const leader = all.find((c) => c.election.isLeader())!;
    const follower = all.find((c) => c !== leader)!;
    const cutAt = performance.now();
    leader.api.mode = "hang"; // requests never answer: only the renew deadline can end it
    await watchLeaders(all, () => follower.election.isLeader());
    console.error(`stepped down ${(leader.stopped[0]! - cutAt).toFixed(0)} ms after the cut`);
    ok(leader.stopped.length > 0, "the cut-off leader stepped down");
    ok(leader.stopped[0]! < follower.started[0]!, "stepped down before the takeover");
    ok(logs.records.some((r) => r.msg === "stopped leading" && r.identity === leader.id));
    deepStrictEqual(leader.metrics.gauge("holdfast_controller_leader", "").get(), 0);
    // Healed: the old leader follows the new one.
    leader.api.mode = "ok";
    await watchLeaders(all, () => leader.election.leader() === follower.id);
    ok(!leader.election.isLeader());
  } finally {
    await stopAll(all);
  }
});

Deno.test("leader: renews answered late count from when they were sent; never two leaders", async () => {
  using _logs = captureLogs();
  await using kube = await startKubeServer();
  const all = await candidates(kube, ["a", "b"]);
  try {
    await watchLeaders(all, () => all.some((c) => c.election.isLeader()));
    const leader = all.find((c) => c.election.isLeader())!;
    // Each renew reaches the server at once (the Lease stays fresh, so nobody takes over), but
    // its answer comes 600 ms later. Renews then succeed every 800 ms (600 + the 200 ms retry),
    // within a deadline counted from each answer; counted from sending, the next success comes
    // 1,400 ms after the last renew was sent, past the 1,000 ms deadline: the leader must step
    // down, as a follower may count the lease from the moment the write landed.
    const lateAt = performance.now();
    leader.api.lateMs = 600;
    leader.api.mode = "late";
    // Counted from the answers, the leader would keep the Lease: the wait would fail.
    await watchLeaders(all, () => leader.stopped.length > 0);
    console.error(`stepped down after ${(leader.stopped[0]! - lateAt).toFixed(0)} ms`);
    await sampleFor(all, 1_500);
  } finally {
    await stopAll(all);
  }
});

Deno.test("leader: stop releases the Lease and the follower takes it at its next try", async () => {
  using logs = captureLogs();
  await using kube = await startKubeServer();
  // A 30 s lease: a takeover within the 15 s wait comes from the release, not from expiry.
  const all = await candidates(kube, ["a", "b"], LONG);
  try {
    await watchLeaders(all, () => all.some((c) => c.election.isLeader()));
    const leader = all.find((c) => c.election.isLeader())!;
    const follower = all.find((c) => c !== leader)!;
    const stopAt = performance.now();
    await leader.election.stop();
    ok(!leader.election.isLeader());
    await watchLeaders(all, () => follower.election.isLeader());
    const takeover = follower.started[0]! - stopAt;
    console.error(`takeover after a release: ${takeover.toFixed(0)} ms`);
    ok(takeover < LONG.leaseDurationMs, "taken before the lease could have run out");
    ok(logs.records.some((r) => r.msg === "released the Lease" && r.identity === leader.id));
    const kc = await kubeConfigFor(kube);
    const lease = await kc.makeApiClient(k8s.CoordinationV1Api).readNamespacedLease({
      name: "holdfast-controller",
      namespace: "default",
    });
    deepStrictEqual(lease.spec?.holderIdentity, follower.id);
    deepStrictEqual(lease.spec?.leaseTransitions, 1);
  } finally {
    await stopAll(all);
  }
});
