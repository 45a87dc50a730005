/** `main.ts agent --help`: one screen of usage (parsed by `agent_args.ts`). */

/** One-screen usage of `main.ts agent`. */
export const USAGE =
  `usage: main.ts agent --node-name NAME (--config FILE | --model redis) --redis URL
  (URL: redis://[USER@]HOST:PORT, rediss://… for TLS, or a Redis Cluster:
   redis+cluster://HOST:PORT[,HOST:PORT…] — any nodes of it; docs/operators.md)
  [--vip IP[,IP...]] [--no-flow-sync] [--maglev-size M] [--policy FILE.wasm] [--config-poll-ms MS]
  [--policy-follow PATH (follow the active file of \`main.ts policy swap --active PATH\`)]
  [--redis-user USER] [--redis-password-file FILE] [--redis-tls] [--redis-ca FILE]
  [--listen HOST:PORT (default 127.0.0.1:9470; "none" to disable)]
  [--datapath bpf|memory (default bpf)] [--pin-dir DIR] [--object-dir DIR]
  [--max-flows N] [--max-services N] [--max-backends N]
  [--node-address IP[,IPV6] (attach XDP to the interface holding IP; default --src-addr and
    --src-addr6: Kubernetes' status.hostIPs)]
  [--attach IFACE (wins over --node-address for the interface)] [--netns NS]
  [--src-addr IP --encap-port PORT --seed N]
  [--src-addr6 IPV6|auto (this node's IPv6 address, outer source to IPv6 backends; auto = the
    attach interface's one global IPv6 address; needs --src-addr or --node-address)]
  [(--encap-port, if given, wins over the model's encapPort; default: the model's, else 6080)]
  [--event-budget N (flows shared per second per CPU; default 20000; docs/contracts.md)]
  [--idle-timeout-ms MS] [--sweep-interval-ms MS] [--queue-capacity N]
  [--learn-window-ms MS (longest wait gathering new flows into one burst; default 200, 0-10000)]
  [--flow-buckets N (Redis hash tags per LB IP, a power of two; default 1; the same on every node)]
  [--flow-sharing all|exceptions (default all: every flow on every node; exceptions: only flows
    the current Maglev tables would place elsewhere; the same on every node; docs/scale.md)]
  [--full-reconcile-interval-ms MS (default 30000; 0 = never)]
  [--health on|off (default on: probe the backends of services with a healthCheck)]
  [--bgp-config FILE (announce the LB IPs via bird while ready; wins over the model's spec.bgp)]
  [--bgp-dir DIR (bird's directory, with --bgp-config or the model's spec.bgp; docs/anycast.md)]
  [--log-level debug|info|warn|error]`;
