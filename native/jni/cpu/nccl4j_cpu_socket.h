/*
 * Sockets for the CPU backend's TCP transport (io.nccl4j.internal.transport.tcp.NativeSocket), used through the JavaCPP
 * class io.nccl4j.internal.bind.cpu.CpuKernels.
 */
#ifndef NCCL4J_CPU_SOCKET_H
#define NCCL4J_CPU_SOCKET_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The CPU backend's TCP payloads straight between native memory and the kernel (io.nccl4j.internal.transport.tcp.NativeSocket):
 * the JDK's socket streams copy every byte through a heap array and a temporary direct buffer on each side.
 * nccl4j keeps a duplicate of the socket's descriptor of its own, so that the JDK closing its descriptor can never
 * leave nccl4j reading or writing a number the process has reused.
 */

/* The 16-byte IPv6 form of a socket address (IPv4 as ::ffff:a.b.c.d) and its port; -1 for other families. */
static inline int nccl4j_socket_address(const struct sockaddr_storage* a, unsigned char out[16]) {
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in* v4 = (const struct sockaddr_in*) a;
        memset(out, 0, 10);
        out[10] = 0xff;
        out[11] = 0xff;
        memcpy(out + 12, &v4->sin_addr, 4);
        return ntohs(v4->sin_port);
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6* v6 = (const struct sockaddr_in6*) a;
        memcpy(out, &v6->sin6_addr, 16);
        return ntohs(v6->sin6_port);
    }
    return -1;
}

/*
 * Whether fd is a connected TCP socket from local (16 bytes, as above) at local_port to peer at peer_port; its inode
 * in *inode when it is. Asks the descriptor only (fstat, getsockopt, getsockname, getpeername): nothing here opens or
 * closes one, since closing any descriptor of a file drops the process's POSIX locks on it (FileChannel.lock).
 */
static inline int nccl4j_socket_is(int fd, const unsigned char* local, int local_port, const unsigned char* peer,
                                   int peer_port, unsigned long* inode) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return 0;
    }
    int type = 0;
    socklen_t tl = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) {
        return 0;
    }
    struct sockaddr_storage a;
    unsigned char addr[16];
    socklen_t al = sizeof(a);
    if (getsockname(fd, (struct sockaddr*) &a, &al) != 0 || nccl4j_socket_address(&a, addr) != local_port
        || memcmp(addr, local, 16) != 0) {
        return 0;
    }
    al = sizeof(a);
    if (getpeername(fd, (struct sockaddr*) &a, &al) != 0 || nccl4j_socket_address(&a, addr) != peer_port
        || memcmp(addr, peer, 16) != 0) {
        return 0;
    }
    *inode = (unsigned long) st.st_ino;
    return 1;
}

/*
 * A duplicate (close-on-exec) of this process's TCP socket from local (16 bytes at addrs, IPv4 as ::ffff:a.b.c.d) at
 * local_port to peer (the next 16 bytes) at peer_port, or -1. Only a descriptor found to be that socket is
 * duplicated, and the duplicate is checked again (the number may have been closed and reused in between): if it is
 * a socket no longer, it is kept open rather than closed, since closing it could drop a file lock (see above).
 */
static inline int nccl4j_socket_dup(const void* addrs, int local_port, int peer_port) {
    const unsigned char* local = (const unsigned char*) addrs;
    const unsigned char* peer = local + 16;
    DIR* d = opendir("/proc/self/fd");
    if (d == NULL) {
        return -1;
    }
    int found = -1;
    struct dirent* e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        int fd = atoi(e->d_name);
        unsigned long inode = 0, again = 0;
        if (fd == dirfd(d) || !nccl4j_socket_is(fd, local, local_port, peer, peer_port, &inode)) {
            continue;
        }
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (dup < 0) {
            continue;
        }
        if (nccl4j_socket_is(dup, local, local_port, peer, peer_port, &again) && again == inode) {
            found = dup;
        } else {
            struct stat st;
            if (fstat(dup, &st) == 0 && S_ISSOCK(st.st_mode)) {
                close(dup);
            }
        }
    }
    closedir(d);
    return found;
}

/* One non-blocking attempt at a payload call: recv or send without waiting. */
typedef ssize_t (*nccl4j_socket_op)(int fd, void* buf, size_t len);

static inline ssize_t nccl4j_recv_now(int fd, void* buf, size_t len) {
    return recv(fd, buf, len, MSG_DONTWAIT);
}

static inline ssize_t nccl4j_send_now(int fd, void* buf, size_t len) {
    return send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/*
 * op on fd, waiting at most timeout_ms for events (POLLIN or POLLOUT) when it cannot go at once: how many bytes,
 * -1 when it still could not go in time, or -2 - errno.
 */
static inline long nccl4j_socket_io(int fd, nccl4j_socket_op op, short events, void* buf, long len, int timeout_ms) {
    ssize_t n = op(fd, buf, (size_t) len);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        struct pollfd p = { fd, events, 0 };
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno != EINTR) {
            return -2 - errno;
        }
        if (r <= 0) {
            return -1;
        }
        n = op(fd, buf, (size_t) len);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return -1;
        }
    }
    return n >= 0 ? (long) n : -2 - errno;
}

/*
 * Receives up to len bytes into dst, waiting at most timeout_ms for some: how many, 0 at the end of the stream,
 * -1 when none came in time, or -2 - errno.
 */
static inline long nccl4j_socket_recv(int fd, void* dst, long len, int timeout_ms) {
    return nccl4j_socket_io(fd, nccl4j_recv_now, POLLIN, dst, len, timeout_ms);
}

/* Sends up to len bytes from src, waiting at most timeout_ms for room: how many, -1 when no room came in time, or -2 - errno. */
static inline long nccl4j_socket_send(int fd, const void* src, long len, int timeout_ms) {
    return nccl4j_socket_io(fd, nccl4j_send_now, POLLOUT, (void*) src, len, timeout_ms);
}

/* Closes a descriptor nccl4j_socket_dup returned; 0 or -errno. */
static inline int nccl4j_socket_close(int fd) {
    return close(fd) == 0 ? 0 : -errno;
}

/* The text of an errno value (for messages), in a buffer of the calling thread's. */
static inline const char* nccl4j_strerror(int err) {
    static __thread char text[128];
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(err, text, sizeof(text)); /* GNU's: returns the text, in text or a static string */
#else
    return strerror_r(err, text, sizeof(text)) == 0 ? text : "unknown error";
#endif
}

#endif
