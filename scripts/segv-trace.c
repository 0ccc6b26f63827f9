/* A debugging aid for hosts without gdb: LD_PRELOAD it and a process that dies on SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL or SIGABRT first writes its native stack to stderr, one frame per
 * line as "object(symbol+offset)[address]" (offsets resolve with addr2line -e object), then
 * dies of the same signal as before.
 * Build: cc -shared -fPIC -O1 -o segv-trace.so scripts/segv-trace.c */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void write_text(const char *text) { (void)!write(2, text, strlen(text)); }

static void on_fatal(int sig, siginfo_t *info, void *context) {
    (void)context;
    char line[96] = "segv-trace: signal ";
    char digits[24];
    int n = 0;
    unsigned long value = (unsigned long)sig;
    do { digits[n++] = (char)('0' + value % 10); value /= 10; } while (value != 0 && n < 20);
    size_t at = strlen(line);
    while (n > 0) line[at++] = digits[--n];
    line[at] = '\0';
    write_text(line);
    write_text(" at fault address 0x");
    value = (unsigned long)info->si_addr;
    n = 0;
    do { digits[n++] = "0123456789abcdef"[value % 16]; value /= 16; } while (value != 0 && n < 20);
    at = 0;
    while (n > 0) line[at++] = digits[--n];
    line[at++] = '\n';
    line[at] = '\0';
    write_text(line);
    void *frames[64];
    const int depth = backtrace(frames, 64);
    backtrace_symbols_fd(frames, depth, 2);
    write_text("segv-trace: end of stack\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc's unwinder now, not inside the handler */
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fatal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    const int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; ++i)
        sigaction(signals[i], &action, NULL);
}
