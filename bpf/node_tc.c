// SPDX-License-Identifier: Apache-2.0
/* Node side (docs/backends.md): on every node hosting backend pods, tc programs on the node's
 * uplink do what `main.ts decap` did inside each pod, with nothing set inside the pod:
 *  - hf_node_in (uplink ingress): a packet to the encap port addressed to a local pod whose inner
 *    packet is for a frontend that pod serves (hf_node_svc[6]: pod, LB IP, port, proto → target
 *    port) loses its outer headers (28 or 48 bytes) and has its destination translated from
 *    LB IP:port to the pod's IP:target port; the client's address stays. The flow's reverse
 *    translation is recorded (hf_node_flows[6]). ICMP errors about the pod's replies (PMTUD,
 *    which the LB forwards to the flow's backend) are translated too: destination and quoted
 *    source. The inner family must be the outer one (the pod's address is the outer destination).
 *  - hf_node_out (uplink egress): a pod's reply of a recorded flow gets its source translated back
 *    to LB IP:port and leaves for the client directly (DSR); a SYN/ACK has its MSS clamped; the
 *    pod's ICMP errors about a client's packet of the flow are translated back too.
 * Running on the uplink, not on the pod's veth, keeps every netfilter hook of the node (conntrack,
 * anti-spoofing on the pod's interface, network policy) seeing ordinary pod traffic: client →
 * pod IP:target port and back from the pod's own address.
 * Headers are read and rewritten in place after one bpf_skb_pull_data, each access checked
 * against data_end (ICMP quotes with bpf_skb_load_bytes); a packet for a served frontend that is
 * malformed is dropped, anything else passes untouched. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "consts6.h"
#include "node_maps.h"
#include "mss_clamp.h"

char LICENSE[] SEC("license") = "GPL";

#define HF_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define HF_L2 14
/* Offsets before decap: the inner packet after outer IP + UDP. */
#define HF_IN4 (HF_L2 + 20 + 8)
#define HF_IN6 (HF_L2 + 40 + 8)
/* Offsets after decap (and of replies): IP at HF_L2, L4 after it. */
#define HF_L4_4 (HF_L2 + 20)
#define HF_L4_6 (HF_L2 + 40)

static __always_inline void hf_ncount(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&hf_node_stat, &reason);
	if (v)
		*v += 1;
}

static __always_inline struct decap_config *hf_node_config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&hf_node_cfg, &zero);
}

#include "node_csum.h"

/* Minimum L4 bytes inside the inner packet for a rewrite of proto. */
static __always_inline __u32 hf_l4_min(__u8 proto)
{
	return proto == HF_IPPROTO_TCP ? sizeof(struct tcphdr) : sizeof(struct udphdr);
}

/* CLOCK_MONOTONIC at tick resolution: bpf_jiffies64 is inlined, the clock helper runs once per
 * tick per CPU. */
static __always_inline __u64 hf_node_now(void)
{
	__u32 zero = 0;
	__u64 j = bpf_jiffies64();
	struct hf_node_clock_cache *c = bpf_map_lookup_elem(&hf_node_clock, &zero);
	if (!c)
		return bpf_ktime_get_coarse_ns();
	if (c->jiffies != j) {
		c->ns = bpf_ktime_get_coarse_ns();
		c->jiffies = j;
	}
	return c->ns;
}

/* Records (or refreshes, at most once a second) the reverse translation of a flow. */
static __always_inline void hf_note_flow4(struct node_flow_key *k, __be32 vip, __be16 port)
{
	__u64 now = hf_node_now();
	struct node_flow_value *v = bpf_map_lookup_elem(&hf_node_flows, k);
	if (v && v->vip == vip && v->port == port) {
		if (now - v->last_seen_ns > HF_NSEC_PER_SEC)
			v->last_seen_ns = now;
		return;
	}
	struct node_flow_value nv = {.vip = vip, .port = port, .last_seen_ns = now};
	bpf_map_update_elem(&hf_node_flows, k, &nv, BPF_ANY);
}

static __always_inline void hf_note_flow6(struct node_flow_key6 *k, __u8 *vip, __be16 port)
{
	__u64 now = hf_node_now();
	struct node_flow_value6 *v = bpf_map_lookup_elem(&hf_node_flows6, k);
	if (v && v->port == port && hf_addr6_eq(v->vip, vip)) {
		if (now - v->last_seen_ns > HF_NSEC_PER_SEC)
			v->last_seen_ns = now;
		return;
	}
	struct node_flow_value6 nv = {.port = port, .last_seen_ns = now};
	__builtin_memcpy(nv.vip, vip, 16);
	bpf_map_update_elem(&hf_node_flows6, k, &nv, BPF_ANY);
}

#include "node_icmp.h"

/* Outer IPv4 + UDP to the encap port, inner IPv4 to a served frontend. The headers are read in
 * place (hf_node_in pulled them into the linear area; each access is bounds-checked). */
static __always_inline int hf_node_in4(struct __sk_buff *skb, struct decap_config *cfg)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + HF_L2;
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return TC_ACT_OK;
	if (ip->version != 4 || ip->ihl != 5 || ip->protocol != HF_IPPROTO_UDP ||
	    (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)) ||
	    udp->dest != bpf_htons(cfg->encap_port_host))
		return TC_ACT_OK;
	struct iphdr *in = (void *)(udp + 1);
	__be16 *ports = (void *)(in + 1);
	if ((void *)(ports + 2) > end || in->version != 4) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	if (in->protocol == HF_IPPROTO_ICMP) {
		struct iphdr ipc = *ip, inc = *in;
		return hf_node_icmp_in4(skb, &ipc, &inc);
	}
	struct node_svc_key sk = {.pod = ip->daddr, .vip = in->daddr, .port = ports[1],
				  .proto = in->protocol};
	struct node_svc_value *sv = bpf_map_lookup_elem(&hf_node_svc, &sk);
	if (!sv) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	/* A served frontend: the inner packet must be clean and whole, else it is dropped. */
	__u32 tot = bpf_ntohs(ip->tot_len), inner = bpf_ntohs(in->tot_len);
	if (in->ihl != 5 || (in->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)) ||
	    tot < HF_ENCAP_OVERHEAD || inner != tot - HF_ENCAP_OVERHEAD ||
	    inner < sizeof(*in) + hf_l4_min(in->protocol) || HF_L2 + tot > skb->len) {
		hf_ncount(HF_N_BAD_INNER);
		return TC_ACT_SHOT;
	}
	__be32 pod = ip->daddr, vip = in->daddr;
	__be16 port = ports[1], target = sv->target_port;
	__u8 proto = in->protocol;
	struct node_flow_key fk = {.pod = pod, .client = in->saddr, .pod_port = target,
				   .client_port = ports[0], .proto = proto};
	hf_note_flow4(&fk, vip, port);
	if (bpf_skb_adjust_room(skb, -HF_ENCAP_OVERHEAD, BPF_ADJ_ROOM_MAC, 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	struct iphdr *nip = data + HF_L2;
	__be16 *nports = (void *)(nip + 1);
	if ((void *)(nports + 2) > end) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	nip->daddr = pod;
	nports[1] = target;
	if (hf_ip_csum4(skb, vip, pod) || hf_csum4(skb, vip, pod, port, target, proto)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_NAT_IN);
	return TC_ACT_OK;
}

/* Outer IPv6 + UDP to the encap port, inner IPv6 to a served frontend. */
static __always_inline int hf_node_in6(struct __sk_buff *skb, struct decap_config *cfg)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip = data + HF_L2;
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return TC_ACT_OK;
	if (ip->version != 6 || ip->nexthdr != HF_IPPROTO_UDP ||
	    udp->dest != bpf_htons(cfg->encap_port_host))
		return TC_ACT_OK;
	struct ipv6hdr *in = (void *)(udp + 1);
	__be16 *ports = (void *)(in + 1);
	if ((void *)(ports + 2) > end || in->version != 6) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	if (in->nexthdr == HF_IPPROTO_ICMPV6) {
		struct ipv6hdr ipc = *ip, inc = *in;
		return hf_node_icmp_in6(skb, &ipc, &inc);
	}
	struct node_svc_key6 sk = {.port = ports[1], .proto = in->nexthdr};
	__builtin_memcpy(sk.pod, &ip->daddr, 16);
	__builtin_memcpy(sk.vip, &in->daddr, 16);
	struct node_svc_value *sv = bpf_map_lookup_elem(&hf_node_svc6, &sk);
	if (!sv) {
		hf_ncount(HF_N_NOT_LOCAL);
		return TC_ACT_OK;
	}
	__u32 plen = bpf_ntohs(ip->payload_len), inner = bpf_ntohs(in->payload_len);
	if (plen < sizeof(*udp) || inner + sizeof(*in) != plen - sizeof(*udp) ||
	    inner < hf_l4_min(in->nexthdr) || HF_L2 + sizeof(*ip) + plen > skb->len) {
		hf_ncount(HF_N_BAD_INNER);
		return TC_ACT_SHOT;
	}
	__be16 port = ports[1], target = sv->target_port;
	__u8 proto = in->nexthdr;
	struct node_flow_key6 fk = {.pod_port = target, .client_port = ports[0], .proto = proto};
	__builtin_memcpy(fk.pod, sk.pod, 16);
	__builtin_memcpy(fk.client, &in->saddr, 16);
	hf_note_flow6(&fk, sk.vip, port);
	if (bpf_skb_adjust_room(skb, -HF_ENCAP6_OVERHEAD, BPF_ADJ_ROOM_MAC, 0)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	struct ipv6hdr *nip = data + HF_L2;
	__be16 *nports = (void *)(nip + 1);
	if ((void *)(nports + 2) > end) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	__builtin_memcpy(&nip->daddr, sk.pod, 16);
	nports[1] = target;
	if (hf_csum6(skb, sk.vip, sk.pod, port, target, proto)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_NAT_IN);
	return TC_ACT_OK;
}

/* Bytes hf_node_in reads in place: Ethernet, outer IPv6, UDP, inner IPv6, the ports. */
#define HF_NODE_IN_NEED (HF_IN6 + 40 + 4)
/* Bytes hf_node_out reads in place: Ethernet, IPv6, the TCP header up to its flags. */
#define HF_NODE_OUT_NEED (HF_L4_6 + 14)

SEC("tc")
int hf_node_in(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_node_config();
	if (!cfg || cfg->encap_port_host == 0)
		return TC_ACT_OK;
	if (skb->protocol != bpf_htons(HF_ETH_P_IP) && skb->protocol != bpf_htons(HF_ETH_P_IPV6))
		return TC_ACT_OK;
	hf_pull(skb, HF_NODE_IN_NEED);
	if (skb->protocol == bpf_htons(HF_ETH_P_IP))
		return hf_node_in4(skb, cfg);
	if (skb->protocol == bpf_htons(HF_ETH_P_IPV6))
		return hf_node_in6(skb, cfg);
	return TC_ACT_OK;
}

/* Clamps a translated SYN's MSS at l4 to mss (0: off) and counts it. */
static __always_inline int hf_node_clamp(struct __sk_buff *skb, __u32 l4, int syn, __u16 mss)
{
	struct tcphdr tcp;
	if (!syn || mss == 0 || bpf_skb_load_bytes(skb, l4, &tcp, sizeof(tcp)))
		return TC_ACT_OK;
	int r = hf_clamp_syn(skb, l4, &tcp, mss);
	if (r == HF_MSS_OK)
		hf_ncount(HF_N_MSS_OK);
	else if (r == HF_MSS_CLAMPED)
		hf_ncount(HF_N_MSS_CLAMPED);
	return TC_ACT_OK;
}

/* Whether the TCP header at `ports` (bounds-checked to its flags) is a SYN. */
static __always_inline int hf_is_syn(__u8 proto, __be16 *ports, void *end)
{
	__u8 *flags = (__u8 *)ports + 13;
	return proto == HF_IPPROTO_TCP && (void *)(flags + 1) <= end && (*flags & 0x02);
}

SEC("tc")
int hf_node_out(struct __sk_buff *skb)
{
	struct decap_config *cfg = hf_node_config();
	if (!cfg)
		return TC_ACT_OK;
	int v4 = skb->protocol == bpf_htons(HF_ETH_P_IP);
	if (!v4 && skb->protocol != bpf_htons(HF_ETH_P_IPV6))
		return TC_ACT_OK;
	hf_pull(skb, HF_NODE_OUT_NEED);
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (v4) {
		struct iphdr *ip = data + HF_L2;
		__be16 *ports = (void *)(ip + 1);
		if ((void *)(ports + 2) > end || ip->version != 4 || ip->ihl != 5 ||
		    (ip->frag_off & bpf_htons(HF_IP_MF | HF_IP_OFFSET)))
			return TC_ACT_OK;
		if (ip->protocol == HF_IPPROTO_ICMP) {
			struct iphdr ipc = *ip;
			return hf_node_icmp_out4(skb, &ipc);
		}
		if (ip->protocol != HF_IPPROTO_TCP && ip->protocol != HF_IPPROTO_UDP)
			return TC_ACT_OK;
		struct node_flow_key k = {.pod = ip->saddr, .client = ip->daddr, .pod_port = ports[0],
					  .client_port = ports[1], .proto = ip->protocol};
		struct node_flow_value *v = bpf_map_lookup_elem(&hf_node_flows, &k);
		if (!v)
			return TC_ACT_OK;
		__be32 to = v->vip;
		__be16 pto = v->port;
		int syn = hf_is_syn(k.proto, ports, end);
		ip->saddr = to;
		ports[0] = pto;
		if (hf_ip_csum4(skb, k.pod, to) ||
		    hf_csum4(skb, k.pod, to, k.pod_port, pto, k.proto)) {
			hf_ncount(HF_N_ADJUST_FAILED);
			return TC_ACT_SHOT;
		}
		hf_ncount(HF_N_NAT_OUT);
		return hf_node_clamp(skb, HF_L4_4, syn, cfg->mss_max_host);
	}
	struct ipv6hdr *ip6 = data + HF_L2;
	__be16 *ports = (void *)(ip6 + 1);
	if ((void *)(ports + 2) > end || ip6->version != 6)
		return TC_ACT_OK;
	if (ip6->nexthdr == HF_IPPROTO_ICMPV6) {
		struct ipv6hdr ipc = *ip6;
		return hf_node_icmp_out6(skb, &ipc);
	}
	if (ip6->nexthdr != HF_IPPROTO_TCP && ip6->nexthdr != HF_IPPROTO_UDP)
		return TC_ACT_OK;
	struct node_flow_key6 k6 = {.pod_port = ports[0], .client_port = ports[1],
				    .proto = ip6->nexthdr};
	__builtin_memcpy(k6.pod, &ip6->saddr, 16);
	__builtin_memcpy(k6.client, &ip6->daddr, 16);
	struct node_flow_value6 *v6 = bpf_map_lookup_elem(&hf_node_flows6, &k6);
	if (!v6)
		return TC_ACT_OK;
	__u8 vip[16];
	__builtin_memcpy(vip, v6->vip, 16);
	__be16 pto = v6->port;
	int syn = hf_is_syn(k6.proto, ports, end);
	__builtin_memcpy(&ip6->saddr, vip, 16);
	ports[0] = pto;
	if (hf_csum6(skb, k6.pod, vip, k6.pod_port, pto, k6.proto)) {
		hf_ncount(HF_N_ADJUST_FAILED);
		return TC_ACT_SHOT;
	}
	hf_ncount(HF_N_NAT_OUT);
	__u16 mss = cfg->mss_max_host > HF_MSS6_DELTA ? cfg->mss_max_host - HF_MSS6_DELTA : 0;
	return hf_node_clamp(skb, HF_L4_6, syn, mss);
}
