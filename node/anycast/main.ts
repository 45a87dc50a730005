/**
 * `main.ts anycast`: the node agent of anycast mode. It follows services and pods (a state
 * file, node/anycast/state_file.ts, or the Kubernetes API, node/anycast/kube_source.ts), holds each anycast service's LB /32 on `lo` exactly while
 * a ready, non-terminating local pod matches the service's selector, and — with
 * `--bgp-config` — owns the node's bird daemon, which announces what is on `lo`
 * (node/bgp). On SIGTERM/SIGINT it forfeits every address first, waits `--withdraw-wait-ms`
 * for the routers to drop this node, then stops bird.
 *
 * With `--redirect` the node also runs flow redirection (node/anycast/redirect.ts): a packet of
 * an established flow that ECMP moved here is encapsulated to the node that owns it; every
 * stored flow is restored before the first address goes on `lo` (announced).
 *
 * ```
 * main.ts anycast --node-name NAME (--state FILE | --kube [--kubeconfig FILE]) [--bgp-config FILE]
 *                 [--bgp-dir DIR] [--listen HOST:PORT] [--poll-ms N] [--withdraw-wait-ms N]
 *                 [--redirect --redis URL --attach IFACE --src-addr IP --owners IP,IP… [--pin-dir DIR]
 *                  [--liveness-ttl-ms N]]
 * ```
 *
 * @module
 */

import {
  type CommandLine,
  intOption,
  listOption,
  readCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { log as rootLog } from "../../lib/log.ts";
import { sleep } from "../../lib/backoff.ts";
import { exportNodeInfo } from "../../lib/metrics.ts";
import { serveOps } from "../../lib/ops_http.ts";
import { BirdSupervisor, parseBgpSettingsText } from "../bgp/mod.ts";
import { AnycastAgent } from "./agent.ts";
import { presentAddresses, servingServices } from "./model.ts";
import { IpLoopback } from "./loopback.ts";
import { type AnycastState, parseAnycastState } from "./state_file.ts";
import { followKubernetes, KubeBgp } from "./kube_source.ts";
import { watchFile } from "./watch_file.ts";
import { FlowRedirect } from "./redirect.ts";
import { DEFAULT_LIVENESS } from "./liveness.ts";
import { redisUrlProblem } from "../../lib/redis_cluster.ts";
import { defineCommand } from "../../lib/flags.ts";
import {
  bgpFlags,
  listenFlag,
  nodeNameFlag,
  OPS_PORT_ALIAS,
  readListen,
  redisFlags,
} from "../../lib/flag_groups.ts";

const REDIRECT = "flow redirection (off by default; needs root, BPF and a shared Redis)";

/** The `anycast` command for lib/args.ts: its flag table, options and usage. */
export const ANYCAST_COMMAND = defineCommand({
  command: "anycast",
  synopsis: "main.ts anycast --node-name NAME (--state FILE | --kube) [OPTIONS]",
  about: "Holds each anycast service's LB /32 (IPv6: /128) on lo while a ready, non-terminating\n" +
    "pod of the service runs on this node; with --bgp-config, runs bird to announce those\n" +
    "addresses (docs/anycast.md).",
  flags: {
    state: { arg: "FILE", help: "services and pods, YAML or JSON, followed live" },
    kube: {
      type: "boolean",
      help: "services and this node's pods from the Kubernetes API instead",
    },
    kubeconfig: {
      arg: "FILE",
      help: "with --kube",
      defaultText: "in-cluster, else $KUBECONFIG, ~/.kube/config",
    },
    "poll-ms": { arg: "N", help: "file poll interval besides inotify", default: "1000" },
    "withdraw-wait-ms": {
      arg: "N",
      help: "on SIGTERM, wait after forfeiting before stopping bird",
      default: "500",
    },
    "resync-ms": {
      arg: "N",
      help: "repair lo against the current state this often",
      default: "10000",
    },
    ...nodeNameFlag("this node's name (pods' spec.nodeName)", {
      required: true,
      aliases: ["node"],
    }),
    ...listenFlag("none", { aliases: [OPS_PORT_ALIAS] }),
    ...bgpFlags(
      "BGP settings (node/bgp/settings.ts), followed live (birdc configure);\n" +
        "with --kube and no file: the LoadBalancerConfig's spec.bgp",
      "/run/holdfast/bird-NODE",
      { dirAliases: ["bird-dir"] },
    ),
    redirect: {
      type: "boolean",
      help: "run the flow-aware datapath: moved flows go to the node owning them",
      group: REDIRECT,
    },
    ...redisFlags(["redis"], {
      help: "with --redirect: the flow store shared by the anycast nodes\n" +
        "(redis://HOST:PORT, redis+cluster://…)",
    }),
    attach: { arg: "IFACE", help: "the uplink (XDP and tc attach here)", group: REDIRECT },
    "src-addr": {
      arg: "IP",
      help: "this node's address on it (outer source; owner of its own flows)",
      group: REDIRECT,
    },
    owners: {
      arg: "IP[,IP...]",
      multiple: true,
      help: "every anycast node's --src-addr: flows owned elsewhere are refused",
      group: REDIRECT,
    },
    "encap-port": {
      arg: "N",
      help: "encapsulation UDP port, the same on every node",
      defaultText: "6080",
      group: REDIRECT,
    },
    seed: {
      arg: "N",
      help: "flow hash seed, the same on every node",
      defaultText: "0",
      group: REDIRECT,
    },
    "pin-dir": {
      arg: "DIR",
      help: "bpffs directory of the maps",
      defaultText: "/sys/fs/bpf/holdfast",
      group: REDIRECT,
    },
    "liveness-ttl-ms": {
      arg: "N",
      help: "TTL of this node's liveness record, refreshed every second; the\n" +
        "others purge a node's flows once it lapses",
      defaultText: "5000",
      group: REDIRECT,
    },
  },
});

/** Runs the anycast agent until SIGTERM/SIGINT; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, ANYCAST_COMMAND, ({ values }) => {
    const node = stringOption(values, "node-name", { required: true });
    const state = stringOption(values, "state");
    const kube = values.kube === true;
    if ((state === undefined) === !kube) {
      throw new UsageError("Give exactly one of --state FILE or --kube");
    }
    if (!kube && values.kubeconfig !== undefined) {
      throw new UsageError("--kubeconfig goes with --kube");
    }
    return {
      node,
      state,
      kube,
      redirect: redirectOptions(values),
      kubeconfig: stringOption(values, "kubeconfig"),
      bgpConfig: stringOption(values, "bgp-config"),
      birdDir: stringOption(values, "bgp-dir") ?? `/run/holdfast/bird-${node}`,
      listen: readListen(values),
      pollMs: intOption(values, "poll-ms", { min: 10 })!,
      withdrawWaitMs: intOption(values, "withdraw-wait-ms", { max: 60_000 })!,
      resyncMs: intOption(values, "resync-ms", { min: 100 })!,
    };
  });
  if ("exit" in read) return read.exit;
  const o = read.options;
  const log = rootLog.with({ component: "anycast", node: o.node });
  const stop = new AbortController();
  let bird: BirdSupervisor | undefined;
  let prefixes: readonly string[] = [];
  let bgpText = "";
  if (o.bgpConfig) {
    bgpText = await Deno.readTextFile(o.bgpConfig);
    const { settings, problems } = parseBgpSettingsText(bgpText);
    prefixes = settings.prefixes;
    bird = await BirdSupervisor.start(settings, {
      dir: o.birdDir,
      problems,
      log: log.with({ component: "bgp" }),
    });
  }
  const redirect = o.redirect
    ? await FlowRedirect.open({
      node: o.node,
      ...o.redirect,
      log: log.with({ component: "anycast-redirect" }),
    })
    : undefined;
  const agent = new AnycastAgent(o.node, new IpLoopback(), { prefixes, log });
  // --kube without --bgp-config: BGP settings from the LoadBalancerConfig's spec.bgp.
  const kubeBgp = o.kube && !o.bgpConfig
    ? new KubeBgp({ dir: o.birdDir, log: log.with({ component: "bgp" }) })
    : undefined;
  let loaded = false;
  /** The services of the last state applied (what a stop drains). */
  let services: AnycastState["services"] = [];
  exportNodeInfo("anycast", o.node);
  const ops = o.listen ? serveOps(o.listen, () => loaded, { logger: log }) : undefined;
  const onError = (what: string) => (error: unknown) =>
    log.error(`cannot follow ${what}; the previous one stays`, { error });
  let following = false;
  const logReady = () =>
    log.info("anycast agent ready", {
      source: o.state ?? "kubernetes",
      bgp: o.bgpConfig ?? null,
      redirect: o.redirect !== undefined,
    });
  try {
    const apply = async (state: AnycastState) => {
      services = state.services;
      // Frontends programmed and (the first time) every stored flow restored before lo changes.
      // A failure there never stops the addresses following the pods (readiness, terminating):
      // it is logged and the next state tries again.
      if (redirect) {
        try {
          await redirect.update(state.services, {
            signal: stop.signal,
            owned: presentAddresses(o.node, state.services, state.pods),
            serving: servingServices(o.node, state.services, state.pods),
          });
        } catch (error) {
          if (stop.signal.aborted) throw error;
          log.error("flow redirection not updated; addresses follow the pods all the same", {
            error,
            redirecting: redirect.ready,
          });
        }
      }
      await agent.update(state);
      log.info("anycast state applied", {
        services: state.services.length,
        pods: state.pods.length,
        held: [...agent.held.keys()],
      });
      if (!loaded) {
        loaded = true;
        if (following) logReady(); // the first state came late: ready now, as /readyz says
      }
    };
    if (o.state !== undefined) {
      await watchFile(o.state, (text) => apply(parseAnycastState(text)), {
        signal: stop.signal,
        pollMs: o.pollMs,
        onError: onError(`state file "${o.state}"`),
      });
    } else {
      await followKubernetes(o.kubeconfig, o.node, apply, {
        signal: stop.signal,
        log,
        bgp: kubeBgp,
      });
    }
    if (o.bgpConfig && bird) {
      const daemon = bird;
      await watchFile(o.bgpConfig, async (text) => {
        if (text === bgpText) return; // bird runs with it
        bgpText = text;
        const { settings, problems } = parseBgpSettingsText(text);
        await daemon.reload(settings, problems);
      }, {
        signal: stop.signal,
        pollMs: o.pollMs,
        onError: onError(`BGP config "${o.bgpConfig}"`),
      });
    }
    const resync = setInterval(() => {
      if (loaded) void agent.resync();
    }, o.resyncMs);
    stop.signal.addEventListener("abort", () => clearInterval(resync), { once: true });
    // "ready" only with a state applied, as /readyz answers; else when the first one is.
    following = true;
    if (loaded) logReady();
    else log.warn("anycast agent running; not ready until a state applies", {});
    const signalled = await new Promise<string>((resolve) => {
      for (const sig of ["SIGTERM", "SIGINT"] as const) {
        Deno.addSignalListener(sig, () => resolve(sig));
      }
    });
    log.info("stopping: forfeiting every address first", { signal: signalled });
  } finally {
    stop.abort();
    // Draining before withdrawing, as for a pod that terminates: a SYN that arrives while routers
    // move away is dropped (the client retries elsewhere) instead of starting a handshake here
    // whose next packets would land, unknown, on another node. Bounded: a stop never hangs here.
    if (redirect?.ready) {
      const drained = redirect.update(services, { serving: new Set() }).catch((error) =>
        log.warn("cannot mark services draining before withdrawing", { error })
      );
      await Promise.race([drained, sleep(2_000)]);
    }
    await agent.forfeitAll("agent stopping");
    if (bird || kubeBgp?.running) {
      await sleep(o.withdrawWaitMs);
      await bird?.stop();
      await kubeBgp?.stop();
    }
    // Withdrawn now: the pinned services are left without the draining bit, which a release
    // before it does not know (it would keep it and drop new connections once it announces).
    if (redirect?.ready) {
      const undrained = redirect.update(services).catch((error) =>
        log.warn("cannot clear the draining mark before exiting", { error })
      );
      await Promise.race([undrained, sleep(2_000)]);
    }
    await redirect?.close();
    await ops?.shutdown();
  }
  return 0;
}

/** The `--redirect` options, or undefined without it; its flags without it are a usage error. */
function redirectOptions(values: CommandLine["values"]) {
  const flags = [
    "redis",
    "attach",
    "src-addr",
    "owners",
    "encap-port",
    "seed",
    "pin-dir",
    "liveness-ttl-ms",
  ];
  if (values.redirect !== true) {
    const stray = flags.find((f) => values[f] !== undefined);
    if (stray) throw new UsageError(`--${stray} goes with --redirect`);
    return undefined;
  }
  const url = stringOption(values, "redis", { required: true });
  const redisProblem = redisUrlProblem(url);
  if (redisProblem) throw new UsageError(`Cannot use --redis "${url}": ${redisProblem}`);
  const srcAddr = stringOption(values, "src-addr", { required: true });
  const owners = listOption(values, "owners");
  for (const [flag, ip] of [["src-addr", srcAddr], ...owners.map((a) => ["owners", a])]) {
    if (!isIpv4(ip!)) throw new UsageError(`Cannot use --${flag} "${ip}": not an IPv4 address`);
  }
  const pinDir = stringOption(values, "pin-dir");
  return {
    redis: { url },
    attach: stringOption(values, "attach", { required: true }),
    srcAddr,
    owners,
    encapPort: intOption(values, "encap-port", { default: 6080, min: 1, max: 65535 }),
    seed: intOption(values, "seed", { default: 0, max: 0xffffffff }),
    ...(pinDir ? { pinDir } : {}),
    liveness: {
      ttlMs: intOption(values, "liveness-ttl-ms", {
        default: DEFAULT_LIVENESS.ttlMs,
        min: 2 * DEFAULT_LIVENESS.intervalMs,
        max: 600_000,
      }),
    },
  };
}
