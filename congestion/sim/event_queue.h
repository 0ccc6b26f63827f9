// The simulator's pending events: a binary min-heap of 16-byte PODs ordered by time, then
// by insertion, so a run is the same on every machine. Events name their object by index
// (a packet slot, a port, a host); nothing is allocated once the heap has grown to the
// most events ever pending at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ibex::sim {

enum class EventKind : uint8_t {
    kNicSend,     // a host's NIC may transmit (id: host)
    kArrive,      // a packet's last bit reached the far end of its link (id: packet)
    kPortService, // a switch egress port's shaper lets its next packet go (id: global port)
    kPause,       // a PFC pause frame reached the sender of a link (id: link)
    kResume,      // a PFC resume frame did
    kRpWake,      // a QP's DCQCN reaction point has a timer due (id: qp)
    kRelease,     // a message's start time came (id: message)
    kRetransmit,  // a dropped packet is sent again (id: packet)
    kLocalDone,   // a message between two ranks of one host is done (id: message)
    kSample,      // record queues and rates (id: unused)
};

struct Event {
    uint64_t t;
    uint32_t id;
    uint32_t seq_kind; // insertion order << 4 | kind: ties are broken by insertion order
    EventKind kind() const { return static_cast<EventKind>(seq_kind & 0xf); }
};

class EventQueue {
public:
    void reserve(size_t n) { heap_.reserve(n); }
    bool empty() const { return heap_.empty(); }
    size_t size() const { return heap_.size(); }
    void push(uint64_t t, EventKind k, uint32_t id) {
        heap_.push_back({t, id, (seq_++ << 4) | static_cast<uint32_t>(k)});
        std::push_heap(heap_.begin(), heap_.end(), Later{});
    }
    Event pop() {
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        const Event e = heap_.back();
        heap_.pop_back();
        return e;
    }

private:
    // The insertion counter wraps after 2^28 events; ties then order arbitrarily but still
    // deterministically, which is all a repeatable run needs.
    // A function object, not a function pointer, so the sifts can inline it. (A 4-ary heap
    // measured no faster: the heap holds a few events per host and stays in cache.)
    struct Later {
        bool operator()(const Event &a, const Event &b) const {
            return a.t != b.t ? a.t > b.t : a.seq_kind > b.seq_kind;
        }
    };
    std::vector<Event> heap_;
    uint32_t seq_ = 0;
};

} // namespace ibex::sim
