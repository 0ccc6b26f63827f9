#include "transport/provider.h"

#include <cstring>

namespace ibex {

const std::vector<const ProviderOps *> &providers() {
    static const std::vector<const ProviderOps *> list = {
        &kSoftProviderOps,
        &kShmProviderOps,
#if IBEX_HAVE_VERBS
        &kVerbsProviderOps, // after soft: it claims plain RDMA device names only
#endif
    };
    return list;
}

const ProviderOps *provider_for(const char *device) {
    for (const ProviderOps *p : providers())
        if (p->claims && p->claims(device)) return p;
    return nullptr;
}

} // namespace ibex
