/*
 * seccomp.c - build and export the sandbox filter with libseccomp.
 */
#include "jail/seccomp.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <seccomp.h>

#include "util/cleanup.h"

/* Docker's default allowlist (moby profiles/seccomp/default.json), without
 * the entries it grants only with CAP_SYS_ADMIN, CAP_SYS_PTRACE & co, and
 * without io_uring. Names unknown on this architecture are skipped. */
const char *const seccomp_allowed[] = {
        "accept",
        "accept4",
        "access",
        "adjtimex",
        "alarm",
        "arch_prctl",
        "bind",
        "brk",
        "cachestat",
        "capget",
        "capset",
        "chdir",
        "chmod",
        "chown",
        "chroot",
        "clock_adjtime",
        "clock_getres",
        "clock_gettime",
        "clock_nanosleep",
        "close",
        "close_range",
        "connect",
        "copy_file_range",
        "creat",
        "dup",
        "dup2",
        "dup3",
        "epoll_create",
        "epoll_create1",
        "epoll_ctl",
        "epoll_pwait",
        "epoll_pwait2",
        "epoll_wait",
        "eventfd",
        "eventfd2",
        "execve",
        "execveat",
        "exit",
        "exit_group",
        "faccessat",
        "faccessat2",
        "fadvise64",
        "fallocate",
        "fanotify_mark",
        "fchdir",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "fchown",
        "fchownat",
        "fcntl",
        "fdatasync",
        "fgetxattr",
        "flistxattr",
        "flock",
        "fork",
        "fremovexattr",
        "fsetxattr",
        "fstat",
        "fstatfs",
        "fsync",
        "ftruncate",
        "futex",
        "futex_requeue",
        "futex_wait",
        "futex_waitv",
        "futex_wake",
        "futimesat",
        "getcpu",
        "getcwd",
        "getdents",
        "getdents64",
        "getegid",
        "geteuid",
        "getgid",
        "getgroups",
        "getitimer",
        "getpeername",
        "getpgid",
        "getpgrp",
        "getpid",
        "getppid",
        "getpriority",
        "getrandom",
        "getresgid",
        "getresuid",
        "getrlimit",
        "get_robust_list",
        "getrusage",
        "getsid",
        "getsockname",
        "getsockopt",
        "get_thread_area",
        "gettid",
        "gettimeofday",
        "getuid",
        "getxattr",
        "inotify_add_watch",
        "inotify_init",
        "inotify_init1",
        "inotify_rm_watch",
        "io_cancel",
        "io_destroy",
        "io_getevents",
        "io_pgetevents",
        "ioprio_get",
        "ioprio_set",
        "io_setup",
        "io_submit",
        "kill",
        "landlock_add_rule",
        "landlock_create_ruleset",
        "landlock_restrict_self",
        "lchown",
        "lgetxattr",
        "link",
        "linkat",
        "listen",
        "listxattr",
        "llistxattr",
        "lremovexattr",
        "lseek",
        "lsetxattr",
        "lstat",
        "madvise",
        "map_shadow_stack",
        "membarrier",
        "memfd_create",
        "memfd_secret",
        "mincore",
        "mkdir",
        "mkdirat",
        "mknod",
        "mknodat",
        "mlock",
        "mlock2",
        "mlockall",
        "mmap",
        "modify_ldt",
        "mprotect",
        "mq_getsetattr",
        "mq_notify",
        "mq_open",
        "mq_timedreceive",
        "mq_timedsend",
        "mq_unlink",
        "mremap",
        "msgctl",
        "msgget",
        "msgrcv",
        "msgsnd",
        "msync",
        "munlock",
        "munlockall",
        "munmap",
        "name_to_handle_at",
        "nanosleep",
        "newfstatat",
        "open",
        "openat",
        "openat2",
        "pause",
        "pidfd_open",
        "pidfd_send_signal",
        "pipe",
        "pipe2",
        "pkey_alloc",
        "pkey_free",
        "pkey_mprotect",
        "poll",
        "ppoll",
        "prctl",
        "pread64",
        "preadv",
        "preadv2",
        "prlimit64",
        "process_mrelease",
        "process_vm_readv",
        "process_vm_writev",
        "pselect6",
        "ptrace",
        "pwrite64",
        "pwritev",
        "pwritev2",
        "read",
        "readahead",
        "readlink",
        "readlinkat",
        "readv",
        "recvfrom",
        "recvmmsg",
        "recvmsg",
        "remap_file_pages",
        "removexattr",
        "rename",
        "renameat",
        "renameat2",
        "restart_syscall",
        "rmdir",
        "rseq",
        "rt_sigaction",
        "rt_sigpending",
        "rt_sigprocmask",
        "rt_sigqueueinfo",
        "rt_sigreturn",
        "rt_sigsuspend",
        "rt_sigtimedwait",
        "rt_tgsigqueueinfo",
        "sched_getaffinity",
        "sched_getattr",
        "sched_getparam",
        "sched_get_priority_max",
        "sched_get_priority_min",
        "sched_getscheduler",
        "sched_rr_get_interval",
        "sched_setaffinity",
        "sched_setattr",
        "sched_setparam",
        "sched_setscheduler",
        "sched_yield",
        "seccomp",
        "select",
        "semctl",
        "semget",
        "semop",
        "semtimedop",
        "sendfile",
        "sendmmsg",
        "sendmsg",
        "sendto",
        "setfsgid",
        "setfsuid",
        "setgid",
        "setgroups",
        "setitimer",
        "setpgid",
        "setpriority",
        "setregid",
        "setresgid",
        "setresuid",
        "setreuid",
        "setrlimit",
        "set_robust_list",
        "setsid",
        "setsockopt",
        "set_thread_area",
        "set_tid_address",
        "setuid",
        "setxattr",
        "shmat",
        "shmctl",
        "shmdt",
        "shmget",
        "shutdown",
        "sigaltstack",
        "signalfd",
        "signalfd4",
        "socketpair",
        "splice",
        "stat",
        "statfs",
        "statx",
        "symlink",
        "symlinkat",
        "sync",
        "sync_file_range",
        "syncfs",
        "sysinfo",
        "tee",
        "tgkill",
        "time",
        "timer_create",
        "timer_delete",
        "timer_getoverrun",
        "timer_gettime",
        "timer_settime",
        "timerfd_create",
        "timerfd_gettime",
        "timerfd_settime",
        "times",
        "tkill",
        "truncate",
        "umask",
        "uname",
        "unlink",
        "unlinkat",
        "utime",
        "utimensat",
        "utimes",
        "vfork",
        "vmsplice",
        "wait4",
        "waitid",
        "write",
        "writev",
        NULL,
};

/* Namespace-creating clone flags; clone with any of them is refused. */
#define NS_FLAGS                                                                           \
    ((uint64_t)(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                CLONE_NEWNET | CLONE_NEWCGROUP))

static void
ctx_release(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}

/* ioctl requests a sandbox may not make: pushing input into a terminal it
 * shares, and making btrfs subvolumes or snapshots (a subvolume inside a
 * sandbox's bounded area is outside its quota group: disk.h). */
static const uint32_t ioctl_denied[] = {
        TIOCSTI,
        BTRFS_IOC_SNAP_CREATE,
        BTRFS_IOC_SNAP_CREATE_V2,
        BTRFS_IOC_SUBVOL_CREATE,
        BTRFS_IOC_SUBVOL_CREATE_V2,
};

/* Allows ioctl for every request but the denied ones. Rules for a syscall
 * are OR'ed and each is one masked comparison, so the allowed set is cut
 * into cubes: split (mask, value) on the next lower bit until a half holds
 * no denied request, which becomes one rule. The kernel reads the request
 * as an unsigned int: only the low 32 bits are compared, so high bits
 * cannot smuggle a denied request past a rule. */
static int
allow_ioctls_but(scmp_filter_ctx ctx, const uint32_t *deny, size_t n, uint32_t mask, uint32_t value,
                 int bit, struct err *err)
{
    bool hit = false;
    for (size_t i = 0; i < n && !hit; i++)
        hit = (deny[i] & mask) == value;
    if (!hit) {
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                 SCMP_A1(SCMP_CMP_MASKED_EQ, mask, value));
        return r < 0 ? err_setx(err, -r, "seccomp: ioctl rule") : 0;
    }
    if (bit < 0)
        return 0; /* exactly a denied request */
    uint32_t m = mask | 1u << bit;
    int r = allow_ioctls_but(ctx, deny, n, m, value, bit - 1, err);
    if (r == 0)
        r = allow_ioctls_but(ctx, deny, n, m, value | 1u << bit, bit - 1, err);
    return r;
}

int
seccomp_build_bpf(struct buf *out, struct err *err)
{
    __attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    int r;

    if (!ctx)
        return err_set(err, ENOMEM, "cannot initialise the seccomp filter");
    for (const char *const *n = seccomp_allowed; *n; n++) {
        int nr = seccomp_syscall_resolve_name(*n);
        if (nr == __NR_SCMP_ERROR)
            continue;
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (r < 0)
            return err_setx(err, -r, "seccomp: cannot allow '%s'", *n);
    }

    r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
    if (r < 0)
        return err_setx(err, -r, "seccomp: clone rule");
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (r < 0)
        return err_setx(err, -r, "seccomp: clone3 rule");

    static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < ELEMENTSOF(personas); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, personas[i]));
        if (r < 0)
            return err_setx(err, -r, "seccomp: personality rule");
    }

    /* socket: an allowlist of families. The kernel reads the family as an
     * int, so compare only the low 32 bits (a "!= AF_VSOCK" rule on the full
     * register would be bypassed by setting high bits). */
    static const uint64_t families[] = {AF_UNIX,    AF_INET,   AF_INET6,
                                        AF_NETLINK, AF_PACKET, 38 /* AF_ALG */};
    for (size_t i = 0; i < ELEMENTSOF(families); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, families[i]));
        if (r < 0)
            return err_setx(err, -r, "seccomp: socket rule");
    }

    r = allow_ioctls_but(ctx, ioctl_denied, ELEMENTSOF(ioctl_denied), 0, 0, 31, err);
    if (r < 0)
        return r;

    _cleanup_close_ int mfd = memfd_create("abx-seccomp", MFD_CLOEXEC);
    if (mfd < 0)
        return err_setx(err, errno, "seccomp: memfd");
    r = seccomp_export_bpf(ctx, mfd);
    if (r < 0)
        return err_setx(err, -r, "seccomp: cannot export the filter");
    off_t len = lseek(mfd, 0, SEEK_END);
    if (len <= 0 || len > 1024 * 1024)
        return err_set(err, EIO, "seccomp: odd filter size %lld", (long long)len);
    r = buf_reserve(out, (size_t)len);
    if (r < 0)
        return r;
    ssize_t k = pread(mfd, out->data + out->len, (size_t)len, 0);
    if (k != len)
        return err_set(err, EIO, "seccomp: short read of the filter");
    out->len += (size_t)len;
    out->data[out->len] = '\0';
    return 0;
}
