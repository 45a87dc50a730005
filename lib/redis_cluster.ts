/**
 * How an operator names a Redis Cluster, and what the cluster client needs to route a command.
 *
 * A cluster is named by the scheme `redis+cluster://[user:password@]host:port[,host:port…]`
 * (`rediss+cluster://` for TLS): one or more seed nodes, any node of the cluster will do; the
 * client learns the rest (`CLUSTER SLOTS`) and follows MOVED/ASK and topology changes. A scheme
 * rather than "several URLs means a cluster": a cluster is often reached through one seed (a
 * Service name), credentials and TLS are said once for every node, and nothing is guessed from
 * a count. A plain `redis://` or `rediss://` URL is one Redis, as before.
 *
 * @module
 */

/** A `--redis` value, parsed. */
export type RedisTarget =
  | { readonly cluster: false; readonly url: string }
  | {
    readonly cluster: true;
    readonly seeds: readonly { readonly host: string; readonly port: number }[];
    readonly tls: boolean;
    readonly username?: string;
    readonly password?: string;
  };

const CLUSTER_SCHEME = /^(rediss?)\+cluster:\/\/(.*)$/;

/** Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`). */
export function isClusterUrl(url: string): boolean {
  return CLUSTER_SCHEME.test(url);
}

/** Parses a `--redis` value; throws a clear error on a malformed cluster URL. */
export function parseRedisTarget(url: string): RedisTarget {
  const m = CLUSTER_SCHEME.exec(url);
  if (!m) return { cluster: false, url };
  const what = `Redis Cluster URL "${redactCluster(url)}"`;
  let rest = m[2]!;
  let username: string | undefined;
  let password: string | undefined;
  const at = rest.lastIndexOf("@");
  if (at >= 0) {
    const cred = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = cred.indexOf(":");
    const user = decodeURIComponent(colon >= 0 ? cred.slice(0, colon) : cred);
    if (user) username = user;
    if (colon >= 0) password = decodeURIComponent(cred.slice(colon + 1));
  }
  const slash = rest.indexOf("/");
  if (slash >= 0) {
    const db = rest.slice(slash + 1);
    if (db !== "" && db !== "0") {
      throw new Error(`Invalid ${what}: a cluster has only database 0, not "/${db}"`);
    }
    rest = rest.slice(0, slash);
  }
  const seeds = rest.split(",").filter((s) => s !== "").map((s) => {
    const hm = /^(\[[0-9a-fA-F:.]+\]|[^:\[\]]+):(\d{1,5})$/.exec(s);
    const port = Number(hm?.[2]);
    if (!hm || !(port > 0 && port < 65536)) {
      throw new Error(`Invalid ${what}: seed "${s}" is not host:port`);
    }
    return { host: hm[1]!.replace(/^\[|\]$/g, ""), port };
  });
  if (seeds.length === 0) throw new Error(`Invalid ${what}: no seed node (host:port)`);
  return {
    cluster: true,
    seeds,
    tls: m[1] === "rediss",
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
}

function redactCluster(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

/**
 * The key a command is routed by in a cluster (its first key): after `STREAMS` for XREAD, the
 * first of KEYS for EVAL/EVALSHA, else the first argument. Undefined for a keyless command.
 */
export function firstKey(args: readonly string[]): string | undefined {
  const cmd = (args[0] ?? "").toUpperCase();
  if (cmd === "EVAL" || cmd === "EVALSHA") return Number(args[2]) > 0 ? args[3] : undefined;
  if (cmd === "XREAD" || cmd === "XREADGROUP") {
    const i = args.findIndex((a) => a.toUpperCase() === "STREAMS");
    return i >= 0 ? args[i + 1] : undefined;
  }
  return args[1];
}

/**
 * The part of `key` Redis Cluster hashes to pick its slot: the text between the first `{` and
 * the next `}` when that is not empty, else the whole key. Keys one script or multi-key command
 * touches must agree on it.
 */
export function hashTag(key: string): string {
  const open = key.indexOf("{");
  if (open < 0) return key;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/**
 * What is wrong with a `--redis` value, or null when it is usable: `redis://` or `rediss://`
 * (one Redis), `redis+cluster://` or `rediss+cluster://` with host:port seeds (a cluster).
 */
export function redisUrlProblem(url: string): string | null {
  if (isClusterUrl(url)) {
    try {
      parseRedisTarget(url);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  }
  return /^rediss?:\/\//.test(url) ? null : "expected redis:// or rediss:// (one Redis) or " +
    "redis+cluster://HOST:PORT[,HOST:PORT…] (a Redis Cluster)";
}
