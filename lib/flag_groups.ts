/**
 * The option groups every Holdfast daemon shares, declared once so they have the same names
 * everywhere (docs/operators.md "Shared options"), with their readers:
 *
 * | group         | options                                                              |
 * | ------------- | -------------------------------------------------------------------- |
 * | node identity | `--node-name NAME`                                                   |
 * | ops endpoint  | `--listen HOST:PORT` or `none` (`/metrics`, `/healthz`, `/readyz`)   |
 * | Redis         | `--redis URL`, `--redis-user`, `--redis-password-file`, `--redis-tls`, `--redis-ca` |
 * | BGP           | `--bgp-config FILE`, `--bgp-dir DIR`                                 |
 *
 * A daemon takes the group's options it can use (the egress agent only `--redis`); old names
 * (`--node`, `--name`, `--ops-port`, `--metrics-addr`, `--bird-dir`) are its aliases.
 *
 * @module
 */

import { type CommandLine, stringOption, UsageError } from "./args.ts";
import { type AliasDef, type FlagDef, parseHostPort } from "./flags.ts";
import { redisUrlProblem } from "./redis_cluster.ts";

/** Group titles in the usage. */
export const GROUP = {
  node: "node identity",
  ops: "ops endpoint",
  redis: "Redis",
  bgp: "BGP",
} as const;

/** `--node-name NAME`: this daemon's name (`help` says among what). */
export function nodeNameFlag(
  help: string,
  more: Partial<FlagDef> = {},
): { "node-name": FlagDef } {
  return { "node-name": { arg: "NAME", help, group: GROUP.node, ...more } };
}

/** `--listen HOST:PORT|none`: where `/metrics`, `/healthz` and `/readyz` are served. */
export function listenFlag(
  def: string,
  more: Partial<FlagDef> = {},
): { listen: FlagDef } {
  return {
    listen: {
      arg: "HOST:PORT",
      help: '/metrics, /healthz, /readyz ("none": not served)',
      default: def,
      group: GROUP.ops,
      ...more,
    },
  };
}

/** `--ops-port N`, the anycast agent's old spelling of `--listen 127.0.0.1:N` (0: none). */
export const OPS_PORT_ALIAS: AliasDef = {
  name: "ops-port",
  arg: "N",
  map: (n) => {
    if (!/^\d{1,5}$/.test(n) || Number(n) > 65535) {
      throw new UsageError(`Cannot use --ops-port "${n}": expected an integer 0..65535`);
    }
    return Number(n) === 0 ? "none" : `127.0.0.1:${Number(n)}`;
  },
};

/** Reads `--listen`: `null` for `none`; throws {@link UsageError} naming it. */
export function readListen(
  values: CommandLine["values"],
): { hostname: string; port: number } | null {
  const text = stringOption(values, "listen", { default: "none" });
  if (text === "none") return null;
  try {
    return parseHostPort(text, "listen");
  } catch {
    throw new UsageError(`Cannot use --listen "${text}": expected HOST:PORT or none`);
  }
}

const REDIS_FLAGS = {
  redis: {
    arg: "URL",
    help: "redis://[USER@]HOST:PORT, rediss://… (TLS), or a Redis Cluster:\n" +
      "redis+cluster://HOST:PORT[,HOST:PORT…] (any nodes of it)",
    group: GROUP.redis,
  },
  "redis-user": { arg: "USER", help: "ACL user (wins over the URL's)", group: GROUP.redis },
  "redis-password-file": {
    arg: "FILE",
    help: "a file holding the password",
    group: GROUP.redis,
  },
  "redis-tls": { type: "boolean", help: "TLS with the system roots", group: GROUP.redis },
  "redis-ca": { arg: "FILE", help: "TLS with this CA bundle (PEM)", group: GROUP.redis },
} as const satisfies Record<string, FlagDef>;

/** The Redis group's options a command takes (`redis` first), with `redis`'s help adjusted. */
export function redisFlags<K extends keyof typeof REDIS_FLAGS>(
  names: readonly K[],
  redis: Partial<FlagDef> = {},
): Record<K, FlagDef> {
  const out = {} as Record<K, FlagDef>;
  for (const name of names) {
    out[name] = name === "redis" ? { ...REDIS_FLAGS.redis, ...redis } : REDIS_FLAGS[name];
  }
  return out;
}

/** Connection options the Redis group gives (a subset of lib/redis_connection.ts's). */
export interface RedisFlags {
  url: string;
  username?: string;
  password?: string;
  tls?: { ca?: string };
}

/**
 * Reads the Redis group: the URL (checked: one Redis or a Redis Cluster), the user, the
 * password (`--redis-password-file`, else `env.password`), TLS. `undefined` when `--redis` is
 * absent and not `required` (`default`: the URL then). Throws {@link UsageError} naming the flag.
 */
export function readRedis(
  values: CommandLine["values"],
  options: {
    required?: boolean;
    default?: string;
    password?: string;
    readFile?: (path: string) => string;
  } = {},
): RedisFlags | undefined {
  const url = options.required
    ? stringOption(values, "redis", { required: true })
    : stringOption(values, "redis", { default: options.default });
  if (url === undefined) return undefined;
  const problem = redisUrlProblem(url);
  if (problem) throw new UsageError(`Cannot use --redis "${url}": ${problem}`);
  const redis: RedisFlags = { url };
  const read = (flag: string, path: string) => {
    try {
      return (options.readFile ?? Deno.readTextFileSync)(path);
    } catch (err) {
      throw new UsageError(
        `Cannot read --${flag} "${path}": ${(err as Error).message}`,
        undefined,
        {
          cause: err,
        },
      );
    }
  };
  const str = (name: string) => stringOption(values, name) || undefined;
  const user = str("redis-user");
  if (user) redis.username = user;
  const pwFile = str("redis-password-file");
  if (pwFile) redis.password = read("redis-password-file", pwFile).trim();
  else if (options.password) redis.password = options.password;
  const ca = str("redis-ca");
  if (values["redis-tls"] === true || ca) redis.tls = ca ? { ca: read("redis-ca", ca) } : {};
  return redis;
}

/** `--bgp-config FILE` and `--bgp-dir DIR` (bird's directory; `dirDefault` for the usage). */
export function bgpFlags(
  configHelp: string,
  dirDefault: string,
  more: { dirAliases?: readonly (string | AliasDef)[] } = {},
): { "bgp-config": FlagDef; "bgp-dir": FlagDef } {
  return {
    "bgp-config": { arg: "FILE", help: configHelp, group: GROUP.bgp },
    "bgp-dir": {
      arg: "DIR",
      help: "bird's config, control socket, pid file and log",
      defaultText: dirDefault,
      group: GROUP.bgp,
      ...(more.dirAliases ? { aliases: more.dirAliases } : {}),
    },
  };
}
