/*
 * test-seccomp.c - the sandbox filter, installed for real: each probe runs
 * in a forked child twice, once as is (the baseline, which shows that the
 * probe would succeed or fail differently without the filter) and once
 * after PR_SET_NO_NEW_PRIVS + PR_SET_SECCOMP with the filter from
 * seccomp_build_bpf(). Refused calls must answer EPERM, clone3 ENOSYS; the
 * ordinary calls a program makes must keep working (reflinks too, while
 * making btrfs subvolumes is refused); calls through another
 * ABI (int 0x80) must not get past the architecture check.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/seccomp.h"
#include "util/fd.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static struct buf filter;

struct outcome {
    long ret; /* the call's return value */
    int err;  /* errno when ret < 0 */
    int sig;  /* the child was killed by this signal (0: it exited) */
};

typedef long (*probe_fn)(void);

static int
install_filter(void)
{
    struct sock_fprog prog = {
            .len = (unsigned short)(filter.len / sizeof(struct sock_filter)),
            .filter = (struct sock_filter *)(void *)filter.data,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Runs probe in a child, with or without the filter. The child uses only
 * raw system calls and _exit(): no cmocka, no stdio, no atexit handlers. */
static struct outcome
run(probe_fn probe, bool filtered)
{
    struct outcome o = {0};
    int p[2];

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct outcome c = {0};
        close(p[0]);
        if (filtered && install_filter() < 0)
            _exit(100);
        errno = 0;
        c.ret = probe();
        c.err = c.ret < 0 ? errno : 0;
        if (write(p[1], &c, sizeof(c)) != sizeof(c))
            _exit(101);
        _exit(0);
    }
    close(p[1]);
    ssize_t k = read_full(p[0], &o, sizeof(o));
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        o.sig = WTERMSIG(status);
        return o;
    }
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        fail_msg("probe child exited %d", WEXITSTATUS(status));
    assert_int_equal(k, sizeof(o));
    return o;
}

/* --- probes: each one system call, raw where libc might interfere --- */

static long
p_mount(void)
{
    return syscall(SYS_mount, "none", "/nonexistent-abx-seccomp", "tmpfs", 0UL, NULL);
}

static long
p_umount(void)
{
    return syscall(SYS_umount2, "/nonexistent-abx-seccomp", 0);
}

static long
p_unshare_user(void)
{
    return syscall(SYS_unshare, CLONE_NEWUSER);
}

static long
p_unshare_ns(void)
{
    return syscall(SYS_unshare, CLONE_NEWNS);
}

static long
p_setns(void)
{
    return syscall(SYS_setns, -1, 0);
}

/* clone with flags; a child that gets created leaves at once */
static long
clone_with(unsigned long flags)
{
    long r = syscall(SYS_clone, flags | SIGCHLD, 0UL, NULL, NULL, 0UL);
    if (r == 0)
        _exit(0);
    if (r > 0)
        (void)waitpid((pid_t)r, NULL, 0);
    return r;
}

static long
p_clone_newns(void)
{
    return clone_with(CLONE_NEWNS);
}

static long
p_clone_newuser(void)
{
    return clone_with(CLONE_NEWUSER);
}

static long
p_clone_newpid(void)
{
    return clone_with(CLONE_NEWPID);
}

static long
p_clone_newnet(void)
{
    return clone_with(CLONE_NEWNET);
}

static long
p_clone_newcgroup_high_bits(void)
{
    return clone_with(CLONE_NEWCGROUP | (1UL << 40));
}

static long
p_clone3(void)
{
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &args, sizeof(args));
    if (r == 0)
        _exit(0);
    if (r > 0)
        (void)waitpid((pid_t)r, NULL, 0);
    return r;
}

static long
p_socket_vsock(void)
{
    long r = syscall(SYS_socket, AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return r;
}

static long
p_socket_vsock_high_bits(void)
{
    /* the kernel reads the family as an int: the high half is ignored */
    return syscall(SYS_socket, (1UL << 32) | AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static long
p_socket_vsock_dgram(void)
{
    return syscall(SYS_socket, 0xffffffff00000000UL | AF_VSOCK, SOCK_DGRAM, 0);
}

static long
p_io_uring_setup(void)
{
    char params[120]; /* struct io_uring_params */
    memset(params, 0, sizeof(params));
    return syscall(SYS_io_uring_setup, 1, params);
}

static long
p_keyctl(void)
{
    return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
}

static long
p_add_key(void)
{
    return syscall(SYS_add_key, "user", "abx-test", "x", 1, -3);
}

static long
p_bpf(void)
{
    return syscall(SYS_bpf, 9999, NULL, 0);
}

static long
p_perf_event_open(void)
{
    return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

static long
p_userfaultfd(void)
{
    return syscall(SYS_userfaultfd, O_CLOEXEC);
}

static long
p_open_by_handle_at(void)
{
    return syscall(SYS_open_by_handle_at, -1, NULL, 0);
}

static long
p_personality_addr_no_randomize(void)
{
    return syscall(SYS_personality, 0x0040000UL /* ADDR_NO_RANDOMIZE */);
}

static long
p_tiocsti(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    char c = 'x';
    long r = syscall(SYS_ioctl, p[0], TIOCSTI, &c);
    int e = errno;
    close(p[0]);
    close(p[1]);
    errno = e;
    return r;
}

static long
p_tiocsti_high_bits(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    char c = 'x';
    /* the kernel reads the request as an unsigned int */
    long r = syscall(SYS_ioctl, p[0], (1UL << 32) | TIOCSTI, &c);
    int e = errno;
    close(p[0]);
    close(p[1]);
    errno = e;
    return r;
}

/* A btrfs ioctl on /proc: ENOTTY from the kernel (no subvolume can be
 * made there even if the filter let it through). */
static long
btrfs_on_proc(unsigned long req)
{
    struct btrfs_ioctl_vol_args_v2 a;
    memset(&a, 0, sizeof(a));
    (void)snprintf(a.name, sizeof(a.name), "abx-test-never");
    a.fd = -1;
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long r = syscall(SYS_ioctl, fd, req, &a);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static long
p_subvol_create(void)
{
    return btrfs_on_proc(BTRFS_IOC_SUBVOL_CREATE);
}

static long
p_subvol_create_v2(void)
{
    return btrfs_on_proc(BTRFS_IOC_SUBVOL_CREATE_V2);
}

static long
p_snap_create(void)
{
    return btrfs_on_proc(BTRFS_IOC_SNAP_CREATE);
}

static long
p_snap_create_v2_high_bits(void)
{
    return btrfs_on_proc((1UL << 40) | BTRFS_IOC_SNAP_CREATE_V2);
}

static long
p_ficlone(void)
{
    /* reflink copies stay allowed (cp tries them first) */
    return btrfs_on_proc(FICLONE);
}

static long
p_fs_info(void)
{
    return btrfs_on_proc(BTRFS_IOC_FS_INFO);
}

static long
p_ptrace(void)
{
    /* we trace nobody: ESRCH when ptrace is allowed, EPERM when filtered */
    return syscall(SYS_ptrace, PTRACE_PEEKDATA, getppid(), NULL, NULL);
}

/* unshare(CLONE_NEWUSER) through the i386 entry point: i386's unshare is
 * 310. The filter must check the architecture, or this walks past every
 * x86_64 rule. */
static long
p_int80_unshare(void)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(310L), "b"((long)CLONE_NEWUSER) : "memory");
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static long
p_x32_unshare(void)
{
    return syscall(0x40000000L | SYS_unshare, CLONE_NEWUSER);
}

/* --- ordinary life under the filter --- */

static long
p_ordinary(void)
{
    char b[256];
    struct timespec ts = {0, 1000};
    int p[2];

    if (syscall(SYS_getpid) <= 0)
        return -1;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof(b)) <= 0 || close(fd) < 0)
        return -2;
    if (pipe2(p, O_CLOEXEC) < 0 || write(p[1], "x", 1) != 1 || read(p[0], b, 1) != 1)
        return -3;
    close(p[0]);
    close(p[1]);
    void *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, 4096, PROT_READ) < 0 || munmap(m, 65536) < 0)
        return -4;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0 || nanosleep(&(struct timespec){0, 1000}, NULL) < 0)
        return -5;
    if (syscall(SYS_getrandom, b, 16, 0) != 16)
        return -6;
    int s = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -7;
    close(s);
    s = (int)syscall(SYS_socket, (1UL << 32) | AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -8;
    close(s);
    s = (int)syscall(SYS_socket, AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 && errno != EAFNOSUPPORT)
        return -9;
    if (s >= 0)
        close(s);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return -10;
    close(sp[0]);
    close(sp[1]);
    /* fork (clone without namespace flags), exec-less child, wait */
    pid_t pid = fork();
    if (pid < 0)
        return -11;
    if (pid == 0)
        _exit(7);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
        return -12;
    /* a thread-style clone is a plain clone too */
    if (clone_with(CLONE_FS | CLONE_FILES) <= 0)
        return -13;
    if (syscall(SYS_personality, 0xffffffffUL) < 0 || syscall(SYS_personality, 0x0008UL) < 0 ||
        syscall(SYS_personality, 0UL) < 0)
        return -14;
    if (ioctl(0, FIONREAD, &st) < 0 && errno == EPERM)
        return -15;
    if (syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) < 0)
        return -16;
    return 0;
}

/* --- tests --- */

static void
test_build(void **state)
{
    struct buf b;
    struct err e = {0};
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "prefix"), 0);
    assert_int_equal(seccomp_build_bpf(&b, &e), 0);
    assert_false(err_isset(&e));
    assert_true(b.len > 6);
    assert_int_equal((b.len - 6) % sizeof(struct sock_filter), 0);
    assert_memory_equal(b.data, "prefix", 6); /* appended */
    assert_true((b.len - 6) / sizeof(struct sock_filter) < BPF_MAXINSNS);
    buf_done(&b);

    /* the same filter every time */
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(seccomp_build_bpf(&b, NULL), 0);
    assert_int_equal(b.len, filter.len);
    assert_memory_equal(b.data, filter.data, b.len);
    buf_done(&b);

    /* a buffer too small for it */
    buf_init(&b, 16);
    assert_int_equal(seccomp_build_bpf(&b, NULL), -EFBIG);
    buf_done(&b);

    /* the allowlist: no duplicates, none of the dangerous names */
    /* clang-format off */
    static const char *const never[] = {
            "mount", "umount2", "unshare", "setns", "clone3", "io_uring_setup",
            "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "bpf",
            "perf_event_open", "userfaultfd", "open_by_handle_at", "kexec_load", "init_module",
            "finit_module", "delete_module", "reboot", "swapon", "pivot_root", "acct", "fsopen",
            "fsmount", "move_mount", "open_tree", "socket", "clone", "personality", "ioctl",
            "mount_setattr", "quotactl", "lookup_dcookie", "syslog", "uselib", "vhangup",
            "nfsservctl", NULL,
    };
    /* clang-format on */
    for (const char *const *a = seccomp_allowed; *a; a++) {
        for (const char *const *n = never; *n; n++)
            if (!strcmp(*a, *n))
                fail_msg("'%s' is on the unconditional allowlist", *a);
        for (const char *const *b2 = a + 1; *b2; b2++)
            if (!strcmp(*a, *b2))
                fail_msg("'%s' is listed twice", *a);
    }
}

struct refusal {
    const char *name;
    probe_fn probe;
    int want; /* errno under the filter */
};

static void
test_refused(void **state)
{
    static const struct refusal cases[] = {
            {"mount", p_mount, EPERM},
            {"umount2", p_umount, EPERM},
            {"unshare(CLONE_NEWUSER)", p_unshare_user, EPERM},
            {"unshare(CLONE_NEWNS)", p_unshare_ns, EPERM},
            {"setns", p_setns, EPERM},
            {"clone(CLONE_NEWNS)", p_clone_newns, EPERM},
            {"clone(CLONE_NEWUSER)", p_clone_newuser, EPERM},
            {"clone(CLONE_NEWPID)", p_clone_newpid, EPERM},
            {"clone(CLONE_NEWNET)", p_clone_newnet, EPERM},
            {"clone(CLONE_NEWCGROUP | high bits)", p_clone_newcgroup_high_bits, EPERM},
            {"clone3", p_clone3, ENOSYS},
            {"socket(AF_VSOCK)", p_socket_vsock, EPERM},
            {"socket(AF_VSOCK | 1 << 32)", p_socket_vsock_high_bits, EPERM},
            {"socket(AF_VSOCK | 0xffffffff << 32)", p_socket_vsock_dgram, EPERM},
            {"io_uring_setup", p_io_uring_setup, EPERM},
            {"keyctl", p_keyctl, EPERM},
            {"add_key", p_add_key, EPERM},
            {"bpf", p_bpf, EPERM},
            {"perf_event_open", p_perf_event_open, EPERM},
            {"userfaultfd", p_userfaultfd, EPERM},
            {"open_by_handle_at", p_open_by_handle_at, EPERM},
            {"personality(ADDR_NO_RANDOMIZE)", p_personality_addr_no_randomize, EPERM},
            {"ioctl(BTRFS_IOC_SUBVOL_CREATE)", p_subvol_create, EPERM},
            {"ioctl(BTRFS_IOC_SUBVOL_CREATE_V2)", p_subvol_create_v2, EPERM},
            {"ioctl(BTRFS_IOC_SNAP_CREATE)", p_snap_create, EPERM},
            {"ioctl(BTRFS_IOC_SNAP_CREATE_V2 | 1 << 40)", p_snap_create_v2_high_bits, EPERM},
    };
    char failures[4096] = "";
    int nfail = 0;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct refusal *c = &cases[i];
        struct outcome base = run(c->probe, false);
        struct outcome with = run(c->probe, true);
        printf("# %-36s without filter: %ld/%s%s, with: %ld/%s\n", c->name, base.ret,
               base.ret < 0 ? strerror(base.err) : "ok", base.sig ? " (killed)" : "", with.ret,
               with.ret < 0 ? strerror(with.err) : "ok");
        size_t n = strlen(failures);
        if (with.sig || with.ret >= 0 || with.err != c->want) {
            (void)snprintf(failures + n, sizeof(failures) - n,
                           "\n  %s: ret %ld errno %d (%s) signal %d, want %s", c->name, with.ret,
                           with.err, strerror(with.err), with.sig, strerror(c->want));
            nfail++;
            continue;
        }
        /* without the filter the same call does something else, so the
         * answer above really comes from the filter (as root) */
        if (geteuid() == 0 && !base.sig && base.ret < 0 && base.err == c->want) {
            (void)snprintf(failures + n, sizeof(failures) - n,
                           "\n  %s: the baseline already fails with %s; the probe proves nothing",
                           c->name, strerror(c->want));
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d case(s):%s", nfail, failures);
}

static void
test_tiocsti_refused(void **state)
{
    (void)state;
    /* BUG: seccomp.h says TIOCSTI is refused (a sandbox process could push
     * characters into the input of a terminal it shares), but
     * seccomp_build_bpf() allows ioctl unconditionally: on a pipe the call
     * reaches the kernel and answers ENOTTY instead of EPERM. Add an
     * SCMP_ACT_ERRNO(EPERM) rule for ioctl with
     * SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, TIOCSTI) (masked: the kernel
     * reads the request as an unsigned int). */
    struct outcome base = run(p_tiocsti, false);
    assert_int_equal(base.err, ENOTTY);
    struct outcome with = run(p_tiocsti, true);
    assert_int_equal(with.sig, 0);
    assert_true(with.ret < 0);
    if (with.err != EPERM)
        fail_msg("ioctl(TIOCSTI) under the filter: %s, want EPERM", strerror(with.err));
    with = run(p_tiocsti_high_bits, true);
    if (with.err != EPERM)
        fail_msg("ioctl(TIOCSTI | 1 << 32) under the filter: %s, want EPERM", strerror(with.err));
}

static void
test_allowed(void **state)
{
    (void)state;
    struct outcome o = run(p_ordinary, true);
    assert_int_equal(o.sig, 0);
    if (o.ret != 0)
        fail_msg("ordinary step %ld failed under the filter: %s", -o.ret, strerror(o.err));

    /* ptrace is allowed: the kernel itself answers, as without the filter */
    struct outcome base = run(p_ptrace, false);
    struct outcome with = run(p_ptrace, true);
    assert_int_equal(with.sig, 0);
    assert_int_equal(with.ret, -1);
    assert_int_equal(with.err, base.err);
    assert_int_equal(with.err, ESRCH);

    /* other ioctls of btrfs's type still reach the kernel */
    static const probe_fn same[] = {p_ficlone, p_fs_info};
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        base = run(same[i], false);
        with = run(same[i], true);
        assert_int_equal(with.sig, 0);
        assert_int_equal(with.ret, base.ret);
        assert_int_equal(with.err, base.err);
        assert_int_not_equal(with.err, EPERM);
    }
}

static void
test_foreign_abi(void **state)
{
    (void)state;
    /* through int 0x80 the same unshare works without the filter (when the
     * kernel has IA-32 emulation) and must be stopped with it: the thread
     * is killed (SIGSYS) by the architecture check, or the call fails */
    struct outcome base = run(p_int80_unshare, false);
    struct outcome with = run(p_int80_unshare, true);
    printf("# int 0x80 unshare without filter: %ld/%s signal %d, with: signal %d\n", base.ret,
           base.ret < 0 ? strerror(base.err) : "ok", base.sig, with.sig);
    if (!base.sig && base.ret < 0 && base.err == ENOSYS)
        fprintf(stderr, "# no IA-32 emulation: int 0x80 is not available at all\n");
    assert_true(with.sig == SIGSYS || (with.sig == 0 && with.ret < 0));
    if (with.sig == 0)
        assert_true(with.err == EPERM || with.err == ENOSYS);

    /* the x32 bit set on an x86_64 number */
    with = run(p_x32_unshare, true);
    assert_true(with.sig == SIGSYS || (with.sig == 0 && with.ret < 0));
}

int
main(void)
{
    struct err e = {0};

    buf_init(&filter, BUF_UNLIMITED);
    if (seccomp_build_bpf(&filter, &e) < 0) {
        fprintf(stderr, "cannot build the filter: %s\n", e.msg);
        return 1;
    }
    /* can this kernel install filters at all? */
    pid_t pid = fork();
    if (pid == 0)
        _exit(install_filter() < 0 ? 1 : 0);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "skip: seccomp filters cannot be installed here\n");
        buf_done(&filter);
        return 77;
    }
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_build),           cmocka_unit_test(test_refused),
            cmocka_unit_test(test_tiocsti_refused), cmocka_unit_test(test_allowed),
            cmocka_unit_test(test_foreign_abi),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    buf_done(&filter);
    return r;
}
