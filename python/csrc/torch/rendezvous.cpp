// The store rendezvous of an ibex process group (rendezvous.h).
#include "rendezvous.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tensors.h"

namespace ibex_torch {
namespace {

std::string store_text(const std::vector<uint8_t> &bytes) {
    return std::string(bytes.begin(), bytes.end());
}

std::string host_name() {
    char name[256] = {};
    (void)gethostname(name, sizeof(name) - 1);
    return name;
}

void wait_for(c10d::Store &store, const std::vector<std::string> &keys,
              std::chrono::milliseconds timeout, const std::string &what) {
    try {
        store.wait(keys, timeout);
    } catch (const std::exception &e) {
        refuse("waited " + std::to_string(timeout.count() / 1000) + " s for " + what + ": " +
               e.what());
    }
}

} // namespace

Rendezvous exchange_unique_id(c10d::Store &store, int rank, int size,
                              std::chrono::milliseconds timeout) {
    const int64_t generation = store.add("ibex/created/" + std::to_string(rank), 1);
    const std::string prefix = "ibex/" + std::to_string(generation) + "/";
    const std::string me = host_name();
    store.set(prefix + "host/" + std::to_string(rank), std::vector<uint8_t>(me.begin(), me.end()));
    Rendezvous out;
    if (rank == 0) {
        std::vector<std::string> keys;
        for (int r = 0; r < size; ++r)
            keys.push_back(prefix + "host/" + std::to_string(r));
        wait_for(store, keys, timeout, "every rank to join (are all " + std::to_string(size) +
                                           " ranks running?)");
        bool one_host = true;
        for (const std::string &k : keys)
            one_host = one_host && store_text(store.get(k)) == me;
        const char *env = std::getenv("IBEX_DEVICE");
        out.device = env != nullptr && *env != '\0' ? env : (one_host ? "shm" : "");
        check(ibex_get_unique_id(&out.id), "ibex_get_unique_id");
        const std::string value = std::to_string(size) + " " +
                                  (out.device.empty() ? "-" : out.device) + " " + out.id.text;
        store.set(prefix + "id", std::vector<uint8_t>(value.begin(), value.end()));
        return out;
    }
    wait_for(store, {prefix + "id"}, timeout,
             "rank 0's rendezvous id (is rank 0 running, or is rank " + std::to_string(rank) +
                 " started twice?)");
    const std::string value = store_text(store.get(prefix + "id"));
    const size_t first = value.find(' ');
    const size_t second = value.find(' ', first + 1);
    if (first == std::string::npos || second == std::string::npos)
        refuse("malformed rendezvous value in the store: " + value);
    const int root_size = std::stoi(value.substr(0, first));
    if (root_size != size)
        refuse("this process was given world size " + std::to_string(size) +
               " but rank 0 was given " + std::to_string(root_size) +
               " (check WORLD_SIZE / world_size on every rank)");
    out.device = value.substr(first + 1, second - first - 1);
    if (out.device == "-")
        out.device.clear();
    const std::string text = value.substr(second + 1);
    if (text.size() >= sizeof(out.id.text))
        refuse("malformed rendezvous id in the store: " + text);
    std::memcpy(out.id.text, text.data(), text.size());
    return out;
}

} // namespace ibex_torch
