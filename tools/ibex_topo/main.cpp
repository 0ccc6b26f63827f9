// ibex_topo: the machine (or an hwloc XML file) as ibex sees it — a device matrix of path
// types like `nvidia-smi topo -m`, and the NIC/NUMA/core binding of each local rank.
#include <ibex/topology.h>

#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void usage(FILE *out) {
    std::fprintf(out,
                 "usage: ibex_topo [--topo FILE] [--ranks N] [--json] [--export FILE]\n"
                 "\n"
                 "Prints the GPUs and NICs of this machine (or of an hwloc XML file) with the PCIe\n"
                 "path type between each pair, their CPU and NUMA affinity, and the binding ibex\n"
                 "chooses for each local rank.\n"
                 "\n"
                 "  --topo FILE    read an hwloc XML topology (default: $IBEX_TOPO_FILE, else this machine)\n"
                 "  --ranks N      local ranks to bind (default: the number of GPUs, or 1)\n"
                 "  --json         print JSON instead of tables\n"
                 "  --export FILE  write the topology as hwloc XML to FILE and exit\n"
                 "  -h, --help     this text\n"
                 "\n"
                 "Environment: IBEX_TOPO_FILE, IBEX_NIC (NICs ranks may use), IBEX_NUMA (node for\n"
                 "memory and progress cores), IBEX_LOG_LEVEL=info (log each binding decision).\n");
}

int die(const char *what, ibex_status_t st) {
    std::fprintf(stderr, "ibex_topo: %s: %s: %s\n", what, ibex_strerror(st), ibex_last_error());
    return 1;
}

struct Binding {
    int rank;
    ibex_binding_t b;
};

ibex_topo_device_t device(const ibex_topology_t *topo, int i) {
    ibex_topo_device_t d{};
    d.size = sizeof d;
    ibex_topo_device(topo, i, &d);
    return d;
}

ibex_path_type_t path(const ibex_topology_t *topo, int i, int j) {
    ibex_path_type_t p = IBEX_PATH_NONE;
    ibex_topo_path(topo, i, j, &p);
    return p;
}

const char *kind_name(ibex_topo_kind_t k) {
    switch (k) {
    case IBEX_TOPO_GPU: return "gpu";
    case IBEX_TOPO_NIC: return "nic";
    case IBEX_TOPO_NUMA: return "numa";
    }
    return "?";
}

std::string or_dash(const char *s) { return (s && *s) ? s : "-"; }

std::string link_text(const ibex_topo_device_t &d) {
    char buf[64] = "";
    if (d.link_width > 0 && d.link_speed_gbs > 0)
        std::snprintf(buf, sizeof buf, "x%d %.1f GB/s", d.link_width, d.link_speed_gbs);
    else if (d.link_speed_gbs > 0)
        std::snprintf(buf, sizeof buf, "%.1f GB/s", d.link_speed_gbs);
    else if (d.link_width > 0)
        std::snprintf(buf, sizeof buf, "x%d", d.link_width);
    return buf;
}

// Left-aligned columns two spaces apart; the last column is not padded.
void print_table(const std::vector<std::vector<std::string>> &rows, const char *indent) {
    std::vector<size_t> width;
    for (const auto &r : rows)
        for (size_t c = 0; c < r.size(); ++c) {
            if (width.size() <= c) width.push_back(0);
            width[c] = std::max(width[c], r[c].size());
        }
    for (const auto &r : rows) {
        std::string line = indent;
        for (size_t c = 0; c < r.size(); ++c) {
            line += r[c];
            if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::puts(line.c_str());
    }
}

void print_text(const ibex_topology_t *topo, const std::vector<Binding> &bindings) {
    const char *src = ibex_topo_source(topo);
    const char *host = ibex_topo_hostname(topo);
    std::printf("ibex topology of %s%s%s%s\n\n", *src ? src : "this machine", *host ? " (host " : "", host,
                *host ? ")" : "");

    std::vector<int> devs; // the matrix shows GPUs and NICs, as nvidia-smi does
    for (int i = 0; i < ibex_topo_device_count(topo); ++i)
        if (device(topo, i).kind != IBEX_TOPO_NUMA) devs.push_back(i);
    if (devs.empty()) {
        std::printf("No GPUs or NICs found.\n\n");
    } else {
        std::vector<std::vector<std::string>> rows;
        std::vector<std::string> head{""};
        for (int j : devs) head.push_back(device(topo, j).label);
        head.push_back("CPU Affinity");
        head.push_back("NUMA Affinity");
        rows.push_back(head);
        for (int i : devs) {
            ibex_topo_device_t d = device(topo, i);
            std::vector<std::string> r{d.label};
            for (int j : devs) r.push_back(ibex_path_type_str(path(topo, i, j)));
            r.push_back(d.cpus);
            r.push_back(d.numa_nodes);
            rows.push_back(r);
        }
        print_table(rows, "");
        std::printf("\nLegend (path between two devices, best first):\n\n"
                    "  X    = the device itself\n"
                    "  PIX  = both behind the same PCIe switch, one bridge apart at most\n"
                    "  PXB  = through two or more PCIe bridges, never up to the CPU's root complex\n"
                    "  PHB  = up through a PCIe host bridge (the CPU's root complex)\n"
                    "  NODE = across host bridges of the same NUMA node\n"
                    "  SYS  = across NUMA nodes, over the inter-socket link\n"
                    "  N/A  = NUMA node unknown (sysfs numa_node is -1): paths beyond its host bridge count as SYS\n\n");
    }

    std::printf("Devices:\n\n");
    std::vector<std::vector<std::string>> rows{{"", "PCI", "name", "netdev", "model", "link"}};
    for (int i = 0; i < ibex_topo_device_count(topo); ++i) {
        ibex_topo_device_t d = device(topo, i);
        if (d.kind == IBEX_TOPO_NUMA)
            rows.push_back({d.label, "-", "-", "-", std::string("cpus ") + d.cpus, ""});
        else
            rows.push_back({d.label, d.pci_busid, d.name, or_dash(d.netdev), or_dash(d.model), link_text(d)});
    }
    print_table(rows, "  ");

    if (bindings.empty()) {
        std::printf("\nBinding: none, no network device.\n");
        return;
    }
    std::printf("\nBinding (%zu local rank%s):\n\n", bindings.size(), bindings.size() == 1 ? "" : "s");
    rows = {{"rank", "GPU", "NIC", "name", "netdev", "path", "NUMA", "progress CPUs", "NIC-local CPUs", "note"}};
    for (const Binding &x : bindings) {
        const ibex_binding_t &b = x.b;
        ibex_topo_device_t nic = device(topo, b.nics[0]);
        std::string gpu = b.gpu >= 0 ? "GPU" + std::to_string(b.gpu) : "-";
        std::string note;
        if (b.flags & IBEX_BINDING_NIC_FROM_ENV) note += "IBEX_NIC ";
        if (b.flags & IBEX_BINDING_NUMA_FROM_ENV) note += "IBEX_NUMA ";
        if (b.numa_node < 0) note += "NUMA unknown ";
        for (int k = 1; k < b.nic_count; ++k) note += std::string("+") + device(topo, b.nics[k]).label + " ";
        rows.push_back({std::to_string(x.rank), gpu, nic.label, nic.name, or_dash(nic.netdev),
                        ibex_path_type_str(b.path), b.numa_node >= 0 ? std::to_string(b.numa_node) : "-",
                        b.progress_cpus, b.nic_cpus, note});
    }
    print_table(rows, "  ");
}

std::string json_str(const char *s) {
    std::string out = "\"";
    for (const char *p = s; p && *p; ++p) {
        unsigned char c = static_cast<unsigned char>(*p);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

void print_json(const ibex_topology_t *topo, const std::vector<Binding> &bindings) {
    const int n = ibex_topo_device_count(topo);
    std::printf("{\n  \"source\": %s,\n  \"host\": %s,\n  \"devices\": [\n",
                json_str(*ibex_topo_source(topo) ? ibex_topo_source(topo) : "this machine").c_str(),
                json_str(ibex_topo_hostname(topo)).c_str());
    for (int i = 0; i < n; ++i) {
        ibex_topo_device_t d = device(topo, i);
        std::printf("    {\"index\": %d, \"label\": %s, \"kind\": \"%s\", \"name\": %s, \"pci_busid\": %s, "
                    "\"model\": %s, \"rdma_device\": %s, \"netdev\": %s, \"cpus\": %s, \"numa_nodes\": %s, "
                    "\"numa_node\": %d, \"link_width\": %d, \"link_speed_gbs\": %.2f}%s\n",
                    i, json_str(d.label).c_str(), kind_name(d.kind), json_str(d.name).c_str(),
                    json_str(d.pci_busid).c_str(), json_str(d.model).c_str(), json_str(d.rdma_device).c_str(),
                    json_str(d.netdev).c_str(), json_str(d.cpus).c_str(), json_str(d.numa_nodes).c_str(), d.numa_node,
                    d.link_width, d.link_speed_gbs, i + 1 < n ? "," : "");
    }
    std::printf("  ],\n  \"paths\": [\n");
    for (int i = 0; i < n; ++i) {
        std::printf("    [");
        for (int j = 0; j < n; ++j) std::printf("%s\"%s\"", j ? ", " : "", ibex_path_type_str(path(topo, i, j)));
        std::printf("]%s\n", i + 1 < n ? "," : "");
    }
    std::printf("  ],\n  \"bindings\": [\n");
    for (size_t r = 0; r < bindings.size(); ++r) {
        const ibex_binding_t &b = bindings[r].b;
        std::string nics;
        for (int k = 0; k < b.nic_count; ++k) nics += (k ? ", " : "") + json_str(device(topo, b.nics[k]).label);
        std::printf("    {\"local_rank\": %d, \"gpu\": %d, \"nics\": [%s], \"path\": \"%s\", \"numa_node\": %d, "
                    "\"progress_cpus\": %s, \"nic_cpus\": %s, \"nic_from_env\": %s, \"numa_from_env\": %s}%s\n",
                    bindings[r].rank, b.gpu, nics.c_str(), ibex_path_type_str(b.path), b.numa_node,
                    json_str(b.progress_cpus).c_str(), json_str(b.nic_cpus).c_str(),
                    (b.flags & IBEX_BINDING_NIC_FROM_ENV) ? "true" : "false",
                    (b.flags & IBEX_BINDING_NUMA_FROM_ENV) ? "true" : "false", r + 1 < bindings.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
}

} // namespace

int main(int argc, char **argv) {
    const char *topo_file = nullptr;
    const char *export_file = nullptr;
    int ranks = 0;
    bool json = false;
    static const option opts[] = {{"topo", required_argument, nullptr, 't'},
                                  {"ranks", required_argument, nullptr, 'r'},
                                  {"json", no_argument, nullptr, 'j'},
                                  {"export", required_argument, nullptr, 'e'},
                                  {"help", no_argument, nullptr, 'h'},
                                  {nullptr, 0, nullptr, 0}};
    for (int c; (c = getopt_long(argc, argv, "h", opts, nullptr)) != -1;) {
        switch (c) {
        case 't': topo_file = optarg; break;
        case 'e': export_file = optarg; break;
        case 'j': json = true; break;
        case 'r': {
            char *end = nullptr;
            long v = std::strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 4096) {
                std::fprintf(stderr, "ibex_topo: --ranks wants a number from 1 to 4096, not \"%s\"\n", optarg);
                return 2;
            }
            ranks = static_cast<int>(v);
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "ibex_topo: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    ibex_topology_t *topo = nullptr;
    if (ibex_status_t st = ibex_topo_load(topo_file, &topo); st != IBEX_OK) return die("loading the topology", st);
    int rc = 0;
    if (export_file) {
        if (ibex_status_t st = ibex_topo_export_xml(topo, export_file); st != IBEX_OK) rc = die("exporting", st);
        ibex_topo_free(topo);
        return rc;
    }

    if (ranks == 0) ranks = std::max(1, ibex_topo_count(topo, IBEX_TOPO_GPU));
    std::vector<Binding> bindings;
    // A host without a network device still has a topology worth printing.
    const bool have_nics = ibex_topo_count(topo, IBEX_TOPO_NIC) > 0;
    for (int r = 0; r < ranks && rc == 0 && have_nics; ++r) {
        ibex_bind_request_t req = IBEX_BIND_REQUEST_INIT;
        req.local_rank = r;
        req.local_size = ranks;
        Binding x{r, {}};
        x.b.size = sizeof x.b;
        if (ibex_status_t st = ibex_topo_bind(topo, &req, &x.b); st != IBEX_OK) rc = die("binding", st);
        bindings.push_back(x);
    }
    if (rc == 0) {
        if (json) print_json(topo, bindings);
        else print_text(topo, bindings);
    }
    ibex_topo_free(topo);
    return rc;
}
