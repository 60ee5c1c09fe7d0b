// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pronghorn's XDP program: on the interface pronghorn drives through AF_XDP, it hands the
 * AF_XDP socket of the frame's queue only the frames pronghorn owns and passes every other
 * frame to the kernel (XDP_PASS). Built by crates/nic/build.rs with clang's BPF target, loaded
 * by DPDK's af_xdp PMD (the `xdp_prog` devarg), which fills `xsks_map`; the runtime fills
 * `ph_config` and `ph_ports` (crates/nic/src/xdp.rs, whose structs mirror the ones below).
 *
 * What pronghorn owns:
 *  - dedicated interface (PH_SHARE clear): ARP, NDP (ICMPv6 133..137), and every IPv4/IPv6
 *    packet to its own addresses (the IPv6 link-local one included), whatever the protocol;
 *  - shared interface (PH_SHARE set): TCP and UDP to its addresses whose destination port is
 *    in `ph_ports` or in the ephemeral range of `ph_config`, and the ICMP errors about them
 *    (the quoted header's source port is ours); ARP, NDP, ping and the rest stay the kernel's.
 * Until the runtime has written `ph_config` (PH_READY clear) everything goes to the kernel.
 * A queue whose socket is gone (the process was killed) has no `xsks_map` entry:
 * bpf_redirect_map's default action XDP_PASS then hands the frame to the kernel, so a crash
 * never blackholes the interface.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define PH_READY 1
#define PH_HAVE_V4 2
#define PH_HAVE_V6 4
#define PH_SHARE 8

struct ph_config {
	__u32 flags;
	__u32 ipv4;          /* network order */
	__u8 ipv6[16];
	__u8 ipv6_link_local[16];
	__u16 ephemeral_lo;  /* host order, inclusive; shared mode */
	__u16 ephemeral_hi;
	__u32 pad;
};

struct ph_port_key {
	__u8 proto;          /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u16 port;          /* host order */
};

/* Redirected to the queue's socket; passed to the kernel, not ours; ours, but the queue has no
 * socket (the process is gone, or this is BPF_PROG_TEST_RUN): passed to the kernel. */
enum ph_verdict { PH_REDIRECTED = 0, PH_PASSED = 1, PH_NO_SOCKET = 2, PH_VERDICTS = 3 };

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ph_config);
} ph_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ph_port_key);
	__type(value, __u32);
} ph_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PH_VERDICTS);
	__type(key, __u32);
	__type(value, __u64);
} ph_verdicts SEC(".maps");

struct ipv4_hdr {
	__u8 ver_ihl;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct ipv6_hdr {
	__u32 ver_tc_flow;
	__u16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

static __always_inline void count(__u32 verdict)
{
	__u64 *n = bpf_map_lookup_elem(&ph_verdicts, &verdict);
	if (n)
		*n += 1;
}

static __always_inline int pass(void)
{
	count(PH_PASSED);
	return XDP_PASS;
}

static __always_inline int redirect(struct xdp_md *ctx)
{
	int rc = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
	count(rc == XDP_REDIRECT ? PH_REDIRECTED : PH_NO_SOCKET);
	return rc;
}

static __always_inline int same16(const __u8 *a, const __u8 *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

/* Whether the TCP or UDP port `port` (network order) is one pronghorn holds. */
static __always_inline int owned_port(const struct ph_config *cfg, __u8 proto, __u16 port)
{
	struct ph_port_key key = { .proto = proto, .pad = 0, .port = bpf_ntohs(port) };
	if (key.port >= cfg->ephemeral_lo && key.port <= cfg->ephemeral_hi && cfg->ephemeral_lo)
		return 1;
	return bpf_map_lookup_elem(&ph_ports, &key) != NULL;
}

/* Shared mode: the transport header at `l4` (protocol `proto`) names a port of ours as its
 * destination (`at` = 2) or, quoted in an ICMP error, as its source (`at` = 0). */
static __always_inline int owned_transport(const struct ph_config *cfg, void *l4, void *end, __u8 proto, int at)
{
	__u16 *ports = l4;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 0;
	if ((void *)(ports + 2) > end)
		return 0;
	return owned_port(cfg, proto, at ? ports[1] : ports[0]);
}

static __always_inline int ipv4(struct xdp_md *ctx, const struct ph_config *cfg, void *l3, void *end)
{
	struct ipv4_hdr *ip = l3;
	if ((void *)(ip + 1) > end || !(cfg->flags & PH_HAVE_V4) || ip->daddr != cfg->ipv4)
		return pass();
	if (!(cfg->flags & PH_SHARE))
		return redirect(ctx);
	/* Shared: fragments are the kernel's to reassemble (pronghorn drops them anyway). */
	if (ip->frag_off & bpf_htons(0x3fff))
		return pass();
	void *l4 = l3 + (ip->ver_ihl & 0xf) * 4;
	if (ip->protocol == IPPROTO_ICMP) {
		__u8 *icmp = l4;
		if ((void *)(icmp + 8) > end)
			return pass();
		/* Destination unreachable, time exceeded, parameter problem: about what we sent? */
		if (icmp[0] != 3 && icmp[0] != 11 && icmp[0] != 12)
			return pass();
		struct ipv4_hdr *inner = (void *)(icmp + 8);
		if ((void *)(inner + 1) > end || inner->saddr != cfg->ipv4)
			return pass();
		void *inner_l4 = (void *)inner + (inner->ver_ihl & 0xf) * 4;
		return owned_transport(cfg, inner_l4, end, inner->protocol, 0) ? redirect(ctx) : pass();
	}
	return owned_transport(cfg, l4, end, ip->protocol, 1) ? redirect(ctx) : pass();
}

static __always_inline int is_ndp(__u8 type)
{
	return type >= 133 && type <= 137;
}

static __always_inline int ipv6(struct xdp_md *ctx, const struct ph_config *cfg, void *l3, void *end)
{
	struct ipv6_hdr *ip = l3;
	if ((void *)(ip + 1) > end || !(cfg->flags & PH_HAVE_V6))
		return pass();
	__u8 *l4 = (void *)(ip + 1);
	int ours = same16(ip->daddr, cfg->ipv6) || same16(ip->daddr, cfg->ipv6_link_local);
	if (!(cfg->flags & PH_SHARE)) {
		if (ours)
			return redirect(ctx);
		/* NDP to a multicast group (solicited-node, all-nodes): pronghorn answers for its own. */
		if (ip->daddr[0] == 0xff && ip->nexthdr == IPPROTO_ICMPV6 && l4 + 1 <= (__u8 *)end && is_ndp(l4[0]))
			return redirect(ctx);
		return pass();
	}
	/* Shared: the link-local address and NDP are the kernel's; extension headers too. */
	if (!same16(ip->daddr, cfg->ipv6))
		return pass();
	if (ip->nexthdr == IPPROTO_ICMPV6) {
		if (l4 + 8 > (__u8 *)end)
			return pass();
		/* Destination unreachable, packet too big, time exceeded, parameter problem. */
		if (l4[0] < 1 || l4[0] > 4)
			return pass();
		struct ipv6_hdr *inner = (void *)(l4 + 8);
		if ((void *)(inner + 1) > end || !same16(inner->saddr, cfg->ipv6))
			return pass();
		return owned_transport(cfg, inner + 1, end, inner->nexthdr, 0) ? redirect(ctx) : pass();
	}
	return owned_transport(cfg, l4, end, ip->nexthdr, 1) ? redirect(ctx) : pass();
}

SEC("xdp")
int pronghorn_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	const struct ph_config *cfg = bpf_map_lookup_elem(&ph_config, &zero);

	if (!cfg || !(cfg->flags & PH_READY) || (void *)(eth + 1) > end)
		return pass();
	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
		return cfg->flags & PH_SHARE ? pass() : redirect(ctx);
	case bpf_htons(ETH_P_IP):
		return ipv4(ctx, cfg, eth + 1, end);
	case bpf_htons(ETH_P_IPV6):
		return ipv6(ctx, cfg, eth + 1, end);
	default:
		return pass();
	}
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
