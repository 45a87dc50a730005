/**
 * The agent's second config source (`main.ts egress --egress NS/NAME`): the config the controller
 * publishes to Redis for an EgressNAT (controller/egress/redis_config.ts). The agent waits,
 * bounded and logged, until the config exists and lists this pod (a new pod is added once it has
 * an IP), then follows its revisions: peers joining or leaving are applied live
 * ({@linkcode ConfigFollower} calls `onPeers`); any other change is logged as needing a restart.
 *
 * @module
 */

import { type Logger } from "../../lib/log.ts";
import { sleep } from "../../lib/backoff.ts";
import { RedisConnection } from "../../lib/redis_connection.ts";
import {
  type EgressConfig,
  type EgressPeer,
  readEgressConfig,
  selfPeer,
} from "../../controller/egress/config.ts";
import type { EgressArgs } from "./egress_args.ts";
import {
  egressConfigKey,
  egressConfigRev,
  readStoredEgressConfig,
  type StoredEgressConfig,
} from "../../controller/egress/redis_config.ts";

/** Options of {@linkcode waitForEgressConfig}. */
export interface WaitOptions {
  /** This pod's name: the config must list it. */
  readonly self: string;
  /** Give up after this long, ms. */
  readonly timeoutMs: number;
  /** Poll period, ms (default 500). */
  readonly pollMs?: number;
  readonly log: Logger;
  readonly signal?: AbortSignal;
}

/**
 * Waits until the config of `egressName` exists in Redis and lists `self`; throws naming the key
 * when `timeoutMs` passes first (or at once for a config that does not validate).
 */
export async function waitForEgressConfig(
  redis: RedisConnection,
  egressName: string,
  o: WaitOptions,
): Promise<StoredEgressConfig> {
  const key = egressConfigKey(egressName);
  const started = performance.now();
  let lastLog = -Infinity;
  let why = "absent";
  for (let i = 0; performance.now() - started <= o.timeoutMs; i++) {
    let stored: StoredEgressConfig | null = null;
    try {
      stored = await readStoredEgressConfig(redis, egressName);
      why = stored === null ? "absent" : `does not list pod "${o.self}" among its peers`;
    } catch (err) {
      if ((err as Error).name === "EgressConfigError") throw err;
      why = `Redis: ${(err as Error).message}`;
    }
    if (stored?.config.peers.some((p) => p.name === o.self)) {
      o.log.info("config read", { key, rev: stored.rev, waited_ms: elapsed(started) });
      return stored;
    }
    if (performance.now() - lastLog >= 5_000) {
      lastLog = performance.now();
      o.log.info("waiting for config", { key, why, waited_ms: elapsed(started) });
    }
    await sleep(o.pollMs ?? 500, o.signal);
  }
  throw new Error(
    `Cannot start: egress config "${key}" ${why} after ${o.timeoutMs} ms (is the controller ` +
      "running with --redis, and does the pod carry the holdfast.io/egress label?)",
  );
}

function elapsed(since: number): number {
  return Math.round(performance.now() - since);
}

/** The config fields other than peers that differ between `a` and `b`. */
export function changedFields(a: EgressConfig, b: EgressConfig): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete("peers");
  const ra = a as unknown as Record<string, unknown>, rb = b as unknown as Record<string, unknown>;
  return [...keys].filter((k) => JSON.stringify(ra[k]) !== JSON.stringify(rb[k])).sort();
}

/** Options of {@linkcode ConfigFollower}. */
export interface FollowerOptions {
  readonly redis: RedisConnection;
  readonly egressName: string;
  /** The config the agent started with. */
  readonly initial: StoredEgressConfig;
  /** Applies a new peer list (live). */
  readonly onPeers: (peers: readonly EgressPeer[]) => void;
  /** Poll period, ms (default 1,000). */
  readonly pollMs?: number;
  readonly log: Logger;
}

/** Follows the config's revisions in Redis (a poll of `rev`; see the module doc). */
export class ConfigFollower {
  readonly #o: FollowerOptions;
  #rev: number;
  #config: EgressConfig;
  #timer: ReturnType<typeof setInterval> | undefined;
  #busy = false;

  constructor(o: FollowerOptions) {
    this.#o = o;
    this.#rev = o.initial.rev;
    this.#config = o.initial.config;
  }

  /** The config last applied. */
  get config(): EgressConfig {
    return this.#config;
  }

  /** Starts polling. */
  start(): void {
    this.#timer ??= setInterval(() => void this.poll(), this.#o.pollMs ?? 1_000);
  }

  /** One poll: reads the config when its revision changed and applies what it can. */
  async poll(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    const key = egressConfigKey(this.#o.egressName);
    try {
      const rev = await egressConfigRev(this.#o.redis, this.#o.egressName);
      if (rev === this.#rev) return;
      const stored = await readStoredEgressConfig(this.#o.redis, this.#o.egressName);
      if (stored === null) {
        this.#o.log.warn("config removed; keeping the last one", { key, rev: this.#rev });
        this.#rev = 0;
        return;
      }
      const before = this.#config;
      this.#rev = stored.rev;
      const restart = changedFields(before, stored.config);
      const peersChanged = JSON.stringify(before.peers) !== JSON.stringify(stored.config.peers);
      if (peersChanged) {
        this.#o.onPeers(stored.config.peers);
        this.#o.log.info("peers changed", {
          key,
          rev: stored.rev,
          peers: stored.config.peers.map((p) => p.name),
        });
      }
      if (restart.length > 0) {
        this.#o.log.warn("config changed; restart the pod to apply", {
          key,
          rev: stored.rev,
          fields: restart,
        });
      }
      this.#config = { ...before, peers: stored.config.peers };
    } catch (err) {
      this.#o.log.warn("cannot read config; keeping the last one", { key, error: String(err) });
    } finally {
      this.#busy = false;
    }
  }

  /** Stops polling. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/** The config `main.ts egress` runs with, the follower of its changes, and what to close. */
export interface LoadedConfig {
  readonly config: EgressConfig;
  /** With `--egress`: follows the config's revisions (start it once the agent runs). */
  readonly follower?: ConfigFollower;
  /** Closes the config's Redis connection (none with `--config`). */
  close(): Promise<void>;
}

/**
 * Reads the config of `main.ts egress`: the file of `--config`, or with `--egress` the
 * controller's config in Redis (waited for; `onPeers` gets later peer changes). Checks that it
 * lists `--name`; errors name the file or the key.
 */
export async function loadAgentConfig(
  a: EgressArgs,
  log: Logger,
  onPeers: (peers: readonly EgressPeer[]) => void,
): Promise<LoadedConfig> {
  if (!a.egress) {
    const config = await readEgressConfig(a.config!);
    selfPeer(config, a.name);
    return { config, close: () => Promise.resolve() };
  }
  const redis = new RedisConnection({ url: a.redis!, logComponent: "egress-config" });
  try {
    const initial = await waitForEgressConfig(redis, a.egress, {
      self: a.name,
      timeoutMs: a.configWaitMs,
      log,
    });
    const follower = new ConfigFollower({ redis, egressName: a.egress, initial, onPeers, log });
    return { config: initial.config, follower, close: () => redis.close() };
  } catch (err) {
    await redis.close();
    throw err;
  }
}
