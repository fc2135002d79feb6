/*
 * test-confine.c - confine_self() in a forked child per case: what the
 * kernel then says we are, which calls kill us with SIGSYS, which still
 * work, what Landlock denies, and when confine_self() refuses.
 *
 * Needs root (it changes uid); exits 77 otherwise. A child reports a failed
 * check by its exit code (the step number), since cmocka's asserts cannot
 * leave a forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv/confine.h"
#include "util/err.h"

/* Not a user of this host (nor of abx's uid pool). */
#define TEST_UID 3999998
#define TEST_GID 3999998

static char base[64], rw_dir[96], ro_dir[96], out_dir[96];
static const char *rw_paths[2];
static const char *ro_paths[3];
static int landlock_abi;
/* An abstract socket name of our own: tests may run side by side. */
static char abstract_name[48];
static socklen_t abstract_len;

static struct confine_config
config(void)
{
    return (struct confine_config){
            .uid = TEST_UID,
            .gid = TEST_GID,
            .rw_paths = rw_paths,
            .ro_paths = ro_paths,
            .parent_death_signal = SIGKILL,
    };
}

/* Confines a child and runs fn there; returns the wait status. */
static int
run(int (*fn)(void))
{
    int st;
    pid_t pid = fork();
    if (pid == 0) {
        struct confine_config c = config();
        struct err err = {0};
        int r = confine_self(&c, &err);
        if (r < 0) {
            fprintf(stderr, "confine_self: %s\n", err.msg);
            _exit(100);
        }
        _exit(fn());
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void
assert_exit0(int st, const char *what)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: %s %d", what, WIFEXITED(st) ? "exited" : "killed by signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* --- status --- */

static int
child_status(void)
{
    struct confine_status s;
    char line[512];
    if (confine_report(&s, NULL) < 0)
        return 1;
    for (int i = 0; i < 4; i++)
        if (s.uid[i] != TEST_UID || s.gid[i] != TEST_GID)
            return 2;
    if (s.cap_eff || s.cap_prm || s.cap_inh || s.cap_bnd || s.cap_amb)
        return 3;
    if (s.no_new_privs != 1 || s.seccomp != 2 || s.threads != 1)
        return 4;
    if (getgroups(0, NULL) != 0)
        return 5;
    if (confine_status_format(&s, line, sizeof(line)) < 0 || !strstr(line, "seccomp=2") ||
        !strstr(line, "cap_eff=0 ") || !strstr(line, "no_new_privs=1"))
        return 6;
    if (confine_status_format(&s, line, 10) != -ENOBUFS)
        return 7;
    return 0;
}

static void
test_status(void **state)
{
    (void)state;
    assert_exit0(run(child_status), "status");
}

/* --- forbidden calls: each must kill with SIGSYS --- */

static int
do_unshare(void)
{
    return unshare(CLONE_NEWUSER);
}

static int
do_setns(void)
{
    return setns(0, CLONE_NEWNET);
}

static int
do_mount(void)
{
    return mount("none", "/tmp", "tmpfs", 0, NULL);
}

static int
do_ptrace(void)
{
    return (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static int
do_bpf(void)
{
    return (int)syscall(SYS_bpf, 0, NULL, 0);
}

static int
do_io_uring(void)
{
    char params[120] = {0};
    return (int)syscall(SYS_io_uring_setup, 1, params);
}

static int
do_init_module(void)
{
    return (int)syscall(SYS_init_module, NULL, 0, "");
}

static int
do_clone_newnet(void)
{
    return (int)syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);
}

static int
do_fork(void)
{
    return (int)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

static int
do_keyctl(void)
{
    return (int)syscall(SYS_keyctl, 0, 0, 0, 0, 0);
}

static int
do_perf(void)
{
    return (int)syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

static int
do_setuid(void)
{
    return (int)syscall(SYS_setuid, 0);
}

static int
do_execve(void)
{
    char *argv[] = {(char *)"true", NULL};
    return execve("/bin/true", argv, argv + 1);
}

static int
do_dumpable(void)
{
    return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static int
do_socket_packet(void)
{
    return socket(AF_PACKET, SOCK_RAW, 0);
}

static int
do_netlink_audit(void)
{
    return socket(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */);
}

static int
do_ioctl_tiocsti(void)
{
    char c = 'x';
    return ioctl(0, 0x5412 /* TIOCSTI */, &c);
}

static const struct {
    const char *name;
    int (*fn)(void);
} forbidden[] = {
        {"unshare(CLONE_NEWUSER)", do_unshare},
        {"setns", do_setns},
        {"mount", do_mount},
        {"ptrace", do_ptrace},
        {"bpf", do_bpf},
        {"io_uring_setup", do_io_uring},
        {"init_module", do_init_module},
        {"clone(CLONE_NEWNET)", do_clone_newnet},
        {"clone without CLONE_THREAD", do_fork},
        {"keyctl", do_keyctl},
        {"perf_event_open", do_perf},
        {"setuid", do_setuid},
        {"execve", do_execve},
        {"prctl(PR_SET_DUMPABLE)", do_dumpable},
        {"socket(AF_PACKET)", do_socket_packet},
        {"socket(AF_NETLINK, NETLINK_AUDIT)", do_netlink_audit},
        {"ioctl(TIOCSTI)", do_ioctl_tiocsti},
};

static void
test_forbidden_kill(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++) {
        int st = run(forbidden[i].fn);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS)
            fail_msg("%s: not killed by SIGSYS (%s %d)", forbidden[i].name,
                     WIFEXITED(st) ? "exited" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
}

/* --- allowed calls --- */

static void *
thread_main(void *arg)
{
    *(int *)arg = 42;
    (void)prctl(PR_SET_NAME, "confined", 0, 0, 0);
    return NULL;
}

static int
child_thread(void)
{
    pthread_t t;
    int v = 0;
    if (pthread_create(&t, NULL, thread_main, &v) != 0)
        return 1;
    if (pthread_join(t, NULL) != 0 || v != 42)
        return 2;
    /* glibc got here through clone: clone3 answers ENOSYS. */
    if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
        return 3;
    return 0;
}

static int
child_files(void)
{
    char p[160], b[8] = {0};
    int fd, dfd;
    (void)snprintf(p, sizeof(p), "%s/f", rw_dir);
    fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return 1;
    if (write(fd, "abc", 3) != 3 || pread(fd, b, 3, 0) != 3 || memcmp(b, "abc", 3) != 0)
        return 2;
    if (ftruncate(fd, 1) < 0 || fsync(fd) < 0)
        return 3;
    close(fd);
    char q[160];
    (void)snprintf(q, sizeof(q), "%s/g", rw_dir);
    if (rename(p, q) < 0 || unlink(q) < 0)
        return 4;
    (void)snprintf(p, sizeof(p), "%s/d", rw_dir);
    if (mkdir(p, 0700) < 0 || rmdir(p) < 0)
        return 5;
    /* The blob store's way: O_TMPFILE, linked in through /proc/self/fd. */
    dfd = open(rw_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    fd = open(rw_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (dfd < 0 || fd < 0)
        return 6;
    char proc[64];
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, dfd, "blob", AT_SYMLINK_FOLLOW) < 0)
        return 7;
    if (unlinkat(dfd, "blob", 0) < 0)
        return 8;
    /* read-only: read yes */
    (void)snprintf(p, sizeof(p), "%s/f", ro_dir);
    fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, 5) != 5 || memcmp(b, "hello", 5) != 0)
        return 9;
    return 0;
}

static int
child_fd_passing(void)
{
    int sv[2], fd, got = -1;
    char c = 'x', rc;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return 1;
    fd = eventfd(7, EFD_CLOEXEC);
    if (fd < 0)
        return 2;
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof(int));
    if (sendmsg(sv[0], &m, MSG_NOSIGNAL) != 1)
        return 3;
    memset(&u, 0, sizeof(u));
    iov.iov_base = &rc;
    if (recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) != 1)
        return 4;
    h = CMSG_FIRSTHDR(&m);
    if (!h || h->cmsg_type != SCM_RIGHTS)
        return 5;
    memcpy(&got, CMSG_DATA(h), sizeof(int));
    uint64_t v = 0;
    if (read(got, &v, sizeof(v)) != sizeof(v) || v != 7)
        return 6;
    return 0;
}

static int
child_epoll(void)
{
    struct epoll_event ev = {.events = EPOLLIN}, out;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ep < 0 || efd < 0)
        return 1;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) < 0)
        return 2;
    uint64_t one = 1;
    if (write(efd, &one, sizeof(one)) != sizeof(one))
        return 3;
    if (epoll_wait(ep, &out, 1, 1000) != 1)
        return 4;
    /* A listening TCP socket on loopback. */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || listen(s, 1) < 0)
        return 5;
    return 0;
}

static void
test_allowed(void **state)
{
    (void)state;
    assert_exit0(run(child_thread), "threads");
    assert_exit0(run(child_files), "files");
    assert_exit0(run(child_fd_passing), "SCM_RIGHTS");
    assert_exit0(run(child_epoll), "epoll");
}

/* --- Landlock --- */

static int
child_landlock(void)
{
    char p[160];
    (void)snprintf(p, sizeof(p), "%s/new", out_dir);
    if (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EACCES)
        return 1; /* write outside */
    (void)snprintf(p, sizeof(p), "%s/secret", out_dir);
    if (open(p, O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
        return 2; /* read outside */
    if (open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
        return 3;
    (void)snprintf(p, sizeof(p), "%s/f", ro_dir);
    if (open(p, O_WRONLY | O_CLOEXEC) >= 0 || errno != EACCES)
        return 4; /* write in read-only */
    (void)snprintf(p, sizeof(p), "%s/new", ro_dir);
    if (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EACCES)
        return 5;
    if (landlock_abi >= CONFINE_LANDLOCK_ABI_SCOPE) {
        /* the parent's abstract socket is outside our domain */
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        memcpy(a.sun_path + 1, abstract_name, strlen(abstract_name));
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            return 6;
        if (connect(s, (struct sockaddr *)&a, abstract_len) == 0 || errno != EPERM)
            return 7;
        if (kill(getppid(), 0) == 0 || errno != EPERM)
            return 8;
    }
    return 0;
}

static void
test_landlock(void **state)
{
    (void)state;
    if (landlock_abi == 0)
        skip();
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path + 1, abstract_name, strlen(abstract_name));
    assert_true(ls >= 0);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, abstract_len), 0);
    assert_int_equal(listen(ls, 1), 0);
    assert_exit0(run(child_landlock), "landlock");
    close(ls);
}

/* --- refusals (unconfined children) --- */

static void *
sleeper(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

static int
child_second_thread(void)
{
    pthread_t t;
    struct confine_config c = config();
    struct err err = {0};
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 1;
    if (confine_self(&c, &err) != -EBUSY || !strstr(err.msg, "threads"))
        return 2;
    if (getuid() != 0)
        return 3; /* refused before changing anything */
    return 0;
}

static int
child_missing_path(void)
{
    static const char *const missing[] = {"/nonexistent/abx-confine", NULL};
    struct confine_config c = config();
    struct err err = {0};
    c.ro_paths = missing;
    if (confine_self(&c, &err) != -ENOENT || !strstr(err.msg, "/nonexistent/abx-confine"))
        return 1;
    if (getuid() != 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
        return 2;
    c = config();
    c.uid = 0;
    if (confine_self(&c, &err) != -EINVAL)
        return 3;
    /* CONFINE_PATHS_MAX per list */
    static const char *many[CONFINE_PATHS_MAX + 2];
    for (int i = 0; i <= CONFINE_PATHS_MAX; i++)
        many[i] = "/";
    c = config();
    c.ro_paths = many;
    err_clear(&err);
    if (confine_self(&c, &err) != -E2BIG || getuid() != 0)
        return 4;
    many[CONFINE_PATHS_MAX] = NULL;
    c.rw_paths = NULL;
    c.ro_paths = many; /* exactly the limit: accepted (and confines) */
    if (confine_self(&c, &err) < 0)
        return 5;
    return getuid() == TEST_UID ? 0 : 6;
}

static int
forked(int (*fn)(void))
{
    int st;
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void
test_refusals(void **state)
{
    (void)state;
    assert_exit0(forked(child_second_thread), "second thread");
    assert_exit0(forked(child_missing_path), "missing path");
}

/* --- fixture --- */

static void
put(const char *dir, const char *name, const char *s)
{
    char p[160];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
    close(fd);
}

static int
setup(void **state)
{
    (void)state;
    /* /tmp, not TMPDIR: the test uid must be able to walk to the dirs, and
     * make check's TMPDIR is a root-only directory. */
    strcpy(base, "/tmp/abx-confine-XXXXXX");
    if (!mkdtemp(base) || chmod(base, 0755) < 0)
        return -1;
    (void)snprintf(rw_dir, sizeof(rw_dir), "%s/rw", base);
    (void)snprintf(ro_dir, sizeof(ro_dir), "%s/ro", base);
    (void)snprintf(out_dir, sizeof(out_dir), "%s/out", base);
    if (mkdir(rw_dir, 0700) < 0 || chown(rw_dir, TEST_UID, TEST_GID) < 0)
        return -1;
    /* Both open to the test uid by their modes: only Landlock says no. */
    if (mkdir(ro_dir, 0777) < 0 || mkdir(out_dir, 0777) < 0)
        return -1;
    put(ro_dir, "f", "hello");
    put(out_dir, "secret", "nope");
    if (chmod(ro_dir, 0777) < 0 || chmod(out_dir, 0777) < 0)
        return -1;
    rw_paths[0] = rw_dir;
    ro_paths[0] = ro_dir;
    ro_paths[1] = "/proc/self";
    landlock_abi = confine_landlock_abi();
    (void)snprintf(abstract_name, sizeof(abstract_name), "abx-test-confine-%d", (int)getpid());
    abstract_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abstract_name));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    char cmd[128];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skip: confine_self() changes uid, which needs root\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_status),   cmocka_unit_test(test_forbidden_kill),
            cmocka_unit_test(test_allowed),  cmocka_unit_test(test_landlock),
            cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
