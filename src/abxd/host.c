/*
 * host.c - abxd's steps that touch the host and parse nothing a client or
 * a sandbox sends: the log and flags, the process's limits and signals,
 * the state directory (lock, reserve, API key), the jail host, the tools'
 * binds. Both abxd in one process and the privileged parent run these
 * (split.h); scripts/layering.py checks that what this file and split.c
 * reach calls no parser.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abxd/config.h"
#include "abxd/daemon.h"
#include "jail/jail.h"
#include "template/set.h"
#include "tools/registry.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/loop.h"
#include "util/rand.h"
#include "util/reserve.h"

/* An early return from main() once the jail host exists must still
 * unmount the sandboxes' disk (jail_host_free() does), or its mount and
 * loop device outlive us. */
static struct jail_host *exit_jail_host;

static void
free_jail_host_at_exit(void)
{
    exit_jail_host = jail_host_free(exit_jail_host);
}

/* Raises RLIMIT_NOFILE to its hard limit; returns the limit now in force. */
static uint32_t
raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    return rl.rlim_cur > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)rl.rlim_cur;
}

/* Reads or creates <state>/api-key (0600). */
static int
load_api_key(struct config *c, int statefd)
{
    struct buf b;
    int r;

    if (c->api_key[0]) {
        log_info("API key from ABX_API_KEY");
        return 0;
    }
    buf_init(&b, 512);
    r = read_file_at(statefd, "api-key", 512, &b);
    if (r == 0) {
        while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
            b.data[--b.len] = '\0';
        if (b.len < 16 || b.len >= sizeof(c->api_key)) {
            buf_done(&b);
            return log_err_errno(-EINVAL, "API key in '%s/api-key' must be 16-255 characters",
                                 c->state_dir);
        }
        memcpy(c->api_key, b.data, b.len + 1);
        buf_done(&b);
        log_info("API key read from %s/api-key", c->state_dir);
        return 0;
    }
    buf_done(&b);
    if (r != -ENOENT)
        return log_err_errno(r, "cannot read '%s/api-key'", c->state_dir);
    char hex[41];
    r = rand_hex(hex, 20);
    if (r < 0)
        return log_err_errno(r, "cannot generate an API key");
    /* E2B's shape (e2b_ + 40 hex): older E2B SDKs check it before sending,
     * and the same key must work for the native and the E2B surfaces. */
    (void)snprintf(c->api_key, sizeof(c->api_key), "e2b_%s", hex);
    _cleanup_close_ int fd =
            openat(statefd, "api-key", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return log_err_errno(-errno, "cannot create '%s/api-key'", c->state_dir);
    char line[300];
    int n = snprintf(line, sizeof(line), "%s\n", c->api_key);
    r = write_full(fd, line, (size_t)n);
    if (r < 0 || fsync(fd) < 0)
        return log_err_errno(r < 0 ? r : -errno, "cannot write the API key");
    log_notice("generated an API key and stored it in %s/api-key (mode 0600)", c->state_dir);
    return 0;
}

#define MiB_OF(b) ((unsigned long long)((b) >> 20))

/* Keeps, gives up or re-creates the reserve in the state directory (see
 * util/reserve.h) and says so whenever that changes. */
void
daemon_check_reserve(struct daemon *d, bool at_start)
{
    struct reserve_state st;
    struct err err = {0};
    uint64_t size = d->cfg.reserve_bytes;
    int r = reserve_check(d->statefd, size, &st, &err);
    if (r < 0) {
        log_warn("reserve in '%s': %s, ignoring", d->cfg.state_dir, err.msg);
    } else if (r == RESERVE_RELEASED && size) {
        log_warn("the state file system of '%s' is full (%llu MiB free, below %llu MiB): "
                 "released the %llu MiB reserve '%s/" RESERVE_NAME "' so that deleting "
                 "workspaces, store GC and the store's journal can proceed; it is re-created "
                 "once %llu MiB are free",
                 d->cfg.state_dir, MiB_OF(st.free_bytes), MiB_OF(st.low_bytes), MiB_OF(size),
                 d->cfg.state_dir, MiB_OF(st.high_bytes));
    } else if (r == RESERVE_RELEASED) {
        log_info("removed '%s/" RESERVE_NAME "': the reserve is off", d->cfg.state_dir);
    } else if (r == RESERVE_CREATED) {
        log_notice("%s the %llu MiB reserve '%s/" RESERVE_NAME "' (%llu MiB were free)",
                   at_start ? "created" : "free space is back: re-created", MiB_OF(size),
                   d->cfg.state_dir, MiB_OF(st.free_bytes));
    } else if (at_start && size && !st.present) {
        log_warn("no room for the %llu MiB reserve in '%s' (%llu MiB free): it is created "
                 "once %llu MiB are free",
                 MiB_OF(size), d->cfg.state_dir, MiB_OF(st.free_bytes), MiB_OF(st.high_bytes));
    }
}

static int state_lock_fd = -1;

static int
lock_state(struct config *c, int *ret_statefd)
{
    int r = mkdir_p(c->state_dir, 0700);
    if (r < 0)
        return log_err_errno(r, "cannot create state directory '%s'", c->state_dir);
    char real[PATH_MAX];
    if (!realpath(c->state_dir, real))
        return log_err_errno(-errno, "cannot resolve '%s'", c->state_dir);
    if (strlen(real) >= sizeof(c->state_dir))
        return log_err_errno(-ENAMETOOLONG, "state directory path is too long");
    strcpy(c->state_dir, real);
    int fd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return log_err_errno(-errno, "cannot open '%s'", c->state_dir);
    (void)fchmod(fd, 0700);
    int lk = openat(fd, "abxd.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0) {
        r = -errno;
        close(fd);
        if (lk >= 0)
            close(lk);
        return log_err_errno(r, "state directory '%s' is in use by another abxd", c->state_dir);
    }
    /* lk stays open (and locked) for the life of the process, and of
     * the network process it starts (split.c). */
    state_lock_fd = lk;
    *ret_statefd = fd;
    return 0;
}

int
daemon_state_lock_fd(void)
{
    return state_lock_fd;
}

void
daemon_init(struct daemon *d)
{
    log_init("abxd");
    *d = (struct daemon){0};
    buf_init(&d->missing, 2048);
    d->sig_fd = -1;
    d->statefd = -1;
}

int
daemon_setup_config(struct daemon *d, int argc, char **argv)
{
    struct err err = {0};
    int r = config_load(&d->cfg, argc, argv, &err);
    if (r < 0) {
        log_err("%s", err.msg);
        return r;
    }
    if (d->cfg.show_help) {
        config_usage(argv[0]);
        return 1;
    }
    if (d->cfg.show_version) {
        printf("abxd %s\n", ABX_VERSION);
        return 1;
    }
    return 0;
}

int
daemon_setup_process(struct daemon *d)
{
    d->nofile = raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    /* Block the signals we read from a signalfd before any thread exists,
     * so no thread can take them with their default action. */
    sigemptyset(&d->sigmask);
    sigaddset(&d->sigmask, SIGTERM);
    sigaddset(&d->sigmask, SIGINT);
    sigprocmask(SIG_BLOCK, &d->sigmask, NULL);
    return 0;
}

int
daemon_setup_state(struct daemon *d)
{
    if (d->role == ROLE_NET) {
        /* The parent holds the lock and keeps the reserve; this uid may
         * only pass through the state directory to what is its own. */
        d->statefd = open(d->cfg.state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d->statefd < 0)
            return log_err_errno(-errno, "cannot open '%s'", d->cfg.state_dir);
        return load_api_key(&d->cfg, d->statefd);
    }
    int r = lock_state(&d->cfg, &d->statefd);
    if (r < 0)
        return r;
    /* Before anything else writes: on a full disk the room goes first. */
    daemon_check_reserve(d, true);
    return load_api_key(&d->cfg, d->statefd);
}

/* --- built layers --- */

#define LAYERS_KEEP_MAX 4096 /* layers a start keeps at most; more: none is collected */

/* A layer made before the host kept them (a directory in place of the
 * link): moved into the layers directory as "m<ms>-<template>", the link
 * put where it was. Its new name into ret; -errno, and it stays. */
static int
move_layer(int lfd, const char *tname, const char *lname, int layersfd, const char *ldir,
           char ret[JAIL_LAYER_NAME_MAX + 1])
{
    char target[PATH_MAX + JAIL_LAYER_NAME_MAX + 2];
    (void)snprintf(ret, JAIL_LAYER_NAME_MAX + 1, "m%s-%s", lname + 6, tname);
    for (char *c = ret; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            *c = '-';
    if (!jail_layer_name_ok(ret) || faccessat(layersfd, ret, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return -EEXIST;
    (void)snprintf(target, sizeof(target), "%s/%s", ldir, ret);
    if (renameat(lfd, "fs", layersfd, ret) < 0)
        return -errno;
    if (symlinkat(target, lfd, "fs") < 0) {
        int e = -errno;
        (void)renameat(layersfd, ret, lfd, "fs");
        return e;
    }
    return 0;
}

/* Every template's layer-<ms>/fs links into the jail host's layers
 * directory (jail.h): those made in place before are moved there, and a
 * layer no link names is collected (the template set collected the
 * layer directories no template stacks). At the start, before any
 * sandbox; in the process that owns the jail host. */
static void
tidy_layers(struct daemon *d)
{
    const char *ldir = jail_host_layers_dir(d->jh);
    char tdir[PATH_MAX];
    char **keep = NULL;
    size_t nkeep = 0;
    bool complete = true;

    if (!ldir || (size_t)snprintf(tdir, sizeof(tdir), "%s/" TEMPLATE_LAYERS_DIR,
                                  d->cfg.state_dir) >= sizeof(tdir))
        return;
    _cleanup_close_ int layersfd = open(ldir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int tfd = open(tdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char **tnames = NULL;
    size_t nt = 0;
    if (layersfd < 0 || !(keep = calloc(LAYERS_KEEP_MAX, sizeof(*keep))))
        goto done;
    if (tfd >= 0 && fd_dir_names(tfd, LAYERS_KEEP_MAX, &tnames, &nt) < 0)
        complete = false;
    for (size_t i = 0; i < nt; i++) {
        if (tnames[i][0] == '.')
            continue;
        _cleanup_close_ int nfd =
                openat(tfd, tnames[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char **lnames = NULL;
        size_t nl = 0;
        if (nfd < 0) {
            complete = complete && errno == ENOTDIR; /* a file: no layers in it */
            continue;
        }
        if (fd_dir_names(nfd, LAYERS_KEEP_MAX, &lnames, &nl) < 0) {
            complete = false;
            continue;
        }
        for (size_t k = 0; k < nl; k++) {
            char link[PATH_MAX], name[JAIL_LAYER_NAME_MAX + 1];
            struct stat st;
            if (strncmp(lnames[k], "layer-", 6) != 0)
                continue;
            _cleanup_close_ int lfd =
                    openat(nfd, lnames[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (lfd < 0 || fstatat(lfd, "fs", &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            name[0] = '\0';
            if (S_ISDIR(st.st_mode)) {
                int r = move_layer(lfd, tnames[i], lnames[k], layersfd, ldir, name);
                if (r < 0) {
                    log_warn("cannot move layer '%s/%s/%s/fs' to '%s': %s", tdir, tnames[i],
                             lnames[k], ldir, strerror(-r));
                    continue;
                }
                log_info("moved layer '%s/%s/%s/fs' to '%s/%s'", tdir, tnames[i], lnames[k], ldir,
                         name);
            } else if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlinkat(lfd, "fs", link, sizeof(link) - 1);
                size_t ln = strlen(ldir);
                if (n <= 0)
                    continue;
                link[n] = '\0';
                if (!strncmp(link, ldir, ln) && link[ln] == '/' &&
                    jail_layer_name_ok(link + ln + 1))
                    (void)snprintf(name, sizeof(name), "%s", link + ln + 1);
            }
            if (!name[0])
                continue;
            if (nkeep == LAYERS_KEEP_MAX)
                complete = false;
            else if (!(keep[nkeep] = strdup(name)))
                complete = false;
            else
                nkeep++;
        }
        fd_names_free(lnames, nl);
    }
    fd_names_free(tnames, nt);
    if (complete) {
        int n = jail_host_layers_collect(d->jh, (const char *const *)keep, nkeep);
        if (n > 0)
            log_info("collected %d layer(s) no template uses", n);
    }
done:
    for (size_t i = 0; keep && i < nkeep; i++)
        free(keep[i]);
    free(keep);
}

int
daemon_setup_jail_host(struct daemon *d)
{
    struct err err = {0};
    struct jail_host_config jc = {
            .binds = d->binds,
            .nbinds = d->nbinds,
            .loop = d->loop,
            .mode = d->cfg.isolation,
            .state_dir = d->cfg.state_dir,
            .cgroup = d->cfg.cgroup,
            .uid_lockfile = d->cfg.uid_lock,
            .uid_base = d->cfg.uid_base,
            .uid_slots = d->cfg.uid_slots,
            .root_bytes = d->cfg.root_bytes,
            .tmp_bytes = d->cfg.tmp_bytes,
            .shm_bytes = d->cfg.shm_bytes,
            .disk_bytes = d->cfg.isolation == JAIL_NONE ? 0 : d->cfg.disk_bytes,
            .disk_pool_bytes = d->cfg.disk_pool_bytes,
            .disk_floor_bytes = d->cfg.disk_floor_bytes,
    };
    int r = jail_host_new(&jc, &d->jh, &err);
    if (r < 0) {
        log_err("cannot set up sandboxing: %s", err.msg);
        return r;
    }
    exit_jail_host = d->jh;
    (void)atexit(free_jail_host_at_exit);
    (void)snprintf(d->cgroup_name, sizeof(d->cgroup_name), "%s", jail_host_cgroup_name(d->jh));
    if ((r = jailer_here_new(d->loop, d->jh, &d->jr)) < 0)
        return log_err_errno(r, "cannot set up sandboxing");
    r = jail_host_reclaim(d->jh, &err);
    if (r < 0)
        log_warn("reclaiming sandboxes of an earlier run failed: %s", err.msg);
    else if (r > 0)
        log_notice("reclaimed %d sandbox(es) left by an earlier run", r);
    tidy_layers(d);
    (void)jail_host_missing(d->jh, &d->missing);
    if (d->cfg.isolation != JAIL_NONE && !jail_host_oom_protect(d->jh))
        log_info("cannot lower oom_score_adj (no CAP_SYS_RESOURCE): sandbox inits are shielded "
                 "from the OOM killer only by their processes' higher score");
    if (d->cfg.isolation != JAIL_NS)
        log_warn("isolation mode '%s' was asked for: sandboxes are weaker than the default 'ns', "
                 "and abxd parses requests as root (privilege separation needs 'ns')",
                 jail_mode_name(d->cfg.isolation));
    else if (!d->cfg.privsep && !d->privsep_auto_off && geteuid() == 0)
        log_warn("--privsep 0 was asked for: abxd parses requests as root (docs/security.md)");
    if (jail_host_disk(d->jh))
        log_info("disk: %s; a sandbox may write %llu MiB unless it asks for another bound",
                 jail_host_disk(d->jh), (unsigned long long)(d->cfg.disk_bytes >> 20));
    else if (d->cfg.isolation != JAIL_NONE && !d->cfg.disk_bytes)
        log_warn("--disk-mb 0 was asked for: sandboxes' writable space is not bounded and is "
                 "on the state file system");
    if (d->cfg.isolation == JAIL_NONE)
        d->cfg.disk_bytes = 0;
    return 0;
}

int
daemon_setup_binds(struct daemon *d)
{
    static char shims[PATH_MAX + 16];
    d->nbinds = 0;
    if (!d->cfg.tools_dir[0])
        return 0;
    if (!realpath(d->cfg.tools_dir, d->tools_real))
        return log_err_errno(-errno, "tools directory '%s'", d->cfg.tools_dir);
    /* The network process writes the shims into toolbin/shims (split.c
     * makes it); whether a carrier gives any is its business. */
    (void)snprintf(shims, sizeof(shims), "%s/" SHIMS_SPLIT_DIR, d->cfg.state_dir);
    d->binds[0] = (struct jail_bind){.src = d->tools_real, .dst = TOOLS_MOUNT, .ro = true};
    d->binds[1] = (struct jail_bind){
            .src = shims, .dst = TOOLS_SHIM_MOUNT, .ro = true, .if_nonempty = true};
    d->nbinds = 2;
    return 0;
}

void
daemon_free_jail_host(struct daemon *d)
{
    d->jh = exit_jail_host = jail_host_free(d->jh);
}

int
daemon_setup_host_loop(struct daemon *d)
{
    if (loop_new(&d->loop) < 0)
        return log_err("out of memory"), -ENOMEM;
    return 0;
}
