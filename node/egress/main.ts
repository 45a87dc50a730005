/**
 * `main.ts egress`: reads the command line and the config (file or Redis), runs one
 * {@linkcode EgressAgent} until SIGTERM (drain, then stop) or SIGINT (stop).
 *
 * @module
 */

import { log as rootLog, setLogLevel } from "../../lib/log.ts";
import { exportNodeInfo } from "../../lib/metrics.ts";
import { readCommandLine } from "../../lib/args.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { loadAgentConfig, type LoadedConfig } from "./_redis_config.ts";
import { EGRESS_COMMAND, readEgressArgs } from "./egress_args.ts";
import { EgressAgent } from "./agent.ts";

/**
 * Runs `main.ts egress` until SIGTERM (drain, then stop) or SIGINT (stop). Exit codes: 0 clean
 * stop, 1 cannot start, 2 bad command line.
 */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, EGRESS_COMMAND, readEgressArgs);
  if ("exit" in read) return read.exit;
  const a = read.options;
  setLogLevel(a.logLevel);
  const log = rootLog.with({ component: "egress", pod: a.name });
  let loaded: LoadedConfig;
  try {
    loaded = await loadAgentConfig(a, log, (peers) => agent.setPeers(peers));
  } catch (err) {
    log.error("cannot start", { err });
    return 1;
  }
  const { config, follower } = loaded;
  const redisUrl = a.redis ?? config.redis;
  if (!redisUrl) {
    log.error("cannot start", { err: 'no Redis: pass --redis or set "redis" in the config' });
    return 1;
  }
  let signal: "SIGTERM" | "SIGINT" | null = null;
  let wake = () => {};
  const stopped = new Promise<void>((resolve) => wake = resolve);
  const onTerm = () => (signal ??= "SIGTERM", wake());
  const onInt = () => (signal ??= "SIGINT", wake());
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onInt);
  const agent = new EgressAgent(config, {
    self: a.name,
    redisUrl,
    sync: config.sync && !a.noSync,
    leaseTtlMs: a.leaseTtlMs,
    announce: a.announce === "auto" ? (config.bgp ? "both" : "garp") : a.announce,
    bgpDir: a.bgpDir,
    log: log.with({ egress: config.name }),
  });
  exportNodeInfo("egress", a.name);
  const server = a.metrics ? serveOps(a.metrics, () => agent.ready, { logger: log }) : null;
  let code = 0;
  try {
    log.info("starting", {
      config: a.config ?? `redis ${a.egress}`,
      egress: config.name,
      sync: config.sync && !a.noSync,
      announce: a.announce,
    });
    await agent.start();
    follower?.start();
    await stopped;
    if (signal === "SIGTERM" && agent.ready) await agent.drain();
  } catch (err) {
    log.error("cannot run", { err });
    code = 1;
  } finally {
    follower?.stop();
    await agent.stop();
    await loaded.close();
    await server?.shutdown();
    Deno.removeSignalListener("SIGTERM", onTerm);
    Deno.removeSignalListener("SIGINT", onInt);
    log.info("stopped", { signal, code });
  }
  return code;
}
