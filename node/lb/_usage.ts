/**
 * The flag table of `main.ts agent`: every option once, with its default and help; the parser's
 * options, the defaults and the `--help` text are made from it (lib/flags.ts). Read by
 * `args.ts`.
 *
 * @module
 */

import { defineCommand, type FlagTable } from "../../lib/flags.ts";
import { bgpFlags, listenFlag, nodeNameFlag, redisFlags } from "../../lib/flag_groups.ts";

const DATAPATH = "datapath";
const FLOWS = "flow sharing";

/** Every option of `main.ts agent`, in usage order. */
export const AGENT_FLAGS: FlagTable = {
  config: { arg: "FILE", help: "the services file the control plane follows" },
  model: { arg: "redis", help: "instead of --config: the model the controller publishes to Redis" },
  "config-poll-ms": { arg: "MS", help: "how often the services file is checked", default: "200" },
  vip: { arg: "IP[,IP...]", multiple: true, help: "LB IPs to follow beyond the config's" },
  "maglev-size": { arg: "M", help: "default Maglev table size (prime)" },
  policy: { arg: "FILE.wasm", help: "the WASM policy module", defaultText: "the release build" },
  "policy-follow": {
    arg: "PATH",
    help: "follow the active file of `main.ts policy swap --active PATH`",
  },
  health: {
    arg: "on|off",
    help: "probe the backends of services with a healthCheck",
    default: "on",
  },
  "full-reconcile-interval-ms": {
    arg: "MS",
    help: "compare the BPF maps with the tables and repair (0 = never)",
    default: "30000",
  },
  "log-level": { arg: "debug|info|warn|error", help: "lowest level logged", default: "info" },
  ...nodeNameFlag("this LB node's name", { required: true }),
  ...listenFlag("127.0.0.1:9470"),
  ...redisFlags(["redis", "redis-user", "redis-password-file", "redis-tls", "redis-ca"], {
    help: "flows (and with --model redis the model); required unless --no-flow-sync:\n" +
      "redis://[USER@]HOST:PORT, rediss://… for TLS, or a Redis Cluster:\n" +
      "redis+cluster://HOST:PORT[,HOST:PORT…] (any nodes of it; docs/operators.md)",
  }),
  ...bgpFlags(
    "announce the LB IPs via bird while ready; wins over the model's spec.bgp",
    "/run/holdfast/bird-NODE",
  ),
  datapath: {
    arg: "bpf|memory",
    help: "the XDP datapath, or in-memory maps (tests without root)",
    default: "bpf",
    group: DATAPATH,
  },
  "pin-dir": { arg: "DIR", help: "bpffs directory of the maps", group: DATAPATH },
  "object-dir": { arg: "DIR", help: "where the BPF objects are", group: DATAPATH },
  "max-flows": { arg: "N", help: "flow table capacity", group: DATAPATH },
  "max-services": { arg: "N", help: "services the maps hold", group: DATAPATH },
  "max-backends": { arg: "N", help: "backends the maps hold", group: DATAPATH },
  "node-address": {
    arg: "IP[,IPV6]",
    help: "attach XDP to the interface holding IP; the default --src-addr and\n" +
      "--src-addr6 (Kubernetes' status.hostIPs)",
    group: DATAPATH,
  },
  attach: { arg: "IFACE", help: "wins over --node-address for the interface", group: DATAPATH },
  netns: { arg: "NS", help: "the namespace of --attach / --node-address", group: DATAPATH },
  "src-addr": { arg: "IP", help: "this node's IPv4 address: outer source", group: DATAPATH },
  "src-addr6": {
    arg: "IPV6|auto",
    help: "this node's IPv6 address, outer source to IPv6 backends; auto = the\n" +
      "attach interface's one global IPv6 address; needs --src-addr or --node-address",
    group: DATAPATH,
  },
  "encap-port": {
    arg: "PORT",
    help: "encapsulation UDP port; if given, wins over the model's encapPort",
    defaultText: "the model's, else 6080",
    group: DATAPATH,
  },
  seed: { arg: "N", help: "flow hash seed, the same on every node", default: "0", group: DATAPATH },
  "event-budget": {
    arg: "N",
    help: "flows shared per second per CPU (docs/contracts.md)",
    defaultText: "20000",
    group: DATAPATH,
  },
  "no-flow-sync": { type: "boolean", help: "do not share flows (Maglev only)", group: FLOWS },
  "idle-timeout-ms": { arg: "MS", help: "idle flows expire after this", group: FLOWS },
  "sweep-interval-ms": { arg: "MS", help: "how often idle flows are swept", group: FLOWS },
  "queue-capacity": { arg: "N", help: "flow events queued for Redis", group: FLOWS },
  "learn-window-ms": {
    arg: "MS",
    help: "longest wait gathering new flows into one burst (0-10000)",
    defaultText: "200",
    group: FLOWS,
  },
  "flow-buckets": {
    arg: "N",
    help: "Redis hash tags per LB IP, a power of two, the same on every node",
    defaultText: "1",
    group: FLOWS,
  },
  "flow-sharing": {
    arg: "all|exceptions",
    help: "all: every flow on every node; exceptions: only flows the current Maglev tables would " +
      "place elsewhere (the same on every node; docs/scale.md)",
    default: "all",
    group: FLOWS,
  },
};

/** The `agent` command for lib/args.ts: its name, options, defaults and usage. */
export const AGENT_COMMAND = defineCommand({
  command: "agent",
  synopsis: "main.ts agent --node-name NAME (--config FILE | --model redis) --redis URL [OPTIONS]",
  about: "Runs an LB node: the XDP datapath, the control plane (from a services file or the\n" +
    "model in Redis) and flow sharing through Redis, until SIGTERM.",
  flags: AGENT_FLAGS,
});

/** One-screen usage of `main.ts agent`. */
export const USAGE = AGENT_COMMAND.usage;
