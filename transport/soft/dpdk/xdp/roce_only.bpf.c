// XDP program for ibex's af_xdp ports: RoCEv2 frames (IPv4 UDP to port 4791, untagged or
// under one 802.1Q tag) go to the interface's AF_XDP socket; everything else goes on to
// the kernel, so TCP on the same interface (the tools' exchange, the bootstrap, ssh) and
// the kernel's own ARP keep working. The PMD's default program takes every frame of the
// queue instead. DPDK's af_xdp PMD loads this with xdp_prog= and puts its socket into the
// map that must be named xsks_map.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCEV2_UDP_PORT 4791
#define ETH_P_8021Q_TAG 0x8100

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int ibex_roce_only(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end) return XDP_PASS;
    void *l3 = eth + 1;
    __u16 proto = eth->h_proto;
    if (proto == bpf_htons(ETH_P_8021Q_TAG)) {
        // 802.1Q: TCI, then the encapsulated EtherType.
        if (l3 + 4 > end) return XDP_PASS;
        proto = *(__u16 *)(l3 + 2);
        l3 += 4;
    }
    if (proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = l3;
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end || udp->dest != bpf_htons(ROCEV2_UDP_PORT)) return XDP_PASS;
    return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
