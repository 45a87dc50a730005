/* SPDX-License-Identifier: Apache-2.0 */
/* Node side, ICMP errors (included by node_tc.c), both ways, checksums (outer IP, quoted IP
 * header, ICMP) kept valid:
 *  - in: an error about a pod's reply (a router on the way to the client sends it to the LB IP,
 *    the LB forwards it to the flow's backend: PMTUD) is translated for the pod: destination
 *    LB IP → pod IP, and in the quoted packet source LB IP:port → pod IP:target port;
 *  - out: a pod's error about a client's packet of a recorded flow (quoting client → pod
 *    IP:target port) leaves as the client expects it: source pod IP → LB IP, and in the quoted
 *    packet destination pod IP:target port → LB IP:port. */
#ifndef HF_NODE_ICMP_H
#define HF_NODE_ICMP_H

/* The first 8 bytes of an ICMP or ICMPv6 message. */
struct hf_icmp_head {
	__u8 type;
	__u8 code;
	__be16 check;
	__be32 rest;
};

static __always_inline int hf_node_icmp_in4(struct __sk_buff *skb, struct iphdr *ip,
					    struct iphdr *in)
{
	struct hf_icmp_head icmp;
	struct iphdr q;
	__be16 qports[2];
	__u32 at = HF_IN4 + sizeof(*in);
	if (bpf_skb_load_bytes(skb, at, &icmp, sizeof(icmp)) ||
	    bpf_skb_load_bytes(skb, at + sizeof(icmp), &q, sizeof(q)) ||
	    bpf_skb_load_bytes(skb, at + sizeof(icmp) + sizeof(q), qports, sizeof(qports)) ||
	    (icmp.type != HF_ICMP_DEST_UNREACH && icmp.type != HF_ICMP_TIME_EXCEEDED) ||
	    q.version != 4 || q.ihl != 5 ||
	    (q.protocol != HF_IPPROTO_TCP && q.protocol != HF_IPPROTO_UDP)) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	struct node_svc_key sk = {.pod = ip->daddr, .vip = q.saddr, .port = qports[0],
				  .proto = q.protocol};
	struct node_svc_value *sv = bpf_map_lookup_elem(&hf_node_svc, &sk);
	if (!sv) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	__u32 tot = bpf_ntohs(ip->tot_len), inner = bpf_ntohs(in->tot_len);
	if (in->daddr != q.saddr || in->ihl != 5 ||
	    (in->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)) || tot < HF_ENCAP_OVERHEAD ||
	    inner != tot - HF_ENCAP_OVERHEAD || inner < sizeof(*in) + sizeof(icmp) + HF_ICMP_QUOTE ||
	    HF_L2 + tot > skb->len) {
		hf_ncount(HF_N_BAD_INNER);
		return TC_ACT_SHOT;
	}
	__be32 vip = q.saddr, pod = ip->daddr;
	__be16 port = qports[0], target = sv->target_port;
	__u32 icsum = HF_L4_4 + offsetof(struct hf_icmp_head, check);
	__u32 qip = HF_L4_4 + sizeof(icmp);
	__u32 qcsum = qip + offsetof(struct iphdr, check);
	__be16 qold = q.check, qnew;
	if (bpf_skb_adjust_room(skb, -HF_ENCAP_OVERHEAD, BPF_ADJ_ROOM_MAC, 0) ||
	    bpf_l3_csum_replace(skb, HF_L2 + offsetof(struct iphdr, check), vip, pod, sizeof(pod)) ||
	    bpf_skb_store_bytes(skb, HF_L2 + offsetof(struct iphdr, daddr), &pod, sizeof(pod), 0) ||
	    bpf_l3_csum_replace(skb, qcsum, vip, pod, sizeof(pod)) ||
	    bpf_skb_store_bytes(skb, qip + offsetof(struct iphdr, saddr), &pod, sizeof(pod), 0) ||
	    bpf_skb_load_bytes(skb, qcsum, &qnew, sizeof(qnew)) ||
	    bpf_l4_csum_replace(skb, icsum, vip, pod, sizeof(pod)) ||
	    bpf_l4_csum_replace(skb, icsum, qold, qnew, sizeof(qnew)) ||
	    bpf_l4_csum_replace(skb, icsum, port, target, sizeof(target)) ||
	    bpf_skb_store_bytes(skb, qip + sizeof(q), &target, sizeof(target), 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_ICMP_IN);
	return TC_ACT_OK;
}

static __always_inline int hf_node_icmp_in6(struct __sk_buff *skb, struct ipv6hdr *ip,
					    struct ipv6hdr *in)
{
	struct hf_icmp_head icmp;
	struct ipv6hdr q;
	__be16 qports[2];
	__u32 at = HF_IN6 + sizeof(*in);
	if (bpf_skb_load_bytes(skb, at, &icmp, sizeof(icmp)) ||
	    bpf_skb_load_bytes(skb, at + sizeof(icmp), &q, sizeof(q)) ||
	    bpf_skb_load_bytes(skb, at + sizeof(icmp) + sizeof(q), qports, sizeof(qports)) ||
	    (icmp.type != HF_ICMP6_DEST_UNREACH && icmp.type != HF_ICMP6_PKT_TOO_BIG &&
	     icmp.type != HF_ICMP6_TIME_EXCEEDED) ||
	    q.version != 6 || (q.nexthdr != HF_IPPROTO_TCP && q.nexthdr != HF_IPPROTO_UDP)) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	struct node_svc_key6 sk = {.port = qports[0], .proto = q.nexthdr};
	__builtin_memcpy(sk.pod, &ip->daddr, 16);
	__builtin_memcpy(sk.vip, &q.saddr, 16);
	struct node_svc_value *sv = bpf_map_lookup_elem(&hf_node_svc6, &sk);
	if (!sv) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	__u32 plen = bpf_ntohs(ip->payload_len), inner = bpf_ntohs(in->payload_len);
	if (!hf_addr6_eq(&in->daddr, &q.saddr) || plen < sizeof(struct udphdr) ||
	    inner + sizeof(*in) != plen - sizeof(struct udphdr) ||
	    inner < sizeof(icmp) + HF_ICMP6_QUOTE || HF_L2 + sizeof(*ip) + plen > skb->len) {
		hf_ncount(HF_N_BAD_INNER);
		return TC_ACT_SHOT;
	}
	__be16 port = qports[0], target = sv->target_port;
	__u32 icsum = HF_L4_6 + offsetof(struct hf_icmp_head, check);
	__u32 qip = HF_L4_6 + sizeof(icmp);
	if (bpf_skb_adjust_room(skb, -HF_ENCAP6_OVERHEAD, BPF_ADJ_ROOM_MAC, 0) ||
	    hf_csum_diff16(skb, icsum, sk.vip, sk.pod, BPF_F_PSEUDO_HDR) ||
	    bpf_skb_store_bytes(skb, HF_L2 + offsetof(struct ipv6hdr, daddr), sk.pod, 16, 0) ||
	    hf_csum_diff16(skb, icsum, sk.vip, sk.pod, 0) ||
	    bpf_skb_store_bytes(skb, qip + offsetof(struct ipv6hdr, saddr), sk.pod, 16, 0) ||
	    bpf_l4_csum_replace(skb, icsum, port, target, sizeof(target)) ||
	    bpf_skb_store_bytes(skb, qip + sizeof(q), &target, sizeof(target), 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_ICMP_IN);
	return TC_ACT_OK;
}

static __always_inline int hf_node_icmp_out4(struct __sk_buff *skb, struct iphdr *ip)
{
	struct hf_icmp_head icmp;
	struct iphdr q;
	__be16 qports[2];
	__u32 qip = HF_L4_4 + sizeof(icmp);
	if (bpf_skb_load_bytes(skb, HF_L4_4, &icmp, sizeof(icmp)) ||
	    bpf_skb_load_bytes(skb, qip, &q, sizeof(q)) ||
	    bpf_skb_load_bytes(skb, qip + sizeof(q), qports, sizeof(qports)) ||
	    (icmp.type != HF_ICMP_DEST_UNREACH && icmp.type != HF_ICMP_TIME_EXCEEDED) ||
	    q.version != 4 || q.ihl != 5 || ip->saddr != q.daddr || ip->daddr != q.saddr ||
	    (q.protocol != HF_IPPROTO_TCP && q.protocol != HF_IPPROTO_UDP))
		return TC_ACT_OK;
	struct node_flow_key k = {.pod = q.daddr, .client = q.saddr, .pod_port = qports[1],
				  .client_port = qports[0], .proto = q.protocol};
	struct node_flow_value *v = bpf_map_lookup_elem(&hf_node_flows, &k);
	if (!v)
		return TC_ACT_OK;
	__be32 pod = q.daddr, vip = v->vip;
	__be16 tport = qports[1], port = v->port, qold = q.check, qnew;
	__u32 icsum = HF_L4_4 + offsetof(struct hf_icmp_head, check);
	__u32 qcsum = qip + offsetof(struct iphdr, check);
	if (bpf_l3_csum_replace(skb, HF_L2 + offsetof(struct iphdr, check), pod, vip, sizeof(vip)) ||
	    bpf_skb_store_bytes(skb, HF_L2 + offsetof(struct iphdr, saddr), &vip, sizeof(vip), 0) ||
	    bpf_l3_csum_replace(skb, qcsum, pod, vip, sizeof(vip)) ||
	    bpf_skb_store_bytes(skb, qip + offsetof(struct iphdr, daddr), &vip, sizeof(vip), 0) ||
	    bpf_skb_load_bytes(skb, qcsum, &qnew, sizeof(qnew)) ||
	    bpf_l4_csum_replace(skb, icsum, pod, vip, sizeof(vip)) ||
	    bpf_l4_csum_replace(skb, icsum, qold, qnew, sizeof(qnew)) ||
	    bpf_l4_csum_replace(skb, icsum, tport, port, sizeof(port)) ||
	    bpf_skb_store_bytes(skb, qip + sizeof(q) + 2, &port, sizeof(port), 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_ICMP_OUT);
	return TC_ACT_OK;
}

static __always_inline int hf_node_icmp_out6(struct __sk_buff *skb, struct ipv6hdr *ip)
{
	struct hf_icmp_head icmp;
	struct ipv6hdr q;
	__be16 qports[2];
	__u32 qip = HF_L4_6 + sizeof(icmp);
	if (bpf_skb_load_bytes(skb, HF_L4_6, &icmp, sizeof(icmp)) ||
	    bpf_skb_load_bytes(skb, qip, &q, sizeof(q)) ||
	    bpf_skb_load_bytes(skb, qip + sizeof(q), qports, sizeof(qports)) ||
	    (icmp.type != HF_ICMP6_DEST_UNREACH && icmp.type != HF_ICMP6_PKT_TOO_BIG &&
	     icmp.type != HF_ICMP6_TIME_EXCEEDED) ||
	    q.version != 6 || !hf_addr6_eq(&ip->saddr, &q.daddr) ||
	    !hf_addr6_eq(&ip->daddr, &q.saddr) ||
	    (q.nexthdr != HF_IPPROTO_TCP && q.nexthdr != HF_IPPROTO_UDP))
		return TC_ACT_OK;
	struct node_flow_key6 k = {.pod_port = qports[1], .client_port = qports[0],
				   .proto = q.nexthdr};
	__builtin_memcpy(k.pod, &q.daddr, 16);
	__builtin_memcpy(k.client, &q.saddr, 16);
	struct node_flow_value6 *v = bpf_map_lookup_elem(&hf_node_flows6, &k);
	if (!v)
		return TC_ACT_OK;
	__u8 vip[16];
	__builtin_memcpy(vip, v->vip, 16);
	__be16 tport = qports[1], port = v->port;
	__u32 icsum = HF_L4_6 + offsetof(struct hf_icmp_head, check);
	if (hf_csum_diff16(skb, icsum, k.pod, vip, BPF_F_PSEUDO_HDR) ||
	    bpf_skb_store_bytes(skb, HF_L2 + offsetof(struct ipv6hdr, saddr), vip, 16, 0) ||
	    hf_csum_diff16(skb, icsum, k.pod, vip, 0) ||
	    bpf_skb_store_bytes(skb, qip + offsetof(struct ipv6hdr, daddr), vip, 16, 0) ||
	    bpf_l4_csum_replace(skb, icsum, tport, port, sizeof(port)) ||
	    bpf_skb_store_bytes(skb, qip + sizeof(q) + 2, &port, sizeof(port), 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_ICMP_OUT);
	return TC_ACT_OK;
}

#endif
