/*
 * fdpass.c - sendmsg()/recvmsg() of one packet with SCM_RIGHTS descriptors.
 */
#include "util/fdpass.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cleanup.h"

int
fdpass_send(int sock, const void *buf, size_t n, const int *fds, unsigned nfds, int flags)
{
    struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = n};
    union {
        char b[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds > FDPASS_MAX)
        return -EINVAL;
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        m.msg_control = u.b;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    for (;;) {
        ssize_t k = sendmsg(sock, &m, MSG_NOSIGNAL | flags);
        if (k == (ssize_t)n)
            return 0;
        if (k < 0 && errno == EINTR)
            continue;
        return k < 0 ? -errno : -EIO;
    }
}

ssize_t
fdpass_recv(int sock, void *buf, size_t cap, int flags, int *fds, unsigned maxfds,
            unsigned *ret_nfds)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        char b[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    unsigned got = 0;
    ssize_t n;

    for (unsigned i = 0; i < maxfds; i++)
        fds[i] = -EBADF;
    *ret_nfds = 0;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < maxfds)
                fds[got] = fd;
            else
                (void)close(fd);
            got++;
        }
    }
    *ret_nfds = got;
    if (n == 0 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        fdpass_close(fds, got < maxfds ? got : maxfds);
        return n == 0 ? 0 : -EBADMSG;
    }
    return n;
}

void
fdpass_close(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        fds[i] = safe_close(fds[i]);
}
