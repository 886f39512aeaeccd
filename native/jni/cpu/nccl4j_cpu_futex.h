/*
 * Waiting between processes, for the CPU backend's windows in /dev/shm (io.nccl4j.internal.transport.shm.Futex), used
 * through the JavaCPP class io.nccl4j.internal.bind.cpu.CpuKernels.
 */
#ifndef NCCL4J_CPU_FUTEX_H
#define NCCL4J_CPU_FUTEX_H

#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Waiting between processes (the CPU backend's windows in /dev/shm): sleeps while the 32-bit word at
 * addr holds expected, for at most timeout_nanos, until nccl4j_futex_wake on the same word (any
 * process mapping it: a shared futex, not FUTEX_PRIVATE). Returns 0 when woken, -1 otherwise (the
 * word had changed, the time ran out, or a signal came): the caller re-checks its condition.
 */
static inline int nccl4j_futex_wait(void* addr, int expected, long timeout_nanos) {
    struct timespec ts;
    ts.tv_sec = timeout_nanos / 1000000000L;
    ts.tv_nsec = timeout_nanos % 1000000000L;
    return syscall(SYS_futex, (int*) addr, FUTEX_WAIT, expected, &ts, NULL, 0) == 0 ? 0 : -1;
}

/* Wakes every process sleeping in nccl4j_futex_wait on the word at addr; returns how many, or -1. */
static inline int nccl4j_futex_wake(void* addr) {
    long n = syscall(SYS_futex, (int*) addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    return n < 0 ? -1 : (int) n;
}

#endif
