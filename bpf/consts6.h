/* SPDX-License-Identifier: Apache-2.0 */
/* Constants of the IPv6 datapath (docs/contracts.md "IPv6"); the shared ones (protocols, ports,
 * flags, map sizes, reasons) are in consts.h. */
#ifndef HF_CONSTS6_H
#define HF_CONSTS6_H

#include "consts.h"

#define HF_ETH_P_IPV6 0x86dd
#define HF_IPPROTO_ICMPV6 58

/* IPv6 extension headers (RFC 8200 4, IANA "IPv6 Extension Header Types"): a packet whose next
 * header is one of these is passed untouched (pass_ipv6_ext), never parsed further. */
#define HF_IPV6_HOPOPTS 0
#define HF_IPV6_ROUTING 43
#define HF_IPV6_FRAGMENT 44
#define HF_IPV6_ESP 50
#define HF_IPV6_AH 51
#define HF_IPV6_DSTOPTS 60
#define HF_IPV6_MOBILITY 135
#define HF_IPV6_HIP 139
#define HF_IPV6_SHIM6 140
#define HF_IPV6_EXP1 253
#define HF_IPV6_EXP2 254

/* ICMPv6 errors (RFC 4443) the LB routes to the owning backend; 2 is also what it sends. */
#define HF_ICMP6_DEST_UNREACH 1
#define HF_ICMP6_PKT_TOO_BIG 2
#define HF_ICMP6_TIME_EXCEEDED 3

#define HF_IPV6_HDR 40
/* Outer headers added by encapsulation to an IPv6 backend: IPv6 (40) + UDP (8). To an IPv4
 * backend the outer headers are IPv4 + UDP (HF_ENCAP_OVERHEAD, 28) whatever the client family. */
#define HF_ENCAP6_OVERHEAD 48
/* The quote of an ICMPv6 error: the 40-byte IPv6 header and 8 bytes of L4. */
#define HF_ICMP6_QUOTE (HF_IPV6_HDR + 8)
/* The IPv6 minimum link MTU (RFC 8200 5). */
#define HF_IPV6_MIN_MTU 1280
/* MSS of a v6 SYN from a local LB IP = mss_max - this: the inner IPv6 header is 20 bytes longer
 * than IPv4's and an outer IPv6 header 20 longer than an outer IPv4 one (docs/mtu.md). */
#define HF_MSS6_DELTA 40

/* Backend address family of flow_value6 / flow_event6. */
#define HF_AF_INET 4
#define HF_AF_INET6 6

#endif
