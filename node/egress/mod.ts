/**
 * The egress NAT: floating SNAT addresses spread over NAT pods, each with an owner (Redis lease,
 * fencing epoch) and a standby that already holds its conntrack state, so a NAT pod's death or
 * a rolling restart keeps established connections. See docs/egress.md.
 *
 * - `agent.ts` the NAT pod's agent (`main.ts egress`), composing the parts below;
 * - `controller/egress/config.ts` the config (the file source's JSON; shared with the controller),
 *   `egress_args.ts` the command line;
 * - `nft.ts` the SNAT rules, `addresses.ts` the floating /32s and gratuitous ARP;
 * - `health.ts` heartbeats, `controller/egress/lease.ts` (the Redis lease) / `assign.ts` /
 *   `ownership.ts` who owns what (one `address_lease.ts` per address);
 * - `sync.ts` conntrack sync between NAT pods (over `node/conntrack/`).
 *
 * @module
 */
export { EgressAgent, type EgressAgentOptions } from "./agent.ts";
export * from "../../controller/egress/config.ts";
export { EGRESS_TABLE, egressRuleset, installEgressRules, removeEgressRules } from "./nft.ts";
export { addFloating, announceFloating, heldFloating, removeFloating } from "./addresses.ts";
