#include "tools/ibex_allreduce_perf/launch.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tools/ibex_allreduce_perf/bench.h"
#include "runtime/bootstrap/unique_id.h"

namespace ibex::collperf {
namespace {

const char *env(const char *name) {
    const char *v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// The launcher whose rank variables are set, or nullptr (same order as the library reads them).
const char *launcher_in_env() {
    if (env("IBEX_RANK") && env("IBEX_NRANKS")) return "IBEX_RANK/IBEX_NRANKS";
    if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) return "mpirun";
    if (env("SLURM_PROCID") && env("SLURM_NTASKS")) return "srun";
    if (env("RANK") && env("WORLD_SIZE")) return "torchrun";
    return nullptr;
}

// mpirun and srun name no rendezvous. When every rank is on this host, agree on one
// without asking the user: loopback and a port derived from the job id, which all ranks
// of the job see alike (IBEX_ROOT_ADDR still wins).
void default_rendezvous() {
    if (env("IBEX_ROOT_ADDR") || (env("MASTER_ADDR") && env("MASTER_PORT"))) return;
    unsigned long job = 0;
    if (env("OMPI_COMM_WORLD_SIZE") && env("OMPI_COMM_WORLD_LOCAL_SIZE") && env("OMPI_MCA_ess_base_jobid") &&
        !std::strcmp(env("OMPI_COMM_WORLD_SIZE"), env("OMPI_COMM_WORLD_LOCAL_SIZE"))) {
        job = std::strtoul(env("OMPI_MCA_ess_base_jobid"), nullptr, 10);
    } else if (env("SLURM_JOB_ID") && env("SLURM_NNODES") && !std::strcmp(env("SLURM_NNODES"), "1")) {
        job = std::strtoul(env("SLURM_JOB_ID"), nullptr, 10) * 131 +
              (env("SLURM_STEP_ID") ? std::strtoul(env("SLURM_STEP_ID"), nullptr, 10) : 0);
    } else {
        return; // the library will say that IBEX_ROOT_ADDR is needed
    }
    const std::string addr = "127.0.0.1:" + std::to_string(20000 + job % 20000);
    setenv("IBEX_ROOT_ADDR", addr.c_str(), 0);
}

// The launcher's rank of this process, read before joining (for "{rank}" in --device), or -1.
int rank_in_env() {
    for (const char *v : {"IBEX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"}) {
        if (env(v)) return std::atoi(env(v));
    }
    return -1;
}

// device: this rank's device name; it must outlive the config.
ibex_comm_config_t config_of(const Options &o, const std::string &device) {
    ibex_comm_config_t c = IBEX_COMM_CONFIG_INIT;
    c.device = device.empty() ? nullptr : device.c_str();
    c.algo = o.algo.empty() ? nullptr : o.algo.c_str();
    c.timeout_ms = o.timeout_ms;
    return c;
}

int fail_init(int rank, const char *what, ibex_status_t st) {
    std::fprintf(stderr, "ibex_allreduce_perf: rank %d: %s failed: %s: %s\n", rank, what, ibex_strerror(st),
                 ibex_last_error());
    return 2;
}

// One rank from start to end, on a communicator already joined.
int run_rank(ibex_comm_t *comm, const Options &o, const std::string &launcher) {
    const int rc = run_benchmark(comm, o, launcher);
    if (rc == 2) {
        ibex_comm_abort(comm); // a failed communicator is not waited for
        return rc;
    }
    const ibex_status_t st = ibex_comm_destroy(comm);
    return st == IBEX_OK ? rc : 2;
}

// The CPUs rank r is pinned to with --bind core: the r-th CPU this process may use, when
// every rank gets one of its own (as mpirun binds ranks to cores); otherwise none, since
// oversubscribed ranks must be free to go wherever a core is idle.
bool core_of_rank(const Options &o, int r, cpu_set_t *out) {
    cpu_set_t all;
    if (!o.bind || sched_getaffinity(0, sizeof all, &all) != 0 || o.nprocs > CPU_COUNT(&all)) return false;
    CPU_ZERO(out);
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &all)) continue;
        if (seen++ == r) {
            CPU_SET(cpu, out);
            return true;
        }
    }
    return false;
}

int run_forked(const Options &o) {
    const int n = o.nprocs;
    ibex_unique_id_t id{};
    if (ibex_status_t st = ibex_get_unique_id(&id); st != IBEX_OK) return fail_init(-1, "ibex_get_unique_id", st);
    std::vector<pid_t> pids;
    std::fflush(nullptr);
    for (int r = 0; r < n; ++r) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::fprintf(stderr, "ibex_allreduce_perf: fork: %s\n", std::strerror(errno));
            for (pid_t p : pids) kill(p, SIGKILL);
            for (pid_t p : pids) waitpid(p, nullptr, 0);
            return 2;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlive the tool
            if (cpu_set_t core; core_of_rank(o, r, &core)) sched_setaffinity(0, sizeof core, &core);
            if (o.ranks_per_host)
                setenv("IBEX_HOST_ID", ("ibex_perf_host" + std::to_string(r / o.ranks_per_host)).c_str(), 1);
            const std::string device = device_for_rank(o.device, r);
            const ibex_comm_config_t cfg = config_of(o, device);
            ibex_comm_t *comm = nullptr;
            int rc = 2;
            if (ibex_status_t st = ibex_comm_init_rank(&comm, n, &id, r, &cfg); st != IBEX_OK)
                rc = fail_init(r, "ibex_comm_init_rank", st);
            else
                rc = run_rank(comm, o, "forked by -np");
            std::fflush(nullptr);
            _exit(rc);
        }
        pids.push_back(pid);
    }
    ibex::bootstrap::release_unique_id(&id); // rank 0 has its own copy of the listener
    // Reap. Once a rank has failed, the others get the collective timeout (plus margin)
    // to report their own error before they are killed: no hang either way.
    int worst = 0;
    size_t left = pids.size();
    auto deadline = std::chrono::steady_clock::time_point::max();
    const int grace_ms = (o.timeout_ms > 0 ? o.timeout_ms : 30000) + 10000;
    while (left > 0) {
        int status = 0;
        const pid_t p = waitpid(-1, &status, deadline == std::chrono::steady_clock::time_point::max() ? 0 : WNOHANG);
        if (p < 0 && errno == EINTR) continue;
        if (p < 0) break;
        if (p == 0) {
            if (std::chrono::steady_clock::now() >= deadline) {
                std::fprintf(stderr, "ibex_allreduce_perf: ranks still running %d ms after one failed; killing them\n", grace_ms);
                for (pid_t q : pids) kill(q, SIGKILL);
                deadline = std::chrono::steady_clock::time_point::max();
                worst = worst > 2 ? worst : 2;
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            continue;
        }
        --left;
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
        if (WIFSIGNALED(status))
            std::fprintf(stderr, "ibex_allreduce_perf: a rank (pid %d) died of signal %d\n", p, WTERMSIG(status));
        if (rc > worst) worst = rc;
        if (rc != 0 && deadline == std::chrono::steady_clock::time_point::max() && left > 0)
            deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    }
    return worst;
}

} // namespace

int launch(const Options &o) {
    const char *launcher = launcher_in_env();
    if (o.nprocs > 0) {
        if (launcher && std::strcmp(launcher, "IBEX_RANK/IBEX_NRANKS") != 0) {
            std::fprintf(stderr, "ibex_allreduce_perf: -np forks ranks itself, but %s started this process as a rank; "
                                 "give one or the other\n", launcher);
            return 2;
        }
        return run_forked(o);
    }
    ibex_comm_t *comm = nullptr;
    if (launcher) {
        const std::string device = device_for_rank(o.device, rank_in_env());
        const ibex_comm_config_t cfg = config_of(o, device);
        default_rendezvous();
        if (ibex_status_t st = ibex_comm_init_from_env(&comm, &cfg); st != IBEX_OK)
            return fail_init(-1, "ibex_comm_init_from_env", st);
        return run_rank(comm, o, std::string("launched by ") + launcher);
    }
    // Nothing says otherwise: one rank, as nccl-tests runs without MPI.
    const std::string device = device_for_rank(o.device, 0);
    const ibex_comm_config_t cfg = config_of(o, device);
    ibex_unique_id_t id{};
    if (ibex_status_t st = ibex_get_unique_id(&id); st != IBEX_OK) return fail_init(0, "ibex_get_unique_id", st);
    if (ibex_status_t st = ibex_comm_init_rank(&comm, 1, &id, 0, &cfg); st != IBEX_OK)
        return fail_init(0, "ibex_comm_init_rank", st);
    return run_rank(comm, o, "single process");
}

} // namespace ibex::collperf
