/*
 * Whether the memory a window between processes is about to touch is still there, for the CPU backend's windows
 * in /dev/shm (io.nccl4j.internal.transport.shm.ShmProbe), used through the JavaCPP class
 * io.nccl4j.internal.bind.cpu.CpuKernels.
 *
 * A process of the job's user can truncate a segment that every rank maps; a page past the new end then faults on
 * the next access, and in native code that fault is SIGBUS, the end of the JVM. The kernels therefore never start on
 * memory a probe has not just found readable. The probe lets the kernel read one byte at each address for this
 * process, as a gathering write into a scratch file of its own: a page that is gone makes the write stop there
 * with EFAULT, not a signal. One system call for all the addresses, where a size check would take one per file.
 */
#ifndef NCCL4J_CPU_SHM_H
#define NCCL4J_CPU_SHM_H

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The scratch file: a memfd of one page, made at the first probe; 0 before, -1 - errno when it cannot be made. */
static int nccl4j_probe_fd = 0;

#define NCCL4J_PROBE_MAX 64

/*
 * How many of the bytes at addresses[0..count) can be read, in order: count when every one can, else the index of
 * the first that cannot (its page is gone). -2 - errno when the probe cannot run at all (no memfd, a seccomp filter
 * that refuses the write, more than NCCL4J_PROBE_MAX addresses): the caller then checks another way.
 */
static inline int nccl4j_readable(const void* const* addresses, int count) {
    if (count < 0 || count > NCCL4J_PROBE_MAX) {
        return -2 - EINVAL;
    }
    int fd = __atomic_load_n(&nccl4j_probe_fd, __ATOMIC_ACQUIRE);
    if (fd == 0) {
        int made = (int) syscall(SYS_memfd_create, "nccl4j-probe", 1 /* MFD_CLOEXEC */);
        int none = 0;
        if (!__atomic_compare_exchange_n(&nccl4j_probe_fd, &none, made >= 0 ? made : -1 - errno, 0,
                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && made >= 0) {
            close(made); /* another thread made one first */
        }
        fd = __atomic_load_n(&nccl4j_probe_fd, __ATOMIC_ACQUIRE);
    }
    if (fd < 0) {
        return -2 - (-1 - fd);
    }
    struct iovec iov[NCCL4J_PROBE_MAX];
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = (void*) addresses[i];
        iov[i].iov_len = 1;
    }
    /* Always at offset 0: the file stays one page, whatever the probes write (their bytes are never read). */
    ssize_t n = pwritev(fd, iov, count, 0);
    if (n >= 0) {
        return (int) n;
    }
    return errno == EFAULT ? 0 : -2 - errno;
}

#endif
