/**
 * The Redis connections of a store (the flow store, the LB model), with node-redis: one for commands
 * (node-redis pipelines everything issued in the same tick) and one for the blocking stream
 * read. Both reconnect by themselves with backoff (`lib/backoff.ts`); while a connection is
 * down, calls fail at once with {@link StoreUnavailableError} (the offline queue is off: the
 * agent keeps its own bounded queue). Wrong credentials stop reconnecting and are reported.
 *
 * Given a Redis Cluster (`redis+cluster://host:port,…`, `lib/redis_cluster.ts`) both are
 * node-redis cluster clients (`createCluster`): a command goes to the master of its first key's
 * slot, MOVED/ASK are followed, and a connection error makes the client re-read the topology
 * (throttled), so a replica promoted after its master died is found. Callers do not change;
 * they keep every key of one script or multi-key command under one hash tag.
 *
 * @module
 */

import { createClient, createCluster, ErrorReply } from "redis";
import { log } from "./log.ts";
import { backoffDelay } from "./backoff.ts";
import { firstKey, parseRedisTarget, type RedisTarget } from "./redis_cluster.ts";

/** The store cannot be reached (network, Redis down); the caller may retry later. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StoreUnavailableError";
  }
}

/** How to reach Redis. */
export interface RedisStoreOptions {
  /**
   * `redis://[user:password@]host:port[/db]` or `rediss://…` for TLS; a Redis Cluster:
   * `redis+cluster://[user:password@]host:port[,host:port…]` (or `rediss+cluster://`).
   */
  url: string;
  /** ACL user name (overrides the URL's). */
  username?: string;
  /** Password of the ACL user or of `requirepass` (overrides the URL's). */
  password?: string;
  /** TLS settings; setting this (or a `rediss://` URL) enables TLS. */
  tls?: {
    /** PEM CA bundle to verify the server with (default: system roots). */
    ca?: string;
    /** Server name to verify (default: the URL's host). */
    servername?: string;
  };
  /** Key prefix (default `hf`). */
  prefix?: string;
  /** Connect timeout per attempt, ms (default 2000). */
  connectTimeoutMs?: number;
  /** `component` of the connection's log lines (default `flow-store`). */
  logComponent?: string;
}

/** One connection (or, to a cluster, one set of node connections) as the store uses it. */
interface Endpoint {
  readonly isReady: boolean;
  readonly firstReady: Promise<void>;
  send(args: string[]): Promise<unknown>;
  /** A sender per master (one for a single Redis): what SCAN must walk to see every key. */
  masters(): ((args: string[]) => Promise<unknown>)[];
  destroy(): void;
}

function isAuthError(err: unknown): boolean {
  return err instanceof ErrorReply && /^(WRONGPASS|NOAUTH|NOPERM|ERR AUTH)/.test(err.message);
}

async function sha1Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The command and stream connections to one Redis or one Redis Cluster, with script caching. */
export class RedisConnection {
  readonly #cmd: Endpoint;
  readonly #blocking: Endpoint;
  readonly #shas = new Map<string, string>();
  readonly #target: RedisTarget;
  #fatal: Error | null = null;
  readonly #everReady = new Set<Endpoint>();
  readonly #restored = new Set<() => void>();
  #closed = false;
  readonly #log;

  /** Connects in the background. Throws at once on a malformed cluster URL. */
  constructor(readonly options: RedisStoreOptions) {
    this.#log = log.with({ component: options.logComponent ?? "flow-store" });
    this.#target = parseRedisTarget(options.url);
    const make = this.#target.cluster
      ? (role: string) => this.#clusterEndpoint(role)
      : (role: string) => this.#singleEndpoint(role);
    this.#cmd = make("commands");
    this.#blocking = make("stream");
  }

  /** Whether this is a Redis Cluster (multi-key commands must stay within one slot). */
  get cluster(): boolean {
    return this.#target.cluster;
  }

  #reconnectStrategy(role: string) {
    return (retries: number, cause: Error) => {
      if (isAuthError(cause)) {
        this.#fatal = new Error(
          `Cannot authenticate to Redis at "${redact(this.options.url)}": ${cause.message}`,
        );
        this.#log.error("redis authentication failed", { role, err: cause.message });
        return this.#fatal;
      }
      return backoffDelay(retries + 1, { minMs: 50, maxMs: 1000 });
    };
  }

  #fireRestored(role: string): void {
    this.#log.info("redis connection restored", { role });
    for (const listener of this.#restored) {
      try {
        listener();
      } catch (err) {
        this.#log.error("redis restored listener failed", { role, err });
      }
    }
  }

  #singleEndpoint(role: string): Endpoint {
    const options = this.options;
    const tls = options.tls !== undefined || options.url.startsWith("rediss://");
    const client = createClient({
      // node-redis insists that the scheme and the tls option agree.
      url: tls ? options.url.replace(/^redis:\/\//, "rediss://") : options.url,
      ...(options.username !== undefined ? { username: options.username } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      disableOfflineQueue: true,
      socket: {
        connectTimeout: options.connectTimeoutMs ?? 2000,
        ...(tls ? { tls: true as const, ...options.tls } : {}),
        reconnectStrategy: this.#reconnectStrategy(role),
      },
    });
    let wasDown = false;
    const firstReady = new Promise<void>((resolve) => client.once("ready", () => resolve()));
    client.on("error", (err: Error) => {
      if (!wasDown) this.#log.warn("redis connection lost", { role, err: err.message });
      wasDown = true;
    });
    client.on("ready", () => {
      if (!wasDown) return;
      wasDown = false;
      this.#fireRestored(role);
    });
    client.connect().catch((err: Error) => {
      if (!this.#closed) this.#log.error("redis connect gave up", { role, err: err.message });
    });
    return {
      get isReady() {
        return client.isReady;
      },
      firstReady,
      send: (args) => client.sendCommand(args),
      masters: () => [(args) => client.sendCommand(args)],
      destroy: () => client.destroy(),
    };
  }

  #clusterEndpoint(role: string): Endpoint {
    const target = this.#target as Extract<RedisTarget, { cluster: true }>;
    const options = this.options;
    const tls = target.tls || options.tls !== undefined;
    const username = options.username ?? target.username;
    const password = options.password ?? target.password;
    const cluster = createCluster({
      rootNodes: target.seeds.map((s) => ({ socket: { host: s.host, port: s.port } })),
      defaults: {
        ...(username !== undefined ? { username } : {}),
        ...(password !== undefined ? { password } : {}),
        disableOfflineQueue: true,
        socket: {
          connectTimeout: options.connectTimeoutMs ?? 2000,
          ...(tls ? { tls: true as const, ...options.tls } : {}),
          reconnectStrategy: this.#reconnectStrategy(role),
        },
      },
    });
    let connected = false;
    let wasDown = false;
    let lastRediscover = 0;
    const lost = (err: Error) => {
      if (!wasDown) this.#log.warn("redis connection lost", { role, err: err.message });
      wasDown = true;
    };
    // A node that went away: re-read the topology (a replica may have taken its slots over).
    const rediscover = () => {
      if (!connected || this.#closed || Date.now() - lastRediscover < 200) return;
      lastRediscover = Date.now();
      const slots = cluster._slots as unknown as { rediscover(c: unknown): Promise<void> };
      // From a node it knows or a seed, at random (one may be the dead one); node-redis falls
      // back to every seed when that one does not answer.
      const known = [
        ...cluster.masters.map((m) => ({ host: m.host, port: m.port })),
        ...target.seeds,
      ];
      const from = known[Math.floor(Math.random() * known.length)]!;
      slots.rediscover({ options: { socket: { host: from.host, port: from.port } } })
        .catch((err: Error) => this.#log.debug("redis cluster topology refresh failed", { err }));
    };
    cluster.on("error", (err: Error) => {
      if (isAuthError(err)) this.#reconnectStrategy(role)(0, err);
      else lost(err);
    });
    cluster.on("node-error", (err: Error) => {
      lost(err);
      rediscover();
    });
    const firstReady = (async () => {
      for (let attempt = 1; !this.#closed && !this.#fatal; attempt++) {
        try {
          await cluster.connect();
          connected = true;
          if (this.#closed) cluster.destroy();
          return;
        } catch (err) {
          if (isAuthError(err)) {
            this.#reconnectStrategy(role)(attempt, err as Error);
            return;
          }
          if (attempt === 1 || attempt % 20 === 0) {
            this.#log.warn("redis cluster unreachable", { role, err: (err as Error).message });
          }
          await new Promise((r) =>
            setTimeout(r, backoffDelay(attempt, { minMs: 50, maxMs: 1000 }))
          );
        }
      }
    })();
    return {
      get isReady() {
        return connected && cluster.isOpen;
      },
      firstReady,
      send: async (args) => {
        try {
          const reply = await cluster.sendCommand(firstKey(args), false, args);
          if (wasDown) {
            wasDown = false;
            this.#fireRestored(role);
          }
          return reply;
        } catch (err) {
          if (!(err instanceof ErrorReply)) rediscover();
          throw err;
        }
      },
      masters: () =>
        cluster.masters.map((m) => async (args: string[]) =>
          await (await cluster.nodeClient(m)).sendCommand(args)
        ),
      destroy: () => {
        this.#closed = true;
        if (cluster.isOpen) cluster.destroy();
      },
    };
  }

  /** Whether the command connection is up. */
  get ready(): boolean {
    return this.#cmd.isReady;
  }

  /**
   * Calls `listener` each time a connection comes back after it was lost: the server may have
   * restarted (possibly empty) without any call failing meanwhile. Returns the unsubscriber.
   * To a cluster: at the first successful call after a node connection was lost.
   */
  onRestored(listener: () => void): () => void {
    this.#restored.add(listener);
    return () => this.#restored.delete(listener);
  }

  /** Before the first connection, waits for it (up to the connect timeout). */
  async #awaitFirstConnect(client: Endpoint): Promise<void> {
    if (client.isReady || this.#everReady.has(client)) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      client.firstReady,
      new Promise((r) => timer = setTimeout(r, this.options.connectTimeoutMs ?? 2000)),
    ]);
    clearTimeout(timer);
    if (client.isReady) this.#everReady.add(client);
  }

  async #send(client: Endpoint, args: string[]): Promise<unknown> {
    if (this.#fatal) throw this.#fatal;
    await this.#awaitFirstConnect(client);
    if (!client.isReady) {
      throw new StoreUnavailableError(
        `Cannot send ${args[0]} to Redis at "${redact(this.options.url)}": not connected`,
      );
    }
    try {
      return await client.send(args);
    } catch (err) {
      if (err instanceof ErrorReply) {
        throw new Error(`Redis rejected ${args[0]} ${args[1] ?? ""}: ${err.message}`, {
          cause: err,
        });
      }
      throw new StoreUnavailableError(
        `Cannot send ${args[0]} to Redis at "${redact(this.options.url)}": ${
          (err as Error).message
        }`,
        { cause: err },
      );
    }
  }

  /** Runs a Lua script (EVALSHA, falling back to EVAL) on the command connection. */
  async eval(script: string, keys: string[], args: string[]): Promise<unknown> {
    let sha = this.#shas.get(script);
    if (!sha) this.#shas.set(script, sha = await sha1Hex(script));
    try {
      return await this.#send(this.#cmd, ["EVALSHA", sha, String(keys.length), ...keys, ...args]);
    } catch (err) {
      if (!(err instanceof Error && /NOSCRIPT/.test(err.message))) throw err;
      return await this.#send(this.#cmd, ["EVAL", script, String(keys.length), ...keys, ...args]);
    }
  }

  /** Sends one command on the command connection. */
  command(args: string[]): Promise<unknown> {
    return this.#send(this.#cmd, args);
  }

  /**
   * Every key matching `pattern` (SCAN … MATCH, COUNT 1,000 a round), sorted; to a Redis Cluster
   * on every master, since SCAN walks one node's keys. Bounded: at most `maxRounds` rounds per
   * node (then what was found so far).
   */
  async scan(pattern: string, maxRounds = 1_000): Promise<string[]> {
    await this.#send(this.#cmd, ["PING"]); // connected (or StoreUnavailableError), as a command
    const keys = new Set<string>();
    for (const send of this.#cmd.masters()) {
      let cursor = "0";
      for (let round = 0; round < maxRounds; round++) {
        const [next, batch] = await send(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"]) as [
          string,
          string[],
        ];
        for (const k of batch) keys.add(k);
        cursor = String(next);
        if (cursor === "0") break;
      }
    }
    return [...keys].sort();
  }

  /**
   * Sends one (blocking) command on the stream connection. To a cluster, its keys must share one
   * slot, and blocking calls to the same master wait for each other (one connection per node).
   */
  blocking(args: string[]): Promise<unknown> {
    return this.#send(this.#blocking, args);
  }

  /** Closes both connections. */
  async close(): Promise<void> {
    if (this.#closed) return;
    for (const c of [this.#cmd, this.#blocking]) {
      try {
        c.destroy();
      } catch { /* already closed */ }
    }
    this.#closed = true;
    await Promise.resolve();
  }
}

/** Removes the password from a Redis URL for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}
