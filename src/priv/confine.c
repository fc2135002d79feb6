/*
 * confine.c - drop to the network process's identity, then Landlock, then
 * the seccomp allow-list; and read back what the kernel says we are.
 *
 * Order matters. Everything that can fail for a reason the operator must
 * fix (a missing directory, a filter libseccomp cannot build) happens first,
 * while nothing has changed. Then the identity: libcap-ng's
 * capng_change_id() keeps CAP_SETPCAP just long enough to empty the
 * bounding set, changes gid, groups and uid and applies empty sets. Then
 * lockdown_self(): after the uid change, which resets the dumpable flag.
 * The result is checked against /proc/self/status, not taken on trust.
 * Landlock needs no_new_privs (we have no CAP_SYS_ADMIN any more), and the
 * seccomp filter goes last because it does not allow the Landlock calls.
 */
#include "priv/confine.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <linux/sockios.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <seccomp.h>

#include "util/cleanup.h"
#include "util/err.h"
#include "util/fd.h"
#include "util/lockdown.h"
#include "util/parse.h"

/* Rights newer than the kernel headers of Debian 12 (6.1, ABI 2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* The ABI 1 file-system rights: bits 0 (EXECUTE) to 12 (MAKE_SYM). */
#define LL_FS_ABI1 ((1ULL << 13) - 1)
/* What a rule on a file (not a directory) may carry. */
#define LL_FS_FILE                                                                               \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define LL_FS_RO (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* struct landlock_ruleset_attr as of ABI 6; older headers stop earlier.
 * The kernel takes a shorter size, and a longer one whose tail is zero. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

/* Namespace-creating clone flags (CLONE_NEWTIME is clone3/unshare only). */
#define NS_FLAGS                                                                           \
    ((uint64_t)(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                CLONE_NEWNET | CLONE_NEWCGROUP))

/* What a multithreaded HTTP server with SQLite, libpq, libcurl, OpenSSL,
 * libmicrohttpd and jansson calls once it runs. Names unknown on this
 * architecture are skipped. Left out on purpose, so they kill: execve
 * (nothing to run), fork/vfork and clone without CLONE_THREAD, every
 * namespace, mount, module, key, tracing, bpf, io_uring, perf, uid/gid and
 * capability call, chown and chroot, wait4 (no children), seccomp and
 * landlock_* (done with them; but for the ABI query), and the setuid
 * family. */
const char *const confine_allowed[] = {
        /* descriptors and files */
        "read",
        "write",
        "readv",
        "writev",
        "pread64",
        "pwrite64",
        "preadv",
        "pwritev",
        "preadv2",
        "pwritev2",
        "open",
        "openat",
        "openat2", /* util/path.h resolves beneath passed directories */
        "close",
        "close_range",
        "lseek",
        "dup",
        "dup2",
        "dup3",
        "fcntl", /* SQLite's locks */
        "flock",
        "fstat",
        "stat",
        "lstat",
        "newfstatat",
        "statx",
        "fstatfs",
        "statfs",
        "access",
        "faccessat",
        "faccessat2",
        "readlink", /* SQLite resolves a database's path */
        "readlinkat",
        "getcwd", /* SQLite, relative paths */
        "getdents64",
        "mkdir",
        "mkdirat",
        "unlink",
        "unlinkat",
        "rmdir",
        "rename",
        "renameat",
        "renameat2",
        "link", /* blobs: an O_TMPFILE linked in through /proc/self/fd */
        "linkat",
        "symlink", /* the tools' python shims */
        "symlinkat",
        "ftruncate",
        "truncate",
        "fallocate",
        "fsync",
        "fdatasync",
        "fchmod", /* SQLite gives a journal its database's mode */
        "utimensat",
        "pipe",
        "pipe2",
        "sendfile", /* libmicrohttpd's file responses */
        "splice",
        "copy_file_range",
        /* memory */
        "brk",
        "mmap",
        "munmap",
        "mprotect",
        "mremap",
        "madvise",
        "msync", /* SQLite's mmap mode */
        /* sockets (socket, socketpair: argument rules below) */
        "bind",
        "listen",
        "accept",
        "accept4",
        "connect",
        "getsockname",
        "getpeername",
        "getsockopt",
        "setsockopt",
        "sendto",
        "recvfrom",
        "sendmsg", /* SCM_RIGHTS, both ways */
        "recvmsg",
        "sendmmsg", /* glibc's resolver sends A and AAAA at once */
        "recvmmsg",
        "shutdown",
        /* waiting */
        "epoll_create",
        "epoll_create1",
        "epoll_ctl",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "eventfd",
        "eventfd2",
        "memfd_create", /* priv/client.c: a large spawn's sealed argv/env */
        /* watches (sandbox/watch.h): on directories the file helpers
         * open, as far as this uid may read them */
        "inotify_init1",
        "inotify_add_watch",
        "inotify_rm_watch",
        "timerfd_create",
        "timerfd_settime",
        "timerfd_gettime",
        "signalfd",
        "signalfd4",
        /* threads (clone: argument rule below) */
        "futex",
        "set_robust_list",
        "rseq", /* glibc >= 2.35 registers one per thread */
        "set_tid_address",
        "exit",
        "exit_group",
        "sched_yield",
        "sched_getaffinity", /* glibc's count of CPUs */
        "getcpu",
        "gettid",
        "getpid",
        "getppid",
        /* signals */
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "rt_sigsuspend",
        "rt_sigpending", /* libpq swallows its own SIGPIPE */
        "rt_sigtimedwait",
        "sigaltstack", /* the sanitizers, per thread */
        "restart_syscall",
        "kill",              /* with Landlock's signal scope: ourselves only */
        "tgkill",            /* raise(), abort(), pthread_kill() */
        "pidfd_send_signal", /* on descriptors the parent passes */
        "waitid",
        /* time, identity, randomness */
        "clock_gettime",
        "clock_getres",
        "clock_nanosleep",
        "nanosleep",
        "gettimeofday",
        "time",
        "getrandom",
        "uname",
        "sysinfo", /* glibc's qsort() sizes its buffer by memory */
        "getrusage",
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "getresuid",
        "getresgid",
        "getgroups",
        NULL,
};

/* ioctl requests allowed, on the request's low 32 bits (what the kernel
 * reads): FIONREAD and FIONBIO (sockets), FIOCLEX/FIONCLEX, TCGETS
 * (isatty()), TIOCGWINSZ, TIOCSWINSZ (a terminal's size, on the master the
 * parent handed over), SIOCGIFINDEX/SIOCGIFNAME (if_nametoindex(), for
 * IPv6 scope ids in URLs). */
static const uint32_t ioctl_allowed[] = {
        FIONREAD,   FIONBIO,    FIOCLEX,      FIONCLEX,    TCGETS,
        TIOCGWINSZ, TIOCSWINSZ, SIOCGIFINDEX, SIOCGIFNAME,
};

/* prctl options allowed: naming our threads (pthread_setname_np() on
 * itself), naming mappings (glibc >= 2.39 names thread stacks), and
 * reading our own bounding set (libnss_systemd asks it when a user is
 * looked up: libpq's getpwuid() without HOME). */
static const uint32_t prctl_allowed[] = {PR_SET_NAME, PR_GET_NAME, PR_SET_VMA, PR_CAPBSET_READ};

/* socket families: unix, IP, and read-only route netlink (getaddrinfo()
 * with AI_ADDRCONFIG, getifaddrs(): changing routes needs CAP_NET_ADMIN). */
static const uint32_t families[] = {AF_UNIX, AF_INET, AF_INET6};

static void
ctx_release(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}

static int
rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *what, unsigned n,
     const struct scmp_arg_cmp *cmp, struct err *err)
{
    int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
    return r < 0 ? err_setx(err, -r, "confine: seccomp rule for %s", what) : 0;
}

/* Low 32 bits of argument a equal v: ints the kernel truncates cannot hide
 * a value in the high half. */
#define ARG32(a, v) SCMP_CMP((a), SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)(v))

static int
build_filter(scmp_filter_ctx *ret, struct err *err)
{
    __attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    int r;

    if (!ctx)
        return err_set(err, ENOMEM, "confine: cannot initialise the seccomp filter");
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0)
        return err_setx(err, -r, "confine: seccomp bad-arch action");
    for (const char *const *n = confine_allowed; *n; n++) {
        int nr = seccomp_syscall_resolve_name(*n);
        if (nr == __NR_SCMP_ERROR)
            continue;
        r = rule(ctx, SCMP_ACT_ALLOW, nr, *n, 0, NULL, err);
        if (r < 0)
            return r;
    }

    /* Threads only: CLONE_THREAD set, no namespace flag. glibc tries clone3
     * first; ENOSYS makes it fall back to clone, whose flags we can see. */
    struct scmp_arg_cmp c[2] = {
            SCMP_CMP(0, SCMP_CMP_MASKED_EQ, NS_FLAGS | CLONE_THREAD, CLONE_THREAD),
    };
    if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), "clone", 1, c, err)) < 0)
        return r;
    if ((r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3", 0, NULL, err)) < 0)
        return r;

    for (size_t i = 0; i < ELEMENTSOF(families); i++) {
        c[0] = ARG32(0, families[i]);
        if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), "socket", 1, c, err)) < 0)
            return r;
    }
    c[0] = ARG32(0, AF_NETLINK);
    c[1] = ARG32(2, NETLINK_ROUTE);
    if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), "socket", 2, c, err)) < 0)
        return r;
    c[0] = ARG32(0, AF_UNIX);
    if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), "socketpair", 1, c, err)) < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(ioctl_allowed); i++) {
        c[0] = ARG32(1, ioctl_allowed[i]);
        if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), "ioctl", 1, c, err)) < 0)
            return r;
    }
    for (size_t i = 0; i < ELEMENTSOF(prctl_allowed); i++) {
        c[0] = ARG32(0, prctl_allowed[i]);
        if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), "prctl", 1, c, err)) < 0)
            return r;
    }
    /* Asking the Landlock ABI (confine_report() does), nothing more. */
    c[0] = SCMP_CMP(0, SCMP_CMP_EQ, 0);
    c[1] = ARG32(2, LANDLOCK_CREATE_RULESET_VERSION);
    r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(landlock_create_ruleset), "landlock_create_ruleset", 2,
             c, err);
    if (r < 0)
        return r;
    /* getrlimit()/setrlimit() on ourselves (pid 0) only. */
    c[0] = ARG32(0, 0);
    if ((r = rule(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), "prlimit64", 1, c, err)) < 0)
        return r;

    *ret = TAKE_PTR(ctx);
    return 0;
}

/* --- /proc/self/status --- */

static int
parse_ids(const char *v, unsigned ret[4])
{
    for (int i = 0; i < 4; i++) {
        char b[16];
        uint32_t x;
        v += strspn(v, " \t");
        size_t n = strcspn(v, " \t\n");
        if (n == 0 || n >= sizeof(b))
            return -EINVAL;
        memcpy(b, v, n);
        b[n] = '\0';
        if (parse_u32(b, &x) < 0)
            return -EINVAL;
        ret[i] = x;
        v += n;
    }
    return 0;
}

static int
parse_hex64(const char *v, uint64_t *ret)
{
    uint64_t x = 0;
    int n = 0;
    for (; *v && *v != '\n'; v++, n++) {
        int d = parse_hex_digit(*v);
        if (d < 0 || n >= 16)
            return -EINVAL;
        x = x << 4 | (uint64_t)d;
    }
    if (n == 0)
        return -EINVAL;
    *ret = x;
    return 0;
}

static int
parse_small(const char *v, int *ret)
{
    char b[16];
    size_t n = strcspn(v, "\n");
    uint32_t x;
    if (n == 0 || n >= sizeof(b))
        return -EINVAL;
    memcpy(b, v, n);
    b[n] = '\0';
    if (parse_u32(b, &x) < 0 || x > INT32_MAX)
        return -EINVAL;
    *ret = (int)x;
    return 0;
}

int
confine_report(struct confine_status *ret, struct err *err)
{
    _cleanup_close_ int fd = -EBADF;
    struct confine_status s = {.no_new_privs = -1, .seccomp = -1};
    char b[8192];
    bool uid = false, gid = false, threads = false, caps = false;
    int seen_caps = 0;

    fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "confine: cannot open /proc/self/status");
    ssize_t n = read_full(fd, b, sizeof(b) - 1);
    if (n < 0)
        return err_setx(err, (int)-n, "confine: cannot read /proc/self/status");
    if ((size_t)n == sizeof(b) - 1)
        return err_set(err, EFBIG, "confine: /proc/self/status is over %zu bytes", sizeof(b));
    b[n] = '\0';

    for (char *line = b; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = '\0';
            const char *v = colon + 1 + strspn(colon + 1, " \t");
            int r = 0;
            if (strcmp(line, "Uid") == 0)
                r = parse_ids(v, s.uid), uid = true;
            else if (strcmp(line, "Gid") == 0)
                r = parse_ids(v, s.gid), gid = true;
            else if (strcmp(line, "Threads") == 0) {
                int t = 0;
                r = parse_small(v, &t);
                s.threads = (unsigned)t, threads = true;
            } else if (strcmp(line, "CapInh") == 0)
                r = parse_hex64(v, &s.cap_inh), seen_caps++;
            else if (strcmp(line, "CapPrm") == 0)
                r = parse_hex64(v, &s.cap_prm), seen_caps++;
            else if (strcmp(line, "CapEff") == 0)
                r = parse_hex64(v, &s.cap_eff), seen_caps++;
            else if (strcmp(line, "CapBnd") == 0)
                r = parse_hex64(v, &s.cap_bnd), seen_caps++;
            else if (strcmp(line, "CapAmb") == 0)
                r = parse_hex64(v, &s.cap_amb), seen_caps++;
            else if (strcmp(line, "NoNewPrivs") == 0)
                r = parse_small(v, &s.no_new_privs);
            else if (strcmp(line, "Seccomp") == 0)
                r = parse_small(v, &s.seccomp);
            if (r < 0)
                return err_set(err, EINVAL, "confine: odd '%s' line in /proc/self/status", line);
        }
        line = next;
    }
    caps = seen_caps == 5;
    if (!uid || !gid || !threads || !caps)
        return err_set(err, EINVAL, "confine: /proc/self/status lacks %s",
                       !uid       ? "Uid"
                       : !gid     ? "Gid"
                       : !threads ? "Threads"
                                  : "a Cap line");
    s.landlock_abi = confine_landlock_abi();
    *ret = s;
    return 0;
}

int
confine_status_format(const struct confine_status *s, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "uid=%u/%u/%u/%u gid=%u/%u/%u/%u threads=%u cap_eff=%#llx cap_prm=%#llx "
                     "cap_inh=%#llx cap_bnd=%#llx cap_amb=%#llx no_new_privs=%d seccomp=%d "
                     "landlock_abi=%d",
                     (unsigned)s->uid[0], (unsigned)s->uid[1], (unsigned)s->uid[2],
                     (unsigned)s->uid[3], (unsigned)s->gid[0], (unsigned)s->gid[1],
                     (unsigned)s->gid[2], (unsigned)s->gid[3], s->threads,
                     (unsigned long long)s->cap_eff, (unsigned long long)s->cap_prm,
                     (unsigned long long)s->cap_inh, (unsigned long long)s->cap_bnd,
                     (unsigned long long)s->cap_amb, s->no_new_privs, s->seccomp, s->landlock_abi);
    if (k < 0)
        return -EINVAL;
    return (size_t)k < n ? k : -ENOBUFS;
}

/* --- Landlock --- */

int
confine_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0 && abi < 1000 ? (int)abi : 0;
}

static uint64_t
handled_fs(int abi)
{
    uint64_t fs = LL_FS_ABI1;
    if (abi >= CONFINE_LANDLOCK_ABI_REFER)
        fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= CONFINE_LANDLOCK_ABI_TRUNCATE)
        fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= CONFINE_LANDLOCK_ABI_IOCTL_DEV)
        fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return fs;
}

struct ll_path {
    int fd;
    bool dir;
    bool rw;
    const char *path;
};

static int
open_paths(const char *const *list, bool rw, struct ll_path *v, size_t *n, struct err *err)
{
    for (const char *const *p = list; p && *p; p++) {
        struct stat st;
        if (*n >= 2 * CONFINE_PATHS_MAX)
            return err_set(err, E2BIG, "confine: more than %d %s paths", CONFINE_PATHS_MAX,
                           rw ? "read-write" : "read-only");
        if ((*p)[0] != '/')
            return err_set(err, EINVAL, "confine: %s path '%s' is not absolute",
                           rw ? "read-write" : "read-only", *p);
        int fd = open(*p, O_PATH | O_CLOEXEC);
        if (fd < 0)
            return err_setx(err, errno, "confine: cannot open %s path '%s'",
                            rw ? "read-write" : "read-only", *p);
        v[*n] = (struct ll_path){.fd = fd, .rw = rw, .path = *p};
        (*n)++;
        if (fstat(fd, &st) < 0)
            return err_setx(err, errno, "confine: cannot stat '%s'", *p);
        v[*n - 1].dir = S_ISDIR(st.st_mode);
    }
    return 0;
}

static size_t
count(const char *const *list)
{
    size_t n = 0;
    for (const char *const *p = list; p && *p; p++)
        n++;
    return n;
}

static int
landlock_apply(int abi, const struct confine_config *c, const struct ll_path *v, size_t n,
               struct err *err)
{
    _cleanup_close_ int rfd = -EBADF;
    uint64_t fs = handled_fs(abi);
    struct ll_ruleset_attr attr = {.handled_access_fs = fs};
    size_t size = sizeof(attr.handled_access_fs);

    if (abi >= CONFINE_LANDLOCK_ABI_SCOPE) {
        /* Abstract unix sockets are not files, and we share the host's
         * network namespace: without the scope we could connect to any
         * host daemon's abstract socket (containerd's shim once took
         * commands there). Signals: the parent and the sandboxes are
         * other uids anyway; the scope makes that independent of uids. */
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
        if (!c->signal_outside)
            attr.scoped |= LANDLOCK_SCOPE_SIGNAL;
        size = sizeof(attr);
    }
    rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rfd < 0)
        return err_setx(err, errno, "confine: cannot create the Landlock ruleset (ABI %d)", abi);
    for (size_t i = 0; i < n; i++) {
        uint64_t allow = v[i].rw ? fs & ~LANDLOCK_ACCESS_FS_EXECUTE : fs & LL_FS_RO;
        if (!v[i].dir)
            allow &= LL_FS_FILE;
        struct landlock_path_beneath_attr pb = {.allowed_access = allow, .parent_fd = v[i].fd};
        if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
            return err_setx(err, errno, "confine: cannot add a Landlock rule for '%s'", v[i].path);
    }
    if (syscall(SYS_landlock_restrict_self, rfd, 0) < 0)
        return err_setx(err, errno, "confine: cannot enforce the Landlock ruleset");
    return 0;
}

/* --- identity --- */

static int
change_identity(const struct confine_config *c, struct err *err)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;

    capng_clear(CAPNG_SELECT_ALL);
    errno = 0;
    int r = capng_change_id((int)c->uid, (int)c->gid,
                            CAPNG_DROP_SUPP_GRP | CAPNG_CLEAR_BOUNDING | CAPNG_CLEAR_AMBIENT);
    if (r < 0)
        /* libcap-ng numbers its steps (which differ between versions);
         * errno is the failed call's. */
        return err_setx(err, errno ? errno : EPERM,
                        "confine: cannot become uid %u gid %u (capng_change_id() step %d)",
                        (unsigned)c->uid, (unsigned)c->gid, -r);
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return err_setx(err, errno, "confine: cannot read our ids back");
    if (ru != c->uid || eu != c->uid || su != c->uid || rg != c->gid || eg != c->gid ||
        sg != c->gid)
        return err_set(err, EPERM, "confine: ids are %u/%u/%u %u/%u/%u, not %u %u", ru, eu, su, rg,
                       eg, sg, (unsigned)c->uid, (unsigned)c->gid);
    if (getgroups(0, NULL) != 0)
        return err_set(err, EPERM, "confine: supplementary groups remain");
    return 0;
}

static int
check_status(const struct confine_config *c, struct err *err)
{
    struct confine_status s;
    int r = confine_report(&s, err);
    if (r < 0)
        return r;
    for (int i = 0; i < 4; i++)
        if (s.uid[i] != c->uid || s.gid[i] != c->gid)
            return err_set(err, EPERM, "confine: /proc/self/status shows uid %u gid %u",
                           (unsigned)s.uid[i], (unsigned)s.gid[i]);
    if (s.cap_eff || s.cap_prm || s.cap_inh || s.cap_bnd || s.cap_amb)
        return err_set(err, EPERM,
                       "confine: capabilities remain (eff %#llx prm %#llx inh %#llx bnd %#llx "
                       "amb %#llx)",
                       (unsigned long long)s.cap_eff, (unsigned long long)s.cap_prm,
                       (unsigned long long)s.cap_inh, (unsigned long long)s.cap_bnd,
                       (unsigned long long)s.cap_amb);
    if (s.no_new_privs != 1)
        return err_set(err, EPERM, "confine: no_new_privs is not set");
    return 0;
}

int
confine_self(const struct confine_config *c, struct err *err)
{
    __attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = NULL;
    struct ll_path paths[2 * CONFINE_PATHS_MAX];
    size_t npaths = 0;
    struct confine_status s;
    const char *step = NULL;
    int abi, r;

    if (c->uid == 0 || c->gid == 0)
        return err_set(err, EINVAL, "confine: uid %u gid %u: the network process is never root",
                       (unsigned)c->uid, (unsigned)c->gid);
    if (count(c->rw_paths) > CONFINE_PATHS_MAX || count(c->ro_paths) > CONFINE_PATHS_MAX)
        return err_set(err, E2BIG, "confine: more than %d paths in a list", CONFINE_PATHS_MAX);
    pid_t parent = getppid();
    r = confine_report(&s, err);
    if (r < 0)
        return r;
    if (s.threads != 1)
        return err_set(err, EBUSY, "confine: %u threads already run; confine before the first",
                       s.threads);

    abi = confine_landlock_abi();
    if (abi == 0 && c->landlock_required)
        return err_set(err, EOPNOTSUPP, "confine: the kernel has no Landlock");
    r = open_paths(c->rw_paths, true, paths, &npaths, err);
    if (r == 0)
        r = open_paths(c->ro_paths, false, paths, &npaths, err);
    if (r == 0)
        r = build_filter(&ctx, err);
    if (r == 0)
        r = change_identity(c, err);
    if (r == 0 && c->parent_death_signal &&
        prctl(PR_SET_PDEATHSIG, c->parent_death_signal, 0, 0, 0) < 0)
        r = err_setx(err, errno, "confine: cannot set the parent-death signal");
    /* The identity change cleared the signal until the line above: a
     * parent that ended meanwhile never sends it. */
    if (r == 0 && c->parent_death_signal && getppid() != parent)
        r = err_set(err, ESRCH, "confine: the parent ended while this process was confined");
    if (r == 0 && (r = lockdown_self(&step)) < 0)
        (void)err_setx(err, -r, "confine: %s", step);
    if (r == 0)
        r = check_status(c, err);
    if (r == 0 && abi > 0)
        r = landlock_apply(abi, c, paths, npaths, err);
    if (r == 0) {
        r = seccomp_load(ctx);
        if (r < 0)
            (void)err_setx(err, -r, "confine: cannot load the seccomp filter");
    }
    for (size_t i = 0; i < npaths; i++)
        (void)safe_close(paths[i].fd);
    return r < 0 ? r : abi;
}
