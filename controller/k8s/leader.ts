/**
 * Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` does it:
 * a candidate takes the Lease when it is free or its holder stopped renewing for a lease
 * duration, renews it every retry period, and steps down at once when it could not renew within
 * the renew deadline. Writes carry the Lease's resourceVersion, so of two candidates racing for
 * it exactly one wins (the other gets 409 Conflict).
 *
 * Fencing: {@linkcode LeaderElection.isLeader} turns false the moment the renew deadline passes
 * without a successful renew — a timer, not the next loop turn — and every write of the leader
 * checks it right before writing. Since a follower waits a whole lease duration (longer than the
 * renew deadline) from when it last saw the Lease change, two candidates never lead at once
 * while their clocks run at the same rate. Expiry is judged by the follower's own monotonic clock
 * (when it observed the record change), not the holder's `renewTime`, so clock skew between nodes
 * does not matter.
 *
 * After stepping down the candidate goes on trying to acquire the Lease (it may lead again).
 * `stop()` releases a held Lease (holder cleared, so a follower takes it at its next try).
 *
 * @example
 * ```ts ignore
 * const kc = new k8s.KubeConfig();
 * kc.loadFromDefault();
 * await using election = startLeaderElection(kc.makeApiClient(k8s.CoordinationV1Api), {
 *   namespace: "holdfast-system",
 *   name: "holdfast-controller",
 *   identity: Deno.hostname(),
 * }, {
 *   onStartedLeading: (signal) => reconcileUntil(signal),
 *   onStoppedLeading: () => log.warn("no longer the leader"),
 * });
 * if (election.isLeader()) await writeStatus();
 * ```
 *
 * @module
 */
import type * as k8s from "@kubernetes/client-node";
import { V1MicroTime } from "@kubernetes/client-node";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import { type Registry, registry as defaultRegistry } from "../../lib/metrics.ts";
import { sleep } from "../../lib/backoff.ts";

/** The calls leader election makes: a `k8s.CoordinationV1Api` has them. */
export type LeaseApi = Pick<
  k8s.CoordinationV1Api,
  "readNamespacedLease" | "createNamespacedLease" | "replaceNamespacedLease"
>;

/** Where the Lease is, who we are, and the timings (defaults as client-go's). */
export interface LeaderElectionConfig {
  /** Namespace of the Lease. */
  readonly namespace: string;
  /** Name of the Lease (e.g. `holdfast-controller`). */
  readonly name: string;
  /** This candidate's identity, written as `holderIdentity` (e.g. the pod name). */
  readonly identity: string;
  /** How long followers wait after the last renew they saw before taking over (default 15,000). */
  readonly leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it steps down (default 10,000). */
  readonly renewDeadlineMs?: number;
  /** Time between tries to acquire or renew (default 2,000). */
  readonly retryPeriodMs?: number;
  /** Logger (default the process logger with `component: leader-election`). */
  readonly logger?: Logger;
  /** Registry of the `holdfast_controller_leader` gauge (default the process-wide one). */
  readonly metrics?: Registry;
}

/** What happens on a change of leadership. */
export interface LeaderCallbacks {
  /**
   * Called when this candidate becomes the leader; `signal` aborts when it stops leading. A
   * returned promise's rejection is logged, not thrown.
   */
  readonly onStartedLeading?: (signal: AbortSignal) => void | Promise<void>;
  /** Called once, synchronously, at the moment this candidate stops leading. */
  readonly onStoppedLeading?: () => void;
  /** Called when another leader is observed (its identity). */
  readonly onNewLeader?: (identity: string) => void;
  /** Stops the election (and releases the Lease) when it aborts. */
  readonly signal?: AbortSignal;
}

/** A running election. */
export interface LeaderElection extends AsyncDisposable {
  /** Whether this candidate leads right now (false from the moment its renew deadline passed). */
  isLeader(): boolean;
  /** The holder identity last observed on the Lease ("" when free or never read). */
  leader(): string;
  /** Stops trying; a leader steps down and releases the Lease. Resolves when done. */
  stop(): Promise<void>;
}

const DEFAULT_LEASE_MS = 15_000;
const DEFAULT_RENEW_DEADLINE_MS = 10_000;
const DEFAULT_RETRY_MS = 2_000;
/** client-go's JitterFactor for the acquire loop. */
const JITTER = 1.2;

interface Observed {
  holder: string;
  renewTime: string;
  resourceVersion: string;
  /** performance.now() when this record was first seen. */
  at: number;
}

/**
 * Starts a candidate for the Lease `config.namespace/config.name`; see the module doc.
 * Throws a `RangeError` when the timings are inconsistent (lease ≤ renew deadline, or renew
 * deadline ≤ retry period · 1.2, as client-go refuses).
 */
export function startLeaderElection(
  api: LeaseApi,
  config: LeaderElectionConfig,
  callbacks: LeaderCallbacks = {},
): LeaderElection {
  const leaseMs = config.leaseDurationMs ?? DEFAULT_LEASE_MS;
  const renewDeadlineMs = config.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
  const retryMs = config.retryPeriodMs ?? DEFAULT_RETRY_MS;
  const where = `${config.namespace}/${config.name}`;
  if (!(leaseMs > renewDeadlineMs)) {
    throw new RangeError(
      `Cannot elect on Lease "${where}": lease duration ${leaseMs} ms must exceed the renew deadline ${renewDeadlineMs} ms`,
    );
  }
  if (!(renewDeadlineMs > retryMs * JITTER)) {
    throw new RangeError(
      `Cannot elect on Lease "${where}": renew deadline ${renewDeadlineMs} ms must exceed ${JITTER} × the retry period ${retryMs} ms`,
    );
  }
  const log = (config.logger ?? rootLog.with({ component: "leader-election" })).with({
    lease: where,
    identity: config.identity,
  });
  const gauge = (config.metrics ?? defaultRegistry).gauge(
    "holdfast_controller_leader",
    "1 while this controller holds the leader Lease, else 0.",
  );
  gauge.set(undefined, 0);

  const stopper = new AbortController();
  let leading = false;
  let leadership: AbortController | undefined;
  let deadline: ReturnType<typeof setTimeout> | undefined;
  let observed: Observed | undefined;
  /** The Lease as we last wrote or read it (for the release). */
  let current: k8s.V1Lease | undefined;

  const stepDown = (why: string) => {
    if (!leading) return;
    leading = false;
    clearTimeout(deadline);
    gauge.set(undefined, 0);
    log.warn("stopped leading", { reason: why });
    leadership?.abort(new Error(`Lost the Lease "${where}": ${why}`));
    try {
      callbacks.onStoppedLeading?.();
    } catch (e) {
      log.error("onStoppedLeading failed", { error: e });
    }
  };
  /**
   * (Re)arms the fence: without another successful renew, leadership ends at the deadline. It
   * counts from when the renew was *sent* (`sentAt`), never from when its answer came: a follower
   * counts the lease from when it saw the write, which is after it was sent, so the leader's
   * deadline always passes before a follower's lease does — however late the answer arrived.
   */
  const renewed = (sentAt: number) => {
    clearTimeout(deadline);
    deadline = setTimeout(
      () => stepDown(`no renew within the renew deadline (${renewDeadlineMs} ms)`),
      Math.max(0, sentAt + renewDeadlineMs - performance.now()),
    );
  };
  const startLeading = (sentAt: number) => {
    leading = true;
    gauge.set(undefined, 1);
    renewed(sentAt);
    log.info("became leader");
    leadership = new AbortController();
    const signal = leadership.signal;
    Promise.resolve()
      .then(() => callbacks.onStartedLeading?.(signal))
      .catch((e) => log.error("onStartedLeading failed", { error: e }));
  };
  const observe = (lease: k8s.V1Lease) => {
    const holder = lease.spec?.holderIdentity ?? "";
    const renewTime = String(lease.spec?.renewTime ?? "");
    const resourceVersion = lease.metadata?.resourceVersion ?? "";
    if (observed?.resourceVersion !== resourceVersion) {
      if (holder && holder !== observed?.holder && holder !== config.identity) {
        log.info("new leader observed", { leader: holder });
        try {
          callbacks.onNewLeader?.(holder);
        } catch (e) {
          log.error("onNewLeader failed", { error: e });
        }
      }
      observed = { holder, renewTime, resourceVersion, at: performance.now() };
    }
    current = lease;
  };

  /** One try: true when we hold the Lease after it. Never throws. */
  const tryAcquireOrRenew = async (): Promise<boolean> => {
    const now = new V1MicroTime(Date.now());
    let lease: k8s.V1Lease;
    try {
      lease = await withTimeout(
        api.readNamespacedLease({ name: config.name, namespace: config.namespace }),
        renewDeadlineMs,
      );
    } catch (e) {
      if (statusCode(e) !== 404) {
        log.debug("cannot read the Lease", { error: describe(e) });
        return false;
      }
      try {
        const created = await withTimeout(
          api.createNamespacedLease({
            namespace: config.namespace,
            body: {
              metadata: { name: config.name, namespace: config.namespace },
              spec: {
                holderIdentity: config.identity,
                leaseDurationSeconds: Math.max(1, Math.ceil(leaseMs / 1000)),
                acquireTime: now,
                renewTime: now,
                leaseTransitions: 0,
              },
            },
          }),
          renewDeadlineMs,
        );
        observe(created);
        return true;
      } catch (e) {
        log.debug("cannot create the Lease", { error: describe(e) });
        return false;
      }
    }
    observe(lease);
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const ours = holder === config.identity;
    if (!ours && holder !== "" && performance.now() < observed!.at + leaseMs) return false;
    const next: k8s.V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: config.identity,
        leaseDurationSeconds: Math.max(1, Math.ceil(leaseMs / 1000)),
        renewTime: now,
        acquireTime: ours ? spec.acquireTime : now,
        leaseTransitions: ours ? spec.leaseTransitions ?? 0 : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      const written = await withTimeout(
        api.replaceNamespacedLease({
          name: config.name,
          namespace: config.namespace,
          body: next,
        }),
        renewDeadlineMs,
      );
      observe(written);
      return true;
    } catch (e) {
      // 409: someone else wrote the Lease since we read it (they won this round).
      log.debug("cannot write the Lease", { error: describe(e) });
      return false;
    }
  };

  const run = async () => {
    const signal = stopper.signal;
    // Bounded by the signal: the loop ends when stop() aborts it.
    while (!signal.aborted) {
      const sentAt = performance.now();
      const held = await tryAcquireOrRenew();
      if (signal.aborted) break;
      if (held && performance.now() >= sentAt + renewDeadlineMs) {
        // Too late to count: the fence has (or would have) passed meanwhile.
        stepDown(`the renew took longer than the renew deadline (${renewDeadlineMs} ms)`);
      } else if (held) {
        if (leading) renewed(sentAt);
        else startLeading(sentAt);
      } else if (leading && observed && observed.holder !== config.identity && observed.holder) {
        stepDown(`the Lease is held by "${observed.holder}"`);
      }
      const wait = leading ? retryMs : retryMs * (1 + Math.random() * (JITTER - 1));
      await sleep(wait, signal).catch(() => {});
    }
  };

  const release = async () => {
    const lease = current;
    if (!lease || lease.spec?.holderIdentity !== config.identity) return;
    const now = new V1MicroTime(Date.now());
    try {
      const released = await withTimeout(
        api.replaceNamespacedLease({
          name: config.name,
          namespace: config.namespace,
          body: {
            ...lease,
            spec: {
              ...lease.spec,
              holderIdentity: undefined,
              leaseDurationSeconds: 1,
              acquireTime: now,
              renewTime: now,
            },
          },
        }),
        renewDeadlineMs,
      );
      current = released;
      log.info("released the Lease");
    } catch (e) {
      log.warn("cannot release the Lease", { error: describe(e) });
    }
  };

  const running = run();
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      const wasLeading = leading;
      stopper.abort();
      await running;
      stepDown("stopped");
      if (wasLeading) await release();
    })();
    return stopped;
  };
  callbacks.signal?.addEventListener("abort", () => void stop(), { once: true });
  if (callbacks.signal?.aborted) void stop();

  return {
    isLeader: () => leading,
    leader: () => observed?.holder ?? "",
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** Rejects when `promise` takes longer than `ms` (the request itself is not cancelled). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function statusCode(e: unknown): number | undefined {
  const code = (e as { code?: unknown })?.code;
  return typeof code === "number" ? code : undefined;
}

function describe(e: unknown): string {
  const code = statusCode(e);
  const message = e instanceof Error ? e.message.split("\n")[0] : String(e);
  return code ? `HTTP ${code}: ${message}` : message ?? "";
}
