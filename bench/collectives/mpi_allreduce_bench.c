/*
 * MPI_Allreduce measured the way ibex_allreduce_perf measures ibex_allreduce, so the two
 * tables line up: float sum, sizes from -b to -e multiplied by -f, -w warm-up and -n
 * timed operations per size after a barrier, time per operation averaged over ranks,
 * algbw = bytes / time, busbw = algbw x 2(n-1)/n. Rank 0 prints one line per size:
 *   size count time_us algbw_GBps busbw_GBps #wrong
 * The result of one extra operation on integer-valued inputs is checked (#wrong).
 * -c alltoall: MPI_Alltoall instead, as ibex_alltoall_perf measures ibex_alltoall: the size
 * is a rank's whole send buffer (a block of size / n bytes for each rank), busbw = algbw x
 * (n-1)/n.
 * -c sendrecv: MPI_Sendrecv instead, as ibex_sendrecv_perf measures ibex_p2p_batch: each rank
 * sends size bytes to rank + 1 and receives as many from rank - 1, busbw = algbw.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

int main(int argc, char **argv) {
    size_t min_bytes = 8, max_bytes = 64u << 20, factor = 2;
    int iters = 20, warmup = 1, rank = 0, n = 1, alltoall = 0, sendrecv = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) min_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) max_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f")) factor = (size_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c") && !strcmp(argv[i + 1], "alltoall")) alltoall = 1;
        else if (!strcmp(argv[i], "-c") && !strcmp(argv[i + 1], "sendrecv")) sendrecv = 1;
        else if (!strcmp(argv[i], "-c") && !strcmp(argv[i + 1], "allreduce")) alltoall = sendrecv = 0;
        else {
            if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: unknown flag %s (-b -e -f -n -w -c allreduce|alltoall|sendrecv)\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (factor < 2 || iters < 1 || min_bytes < 4 || min_bytes > max_bytes) {
        if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: need -f >= 2, -n >= 1, 4 <= -b <= -e\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *send = malloc(max_bytes), *recv = malloc(max_bytes);
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 3);
    memset(recv, 0, max_bytes);
    if (rank == 0) {
        printf("# %s, %d ranks, warmup %d iters %d\n",
               alltoall ? "MPI_Alltoall float" : sendrecv ? "MPI_Sendrecv float (to rank+1, from rank-1)" : "MPI_Allreduce float sum",
               n, warmup, iters);
        printf("#       size         count      time    algbw    busbw  #wrong\n");
        printf("#        (B)    (elements)      (us)   (GB/s)   (GB/s)\n");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        if (alltoall) {
            const int block = (int)(bytes / sizeof(float) / (size_t)n);
            if (block == 0) continue;
            for (int i = 0; i < block * n; ++i) send[i] = (float)((i + rank) % 7 - 3);
            for (int i = 0; i < warmup; ++i) MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            for (int i = 0; i < iters; ++i) MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
            double us = (MPI_Wtime() - t0) * 1e6 / iters, sum_us = 0;
            MPI_Allreduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            us = sum_us / n;
            memset(recv, 0xff, (size_t)block * (size_t)n * sizeof(float));
            MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
            long long wrong = 0, total = 0;
            for (int q = 0; q < n; ++q) /* block q: rank q's elements for this rank */
                for (int j = 0; j < block; ++j)
                    if (recv[q * block + j] != (float)((rank * block + j + q) % 7 - 3)) ++wrong;
            MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) {
                const size_t sent = (size_t)block * (size_t)n * sizeof(float);
                const double algbw = (double)sent / (us * 1e3);
                printf("  %10zu  %12d  %8.2f  %7.3f  %7.3f  %6lld\n", sent, block * n, us, algbw,
                       algbw * (n - 1) / n, total);
                fflush(stdout);
            }
            continue;
        }
        const int count = (int)(bytes / sizeof(float));
        for (int i = 0; i < count; ++i) send[i] = (float)((i + rank) % 7 - 3);
        if (sendrecv) {
            const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
#define SENDRECV() MPI_Sendrecv(send, count, MPI_FLOAT, next, 0, recv, count, MPI_FLOAT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
            for (int i = 0; i < warmup; ++i) SENDRECV();
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            for (int i = 0; i < iters; ++i) SENDRECV();
            double us = (MPI_Wtime() - t0) * 1e6 / iters, sum_us = 0;
            MPI_Allreduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            us = sum_us / n;
            memset(recv, 0xff, bytes);
            SENDRECV();
#undef SENDRECV
            long long wrong = 0, total = 0;
            for (int i = 0; i < count; ++i)
                if (recv[i] != (float)((i + prev) % 7 - 3)) ++wrong;
            MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0) {
                const double algbw = (double)bytes / (us * 1e3);
                printf("  %10zu  %12d  %8.2f  %7.3f  %7.3f  %6lld\n", bytes, count, us, algbw, algbw, total);
                fflush(stdout);
            }
            continue;
        }
        for (int i = 0; i < warmup; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double us = (MPI_Wtime() - t0) * 1e6 / iters, sum_us = 0;
        MPI_Allreduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        us = sum_us / n;
        /* Check: sum over ranks of ((i + r) % 7 - 3), exact in float. */
        memset(recv, 0xff, bytes);
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        long long wrong = 0, total = 0;
        for (int i = 0; i < count; ++i) {
            float want = 0;
            for (int r = 0; r < n; ++r) want += (float)((i + r) % 7 - 3);
            if (recv[i] != want) ++wrong;
        }
        MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            const double algbw = (double)bytes / (us * 1e3);
            printf("  %10zu  %12d  %8.2f  %7.3f  %7.3f  %6lld\n", bytes, count, us, algbw, algbw * 2.0 * (n - 1) / n, total);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
