// ibex_devinfo: the devices this host offers (as ibv_devices lists RDMA devices), and what
// one of them carries (as ibv_devinfo -d does): ibex_get_device_list, ibex_query_device.
#include <ibex/ibex.h>

#include <arpa/inet.h>
#include <getopt.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

void usage(FILE *out) {
    std::fprintf(out,
                 "usage: ibex_devinfo [-d DEVICE] [--json]\n"
                 "\n"
                 "Without -d, lists the devices every built provider can open, with the provider.\n"
                 "With -d, opens DEVICE and prints what it carries: the longest message, the\n"
                 "largest path MTU, the message length from which its per-message costs stay\n"
                 "small (the collectives' slice follows it), and the address its QPs take.\n"
                 "\n"
                 "  -d, --ib-dev DEVICE  a device name as listed (udp:lo, udp:<if>, shm, dpdk:...,\n"
                 "                       an RDMA device)\n"
                 "  --json               print JSON\n"
                 "  -h, --help           this text\n");
}

int fail(const char *what, ibex_status_t st) {
    std::fprintf(stderr, "ibex_devinfo: %s: %s: %s\n", what, ibex_strerror(st), ibex_last_error());
    return 1;
}

int list_devices(bool json) {
    ibex_device_list_t *list = nullptr;
    int n = 0;
    if (ibex_status_t st = ibex_get_device_list(&list, &n); st != IBEX_OK) return fail("listing devices", st);
    if (json) {
        std::printf("[");
        for (int i = 0; i < n; ++i)
            std::printf("%s\n  {\"device\": \"%s\", \"provider\": \"%s\"}", i ? "," : "", ibex_device_name(list, i),
                        ibex_device_provider(list, i));
        std::printf("%s]\n", n ? "\n" : "");
    } else {
        std::printf("    %-24s %s\n    %-24s %s\n", "device", "provider", "------", "--------");
        for (int i = 0; i < n; ++i) std::printf("    %-24s %s\n", ibex_device_name(list, i), ibex_device_provider(list, i));
    }
    ibex_free_device_list(list);
    return 0;
}

// The address and UDP port a QP of this context takes; "" where the device has no network
// address (shm names processes, not hosts: its QPs announce no UDP port).
std::string qp_address(ibex_context_t *ctx, uint16_t *udp_port) {
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    std::string out;
    *udp_port = 0;
    if (ibex_alloc_pd(ctx, &pd) == IBEX_OK && ibex_create_cq(ctx, 4, &cq) == IBEX_OK) {
        ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
        a.send_cq = a.recv_cq = cq;
        a.max_send_wr = a.max_recv_wr = 1;
        a.max_send_sge = a.max_recv_sge = 1;
        ibex_ep_addr_t ep{};
        if (ibex_create_qp(pd, &a, &qp) == IBEX_OK && ibex_qp_local_addr(qp, &ep) == IBEX_OK && ep.udp_port) {
            char text[INET6_ADDRSTRLEN] = {};
            static const uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (std::memcmp(ep.gid, kV4Mapped, sizeof kV4Mapped) == 0)
                inet_ntop(AF_INET, ep.gid + 12, text, sizeof text);
            else
                inet_ntop(AF_INET6, ep.gid, text, sizeof text);
            out = text;
            *udp_port = ep.udp_port;
        }
    }
    if (qp) ibex_destroy_qp(qp);
    if (cq) ibex_destroy_cq(cq);
    if (pd) ibex_dealloc_pd(pd);
    return out;
}

int show_device(const char *device, bool json) {
    ibex_context_t *ctx = nullptr;
    if (ibex_status_t st = ibex_open_device(device, nullptr, &ctx); st != IBEX_OK)
        return fail((std::string("opening \"") + device + "\"").c_str(), st);
    ibex_device_attr_t d{};
    d.size = sizeof d;
    const ibex_status_t st = ibex_query_device(ctx, &d);
    if (st != IBEX_OK) {
        const int rc = fail("ibex_query_device", st);
        ibex_close_device(ctx);
        return rc;
    }
    uint16_t udp_port = 0;
    const std::string addr = qp_address(ctx, &udp_port);
    const int mtu = ibex_mtu_to_bytes(static_cast<ibex_mtu_t>(d.max_mtu));
    if (json) {
        std::printf("{\"device\": \"%s\", \"max_msg_size\": %llu, \"max_mtu\": %d, \"efficient_msg_bytes\": %llu, "
                    "\"address\": \"%s\", \"udp_port\": %u}\n",
                    ibex_context_device_name(ctx), static_cast<unsigned long long>(d.max_msg_size), mtu,
                    static_cast<unsigned long long>(d.efficient_msg_bytes), addr.c_str(), udp_port);
    } else {
        std::printf("device:\t\t\t%s\n", ibex_context_device_name(ctx));
        std::printf("\tmax_msg_sz:\t\t%llu\n", static_cast<unsigned long long>(d.max_msg_size));
        std::printf("\tmax_mtu:\t\t%d (%u)\n", mtu, d.max_mtu);
        std::printf("\tefficient_msg_sz:\t%llu\n", static_cast<unsigned long long>(d.efficient_msg_bytes));
        if (!addr.empty()) std::printf("\taddress:\t\t%s udp %u\n", addr.c_str(), udp_port);
    }
    ibex_close_device(ctx);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    static const option kLong[] = {{"ib-dev", required_argument, nullptr, 'd'},
                                   {"json", no_argument, nullptr, 'j'},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    const char *device = nullptr;
    bool json = false;
    for (int c; (c = getopt_long(argc, argv, "d:h", kLong, nullptr)) != -1;) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'j': json = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "ibex_devinfo: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return device ? show_device(device, json) : list_devices(json);
}
