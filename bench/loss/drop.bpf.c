// tc egress program for the TCP side of the loss sweep: drops each packet with
// probability LOSS_PPM / 10^6. This kernel has no netem and no gact action, so the sweep
// attaches this with `tc filter ... bpf da` instead (built by run_sweep.sh with clang).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#ifndef LOSS_PPM
#define LOSS_PPM 0
#endif

SEC("tc")
int drop_random(struct __sk_buff *skb) {
    (void)skb;
    return bpf_get_prandom_u32() % 1000000u < LOSS_PPM ? TC_ACT_SHOT : TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
