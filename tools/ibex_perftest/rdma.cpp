#include "tools/ibex_perftest/rdma.h"

#include <ibex/topology.h>

#include <algorithm>
#include <cstring>

#ifdef IBEX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace ibex::perftest {

std::string ibex_error(const char *what, ibex_status_t st) {
    std::string s = std::string(what) + ": " + ibex_strerror(st);
    const char *detail = ibex_last_error();
    if (detail && *detail) s += std::string(": ") + detail;
    return s;
}

ibex_mtu_t mtu_enum(int bytes) {
    switch (bytes) {
    case 256: return IBEX_MTU_256;
    case 512: return IBEX_MTU_512;
    case 1024: return IBEX_MTU_1024;
    case 2048: return IBEX_MTU_2048;
    case 4096: return IBEX_MTU_4096;
    default: return static_cast<ibex_mtu_t>(0);
    }
}

bool cuda_usable(int device, std::string *err) {
#ifdef IBEX_HAVE_CUDA
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        *err = std::string("--use_cuda: no usable GPU: ") + cudaGetErrorString(e);
        return false;
    }
    if (device >= count) {
        *err = "--use_cuda=" + std::to_string(device) + ": this host has " + std::to_string(count) + " GPU(s)";
        return false;
    }
    return true;
#else
    (void)device;
    *err = "--use_cuda: this ibex was built without CUDA (IBEX_WITH_CUDA found no toolkit); "
           "rebuild with the CUDA toolkit installed to measure GPU buffers";
    return false;
#endif
}

Resources::~Resources() { close(); }

bool Resources::open(const std::string &device, const ResourceSpec &spec, std::string *err) {
    ibex_status_t st = ibex_open_device(device.c_str(), nullptr, &ctx);
    if (st != IBEX_OK) {
        *err = ibex_error(("cannot open device \"" + device + "\"").c_str(), st);
        return false;
    }
    if ((st = ibex_alloc_pd(ctx, &pd)) != IBEX_OK) {
        *err = ibex_error("ibex_alloc_pd", st);
        return false;
    }
    const int cqe = static_cast<int>(spec.num_qps * (spec.max_send_wr + spec.max_recv_wr)) + 64;
    if ((st = ibex_create_cq(ctx, cqe, &cq)) != IBEX_OK) {
        *err = ibex_error("ibex_create_cq", st);
        return false;
    }
    for (uint32_t i = 0; i < spec.num_qps; ++i) {
        ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
        qa.send_cq = cq;
        qa.recv_cq = cq;
        qa.max_send_wr = spec.max_send_wr;
        qa.max_recv_wr = spec.max_recv_wr;
        qa.max_send_sge = 1;
        qa.max_recv_sge = 1;
        ibex_qp_t *qp = nullptr;
        if ((st = ibex_create_qp(pd, &qa, &qp)) != IBEX_OK) {
            *err = ibex_error("ibex_create_qp", st);
            return false;
        }
        qps.push_back(qp);
        ibex_ep_addr_t a{};
        if ((st = ibex_qp_local_addr(qp, &a)) != IBEX_OK) {
            *err = ibex_error("ibex_qp_local_addr", st);
            return false;
        }
        local.push_back(a);
    }
    region_len = (spec.region + 4095) & ~size_t(4095);
    buf_len = region_len * spec.num_qps;
    if (spec.cuda_device >= 0) {
#ifdef IBEX_HAVE_CUDA
        void *p = nullptr;
        cudaError_t e = cudaSetDevice(spec.cuda_device);
        if (e == cudaSuccess) e = cudaMalloc(&p, buf_len);
        if (e == cudaSuccess) e = cudaMemset(p, 0, buf_len);
        if (e != cudaSuccess) {
            *err = std::string("cannot allocate ") + std::to_string(buf_len) + " bytes on GPU " +
                   std::to_string(spec.cuda_device) + ": " + cudaGetErrorString(e);
            if (p) cudaFree(p);
            return false;
        }
        buf = static_cast<uint8_t *>(p);
        cuda_ = spec.cuda_device;
#else
        return cuda_usable(spec.cuda_device, err);
#endif
    } else if (spec.ibex_alloc) {
        // First touch by this (NUMA-bound) thread places the pages, as ibex_numa_alloc would.
        void *p = nullptr;
        if ((st = ibex_mem_alloc(pd, buf_len, &p)) != IBEX_OK) {
            *err = ibex_error(("ibex_mem_alloc of " + std::to_string(buf_len) + " bytes").c_str(), st);
            return false;
        }
        buf = static_cast<uint8_t *>(p);
        ibex_alloc_ = true;
        std::memset(buf, 0, buf_len);
    } else {
        void *p = nullptr;
        if ((st = ibex_numa_alloc(buf_len, spec.numa_node, &p)) != IBEX_OK) {
            *err = ibex_error(("cannot allocate a buffer of " + std::to_string(buf_len) + " bytes").c_str(), st);
            return false;
        }
        buf = static_cast<uint8_t *>(p);
        std::memset(buf, 0, buf_len);
    }
    st = ibex_reg_mr(pd, buf, buf_len,
                     IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ |
                         IBEX_ACCESS_REMOTE_ATOMIC,
                     &mr);
    if (st != IBEX_OK) {
        *err = ibex_error("ibex_reg_mr", st);
        return false;
    }
    return true;
}

void Resources::close() {
    if (mr) ibex_dereg_mr(mr);
    for (ibex_qp_t *qp : qps) ibex_destroy_qp(qp);
    if (cq) ibex_destroy_cq(cq);
    if (buf && ibex_alloc_) {
        ibex_mem_free(pd, buf);
        buf = nullptr;
    }
    ibex_alloc_ = false;
    if (pd) ibex_dealloc_pd(pd);
    if (ctx) ibex_close_device(ctx);
    if (buf) {
#ifdef IBEX_HAVE_CUDA
        if (cuda_ >= 0) cudaFree(buf);
        else
#endif
            ibex_numa_free(buf, buf_len);
    }
    mr = nullptr;
    qps.clear();
    local.clear();
    cq = nullptr;
    pd = nullptr;
    ctx = nullptr;
    buf = nullptr;
}

KeyRecord Resources::local_key(uint32_t i, size_t remote_offset) const {
    KeyRecord k;
    k.lid = 0; // RoCE has no LID
    k.out_reads = 16;
    k.qpn = local[i].qpn & 0xffffff;
    k.psn = local[i].psn & 0xffffff;
    k.rkey = ibex_mr_rkey(mr);
    k.vaddr = reinterpret_cast<uintptr_t>(region(i)) + remote_offset;
    k.srqn = 0;
    std::memcpy(k.gid, local[i].gid, sizeof k.gid);
    return k;
}

std::array<QpStep, 3> connect_steps(const ibex_ep_addr_t &local, const KeyRecord &remote, const ConnectParams &p) {
    std::array<QpStep, 3> steps{};
    for (QpStep &s : steps) s.attr = IBEX_QP_ATTR_INIT;
    ibex_qp_attr_t &init = steps[0].attr;
    init.qp_state = IBEX_QPS_INIT;
    init.qp_access_flags =
        IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC;
    steps[0].mask = IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS;

    ibex_qp_attr_t &rtr = steps[1].attr;
    rtr.qp_state = IBEX_QPS_RTR;
    std::memcpy(rtr.dest.gid, remote.gid, sizeof rtr.dest.gid);
    rtr.dest.udp_port = kRoceUdpPort;
    rtr.dest.qpn = remote.qpn;
    rtr.dest.psn = remote.psn;
    const uint8_t agreed = p.mtu_bytes ? static_cast<uint8_t>(mtu_enum(p.mtu_bytes)) : 0;
    rtr.path_mtu = static_cast<ibex_mtu_t>(agreed && agreed < local.mtu ? agreed : local.mtu);
    rtr.dest.mtu = static_cast<uint8_t>(rtr.path_mtu);
    rtr.rq_psn = remote.psn;
    // Responder resources: the READs/atomics this side serves at once (-o).
    rtr.max_rd_atomic = static_cast<uint8_t>(std::min<uint32_t>(p.out_reads, 255));
    rtr.traffic_class = p.traffic_class;
    steps[1].mask = IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_MAX_RD_ATOMIC |
                    IBEX_QP_TRAFFIC_CLASS;
    if (p.sl >= 0) {
        rtr.sl = static_cast<uint8_t>(p.sl);
        steps[1].mask |= IBEX_QP_SL;
    }

    ibex_qp_attr_t &rts = steps[2].attr;
    rts.qp_state = IBEX_QPS_RTS;
    rts.sq_psn = local.psn;
    rts.timeout = p.timeout;
    rts.retry_cnt = 7;
    rts.rnr_retry = 7;
    // Initiator depth: ours (-o), never more than the peer said it serves.
    rts.max_rd_atomic = static_cast<uint8_t>(
        std::min<uint32_t>({p.out_reads, remote.out_reads ? remote.out_reads : 16u, 255u}));
    steps[2].mask =
        IBEX_QP_STATE | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_MAX_RD_ATOMIC;
    return steps;
}

bool Resources::connect(uint32_t i, const KeyRecord &remote, const ConnectParams &p, std::string *err) {
    static constexpr const char *kTo[] = {"INIT", "RTR", "RTS"};
    const std::array<QpStep, 3> steps = connect_steps(local[i], remote, p);
    for (size_t k = 0; k < steps.size(); ++k) {
        const ibex_status_t st = ibex_modify_qp(qps[i], &steps[k].attr, steps[k].mask);
        if (st != IBEX_OK) {
            *err = ibex_error(("cannot connect the QP to the peer (to " + std::string(kTo[k]) + ")").c_str(), st);
            return false;
        }
    }
    ibex_qp_attr_t qa = IBEX_QP_ATTR_INIT;
    if (const ibex_status_t st = ibex_query_qp(qps[i], &qa); st != IBEX_OK) {
        *err = ibex_error("ibex_query_qp", st);
        return false;
    }
    path_mtu_ = ibex_mtu_to_bytes(qa.path_mtu);
    traffic_class_ = qa.traffic_class;
    sl_ = qa.sl;
    return true;
}

} // namespace ibex::perftest
