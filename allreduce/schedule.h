// A collective, as one rank sees it: a list of steps (send to a peer, receive from a peer
// into place or reduced into place, local copy) with the dependencies between them. The
// algorithms only build schedules; the executor runs them over RDMA, so every algorithm
// shares one data path and one error path.
//
// Matching: the i-th send this rank issues to peer p is the i-th receive peer p issues
// from this rank, counted over the life of the communicator. Every algorithm must
// therefore emit, per ordered pair of ranks, the same sequence on both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ibex/coll.h"

namespace ibex::coll {

enum class StepKind : uint8_t {
    send,        // src -> peer (lands wherever the peer's credit says)
    recv_copy,   // peer -> dst directly (the credit announces dst itself: zero copy)
    recv_reduce, // peer -> staging slot, then dst = op(src, slot)
    local_copy,  // src -> dst on this rank
};

struct Step {
    StepKind kind = StepKind::send;
    int peer = -1;
    const void *src = nullptr;
    void *dst = nullptr;
    size_t bytes = 0;
    // Steps that must be done before this one starts (send: before it is posted; receive:
    // before the destination is announced to the sender; local: before it runs). -1: none.
    int dep[2] = {-1, -1};
    // recv_reduce only: steps that must be done before the reduction is applied. This fixes
    // the order in which operands meet, so the same inputs always give the same bits.
    int apply_dep = -1;
    // recv_reduce only: this produces a final value; divide by nranks for IBEX_AVG.
    bool finalize = false;
    // recv_reduce only: the landed operand is the left one, dst = op(landed, src). Two ranks
    // that each reduce the same pair then apply op to the operands in the same order.
    bool landed_first = false;
    // Schedules that run without credits (Schedule::direct): where a send lands at the peer
    // (its landing zone for this rank, or its recvbuf), at remote_off bytes; a recv_reduce
    // finds its operand at remote_off in this rank's zone for the peer.
    enum class Lands : uint8_t { credit, zone, recvbuf };
    Lands lands = Lands::credit;
    uint64_t remote_off = 0;
};

struct Schedule {
    std::vector<Step> steps;
    // Every send names where it lands (Step::lands): no credits. Each rank announces its
    // recvbuf to its peers once per collective instead (allreduce/algorithms/gdraa.cpp).
    bool direct = false;
    void *direct_recvbuf = nullptr;
    size_t direct_recv_bytes = 0;

    // Empty again, keeping the steps' storage.
    void reset() {
        steps.clear();
        direct = false;
        direct_recvbuf = nullptr;
        direct_recv_bytes = 0;
    }
};

// Appends steps, splitting transfers into slices no larger than slice_bytes (whole
// elements), so long transfers pipeline and fit the receiver's staging slots.
class ScheduleBuilder {
public:
    ScheduleBuilder(Schedule *s, size_t elem_bytes, size_t slice_bytes)
        : s_(s), elem_(elem_bytes), slice_elems_(slice_bytes / elem_bytes ? slice_bytes / elem_bytes : 1) {}

    size_t elem_bytes() const { return elem_; }
    size_t steps() const { return s_->steps.size(); }
    Schedule *schedule() { return s_; }

    // Builds a sub-collective on a group of ranks: the builder's caller names peers by their
    // index in `ranks` (nullptr: ranks are the communicator's own), and every step added
    // meanwhile also waits for step `floor` (-1: none), which a previous phase produced.
    void set_group(const std::vector<int> *ranks, int floor = -1) {
        group_ = ranks;
        floor_ = floor;
    }
    // A step that is done once every step from `first` on, other than sends, is done (a
    // chain of empty local copies): the end of a phase, for the next one to wait for.
    int join(size_t first) {
        const std::vector<int> *g = group_;
        const int f = floor_;
        set_group(nullptr);
        int last = -1;
        for (size_t i = first, end = s_->steps.size(); i < end; ++i)
            if (s_->steps[i].kind != StepKind::send)
                last = add(make(StepKind::local_copy, -1, nullptr, nullptr, 0, last, static_cast<int>(i)));
        set_group(g, f);
        return last;
    }
    size_t slice_elems() const { return slice_elems_; }
    // Slices of a run of `count` elements (at least 1, so an empty run still synchronises).
    size_t slices(size_t count) const { return count ? (count + slice_elems_ - 1) / slice_elems_ : 1; }
    // Element range [*off, *off + *len) of slice j of a run of `count` elements.
    void slice(size_t count, size_t j, size_t *off, size_t *len) const {
        *off = j * slice_elems_;
        *len = *off >= count ? 0 : (count - *off < slice_elems_ ? count - *off : slice_elems_);
    }

    int add(const Step &st) {
        s_->steps.push_back(st);
        return static_cast<int>(s_->steps.size()) - 1;
    }
    int send(int peer, const void *src, size_t elems, int dep0 = -1, int dep1 = -1) {
        return add(make(StepKind::send, peer, src, nullptr, elems, dep0, dep1));
    }
    int recv_copy(int peer, void *dst, size_t elems, int dep0 = -1, int dep1 = -1) {
        return add(make(StepKind::recv_copy, peer, nullptr, dst, elems, dep0, dep1));
    }
    int recv_reduce(int peer, void *dst, const void *local, size_t elems, int apply_dep = -1, bool finalize = false,
                    int dep0 = -1, bool landed_first = false) {
        Step st = make(StepKind::recv_reduce, peer, local, dst, elems, dep0, -1);
        st.apply_dep = apply_dep;
        st.finalize = finalize;
        st.landed_first = landed_first;
        return add(st);
    }
    int local_copy(void *dst, const void *src, size_t elems, int dep0 = -1) {
        return add(make(StepKind::local_copy, -1, src, dst, elems, dep0, -1));
    }

    // Whole-run transfers, sliced; every slice carries the same dependencies and the index
    // of the last slice is returned. Per peer, sends complete, copies land and reductions
    // apply in order, so depending on the last slice means depending on all of them.
    int send_run(int peer, const void *src, size_t count, int dep0 = -1, int dep1 = -1) {
        return sliced(count, [&](size_t off, size_t len) { return send(peer, at(src, off), len, dep0, dep1); });
    }
    int recv_copy_run(int peer, void *dst, size_t count, int dep0 = -1, int dep1 = -1) {
        return sliced(count, [&](size_t off, size_t len) { return recv_copy(peer, at(dst, off), len, dep0, dep1); });
    }
    int recv_reduce_run(int peer, void *dst, const void *local, size_t count, int apply_dep, bool finalize,
                        int dep0 = -1) {
        return sliced(count, [&](size_t off, size_t len) {
            return recv_reduce(peer, at(dst, off), at(local, off), len, apply_dep, finalize, dep0);
        });
    }

    void *at(void *p, size_t elems) const { return p ? static_cast<uint8_t *>(p) + elems * elem_ : nullptr; }
    const void *at(const void *p, size_t elems) const {
        return p ? static_cast<const uint8_t *>(p) + elems * elem_ : nullptr;
    }

private:
    Step make(StepKind kind, int peer, const void *src, void *dst, size_t elems, int dep0, int dep1) const {
        Step st;
        st.kind = kind;
        st.peer = group_ && peer >= 0 ? (*group_)[static_cast<size_t>(peer)] : peer;
        st.src = src;
        st.dst = dst;
        st.bytes = elems * elem_;
        st.dep[0] = dep0;
        st.dep[1] = dep1;
        // With both slots taken the step waits for steps of its own phase, which (at the
        // bottom of the chain) wait for the floor.
        if (floor_ >= 0) {
            if (st.dep[0] < 0)
                st.dep[0] = floor_;
            else if (st.dep[1] < 0)
                st.dep[1] = floor_;
        }
        return st;
    }
    // Calls add_slice(offset, length) for each slice of a run; returns the last step.
    template <typename AddSlice>
    int sliced(size_t count, AddSlice add_slice) {
        int last = -1;
        for (size_t j = 0, n = slices(count); j < n; ++j) {
            size_t off, len;
            slice(count, j, &off, &len);
            last = add_slice(off, len);
        }
        return last;
    }

    Schedule *s_;
    size_t elem_;
    size_t slice_elems_;
    const std::vector<int> *group_ = nullptr;
    int floor_ = -1;
};

} // namespace ibex::coll
