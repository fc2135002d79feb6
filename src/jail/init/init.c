/*
 * init.c - abx-init: pid 1 of a sandbox, built as a small static binary.
 *
 * abxd clones us into a fresh pid namespace and execs us while we are still
 * host root. We then (ns mode) make mount, net, ipc and uts namespaces, build the root
 * file system, pivot into it, bring up loopback, enter a cgroup namespace,
 * and only then move into a new user namespace whose root abxd maps to the
 * sandbox's pooled uid range. The namespaces above stay owned by the host's
 * user namespace, so sandbox root holds no capability over its own mounts,
 * network or host name. Because our image was exec'd before the user
 * namespace existed and we are not dumpable, sandbox root cannot ptrace us.
 *
 * After set-up we only spawn processes abxd asks for, signal them, and reap
 * every child, reporting exits of the ones abxd started. We hold no host
 * secrets; abxd still treats what we say as hostile. Control socket: fd 3.
 * When it closes (abxd died) we exit, and the kernel kills the namespace.
 *
 * This is not a general-purpose init: no services, no restarts, no logging.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/caps.h"
#include "jail/init/init-internal.h"
#include "jail/init/sudo-server.h"
#include "jail/proto.h"
#include "util/lockdown.h"

#define CTL_FD       3
#define MAX_TRACKED  4096 /* processes abxd started and has not seen exit */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static char rxbuf[PROTO_MAX_MSG];
static char txbuf[4096];
static char *argvv[PROTO_MAX_ARGS + 1];
static char *envv[PROTO_MAX_ARGS + 1];
static pid_t tracked[MAX_TRACKED];
static size_t ntracked;
static uint32_t mode;

/* Capabilities sandbox root keeps across exec: Docker's default set. */

static int
send_msg(const void *buf, size_t n)
{
    for (;;) {
        ssize_t k = send(CTL_FD, buf, n, MSG_NOSIGNAL);
        if (k >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* Reports a set-up failure and exits; abxd turns it into an error naming the step. */
void
init_fail(const char *step, int errnum)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_FAILED);
    proto_put_u32(&w, (uint32_t)(errnum > 0 ? errnum : EIO));
    proto_put_str(&w, step);
    long n = proto_writer_finish(&w);
    if (n > 0)
        (void)send_msg(txbuf, (size_t)n);
    _exit(1);
}

static void
loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        init_fail("loopback socket", errno);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    CHECK(ioctl(s, SIOCGIFFLAGS, &ifr), "loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    CHECK(ioctl(s, SIOCSIFFLAGS, &ifr), "loopback up");
    close(s);
}

static void
wait_mapped(void)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_NEED_MAP);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);
    for (;;) {
        ssize_t k = recv(CTL_FD, rxbuf, sizeof(rxbuf), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            _exit(1);
        struct proto_reader r;
        if (proto_reader_init(&r, rxbuf, (size_t)k) == PROTO_MAPPED && proto_reader_done(&r) == 0)
            return;
        init_fail("expected MAPPED", EPROTO);
    }
}

static void
drop_bounding_caps(void)
{
    const char *step = NULL;
    uint64_t keep = 0;
    for (size_t i = 0; i < sizeof(jail_keep_caps) / sizeof(jail_keep_caps[0]); i++)
        keep |= UINT64_C(1) << jail_keep_caps[i];
    int r = lockdown_bound_caps(keep, &step);
    if (r < 0)
        init_fail(step, -r);
}

static void
setup(const struct proto_config *c)
{
    mode = c->mode;
    for (uint32_t i = 0; i < c->ncgroups; i++) {
        int fd = open(c->cgroups[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            init_fail("join cgroup", errno);
        close(fd);
    }
    if (mode == PROTO_MODE_NS) {
        /* abxd made only our pid namespace; the rest are ours to make, as
         * host root, so they belong to the host's user namespace. */
        CHECK(unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "namespaces");
        init_build_root(c);
        loopback_up();
        CHECK(sethostname(c->hostname, strlen(c->hostname)), "sethostname");
        CHECK(unshare(CLONE_NEWCGROUP), "cgroup namespace");
        CHECK(unshare(CLONE_NEWUSER), "user namespace");
        wait_mapped();
        CHECK(setgroups(0, NULL), "setgroups");
        CHECK(setresgid(0, 0, 0), "setresgid");
        CHECK(setresuid(0, 0, 0), "setresuid");
        drop_bounding_caps();
    } else {
        /* No pid namespace: adopt orphans so they are reaped and counted. */
        CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper");
        CHECK(chdir(c->workspace), "chdir workspace");
        if (mode == PROTO_MODE_UID)
            drop_bounding_caps();
    }

    /* Credential changes clear the parent-death signal; set it again. */
    CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "pdeathsig");
    if (mode != PROTO_MODE_NONE) {
        const char *step = NULL;
        int r = lockdown_self(&step);
        if (r < 0)
            init_fail(step, -r);
        if (c->bpf_len) {
            if (c->bpf_len % sizeof(struct sock_filter) != 0)
                init_fail("seccomp program", EINVAL);
            struct sock_fprog prog = {
                    .len = (unsigned short)(c->bpf_len / sizeof(struct sock_filter)),
                    .filter = (struct sock_filter *)(uintptr_t)c->bpf,
            };
            CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "seccomp filter");
        }
    }
}

/* --- spawning --- */

struct spawn_err {
    int step;
    int errnum;
};

enum { STEP_SETSID = 1, STEP_STDIO, STEP_GROUPS, STEP_GID, STEP_UID, STEP_CHDIR };

static const char *
step_name(int step)
{
    switch (step) {
    case STEP_SETSID:
        return "setsid";
    case STEP_STDIO:
        return "stdio";
    case STEP_GROUPS:
        return "setgroups";
    case STEP_GID:
        return "setgid";
    case STEP_UID:
        return "setuid";
    case STEP_CHDIR:
        return "chdir";
    default:
        return "spawn";
    }
}

static void __attribute__((noreturn)) child_fail(int errpipe, int step)
{
    struct spawn_err e = {step, errno};
    (void)!write(errpipe, &e, sizeof(e));
    _exit(125);
}

static const char *
env_path(char *const *env)
{
    for (size_t i = 0; env[i]; i++)
        if (!strncmp(env[i], "PATH=", 5))
            return env[i] + 5;
    return DEFAULT_PATH;
}

static void __attribute__((noreturn)) exec_or_die(char *const *argv, char *const *env)
{
    static char cand[4096];
    const char *file = argv[0];
    int err = ENOENT;
    bool eacces = false;

    if (strchr(file, '/')) {
        execve(file, argv, env);
        err = errno;
    } else if (*file) {
        const char *p = env_path(env);
        for (;;) {
            const char *colon = strchr(p, ':');
            size_t n = colon ? (size_t)(colon - p) : strlen(p);
            int k = n ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, file)
                      : snprintf(cand, sizeof(cand), "%s", file);
            if (k > 0 && (size_t)k < sizeof(cand)) {
                execve(cand, argv, env);
                if (errno == EACCES)
                    eacces = true;
                else if (errno != ENOENT && errno != ENOTDIR)
                    err = errno;
            }
            if (!colon)
                break;
            p = colon + 1;
        }
        if (eacces && err == ENOENT)
            err = EACCES;
    }
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "abx: %s: %s\n", file,
                     err == ENOENT ? "command not found" : strerror(err));
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

static void __attribute__((noreturn))
spawn_child(const struct proto_spawn *s, const int *fds, int nfds, int errpipe)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* init changes no disposition but SIGPIPE's (handlers would be reset
     * by exec anyway; an ignored signal would stay ignored). */
    (void)signal(SIGPIPE, SIG_DFL);

    if (setsid() < 0)
        child_fail(errpipe, STEP_SETSID);
    for (int i = 0; i < 3; i++) {
        int fd = i < nfds ? fds[i] : -1;
        if (fd < 0) {
            fd = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (fd < 0)
                child_fail(errpipe, STEP_STDIO);
        }
        if (dup2(fd, i) < 0)
            child_fail(errpipe, STEP_STDIO);
    }
    /* A terminal on stdin (abxd's PTY processes) becomes the new session's
     * controlling terminal, so job control and ^C work as in a login. */
    if (isatty(0))
        (void)ioctl(0, TIOCSCTTY, 0);
    /* Everything else we hold (control socket, received fds, the error
     * pipe) is closed by the exec. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        for (int fd = 3; fd < 65536; fd++)
            if (fd != errpipe)
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (mode != PROTO_MODE_NONE) {
        /* The OOM killer should always pick a sandbox's processes before its
         * init (whose death ends the sandbox), and untrusted code before the
         * host's services. Raising the score needs no privilege. */
        int ofd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (ofd >= 0) {
            (void)!write(ofd, "300", 3);
            close(ofd);
        }
        gid_t g = s->gid;
        if (setgroups(1, &g) < 0)
            child_fail(errpipe, STEP_GROUPS);
        if (setresgid(s->gid, s->gid, s->gid) < 0)
            child_fail(errpipe, STEP_GID);
        if (setresuid(s->uid, s->uid, s->uid) < 0)
            child_fail(errpipe, STEP_UID);
    }
    if (chdir(s->cwd) < 0)
        child_fail(errpipe, STEP_CHDIR);
    umask(022);
    exec_or_die(argvv, envv);
}

static bool
track(pid_t pid)
{
    if (ntracked >= MAX_TRACKED)
        return false;
    tracked[ntracked++] = pid;
    return true;
}

static bool
untrack(pid_t pid)
{
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i] == pid) {
            tracked[i] = tracked[--ntracked];
            return true;
        }
    return false;
}

static void
send_spawned(uint64_t token, pid_t pid, int errnum, const char *step)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_SPAWNED);
    proto_put_u64(&w, token);
    proto_put_u32(&w, (uint32_t)(pid > 0 ? pid : 0));
    proto_put_u32(&w, (uint32_t)errnum);
    proto_put_str(&w, step);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);
}

static void
do_spawn(struct proto_reader *r, int *fds, int nfds)
{
    struct proto_spawn s;

    if (proto_decode_spawn(r, &s) < 0)
        init_fail("bad spawn message", EPROTO);
    for (uint32_t i = 0; i < s.argc; i++)
        argvv[i] = (char *)(uintptr_t)proto_get_str(r, NULL);
    argvv[s.argc] = NULL;
    for (uint32_t i = 0; i < s.envc; i++)
        envv[i] = (char *)(uintptr_t)proto_get_str(r, NULL);
    envv[s.envc] = NULL;
    if (proto_reader_done(r) < 0)
        init_fail("bad spawn message", EPROTO);

    if (ntracked >= MAX_TRACKED) {
        send_spawned(s.token, 0, EAGAIN, "process table full");
        return;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        send_spawned(s.token, 0, errno, "pipe");
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        send_spawned(s.token, 0, e, "fork");
        return;
    }
    if (pid == 0) {
        close(ep[0]);
        spawn_child(&s, fds, nfds, ep[1]);
    }
    close(ep[1]);
    struct spawn_err e;
    ssize_t k;
    do
        k = read(ep[0], &e, sizeof(e));
    while (k < 0 && errno == EINTR);
    close(ep[0]);
    if (k == (ssize_t)sizeof(e)) {
        (void)waitpid(pid, NULL, 0);
        send_spawned(s.token, 0, e.errnum ? e.errnum : EIO, step_name(e.step));
        return;
    }
    track(pid);
    send_spawned(s.token, pid, 0, "");
}

static void
do_signal(struct proto_reader *r)
{
    int32_t pid = (int32_t)proto_get_u32(r);
    int32_t sig = (int32_t)proto_get_u32(r);
    uint32_t flags = proto_get_u32(r);
    if (proto_reader_done(r) < 0 || pid <= 1 || sig < 0 || sig >= NSIG)
        return;
    /* Only processes we started (or their groups) may be signalled. */
    bool known = false;
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i] == pid)
            known = true;
    if (!known)
        return;
    (void)kill((flags & PROTO_SIGNAL_GROUP) ? -pid : pid, sig);
}

static void
reap(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        /* Not abxd's (an orphan, or a sudo command): abxd never hears of it. */
        if (!untrack(pid)) {
            (void)sudo_server_reaped(pid, status);
            continue;
        }
        struct proto_writer w;
        proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_EXITED);
        proto_put_u32(&w, (uint32_t)pid);
        proto_put_u32(&w, (uint32_t)status);
        long n = proto_writer_finish(&w);
        if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
            _exit(1);
    }
}

static void
handle_control(void)
{
    int fds[PROTO_MAX_FDS];
    int nfds = 0;
    char cbuf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
    struct iovec iov = {rxbuf, sizeof(rxbuf)};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};

    ssize_t k = recvmsg(CTL_FD, &mh, MSG_CMSG_CLOEXEC);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (k <= 0) {
        /* abxd is gone. In ns mode leaving takes the namespace with us;
         * otherwise take down the process groups we started ourselves. */
        if (mode != PROTO_MODE_NS)
            for (size_t i = 0; i < ntracked; i++)
                (void)kill(-tracked[i], SIGKILL);
        _exit(0);
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (nfds < PROTO_MAX_FDS)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    struct proto_reader r;
    int type = proto_reader_init(&r, rxbuf, (size_t)k);
    if (type == PROTO_SPAWN)
        do_spawn(&r, fds, nfds);
    else if (type == PROTO_SIGNAL)
        do_signal(&r);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

static uint64_t
usec_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int
main(void)
{
    uint64_t t0 = usec_now();
    sigset_t mask;

    (void)prctl(PR_SET_NAME, "abx-init", 0, 0, 0);
    (void)signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    (void)sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        init_fail("signalfd", errno);
    if (fcntl(CTL_FD, F_SETFD, FD_CLOEXEC) < 0)
        _exit(1);

    ssize_t k;
    do
        k = recv(CTL_FD, rxbuf, sizeof(rxbuf), 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        _exit(1);
    struct proto_config cfg;
    if (proto_decode_config(rxbuf, (size_t)k, &cfg) < 0)
        init_fail("bad config message", EPROTO);
    setup(&cfg);
    if (mode == PROTO_MODE_NS) {
        int r = sudo_server_start();
        if (r < 0)
            init_fail("sudo socket", -r);
    }

    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_READY);
    proto_put_u64(&w, usec_now() - t0);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);

    struct pollfd pfd[2 + SUDO_SERVER_MAX_POLLS] = {{.fd = CTL_FD, .events = POLLIN},
                                                    {.fd = sfd, .events = POLLIN}};
    for (;;) {
        size_t nsudo = sudo_server_pollfds(pfd + 2, SUDO_SERVER_MAX_POLLS);
        if (poll(pfd, 2 + nsudo, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (pfd[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
            reap();
        }
        sudo_server_dispatch(pfd + 2, nsudo);
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
            handle_control();
    }
}
