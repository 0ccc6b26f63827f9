#include <new>
#include <string>
#include <vector>

#include "runtime/base/status.h"
#include "transport/provider.h"

struct ibex_device_list {
    std::vector<ibex::DeviceEntry> entries;
};

extern "C" {

ibex_status_t ibex_get_device_list(ibex_device_list_t **list, int *count) {
    if (!list) return ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_get_device_list: list is NULL");
    auto *l = new (std::nothrow) ibex_device_list;
    if (!l) return ibex::fail(IBEX_ERR_NO_MEMORY, "ibex_get_device_list");
    for (const ibex::ProviderOps *p : ibex::providers())
        if (p->list_devices) p->list_devices(l->entries);
    *list = l;
    if (count) *count = static_cast<int>(l->entries.size());
    return IBEX_OK;
}

const char *ibex_device_name(const ibex_device_list_t *list, int index) {
    if (!list || index < 0 || index >= static_cast<int>(list->entries.size())) return nullptr;
    return list->entries[index].name.c_str();
}

const char *ibex_device_provider(const ibex_device_list_t *list, int index) {
    if (!list || index < 0 || index >= static_cast<int>(list->entries.size())) return nullptr;
    return list->entries[index].provider.c_str();
}

void ibex_free_device_list(ibex_device_list_t *list) { delete list; }

} // extern "C"
