// SPDX-License-Identifier: Apache-2.0
/* Trivial tc program: the no-op floor of bench/backend.ts (the node side's cost per packet is
 * given as a ratio to it, measured by the same method in the same run). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int hf_tc_pass(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}
