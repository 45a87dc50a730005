/**
 * The virtual lab: network-namespace topologies, a throwaway redis-server, the virtual Holdfast
 * cluster, the demo and the chaos scenarios. Tests, benches and `main.ts demo` all build on it.
 *
 * - `command.ts` runs commands, tells live processes, says why the lab cannot run here;
 * - `netns.ts` declares topologies (hosts, veth links, ECMP routes); `host_process.ts` is a
 *   process inside a host;
 * - `redis_server.ts` a throwaway redis-server, also inside a namespace;
 * - `cluster.ts` the virtual cluster (its store, one Redis or a Redis Cluster: `_cluster_store.ts`),
 *   `cluster_probe.ts` what it is doing;
 * - `chaos.ts` the chaos scenarios (`deno task chaos`; shard failover checks: `_chaos_shard.ts`),
 *   `demo.ts` the demo (`main.ts demo`);
 * - `anycast.ts` the anycast lab (a bird2 router, nodes running `main.ts anycast`, pods as HTTP
 *   servers; imported directly: not re-exported here);
 * - `egress.ts` the egress NAT lab (clients, NAT pods, two bridged segments, a server),
 *   `egress_scenario.ts` its failover runs (imported directly: not re-exported here);
 * - `packets.ts` frame builders; `clients/` the programs run inside namespaces;
 * - `sweep.ts` removes what crashed runs left behind (`deno task sweep`).
 *
 * @module
 */
export * from "./command.ts";
export * from "./host_process.ts";
export * from "./netns.ts";
export * from "./redis_server.ts";
export * from "./cluster.ts";
export * from "./cluster_probe.ts";
