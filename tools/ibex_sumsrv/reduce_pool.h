// The summation server's thread pool: runs one function over a range of elements cut into
// as many pieces as there are threads (the caller's thread takes the first), and returns
// when all are done. Each piece covers whole elements, so every thread runs the same
// kernels on its own part and the result does not depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ibex::sumsrv {

class ReducePool {
public:
    // threads: how many take part, the caller's included (at least 1).
    explicit ReducePool(int threads);
    ~ReducePool();
    ReducePool(const ReducePool &) = delete;
    ReducePool &operator=(const ReducePool &) = delete;

    int threads() const { return static_cast<int>(helpers_.size()) + 1; }
    // fn(begin, end) over [0, count), in pieces of at least min_piece elements.
    void run(size_t count, size_t min_piece, const std::function<void(size_t, size_t)> &fn);

private:
    void helper_main(size_t index);

    std::vector<std::thread> helpers_;
    std::mutex mu_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(size_t, size_t)> *fn_ = nullptr;
    size_t count_ = 0, pieces_ = 0;
    unsigned long generation_ = 0;
    size_t outstanding_ = 0;
    bool stopping_ = false;
};

} // namespace ibex::sumsrv
