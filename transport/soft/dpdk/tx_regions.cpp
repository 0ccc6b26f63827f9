// rte_dev_dma_map is still "experimental" in 22.11 (stable in later releases).
#define ALLOW_EXPERIMENTAL_API 1
#include "transport/soft/dpdk/tx_regions.h"

#include <algorithm>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_memory.h>

#include "runtime/base/log.h"

namespace ibex::soft::dpdk {
namespace {

void free_shinfo(void *, void *opaque) { delete static_cast<rte_mbuf_ext_shared_info *>(opaque); }

rte_iova_t iova_of(const void *p) {
    return rte_eal_iova_mode() == RTE_IOVA_VA ? reinterpret_cast<rte_iova_t>(p) : rte_mem_virt2iova(p);
}

} // namespace

TxRegions::~TxRegions() {
    for (auto &r : regions_) release(r);
}

void TxRegions::add(const void *addr, size_t len) {
    if (!len) return;
    Region r{reinterpret_cast<uintptr_t>(addr), len, new rte_mbuf_ext_shared_info{}, 0, 0};
    r.shinfo->free_cb = free_shinfo;
    r.shinfo->fcb_opaque = r.shinfo;
    rte_mbuf_ext_refcnt_set(r.shinfo, 1);
    if (dma_device_) {
        const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
        const uintptr_t a = r.start & ~(page - 1);
        const uintptr_t b = (r.start + len + page - 1) & ~(page - 1);
        // Another region on the same pages was registered first: EAL refuses overlaps,
        // and this one then goes out by copy (attach() checks dma_len).
        if (rte_extmem_register(reinterpret_cast<void *>(a), b - a, nullptr, 0, page) == 0) {
            if (rte_dev_dma_map(dma_device_, reinterpret_cast<void *>(a), iova_of(reinterpret_cast<void *>(a)), b - a) == 0) {
                r.dma_start = a;
                r.dma_len = b - a;
            } else {
                IBEX_LOG(warn, "dpdk: DMA map of %zu bytes failed (%s): that region is sent by copy", size_t(b - a),
                         rte_strerror(rte_errno));
                rte_extmem_unregister(reinterpret_cast<void *>(a), b - a);
            }
        } else {
            IBEX_LOG(info, "dpdk: extmem register of %zu bytes failed (%s): that region is sent by copy", size_t(b - a),
                     rte_strerror(rte_errno));
        }
    }
    auto at = std::lower_bound(regions_.begin(), regions_.end(), r.start,
                               [](const Region &x, uintptr_t s) { return x.start < s; });
    regions_.insert(at, r);
}

void TxRegions::remove(const void *addr, size_t len) {
    const uintptr_t s = reinterpret_cast<uintptr_t>(addr);
    for (auto it = regions_.begin(); it != regions_.end(); ++it) {
        if (it->start == s && it->len == len) {
            release(*it);
            regions_.erase(it);
            return;
        }
    }
}

void TxRegions::release(Region &r) {
    if (r.dma_len) {
        rte_dev_dma_unmap(dma_device_, reinterpret_cast<void *>(r.dma_start), iova_of(reinterpret_cast<void *>(r.dma_start)),
                          r.dma_len);
        rte_extmem_unregister(reinterpret_cast<void *>(r.dma_start), r.dma_len);
    }
    // Drops the registration's reference; mbufs still in a PMD keep the shinfo alive.
    if (rte_mbuf_ext_refcnt_update(r.shinfo, -1) == 0) delete r.shinfo;
}

bool TxRegions::attach(rte_mbuf *m, const void *p, uint32_t len) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    // The last region starting at or below a (regions may overlap; the newest wins rarely).
    auto it = std::upper_bound(regions_.begin(), regions_.end(), a, [](uintptr_t v, const Region &x) { return v < x.start; });
    if (it == regions_.begin() || len > UINT16_MAX) return false;
    --it;
    if (a + len > it->start + it->len) return false;
    if (dma_device_ && !it->dma_len) return false;
    rte_mbuf_ext_refcnt_update(it->shinfo, 1);
    rte_pktmbuf_attach_extbuf(m, const_cast<void *>(p), iova_of(p), static_cast<uint16_t>(len), it->shinfo);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = len;
    return true;
}

} // namespace ibex::soft::dpdk
