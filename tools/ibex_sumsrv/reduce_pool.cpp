#include "tools/ibex_sumsrv/reduce_pool.h"

#include <algorithm>

namespace ibex::sumsrv {
namespace {

void piece(size_t count, size_t pieces, size_t i, size_t *begin, size_t *end) {
    *begin = count * i / pieces;
    *end = count * (i + 1) / pieces;
}

} // namespace

ReducePool::ReducePool(int threads) {
    for (int i = 1; i < std::max(threads, 1); ++i)
        helpers_.emplace_back([this, i] { helper_main(static_cast<size_t>(i)); });
}

ReducePool::~ReducePool() {
    {
        std::lock_guard l(mu_);
        stopping_ = true;
    }
    start_cv_.notify_all();
    for (std::thread &t : helpers_) t.join();
}

void ReducePool::run(size_t count, size_t min_piece, const std::function<void(size_t, size_t)> &fn) {
    const size_t pieces = std::clamp<size_t>(count / std::max<size_t>(min_piece, 1), 1, helpers_.size() + 1);
    if (pieces == 1) {
        fn(0, count);
        return;
    }
    {
        std::lock_guard l(mu_);
        fn_ = &fn;
        count_ = count;
        pieces_ = pieces;
        outstanding_ = pieces - 1;
        ++generation_;
    }
    start_cv_.notify_all();
    size_t begin, end;
    piece(count, pieces, 0, &begin, &end);
    fn(begin, end);
    std::unique_lock l(mu_);
    done_cv_.wait(l, [&] { return outstanding_ == 0; });
    fn_ = nullptr;
}

void ReducePool::helper_main(size_t index) {
    unsigned long seen = 0;
    std::unique_lock l(mu_);
    for (;;) {
        start_cv_.wait(l, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (index >= pieces_) continue; // fewer pieces than threads this time
        const auto *fn = fn_;
        size_t begin, end;
        piece(count_, pieces_, index, &begin, &end);
        l.unlock();
        (*fn)(begin, end);
        l.lock();
        if (--outstanding_ == 0) done_cv_.notify_one();
    }
}

} // namespace ibex::sumsrv
