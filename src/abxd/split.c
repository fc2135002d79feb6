/*
 * split.c - the privileged parent and the network process (split.h).
 */
#include "abxd/split.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "priv/client.h"
#include "priv/confine.h"
#include "priv/parent.h"
#include "sandbox/fileops-helper.h"
#include "template/set.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/listen.h"
#include "util/log.h"
#include "util/timeutil.h"

#define RESTART_MIN_MS 100
#define RESTART_MAX_MS 5000
#define STABLE_MS      10000 /* up this long: the next crash restarts at once again */
#define RESERVE_MS     1000  /* how often the parent looks at the state file system */

/* split.h */
const struct split_dir split_net_dirs[SPLIT_NET_DIRS] = {{"tmp", true, false},
                                                         {SHIMS_SPLIT_DIR, true, false},
                                                         {"snapshots", false, false},
                                                         {TEMPLATE_LAYERS_DIR, true, true}};

/* The parent's state: one network process at a time. */
static struct {
    struct daemon *d;
    struct priv_parent *pp;
    struct fileops_parent fp;
    int image_fd, idmap_fd, idmap_ro_fd;
    int listen_fd;         /* the HTTP listener, handed to every network process */
    char **argv;           /* the network process's */
    pid_t pid, parent_pid; /* the network process's; ours, for its check */
    int pidfd;
    struct loop_io *pid_io, *sig_io;
    struct loop_timer *restart, *reserve;
    uint64_t started_ms, backoff_ms;
    int status; /* main()'s, once the network process has ended for good */
} P = {.image_fd = -EBADF,
       .idmap_fd = -EBADF,
       .idmap_ro_fd = -EBADF,
       .listen_fd = -EBADF,
       .pidfd = -EBADF};

int
split_path(char *out, size_t n, const char *dir, const char *name)
{
    int w = snprintf(out, n, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= n) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

uid_t
split_net_uid(const struct config *c)
{
    return c->privsep_uid ? (uid_t)c->privsep_uid : (uid_t)(c->uid_base - 1);
}

/* --- the network process's storage --- */

static uid_t chown_to;
static bool chown_templates; /* templates/: <name>/layer-<ms>/fs is no tree to hand over */

static int
chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    if (chown_templates && ftw->level == 3 && S_ISDIR(st->st_mode) &&
        !strcmp(path + ftw->base, "fs"))
        return FTW_SKIP_SUBTREE; /* a layer (tidy_layers() could not move it) */
    if (st->st_uid == chown_to && st->st_gid == (gid_t)chown_to)
        return FTW_CONTINUE;
    /* A second name of a file may be a link to one outside (made before
     * fs.protected_hardlinks, or by root): never hand such a file over. */
    if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
        log_warn("not handing '%s' to uid %u: it has %lu names", path, (unsigned)chown_to,
                 (unsigned long)st->st_nlink);
        return FTW_CONTINUE;
    }
    return lchown(path, chown_to, (gid_t)chown_to) < 0 ? FTW_STOP : FTW_CONTINUE;
}

/* Makes the directory path (and with tree, all below it) the network
 * uid's; made if missing. */
static int
give_path(const char *path, bool tree, bool templates, uid_t uid)
{
    struct stat st;
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return log_err_errno(-errno, "cannot create '%s'", path);
    /* The top is handed over last: owned by uid, the tree was before (a
     * store of many blobs is not walked at every start). */
    if (!templates && lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
        st.st_gid == (gid_t)uid)
        return 0;
    chown_to = uid;
    chown_templates = templates;
    errno = 0;
    int r = tree ? nftw(path, chown_one, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL) : 0;
    if (r == FTW_STOP)
        r = errno ? -errno : -EIO;
    if (r == 0 && lchown(path, uid, (gid_t)uid) < 0)
        r = -errno;
    if (r != 0)
        return log_err_errno(r < 0 ? r : -EIO, "cannot hand '%s' to uid %u", path, (unsigned)uid);
    return 0;
}

/* give_path() of <state>/name. */
static int
give_dir(struct daemon *d, const struct split_dir *sd, uid_t uid)
{
    char path[PATH_MAX];
    if (split_path(path, sizeof(path), d->cfg.state_dir, sd->name) < 0)
        return log_err_errno(-ENAMETOOLONG, "state directory path is too long");
    return give_path(path, sd->tree, sd->templates, uid);
}

/* Whether uid can walk down to path: every directory above it must let
 * others search it (the network uid is in no group). -EACCES with the one
 * that does not in blocker; a directory not there yet is made by root
 * later, searchable. A relative path is taken from the working directory. */
static int
reach_blocker(const char *path, uid_t uid, char blocker[PATH_MAX])
{
    char p[PATH_MAX];
    struct stat st;
    int w = path[0] == '/' ? snprintf(p, sizeof(p), "%s", path)
                           : (getcwd(p, sizeof(p))
                                      ? snprintf(p + strlen(p), sizeof(p) - strlen(p), "/%s", path)
                                      : -1);
    if (w < 0 || (size_t)w >= sizeof(p))
        return -ENAMETOOLONG;
    for (char *slash = strrchr(p, '/'); slash; slash = strrchr(p, '/')) {
        *slash = '\0';
        const char *at = p[0] ? p : "/";
        if (stat(at, &st) < 0) {
            if (errno == ENOENT)
                continue;
            (void)snprintf(blocker, PATH_MAX, "%s", at);
            return -errno;
        }
        if (st.st_uid != uid && !(st.st_mode & S_IXOTH)) {
            (void)snprintf(blocker, PATH_MAX, "%s", at);
            return -EACCES;
        }
    }
    return 0;
}

static int
check_reachable(const char *dir, uid_t uid)
{
    char at[PATH_MAX];
    int r = reach_blocker(dir, uid, at);
    if (r == -EACCES)
        return log_err("the network process (uid %u) cannot reach '%s': '%s' is not "
                       "searchable by others (chmod o+x it, or choose another directory)",
                       (unsigned)uid, dir, at),
               r;
    return r < 0 ? log_err_errno(r, "cannot look at '%s'", at) : 0;
}

int
split_reachable(const struct config *c, char *why, size_t n)
{
    const char *paths[] = {c->state_dir, c->tools_dir, c->templates_dir, c->keys_file,
                           strncmp(c->store, "postgres", 8) ? c->store : ""};
    char at[PATH_MAX];
    for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
        if (!paths[i][0] || reach_blocker(paths[i], split_net_uid(c), at) == 0)
            continue;
        (void)snprintf(why, n,
                       "its network process (uid %u) cannot reach '%s' ('%s' is not "
                       "searchable by others)",
                       (unsigned)split_net_uid(c), paths[i], at);
        return -EACCES;
    }
    return 0;
}

static int
prepare_storage(struct daemon *d, uid_t uid)
{
    int r = check_reachable(d->cfg.state_dir, uid);
    if (r < 0)
        return r;
    /* Searchable, not listable: the network uid reaches what is its own
     * by name; the rest is root's 0600/0700. */
    if (fchmod(d->statefd, 0711) < 0)
        return log_err_errno(-errno, "cannot make '%s' searchable", d->cfg.state_dir);
    /* toolbin/ stays root's, so that its shims/, which the parent binds
     * into sandboxes by path, cannot be replaced by a link elsewhere. */
    if ((mkdirat(d->statefd, SHIMS_DIR, 0755) < 0 && errno != EEXIST) ||
        fchownat(d->statefd, SHIMS_DIR, 0, 0, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchmodat(d->statefd, SHIMS_DIR, 0755, 0) < 0)
        return log_err_errno(-errno, "cannot prepare '%s/toolbin'", d->cfg.state_dir);
    for (size_t i = 0; i < SPLIT_NET_DIRS; i++) {
        r = give_dir(d, &split_net_dirs[i], uid);
        if (r < 0)
            return r;
    }
    /* The SQLite store: <state>/store or the directory ABX_STORE names. */
    static const struct split_dir store = {"store", true, false};
    if (!d->cfg.store[0])
        r = give_dir(d, &store, uid);
    else if (strncmp(d->cfg.store, "postgres", 8) != 0 &&
             (r = check_reachable(d->cfg.store, uid)) == 0)
        r = give_path(d->cfg.store, true, false, uid);
    if (r < 0)
        return r;
    if (fchownat(d->statefd, "api-key", uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) < 0 &&
        errno != ENOENT)
        return log_err_errno(-errno, "cannot hand '%s/api-key' to uid %u", d->cfg.state_dir,
                             (unsigned)uid);
    return 0;
}

/* --- the parent's own rights --- */

/* What the parent does and the capability each needs; nothing else is
 * kept, in its sets or in the bounding set its children inherit (a
 * sandbox gets a full set in its own user namespace whatever this is,
 * and trims it there). */
static const int parent_caps[] = {
        CAP_SYS_ADMIN,       /* namespaces, mounts, idmapped mounts, the btrfs disk */
        CAP_SETUID,          /* uid maps; the network process's and helpers' ids */
        CAP_SETGID,          /* gid maps, the same */
        CAP_SETFCAP,         /* a uid map that names host root's ids */
        CAP_SETPCAP,         /* dropping capabilities when becoming another uid */
        CAP_SYS_CHROOT,      /* a sandbox's root */
        CAP_SYS_PTRACE,      /* the namespaces and descriptors of sandbox processes */
        CAP_SYS_RESOURCE,    /* init's oom_score_adj, limits of sandboxes */
        CAP_KILL,            /* signals to sandbox processes (other uids) */
        CAP_CHOWN,           /* handing storage over, terminals, layers' ids */
        CAP_FOWNER,          /* modes of trees other uids own */
        CAP_FSETID,          /* copying a layer out of an area */
        CAP_DAC_OVERRIDE,    /* sandboxes' directories, cgroup files */
        CAP_DAC_READ_SEARCH, /* removing and copying trees other uids own */
        CAP_MKNOD,           /* a sandbox's /dev */
        CAP_NET_ADMIN,       /* a sandbox's network namespace */
};

/* Drops every capability parent_caps does not name, from the effective,
 * permitted, inheritable and bounding sets. After the listener is made. */
static int
trim_caps(void)
{
    bool have[ELEMENTSOF(parent_caps)];
    /* Of those, only what this process has (a container may withhold some). */
    if (capng_get_caps_process() < 0)
        return log_err("cannot read the parent's capabilities"), -EPERM;
    for (size_t i = 0; i < ELEMENTSOF(parent_caps); i++)
        have[i] = capng_have_capability(CAPNG_PERMITTED, (unsigned)parent_caps[i]) &&
                  capng_have_capability(CAPNG_BOUNDING_SET, (unsigned)parent_caps[i]);
    capng_clear(CAPNG_SELECT_BOTH);
    for (size_t i = 0; i < ELEMENTSOF(parent_caps); i++)
        if (have[i] &&
            capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
                         (unsigned)parent_caps[i]) < 0)
            return log_err("cannot keep capability %d", parent_caps[i]), -EINVAL;
    if (capng_apply(CAPNG_SELECT_BOTH) < 0)
        return log_err("cannot trim the parent's capabilities"), -EPERM;
    return 0;
}

/* --- the network process, started and watched --- */

static void on_net_exit(struct loop_io *io, uint32_t ev, void *ud);

/* fd onto want, without O_CLOEXEC; -1 on failure. */
static int
place_fd(int fd, int want)
{
    if (fd == want)
        return fcntl(fd, F_SETFD, 0) < 0 ? -1 : 0;
    return dup2(fd, want) < 0 ? -1 : 0;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPLIT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(SPLIT_ASAN)
#define SPLIT_ASAN 1
#endif

/* LeakSanitizer checks at exit by tracing the process from a clone of it,
 * which the network process's filter kills (and its no-dump setting
 * forbids): in sanitizer builds it runs without the leak check (the same
 * code is leak-checked in one process). */
static void
sanitizer_env(void)
{
#ifdef SPLIT_ASAN
    char v[1024];
    const char *o = getenv("ASAN_OPTIONS");
    (void)snprintf(v, sizeof(v), "%s%sdetect_leaks=0", o ? o : "", o && *o ? ":" : "");
    (void)setenv("ASAN_OPTIONS", v, 1);
#endif
}

static _noreturn_ void
exec_net(int sock)
{
    /* The listener and the lock first: they may sit on 3..5. The network
     * process holds the state lock with the parent, so that no other abxd
     * takes the state directory (and its store's GC) while it still
     * writes: a parent killed with -9 leaves it alive for a moment. */
    int lfd = fcntl(P.listen_fd, F_DUPFD_CLOEXEC, SPLIT_LOCK_FD + 1);
    int kfd = fcntl(daemon_state_lock_fd(), F_DUPFD_CLOEXEC, SPLIT_LOCK_FD + 1);
    if (lfd < 0 || kfd < 0 || place_fd(sock, SPLIT_PRIV_FD) < 0 ||
        place_fd(lfd, SPLIT_LISTEN_FD) < 0 || place_fd(kfd, SPLIT_LOCK_FD) < 0)
        _exit(127);
    (void)close_range(SPLIT_LOCK_FD + 1, ~0u, 0);
    sigset_t all;
    sigemptyset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, NULL);
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != P.parent_pid)
        _exit(127); /* the parent ended before the signal was armed */
    sanitizer_env();
    execv("/proc/self/exe", P.argv);
    _exit(127);
}

static int
start_net(void)
{
    struct err err = {0};
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return log_err_errno(-errno, "cannot make the network process's socket");
    P.parent_pid = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int r = -errno;
        safe_close(sv[0]);
        safe_close(sv[1]);
        return log_err_errno(r, "cannot start the network process");
    }
    if (pid == 0)
        exec_net(sv[1]);
    safe_close(sv[1]);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int r = pidfd < 0 ? -errno : 0;
    if (r == 0)
        r = loop_io_add(P.d->loop, pidfd, EPOLLIN, on_net_exit, NULL, &P.pid_io);
    if (r < 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        safe_close(pidfd);
        safe_close(sv[0]);
        return log_err_errno(r, "cannot watch the network process");
    }
    P.pid = pid;
    P.pidfd = pidfd;
    P.started_ms = now_msec();
    r = priv_parent_serve_child(P.pp, sv[0], &err);
    if (r < 0) {
        log_err("cannot serve the network process: %s", err.msg);
        (void)kill(pid, SIGKILL);
        return r;
    }
    log_info("network process %d started (uid %u)", (int)pid, (unsigned)split_net_uid(&P.d->cfg));
    return 0;
}

static void
on_restart(struct loop_timer *t, void *ud)
{
    (void)t, (void)ud;
    if (P.d->stopping)
        return;
    if (start_net() < 0) {
        P.status = 1;
        loop_quit(P.d->loop, 0);
    }
}

static void
on_net_exit(struct loop_io *io, uint32_t ev, void *ud)
{
    siginfo_t si = {0};
    (void)io, (void)ev, (void)ud;
    if (waitid((idtype_t)P_PIDFD, (id_t)P.pidfd, &si, WEXITED | WNOHANG) < 0 || !si.si_pid)
        return;
    loop_io_free(P.pid_io);
    P.pid_io = NULL;
    P.pidfd = safe_close(P.pidfd);
    P.pid = 0;
    bool crashed = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
    if (P.d->stopping || !crashed) {
        /* It drained (a signal we passed on), or it could not start: its
         * status is ours, as if it had been us. */
        P.status = si.si_code == CLD_EXITED ? si.si_status : 1;
        if (!P.d->stopping && P.status == 0)
            log_info("the network process ended; exiting");
        loop_quit(P.d->loop, 0);
        return;
    }
    uint64_t up = now_msec() - P.started_ms;
    P.backoff_ms = up >= STABLE_MS ? RESTART_MIN_MS
                   : P.backoff_ms  ? MIN(P.backoff_ms * 2, (uint64_t)RESTART_MAX_MS)
                                   : RESTART_MIN_MS;
    log_err("the network process was killed by signal %d after %llu ms; starting another in "
            "%llu ms (its sandboxes live on for %d s)",
            si.si_status, (unsigned long long)up, (unsigned long long)P.backoff_ms,
            PRIV_ORPHAN_GRACE_MS / 1000);
    (void)loop_timer_arm(P.restart, now_msec() + P.backoff_ms);
}

/* The reserve in the state directory is the parent's (the network uid
 * may not write there): released when the disk is full, made again when
 * there is room (daemon_check_reserve()). */
static void
on_reserve(struct loop_timer *t, void *ud)
{
    (void)ud;
    daemon_check_reserve(P.d, false);
    (void)loop_timer_arm(t, now_msec() + RESERVE_MS);
}

static void
on_parent_signal(struct loop_io *io, uint32_t ev, void *ud)
{
    struct signalfd_siginfo si;
    (void)io, (void)ev, (void)ud;
    while (read(P.d->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo != SIGTERM && si.ssi_signo != SIGINT)
            continue;
        if (!P.d->stopping)
            log_info("%s: passing it to the network process", strsignal((int)si.ssi_signo));
        P.d->stopping = true;
        loop_timer_disarm(P.restart);
        if (P.pid > 0)
            (void)kill(P.pid, (int)si.ssi_signo);
        else
            loop_quit(P.d->loop, 0);
    }
}

/* The network process's argv: ours behind the role and the facts it
 * cannot find out itself (the cgroup hierarchy's name). */
static int
net_argv(struct daemon *d, int argc, char **argv)
{
    P.argv = calloc((size_t)argc + 3, sizeof(char *));
    if (!P.argv)
        return -ENOMEM;
    P.argv[0] = argv[0];
    P.argv[1] = (char *)SPLIT_ROLE_ARG;
    static char cgroup[16];
    (void)snprintf(cgroup, sizeof(cgroup), "%s", d->cgroup_name);
    P.argv[2] = cgroup;
    for (int i = 1; i < argc; i++)
        P.argv[i + 2] = argv[i];
    return 0;
}

int
split_parent_run(struct daemon *d, int argc, char **argv)
{
    struct err err = {0};
    uid_t uid = split_net_uid(&d->cfg);
    char snaps[PATH_MAX], tpls[PATH_MAX];
    int r;

    P.d = d;
    P.status = 1;
    if (uid == 0)
        return log_err("ABX_PRIVSEP_UID must not be 0"), 2;
    if (d->cfg.isolation != JAIL_NS)
        return log_err("privilege separation needs isolation 'ns'"), 2;
    if (prepare_storage(d, uid) < 0 || net_argv(d, argc, argv) < 0)
        return 1;
    uint16_t port = 0;
    P.listen_fd = listen_tcp(d->cfg.listen_host, d->cfg.listen_port, &port, &err);
    if (P.listen_fd < 0)
        return log_err("%s", err.msg), 1;
    if (trim_caps() < 0)
        return 1;
    (void)split_path(snaps, sizeof(snaps), d->cfg.state_dir, "snapshots");
    P.image_fd = fileops_helper_image();
    (void)split_path(tpls, sizeof(tpls), d->cfg.state_dir, TEMPLATE_LAYERS_DIR);
    P.idmap_fd = open(snaps, O_PATH | O_DIRECTORY | O_CLOEXEC);
    P.idmap_ro_fd = open(tpls, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (P.image_fd < 0 || P.idmap_fd < 0 || P.idmap_ro_fd < 0)
        return log_err_errno(P.image_fd < 0 ? P.image_fd : -errno,
                             "cannot prepare the file helpers"),
               1;
    P.fp = (struct fileops_parent){.image_fd = P.image_fd, .host = d->jh};
    struct priv_parent_config pc = {
            .host = d->jh,
            .loop = d->loop,
            .peer_uid = uid,
            .max_sandboxes = d->cfg.uid_slots,
            .idmap_root_fd = P.idmap_fd,
            .idmap_ro_root_fd = P.idmap_ro_fd,
            .start_helper = fileops_parent_helper,
            .helper_ud = &P.fp,
            .orphan_grace_ms = PRIV_ORPHAN_GRACE_MS,
    };
    r = priv_parent_new(&pc, &P.pp, &err);
    if (r < 0)
        return log_err("cannot start the privileged parent: %s", err.msg), 1;
    d->sig_fd = signalfd(-1, &d->sigmask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sig_fd < 0 ||
        loop_io_add(d->loop, d->sig_fd, EPOLLIN, on_parent_signal, NULL, &P.sig_io) < 0 ||
        loop_timer_new(d->loop, on_restart, NULL, &P.restart) < 0 ||
        loop_timer_new(d->loop, on_reserve, NULL, &P.reserve) < 0)
        return log_err("cannot watch signals"), 1;
    (void)loop_timer_arm(P.reserve, now_msec() + RESERVE_MS);
    if (start_net() < 0)
        return 1;
    (void)loop_run(d->loop);

    /* The network process has ended: so do its sandboxes. */
    if (P.pid > 0) {
        (void)kill(P.pid, SIGKILL);
        (void)waitpid(P.pid, NULL, 0);
    }
    loop_io_free(P.pid_io);
    safe_close(P.pidfd);
    loop_io_free(P.sig_io);
    loop_timer_free(P.restart);
    loop_timer_free(P.reserve);
    /* Teardown work still queued (a sandbox's directory being removed,
     * a layer being installed) finishes and is told first: the parent
     * frees its jails next, and from then on teardown is synchronous. */
    jail_host_flush(d->jh);
    P.pp = priv_parent_free(P.pp);
    safe_close(P.image_fd);
    safe_close(P.idmap_fd);
    safe_close(P.idmap_ro_fd);
    safe_close(P.listen_fd);
    free(P.argv);
    /* What the steps before made, as daemon_teardown() frees it. */
    d->jr = jailer_free(d->jr);
    daemon_free_jail_host(d);
    loop_free(d->loop);
    d->loop = NULL;
    buf_done(&d->missing);
    d->sig_fd = safe_close(d->sig_fd);
    d->statefd = safe_close(d->statefd);
    return P.status;
}
