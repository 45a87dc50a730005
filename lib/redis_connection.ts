/**
 * The Redis connections of a store (the flow store, the LB model), with node-redis: one for commands
 * (node-redis pipelines everything issued in the same tick) and one for the blocking stream
 * read. Both reconnect by themselves with backoff (`lib/backoff.ts`); while a connection is
 * down, calls fail at once with {@link StoreUnavailableError} (the offline queue is off: the
 * agent keeps its own bounded queue). Wrong credentials stop reconnecting and are reported.
 *
 * @module
 */

import { createClient, ErrorReply } from "redis";
import { log } from "./log.ts";
import { backoffDelay } from "./backoff.ts";

/** The store cannot be reached (network, Redis down); the caller may retry later. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StoreUnavailableError";
  }
}

/** How to reach Redis. */
export interface RedisStoreOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` for TLS. */
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

type Client = ReturnType<typeof createClient>;

function isAuthError(err: unknown): boolean {
  return err instanceof ErrorReply && /^(WRONGPASS|NOAUTH|NOPERM|ERR AUTH)/.test(err.message);
}

async function sha1Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The command and stream connections to one Redis, with script caching. */
export class RedisConnection {
  readonly #cmd: Client;
  readonly #blocking: Client;
  readonly #shas = new Map<string, string>();
  #fatal: Error | null = null;
  readonly #firstReady = new Map<Client, Promise<void>>();
  readonly #everReady = new Set<Client>();
  readonly #restored = new Set<() => void>();
  #closed = false;

  /** Connects in the background. */
  constructor(readonly options: RedisStoreOptions) {
    const storeLog = log.with({ component: options.logComponent ?? "flow-store" });
    const make = (role: string) => {
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
          reconnectStrategy: (retries: number, cause: Error) => {
            if (isAuthError(cause)) {
              this.#fatal = new Error(
                `Cannot authenticate to Redis at "${redact(options.url)}": ${cause.message}`,
              );
              storeLog.error("redis authentication failed", { role, err: cause.message });
              return this.#fatal;
            }
            return backoffDelay(retries + 1, { minMs: 50, maxMs: 1000 });
          },
        },
      });
      let wasDown = false;
      const firstReady = new Promise<void>((resolve) => client.once("ready", () => resolve()));
      this.#firstReady.set(client, firstReady);
      client.on("error", (err: Error) => {
        if (!wasDown) storeLog.warn("redis connection lost", { role, err: err.message });
        wasDown = true;
      });
      client.on("ready", () => {
        if (!wasDown) return;
        wasDown = false;
        storeLog.info("redis connection restored", { role });
        for (const listener of this.#restored) {
          try {
            listener();
          } catch (err) {
            storeLog.error("redis restored listener failed", { role, err });
          }
        }
      });
      client.connect().catch((err: Error) => {
        if (!this.#closed) storeLog.error("redis connect gave up", { role, err: err.message });
      });
      return client;
    };
    this.#cmd = make("commands");
    this.#blocking = make("stream");
  }

  /** Whether the command connection is up. */
  get ready(): boolean {
    return this.#cmd.isReady;
  }

  /**
   * Calls `listener` each time a connection comes back after it was lost: the server may have
   * restarted (possibly empty) without any call failing meanwhile. Returns the unsubscriber.
   */
  onRestored(listener: () => void): () => void {
    this.#restored.add(listener);
    return () => this.#restored.delete(listener);
  }

  /** Before the first connection, waits for it (up to the connect timeout). */
  async #awaitFirstConnect(client: Client): Promise<void> {
    if (client.isReady || this.#everReady.has(client)) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      this.#firstReady.get(client),
      new Promise((r) => timer = setTimeout(r, this.options.connectTimeoutMs ?? 2000)),
    ]);
    clearTimeout(timer);
    if (client.isReady) this.#everReady.add(client);
  }

  async #send(client: Client, args: string[]): Promise<unknown> {
    if (this.#fatal) throw this.#fatal;
    await this.#awaitFirstConnect(client);
    if (!client.isReady) {
      throw new StoreUnavailableError(
        `Cannot send ${args[0]} to Redis at "${redact(this.options.url)}": not connected`,
      );
    }
    try {
      return await client.sendCommand(args);
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

  /** Sends one (blocking) command on the stream connection. */
  blocking(args: string[]): Promise<unknown> {
    return this.#send(this.#blocking, args);
  }

  /** Closes both connections. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of [this.#cmd, this.#blocking]) {
      try {
        c.destroy();
      } catch { /* already closed */ }
    }
    await Promise.resolve();
  }
}

/** Removes the password from a Redis URL for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}
