// The threads of the calling process, as /proc/self/task lists them: how many, what their
// status says (CPUs allowed, context switches), and pinning all of them to one CPU.
#pragma once

#include <dirent.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ibex::test {

// Thread ids of this process, at the moment of the call.
inline std::vector<int> process_threads() {
    std::vector<int> out;
    if (DIR *d = opendir("/proc/self/task")) {
        while (const dirent *e = readdir(d))
            if (e->d_name[0] != '.') out.push_back(std::atoi(e->d_name));
        closedir(d);
    }
    return out;
}

// A thread's name (its comm, as pthread_setname_np set it); empty if it is gone.
inline std::string thread_name(int tid) {
    std::string name;
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::getline(f, name);
    return name;
}

// The value of a field of a thread's status ("Cpus_allowed_list", "voluntary_ctxt_switches"),
// without its leading blanks; empty if the thread is gone or has no such field.
inline std::string thread_status(int tid, const std::string &field) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
    const std::string key = field + ":";
    for (std::string line; std::getline(f, line);) {
        if (line.rfind(key, 0) != 0) continue;
        const size_t v = line.find_first_not_of(" \t", key.size());
        return v == std::string::npos ? std::string() : line.substr(v);
    }
    return {};
}

// Times a thread has blocked so far (its voluntary context switches): each is one sleep,
// so one wake-up. Preemptions are left out: they count the host's load, not the thread.
inline long thread_sleeps(int tid) { return std::atol(thread_status(tid, "voluntary_ctxt_switches").c_str()); }

// Every thread of the calling process onto one CPU: a test that wants a background thread
// (EAL's interrupt thread, say) to run only by preempting the one that polls.
inline void pin_all_threads(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    for (int tid : process_threads()) sched_setaffinity(tid, sizeof set, &set);
}

} // namespace ibex::test
