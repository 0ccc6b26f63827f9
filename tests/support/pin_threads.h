// Every thread of the calling process onto one CPU: a test that wants a background thread
// (EAL's interrupt thread, say) to run only by preempting the one that polls.
#pragma once

#include <dirent.h>
#include <sched.h>
#include <string>

namespace ibex::test {

inline void pin_all_threads(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') sched_setaffinity(std::stoi(e->d_name), sizeof set, &set);
    closedir(d);
}

} // namespace ibex::test
