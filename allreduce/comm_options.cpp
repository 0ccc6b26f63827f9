#include "allreduce/comm_options.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "runtime/base/config.h"
#include "runtime/qp_connect.h"
#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t comm_options(const ibex_comm_config_t *config, CommOptions *out) {
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    if (config) {
        if (config->size < offsetof(ibex_comm_config_t, version) || config->magic != IBEX_MAGIC_COMM_CONFIG)
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "ibex_comm_config_t: bad size/magic (initialise it with IBEX_COMM_CONFIG_INIT)");
        if (config->size > sizeof cfg)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_comm_config_t: size %u is newer than this library",
                        config->size);
        std::memcpy(&cfg, config, config->size);
    }
    IBEX_TRY(qp_connect_choice(cfg.qp_attr, cfg.qp_attr_mask, "ibex_comm_config_t.qp_attr", &out->qp));
    out->sumsrv.qp = out->qp;
    const char *dev = cfg.device ? cfg.device : config::get_string("IBEX_DEVICE", nullptr);
    if (!dev) {
        ibex_device_list_t *list = nullptr;
        int count = 0;
        if (ibex_get_device_list(&list, &count) == IBEX_OK && count > 0) out->device = ibex_device_name(list, 0);
        if (list) ibex_free_device_list(list);
        if (out->device.empty()) return fail(IBEX_ERR_NO_DEVICE, "no device to open (set IBEX_DEVICE)");
        out->device_defaulted = true;
    } else {
        out->device = dev;
    }
    out->timeout_ms = cfg.timeout_ms > 0 ? cfg.timeout_ms
                                         : static_cast<int>(config::get_int("IBEX_TIMEOUT_MS", 30000, 1, 86400000));
    const char *algo = cfg.algo ? cfg.algo : config::get_string("IBEX_ALGO", nullptr);
    out->forced = false;
    out->bigraph_per_switch = static_cast<int>(config::get_int("IBEX_BIGRAPH_HOSTS_PER_SWITCH", 0, 0, 1 << 16));
    out->bigraph_required = false;
    if (algo && std::strcmp(algo, "bigraph") == 0) {
        // halving-doubling with the BiGraph placement: rhd's schedule over mapped ranks
        out->algo = Algo::rhd;
        out->forced = out->bigraph_required = true;
    } else if (algo && std::strcmp(algo, "auto") != 0) {
        if (!parse_algo(algo, &out->algo))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "algorithm \"%s\" is not one of ring, rhd, tree, hierarchical, bigraph, gdraa, sumsrv",
                        algo);
        out->forced = true;
    }
    out->slice_given = *config::get_string("IBEX_COMM_SLICE", "") != 0;
    out->exec.slice_bytes =
        static_cast<size_t>(config::get_int("IBEX_COMM_SLICE", 128 << 10, 4096, 64 << 20)) & ~size_t(7);
    out->slots_given = *config::get_string("IBEX_COMM_SLOTS", "") != 0;
    out->exec.slots = static_cast<int>(config::get_int("IBEX_COMM_SLOTS", 8, 1, 256));
    out->exec.window = static_cast<int>(config::get_int("IBEX_COMM_WINDOW", 16, 1, 1024));
    out->exec.eager_bytes = static_cast<size_t>(config::get_int("IBEX_COMM_EAGER", 32 << 10, 0, 1 << 20));
    out->exec.eager_slots = static_cast<int>(config::get_int("IBEX_COMM_EAGER_SLOTS", 32, 2, 1024));
    out->exec.sq_depth = static_cast<int>(config::get_int("IBEX_COMM_SQ_DEPTH", 0, 0, 16384));
    // GDRAA's landing zones: off unless asked for, by size or by forcing the algorithm.
    const bool gdraa = out->forced && out->algo == Algo::gdraa;
    out->exec.zone_bytes = static_cast<size_t>(config::get_int("IBEX_GDRAA_ZONE", gdraa ? 1 << 20 : 0, 0, 1 << 30)) & ~size_t(7);
    out->spin_us = static_cast<int>(config::get_int("IBEX_COMM_SPIN_US", 50, 0, 1000000));
    out->wait_spin_us = static_cast<int>(config::get_int("IBEX_COMM_WAIT_SPIN_US", -1, -1, 1000000));
    out->handover_us = static_cast<int>(config::get_int("IBEX_COMM_HANDOVER_US", 200, 0, 1000000));
    out->probe = config::get_bool("IBEX_COMM_PROBE", true);
    // The summation service: servers, the device this rank reaches them on (default: the
    // communicator's, or with shm, which reaches no other process, the first other one),
    // and the slot geometry.
    IBEX_TRY(parse_sumsrv_list(config::get_string("IBEX_SUMSRV", nullptr), &out->sumsrv.servers));
    if (const char *d = config::get_string("IBEX_SUMSRV_DEVICE", nullptr)) out->sumsrv.device = d;
    out->sumsrv.chunk_bytes =
        static_cast<uint32_t>(config::get_int("IBEX_SUMSRV_CHUNK", 256 << 10, 4096, 256 << 20)) & ~uint32_t(7);
    out->sumsrv.slots = static_cast<uint32_t>(config::get_int("IBEX_SUMSRV_SLOTS", 16, 1, 64));
    out->sumsrv.timeout_ms = out->timeout_ms;
    out->gpu_chunk_bytes = static_cast<size_t>(config::get_int("IBEX_GPU_CHUNK", 4 << 20, 4096, int64_t(1) << 32));
    return IBEX_OK;
}

size_t comm_slice_bytes(uint64_t device_efficient) {
    // 128 KiB pipelines a 1 MiB collective in eight steps, and is longer than what a
    // message costs on memif, shm or an RNIC. A device whose messages cost more (the udp
    // port: 512 KiB) lengthens it: over memif, where a message costs little beyond its
    // bytes, 1 MiB lost its pipelining at 512 KiB. Capped at 4 MiB (two staging slots of
    // it per peer) and cut to whole pages.
    constexpr uint64_t kDefault = uint64_t(128) << 10, kMax = uint64_t(4) << 20;
    return static_cast<size_t>(std::clamp(device_efficient, kDefault, kMax) & ~uint64_t(4095));
}

int comm_staging_slots(size_t slice_bytes) {
    // 1 MiB of staging per peer, as 8 slots of 128 KiB always had; at 512 KiB two slots
    // (one landing while the other is reduced) gave 2 ranks over udp:lo the same busbw
    // as eight, 1-16 MiB. Never more than the 8 shorter slices always had.
    constexpr size_t kStagingBytes = size_t(1) << 20;
    return static_cast<int>(std::clamp<size_t>(kStagingBytes / std::max<size_t>(1, slice_bytes), 2, 8));
}

} // namespace ibex::coll
