// Registered memory a dpdk port may transmit from without copying: each region carries an
// rte_mbuf_ext_shared_info whose reference count is one for the registration plus one per
// mbuf attached to it, so a region deregistered while a PMD still holds its mbufs is
// released only when the last of them is freed. Devices that DMA (a bus device, not a
// vdev) also get the pages registered with EAL (rte_extmem_register) and mapped for the
// device (rte_dev_dma_map).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

struct rte_mbuf;
struct rte_mbuf_ext_shared_info;
struct rte_device;

namespace ibex::soft::dpdk {

class TxRegions {
public:
    explicit TxRegions(rte_device *dma_device) : dma_device_(dma_device) {}
    ~TxRegions();
    TxRegions(const TxRegions &) = delete;
    TxRegions &operator=(const TxRegions &) = delete;

    void add(const void *addr, size_t len);
    void remove(const void *addr, size_t len);
    // Attaches [p, p + len) to m as an external buffer if it lies in one region; m must be
    // a fresh direct mbuf. False: not registered memory (the caller copies).
    bool attach(rte_mbuf *m, const void *p, uint32_t len);
    size_t count() const { return regions_.size(); }

private:
    struct Region {
        uintptr_t start;
        size_t len;
        rte_mbuf_ext_shared_info *shinfo;
        uintptr_t dma_start; // page-aligned range mapped for the device (0: none)
        size_t dma_len;
    };
    void release(Region &r);

    rte_device *dma_device_;
    std::vector<Region> regions_; // sorted by start
};

} // namespace ibex::soft::dpdk
