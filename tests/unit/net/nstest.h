/*
 * nstest.h - network namespaces for the data path's tests, and sockets in
 * them. Nothing here touches the machine's own network: nstest_main()
 * forks, and the child leaves the initial namespace (unshare) before any
 * test runs; nstest_guard() refuses to go on in the namespace the test
 * started in. Each test then makes its own "host" namespace
 * (nstest_fresh_host(), the process moves into it) and namespaces beside
 * it held by fds (nstest_ns_new(), the process stays). Only documentation
 * addresses (198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) and, inside
 * these namespaces only, 169.254.169.254. A namespace dies with its last
 * fd and process, so nothing outlives a test.
 */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/pool.h"
#include "util/cleanup.h"

static ino_t nstest_init_ino;

static _unused_ ino_t
nstest_ino(void)
{
    struct stat st;
    if (stat("/proc/thread-self/ns/net", &st) < 0)
        abort();
    return st.st_ino;
}

/* Aborts the test binary if we are still in the namespace it started in. */
static _unused_ void
nstest_guard(void)
{
    if (nstest_ino() == nstest_init_ino) {
        fprintf(stderr, "nstest: still in the initial network namespace, stopping\n");
        abort();
    }
}

/* Moves the process into a new, empty network namespace. */
static _unused_ int
nstest_fresh_host(void)
{
    if (unshare(CLONE_NEWNET) < 0)
        return -errno;
    nstest_guard();
    return 0;
}

/* A new network namespace, held by the returned fd; we stay where we are. */
static _unused_ int
nstest_ns_new(void)
{
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0)
        return -errno;
    int fd = -1;
    if (unshare(CLONE_NEWNET) == 0)
        fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? -errno : fd;
    if (setns(home, CLONE_NEWNET) < 0)
        abort();
    close(home);
    return r;
}

/* socket() in namespace ns (-1 = here). */
static _unused_ int
nstest_socket(int ns, int domain, int type)
{
    int home = -1, fd;
    if (ns >= 0) {
        home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (home < 0 || setns(ns, CLONE_NEWNET) < 0)
            abort();
    }
    fd = socket(domain, type | SOCK_CLOEXEC, 0);
    int e = errno;
    if (home >= 0) {
        if (setns(home, CLONE_NEWNET) < 0)
            abort();
        close(home);
    }
    errno = e;
    return fd;
}

static _unused_ socklen_t
nstest_sa(const char *addr, unsigned port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &a->sin_addr) == 1) {
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        return sizeof(*a);
    }
    if (inet_pton(AF_INET6, addr, &a6->sin6_addr) != 1)
        abort();
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    return sizeof(*a6);
}

/* A listening (SOCK_STREAM) or bound (SOCK_DGRAM) socket in ns. */
static _unused_ int
nstest_listen(int ns, int type, const char *addr, unsigned port)
{
    struct sockaddr_storage ss;
    socklen_t n = nstest_sa(addr, port, &ss);
    int fd = nstest_socket(ns, ss.ss_family, type);
    int one = 1;
    if (fd < 0)
        return -errno;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, n) < 0 || (type == SOCK_STREAM && listen(fd, 16) < 0)) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

#define NSTEST_DROP_MS 300 /* how long a dropped connection attempt is given */

/* Connects over TCP from ns to addr:port: 0 when it connected, -ETIMEDOUT
 * when nothing answered in ms (dropped), else the refusal. With ret_fd,
 * the connected socket is the caller's. */
static _unused_ int
nstest_tcp(int ns, const char *addr, unsigned port, int ms, int *ret_fd)
{
    struct sockaddr_storage ss;
    socklen_t n = nstest_sa(addr, port, &ss);
    int fd = nstest_socket(ns, ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK);
    int r = 0;
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&ss, n) < 0) {
        if (errno != EINPROGRESS) {
            r = -errno;
        } else {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int k = poll(&p, 1, ms);
            if (k == 0) {
                r = -ETIMEDOUT;
            } else {
                int e = 0;
                socklen_t el = sizeof(e);
                (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
                r = -e;
            }
        }
    }
    if (r == 0 && ret_fd)
        *ret_fd = fd;
    else
        close(fd);
    return r;
}

/* Sends one UDP datagram from ns to addr:port and says whether rx (a bound
 * socket) got it within ms. */
static _unused_ bool
nstest_udp(int ns, const char *addr, unsigned port, int rx, int ms)
{
    struct sockaddr_storage ss;
    socklen_t n = nstest_sa(addr, port, &ss);
    int fd = nstest_socket(ns, ss.ss_family, SOCK_DGRAM);
    char c = 'q', got;
    if (fd < 0)
        return false;
    (void)sendto(fd, &c, 1, 0, (struct sockaddr *)&ss, n);
    close(fd);
    struct pollfd p = {.fd = rx, .events = POLLIN};
    if (poll(&p, 1, ms) != 1)
        return false;
    return recv(rx, &got, 1, MSG_DONTWAIT) == 1;
}

/* The peer address of the next connection on listener lfd, in text. */
static _unused_ int
nstest_accept_peer(int lfd, char peer[static NET_IP_STR])
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof(ss);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, 2000) != 1)
        return -ETIMEDOUT;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &n, SOCK_CLOEXEC);
    if (fd < 0)
        return -errno;
    close(fd);
    const void *a = ss.ss_family == AF_INET
                            ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
    return inet_ntop(ss.ss_family, a, peer, NET_IP_STR) ? 0 : -errno;
}

static _unused_ struct net_ip
nstest_ip(const char *s)
{
    struct net_ip ip = {0};
    if (inet_pton(AF_INET, s, ip.bytes) == 1)
        ip.family = AF_INET;
    else if (inet_pton(AF_INET6, s, ip.bytes) == 1)
        ip.family = AF_INET6;
    else
        abort();
    return ip;
}

static _unused_ struct net_block
nstest_block(const char *s, unsigned prefix)
{
    return (struct net_block){nstest_ip(s), (uint8_t)prefix};
}

static _unused_ uint64_t
nstest_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Runs tests (returning an exit status) in a forked child that has left
 * the initial network namespace; 77 without root or network namespaces. */
static _unused_ int
nstest_main(int (*tests)(void))
{
    if (geteuid() != 0) {
        fprintf(stderr, "skip: network namespaces, veths and nftables need root\n");
        return 77;
    }
    nstest_init_ino = nstest_ino();
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        if (unshare(CLONE_NEWNET) < 0) {
            fprintf(stderr, "skip: cannot make a network namespace: %s\n", strerror(errno));
            _exit(77);
        }
        nstest_guard();
        _exit(tests());
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
