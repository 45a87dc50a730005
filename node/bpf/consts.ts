/**
 * The numbers of bpf/consts.h that user space needs, in TypeScript: map sizes, flag bits, the
 * reason counter enums. bpf/consts.h is the source; tests/bpf/consts_mirror_test.ts parses it
 * and fails when a value here (or a new `HF_MAX_*` there) is out of step.
 *
 * @module
 */

/** IP protocol numbers (`HF_IPPROTO_*`). */
export const PROTO = { ICMP: 1, TCP: 6, UDP: 17 } as const;

/** Default map sizes of the LB object (`HF_MAX_*`); services, backends and flows are settable at
 * load time (`Datapath.open` `maxServices`/`maxBackends`/`maxFlows`). */
export const HF_MAX = {
  /** hf_services, hf_maglev, hf_fe_stats: service IDs are 1..SERVICES-1. */
  SERVICES: 4096,
  /** hf_backends, hf_be_stats: backend IDs are 1..BACKENDS-1. */
  BACKENDS: 65536,
  /** hf_flows (LRU). */
  FLOWS: 262144,
  /** hf_flows_syn (LRU): flows not shared yet (a SYN's, or over the event budget). */
  SYN_FLOWS: 65536,
  /** hf_local_vips of the decap object. */
  LOCAL_VIPS: 1024,
  /** hf_node_svc, hf_node_svc6 of the node object: (pod, frontend) pairs per family. */
  NODE_SERVICES: 16384,
  /** hf_node_flows, hf_node_flows6 (LRU) of the node object: reverse translations per family. */
  NODE_FLOWS: 131072,
} as const;

/** Size of the inner Maglev array template; real tables may have any size (BPF_F_INNER_MAP). */
export const HF_MAGLEV_TEMPLATE_SIZE = 65537;
/** hf_events ring buffer bytes. */
export const HF_RINGBUF_BYTES = 8 << 20;
/** UDP destination port of encapsulated packets unless configured (`HF_ENCAP_PORT_DEFAULT`). */
export const HF_ENCAP_PORT_DEFAULT = 6080;
/** Outer IPv4 (20) + UDP (8) bytes added by encapsulation (`HF_ENCAP_OVERHEAD`). */
export const HF_ENCAP_OVERHEAD = 28;

/** New-flow events per second per CPU when `lb_config.event_budget` is 0
 * (`HF_EVENT_BUDGET_DEFAULT`). */
export const HF_EVENT_BUDGET_DEFAULT = 20000;

/** `service_value.flags` bit: key flows by client address (`HF_SVC_F_CLIENT_IP`). */
export const SVC_F_CLIENT_IP = 1;
/** `service_value.flags` bit: no new TCP connection, a SYN without a flow is dropped (`HF_SVC_F_DRAINING`). */
export const SVC_F_DRAINING = 2;

/** enum hf_reason names, by index (bpf/consts.h). */
export const REASONS = [
  "pass_not_ipv4",
  "pass_truncated",
  "pass_not_l4",
  "pass_not_frontend",
  "drop_ip_options",
  "drop_fragment",
  "drop_bad_length",
  "drop_no_backends",
  "drop_no_maglev",
  "drop_maglev_slot_zero",
  "drop_no_backend",
  "drop_no_config",
  "drop_encap",
  "drop_too_big",
  "tx_hit",
  "tx_new",
  "event_lost",
  "pass_icmp",
  "tx_icmp_too_big",
  "drop_martian",
  "drop_ttl_zero",
  "drop_bad_csum",
  "drop_tcp_flags",
  "drop_l2_group_dst",
  "drop_l2_group_src",
  "tx_icmp_to_backend",
  "pass_icmp_bad_quote",
  "tx_unconfirmed",
  "tx_confirmed",
  "flow_shared",
  "flow_unshared",
  "pass_ipv6_ext",
  "pass_local_backend",
] as const;

/** A reason counter name. */
export type Reason = typeof REASONS[number];

/** enum hf_decap_reason names, by index. */
export const DECAP_REASONS = [
  "decap",
  "not_local",
  "bad_inner",
  "adjust_failed",
  "mss_clamped",
  "mss_ok",
] as const;

/** A decap reason counter name. */
export type DecapReason = typeof DECAP_REASONS[number];

/** enum hf_node_reason names, by index (the node object, bpf/node_tc.c). */
export const NODE_REASONS = [
  "nat_in",
  "nat_out",
  "not_local",
  "bad_inner",
  "adjust_failed",
  "mss_clamped",
  "mss_ok",
  "icmp_in",
  "icmp_out",
] as const;

/** A node reason counter name. */
export type NodeReason = typeof NODE_REASONS[number];
