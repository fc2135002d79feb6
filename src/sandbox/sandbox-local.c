/*
 * sandbox-local.c - the local Sandbox: a jail, a warm pool, and a process table.
 *
 * The implementation of sandbox.h on jailer.h (its ops tables are at the
 * end): the jail operations in this process or through the privileged
 * parent, whichever jailer abxd made. sandbox.h's neutral limits become
 * jail types here and in the jailers only. The file work itself is
 * fileops.h's.
 */
#include "sandbox/sandbox-local.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "sandbox/fileops.h"
#include "sandbox/jailer.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/vfs.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/timeutil.h"

#define POOL_RETRY_MS 1000 /* after a pool jail failed to start */

#define POOL_REFILL_MS 5 /* after handing one out: let the answer go first */

struct pooled {
    struct list link;
    struct local_host *host;
    struct jailer_jail *jail;
    bool ready;
};

struct local_host {
    struct sandbox_host pub;
    struct loop *loop;
    struct jailer *jr;
    struct sandbox_host_config cfg;
    struct list pool;
    uint32_t pool_ready, pool_creating;
    bool draining;
    struct loop_timer *retry;
    int null_fd;        /* stdin of processes given none */
    char path_env[512]; /* "PATH=..." every exec starts from */
    uint32_t fds;       /* charged by jails and processes, see sandbox.h */
    uint32_t fd_budget; /* 0 = no bound */
};

struct entry {
    struct list link;
    struct proc *p;
    pid_t pid;
    bool exited;
    unsigned fds; /* charged to the sandbox until the process ends */
};

struct pending {
    struct list link;
    uint64_t token;
    struct proc *p;
    sandbox_exec_fn cb;
    void *ud;
    unsigned fds;
};

enum sb_state { SB_CREATING, SB_READY, SB_DYING, SB_GONE };

struct local_sb {
    struct sandbox pub;
    struct local_host *host;
    struct jailer_jail *jail;
    enum sb_state state;
    bool was_ready;
    char **env;
    size_t nenv;
    struct list procs;
    size_t nrunning, nexited;
    struct list pending;
    size_t npending;         /* spawns init has not answered: they count as running */
    uint32_t fds;            /* what its processes hold, charged in sandbox_exec() */
    struct proc_rate unread; /* shared by its processes (proc.h) */
    uint64_t next_token;
    sandbox_ready_fn ready;
    void *ready_ud;
    uint64_t t0;
    uint64_t oom_seen;     /* the cgroup's OOM-kill count when last looked at */
    struct fileops *fo[2]; /* file work as "user" [0] and as root [1]; made on first use */
};

static const struct jailer_callbacks sandbox_jail_cb;
static const struct sandbox_ops local_ops;
static const struct sandbox_host_ops local_host_ops;
static void pool_refill(struct local_host *h);
static void local_free(struct sandbox *pub);
static void local_vfs_ids(const struct sandbox *pub, struct vfs_ids *ret);

#define LHOST(p)  container_of(p, struct local_host, pub)
#define CLHOST(p) const_container_of(p, struct local_host, pub)
#define LSB(p)    container_of(p, struct local_sb, pub)
#define CLSB(p)   const_container_of(p, struct local_sb, pub)

/* --- the neutral types of sandbox.h, as jail takes them --- */

_Static_assert(SANDBOX_MAX_LAYERS == JAIL_MAX_LAYERS, "sandbox_fs and jail_fs stack alike");

static struct jail_limits
to_jail_limits(const struct sandbox_limits *l)
{
    return (struct jail_limits){.memory_bytes = l->memory_bytes,
                                .cpu_millis = l->cpu_millis,
                                .pids = l->pids,
                                .disk_bytes = l->disk_bytes};
}

/* --- descriptors --- */

static bool
host_fds_fit(const struct local_host *h, unsigned n)
{
    return !h->fd_budget || h->fds + n <= h->fd_budget;
}

static void
host_fds_release(struct local_host *h, unsigned n)
{
    h->fds = n < h->fds ? h->fds - n : 0;
}

/* jailer_create() with its descriptors charged to the host. */
static int
host_jail_create(struct local_host *h, const char *id, const struct sandbox_limits *limits,
                 const struct sandbox_fs *fs, const struct jailer_callbacks *cb, void *ud,
                 struct jailer_jail **ret, struct err *err)
{
    struct jail_limits jl = to_jail_limits(limits);
    if (fs && fs->nlayers > JAIL_MAX_LAYERS)
        return err_set(err, E2BIG, "more than %d file system layers", JAIL_MAX_LAYERS);
    if (!host_fds_fit(h, SANDBOX_JAIL_FDS))
        return err_set(err, EMFILE,
                       "abxd has no descriptors left for another sandbox (%u of %u in use)", h->fds,
                       h->fd_budget);
    int r = jailer_create(h->jr, id, &jl, fs, cb, ud, ret, err);
    if (r == 0)
        h->fds += SANDBOX_JAIL_FDS;
    return r;
}

static void
host_jail_free(struct local_host *h, struct jailer_jail *j)
{
    if (!j)
        return;
    host_fds_release(h, SANDBOX_JAIL_FDS);
    jailer_free_jail(j);
}

/* A process's descriptors, charged in sandbox_exec(), come back when it
 * ends (or never started). */
static void
fds_release(struct local_sb *sb, unsigned n)
{
    sb->fds = n < sb->fds ? sb->fds - n : 0;
    host_fds_release(sb->host, n);
}

static void
local_host_set_fd_budget(struct sandbox_host *pub, uint32_t budget)
{
    struct local_host *h = LHOST(pub);
    h->fd_budget = budget;
}

static uint32_t
local_host_fds(const struct sandbox_host *pub)
{
    const struct local_host *h = CLHOST(pub);
    return h->fds;
}

static uint32_t
local_fd_limit(const struct sandbox_host *pub)
{
    const struct local_host *h = CLHOST(pub);
    if (!h->fd_budget)
        return SANDBOX_MAX_FDS;
    return MIN((uint32_t)SANDBOX_MAX_FDS, h->fd_budget / SANDBOX_FD_SHARE);
}

/* --- pool --- */

static void
pool_ready(struct jailer_jail *j, int r, const struct err *err, void *ud)
{
    struct pooled *pj = ud;
    struct local_host *h = pj->host;
    (void)err;

    h->pool_creating--;
    if (r < 0) {
        list_remove(&pj->link);
        host_jail_free(h, j);
        free(pj);
        if (!h->draining)
            (void)loop_timer_arm(h->retry, now_msec() + POOL_RETRY_MS);
        return;
    }
    pj->ready = true;
    h->pool_ready++;
    if (h->draining) {
        jailer_kill(j);
        return;
    }
    pool_refill(h);
}

static void
pool_gone(struct jailer_jail *j, void *ud)
{
    struct pooled *pj = ud;
    struct local_host *h = pj->host;

    if (pj->ready)
        h->pool_ready--;
    list_remove(&pj->link);
    host_jail_free(h, j);
    free(pj);
    pool_refill(h);
}

static const struct jailer_callbacks pool_cb = {
        .ready = pool_ready,
        .gone = pool_gone,
};

/* For a warm jail we could not hand out: free it once it is gone. ud is
 * the host. */
static void
discard_ready(struct jailer_jail *j, int r, const struct err *err, void *ud)
{
    (void)err;
    if (r < 0)
        host_jail_free(ud, j);
}

static void
discard_gone(struct jailer_jail *j, void *ud)
{
    host_jail_free(ud, j);
}

static const struct jailer_callbacks discard_cb = {
        .ready = discard_ready,
        .gone = discard_gone,
};

static void
pool_refill(struct local_host *h)
{
    /* One at a time: creation work stays off the request path. */
    if (h->draining || h->pool_creating > 0 || h->pool_ready + h->pool_creating >= h->cfg.pool_size)
        return;
    struct pooled *pj = calloc(1, sizeof(*pj));
    char id[21];
    if (!pj || rand_id(id, 20) < 0) {
        free(pj);
        return;
    }
    pj->host = h;
    struct err err = {0};
    if (host_jail_create(h, id, &h->cfg.pool_limits, NULL, &pool_cb, pj, &pj->jail, &err) < 0) {
        free(pj);
        (void)loop_timer_arm(h->retry, now_msec() + POOL_RETRY_MS);
        return;
    }
    h->pool_creating++;
    list_add_tail(&h->pool, &pj->link);
}

static void
on_retry(struct loop_timer *t, void *ud)
{
    (void)t;
    pool_refill(ud);
}

static struct jailer_jail *
pool_take(struct local_host *h)
{
    list_foreach (l, &h->pool) {
        struct pooled *pj = list_entry(l, struct pooled, link);
        if (!pj->ready || !jailer_is_ready(pj->jail))
            continue;
        struct jailer_jail *j = pj->jail;
        list_remove(&pj->link);
        h->pool_ready--;
        free(pj);
        return j;
    }
    return NULL;
}

int
sandbox_host_new(struct loop *loop, struct jailer *jr, const struct sandbox_host_config *c,
                 struct sandbox_host **ret)
{
    struct local_host *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->pub.ops = &local_host_ops;
    h->loop = loop;
    h->jr = jr;
    h->cfg = *c;
    h->cfg.path_prefix = NULL;
    if ((size_t)snprintf(h->path_env, sizeof(h->path_env), "PATH=%s%s" SANDBOX_DEFAULT_PATH,
                         c->path_prefix ? c->path_prefix : "",
                         c->path_prefix ? ":" : "") >= sizeof(h->path_env)) {
        free(h);
        return -ENAMETOOLONG;
    }
    list_init(&h->pool);
    h->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int r = h->null_fd < 0 ? -errno : 0;
    if (r >= 0)
        r = loop_timer_new(loop, on_retry, h, &h->retry);
    if (r < 0) {
        safe_close(h->null_fd);
        free(h);
        return r;
    }
    pool_refill(h);
    *ret = &h->pub;
    return 0;
}

static void
local_host_drain_pool(struct sandbox_host *pub)
{
    struct local_host *h = LHOST(pub);
    h->draining = true;
    loop_timer_disarm(h->retry);
    list_foreach_safe (l, tmp, &h->pool) {
        struct pooled *pj = list_entry(l, struct pooled, link);
        jailer_kill(pj->jail); /* pool_gone / pool_ready(error) free it */
    }
}

static void
local_host_free(struct sandbox_host *pub)
{
    struct local_host *h = LHOST(pub);
    list_foreach_safe (l, tmp, &h->pool) {
        struct pooled *pj = list_entry(l, struct pooled, link);
        list_remove(&pj->link);
        host_jail_free(h, pj->jail);
        free(pj);
    }
    loop_timer_free(h->retry);
    safe_close(h->null_fd);
    free(h);
}

static uint32_t
local_host_pool_ready(const struct sandbox_host *pub)
{
    const struct local_host *h = CLHOST(pub);
    return h->pool_ready;
}

static bool
local_host_has_layers(const struct sandbox_host *pub)
{
    return jailer_mode(CLHOST(pub)->jr) == JAIL_NS;
}

static const char *
local_host_state_dir(const struct sandbox_host *pub)
{
    return jailer_state_dir(CLHOST(pub)->jr);
}

static int
local_host_area_create(struct sandbox_host *pub, const char *name, uint64_t limit_bytes,
                       struct err *err)
{
    return jailer_area_create(LHOST(pub)->jr, name, limit_bytes, err);
}

static const char *
local_host_layers_dir(const struct sandbox_host *pub)
{
    return jailer_layers_dir(CLHOST(pub)->jr);
}

static int
local_host_layer_install(struct sandbox_host *pub, const char *area, const char *name, uid_t first,
                         sandbox_layer_fn done, void *ud, struct err *err)
{
    return jailer_layer_install(LHOST(pub)->jr, area, name, first, done, ud, err);
}

static int
local_host_area_usage(struct sandbox_host *pub, const char *name, uint64_t *ret_bytes)
{
    return jailer_area_usage(LHOST(pub)->jr, name, ret_bytes);
}

static void
local_host_area_destroy(struct sandbox_host *pub, const char *name)
{
    jailer_area_destroy(LHOST(pub)->jr, name);
}

/* --- sandbox lifecycle --- */

static void
fail_pending(struct local_sb *sb, int r, const char *why)
{
    while (!list_empty(&sb->pending)) {
        struct pending *pd = list_entry(sb->pending.next, struct pending, link);
        list_remove(&pd->link);
        sb->npending--;
        fds_release(sb, pd->fds);
        struct err err = {0};
        (void)err_set(&err, -r, "%s", why);
        proc_spawn_failed(pd->p);
        proc_free(pd->p);
        sandbox_exec_fn cb = pd->cb;
        void *ud = pd->ud;
        free(pd);
        cb(&sb->pub, NULL, r, &err, ud);
    }
}

static void
on_jail_ready(struct jailer_jail *j, int r, const struct err *err, void *ud)
{
    struct local_sb *sb = ud;
    (void)j;

    if (r < 0) {
        sb->state = SB_GONE;
        sb->ready(&sb->pub, r, err, sb->ready_ud);
        return;
    }
    sb->state = SB_READY;
    sb->was_ready = true;
    const struct jail_timings *jt = jailer_timings(j);
    sb->pub.timings.prepare_us = jt->prepare_us;
    sb->pub.timings.clone_us = jt->clone_us;
    sb->pub.timings.init_us = jt->init_us;
    sb->pub.timings.total_us = now_usec() - sb->t0;
    sb->ready(&sb->pub, 0, NULL, sb->ready_ud);
}

static void
deferred_ready(void *ud)
{
    struct local_sb *sb = ud;
    /* Even if it was killed meanwhile: the owner then also hears "gone". */
    sb->ready(&sb->pub, 0, NULL, sb->ready_ud);
}

static void
on_jail_gone(struct jailer_jail *j, void *ud)
{
    struct local_sb *sb = ud;
    (void)j;

    sb->state = SB_GONE;
    fail_pending(sb, -ESRCH, "sandbox is gone");
    list_foreach (l, &sb->procs) {
        struct entry *e = list_entry(l, struct entry, link);
        proc_abandon(e->p);
    }
    if (sb->pub.gone)
        sb->pub.gone(&sb->pub, sb->pub.gone_ud);
}

static struct entry *
find_entry(struct local_sb *sb, pid_t pid)
{
    list_foreach (l, &sb->procs) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->pid == pid)
            return e;
    }
    return NULL;
}

static void
drop_entry(struct local_sb *sb, struct entry *e)
{
    list_remove(&e->link);
    if (e->exited)
        sb->nexited--;
    else
        sb->nrunning--;
    fds_release(sb, e->fds);
    proc_free(e->p);
    free(e);
}

static void
on_spawned(struct jailer_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct local_sb *sb = ud;
    struct pending *pd = NULL;
    (void)j;

    list_foreach (l, &sb->pending) {
        struct pending *x = list_entry(l, struct pending, link);
        if (x->token == token) {
            pd = x;
            break;
        }
    }
    if (!pd)
        return; /* not ours (init is not trusted to echo tokens faithfully) */
    list_remove(&pd->link);
    sb->npending--;
    struct proc *p = pd->p;
    sandbox_exec_fn cb = pd->cb;
    void *cud = pd->ud;
    unsigned fds = pd->fds;
    free(pd);

    struct entry *old = r == 0 ? find_entry(sb, pid) : NULL;
    struct entry *e = r == 0 ? calloc(1, sizeof(*e)) : NULL;
    if (r == 0 && old && !old->exited) {
        /* Two live processes cannot share a pid: init is lying. */
        r = -EPROTO;
        step = "pid";
    }
    if (r < 0 || !e) {
        struct err err = {0};
        if (r == 0)
            r = -ENOMEM;
        if (r == -ENOENT || r == -ENOTDIR)
            (void)err_set(&err, ENOENT, "cannot start the process: %s failed: %s", step,
                          strerror(-r));
        else
            (void)err_setx(&err, -r, "cannot start the process: %s failed", step);
        free(e);
        fds_release(sb, fds);
        proc_spawn_failed(p);
        proc_free(p);
        cb(&sb->pub, NULL, r, &err, cud);
        return;
    }
    /* A recycled pid replaces the finished process that last had it. */
    if (old)
        drop_entry(sb, old);
    e->p = p;
    e->pid = pid;
    e->fds = fds;
    list_add_tail(&sb->procs, &e->link);
    sb->nrunning++;
    proc_started(p, pid);
    cb(&sb->pub, p, 0, NULL, cud);
}

static void
on_exited(struct jailer_jail *j, pid_t pid, int status, void *ud)
{
    struct local_sb *sb = ud;
    (void)j;
    struct entry *e = find_entry(sb, pid);
    if (e && !e->exited)
        proc_exited(e->p, status);
}

static const struct jailer_callbacks sandbox_jail_cb = {
        .ready = on_jail_ready,
        .spawned = on_spawned,
        .exited = on_exited,
        .gone = on_jail_gone,
};

static int
copy_env(struct local_sb *sb, const char *const *env)
{
    size_t n = 0;
    while (env && env[n])
        n++;
    sb->env = calloc(n + 1, sizeof(char *));
    if (!sb->env)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        sb->env[i] = strdup(env[i]);
        if (!sb->env[i])
            return -ENOMEM;
    }
    sb->nenv = n;
    return 0;
}

/* A sandbox of id as local_create() and local_adopt() begin it. */
static int
sb_new(struct local_host *h, const char *id, const struct sandbox_spec *spec,
       sandbox_ready_fn ready, void *ud, struct local_sb **ret, struct err *err)
{
    struct local_sb *sb = calloc(1, sizeof(*sb));
    if (!sb)
        return -ENOMEM;
    int r = sandbox_init(&sb->pub, &local_ops, id, &spec->limits, err);
    if (r < 0) {
        free(sb);
        return r;
    }
    sb->host = h;
    sb->t0 = now_usec();
    sb->ready = ready;
    sb->ready_ud = ud;
    proc_rate_init(&sb->unread, SANDBOX_UNREAD_RATE, SANDBOX_UNREAD_BURST);
    list_init(&sb->procs);
    list_init(&sb->pending);
    r = copy_env(sb, spec->env);
    if (r < 0) {
        local_free(&sb->pub);
        return r;
    }
    *ret = sb;
    return 0;
}

static int
local_create(struct sandbox_host *pub, const char *id, const struct sandbox_spec *spec,
             sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err)
{
    struct local_host *h = LHOST(pub);
    struct local_sb *sb = NULL;
    struct jailer_jail *j = NULL;
    int r = sb_new(h, id, spec, ready, ud, &sb, err);
    if (r < 0)
        return r;

    j = spec->fs ? NULL : pool_take(h);
    if (j) {
        bool same = !memcmp(&spec->limits, &h->cfg.pool_limits, sizeof(spec->limits));
        struct jail_limits jl = to_jail_limits(&spec->limits);
        r = same ? 0 : jailer_set_limits(j, &jl, err);
        if (r < 0) {
            jailer_set_callbacks(j, &discard_cb, h);
            jailer_kill(j);
            goto fail;
        }
        jailer_set_callbacks(j, &sandbox_jail_cb, sb);
        sb->jail = j;
        sb->state = SB_READY;
        sb->was_ready = true;
        sb->pub.timings.from_pool = true;
        sb->pub.timings.total_us = now_usec() - sb->t0;
        r = loop_defer(h->loop, deferred_ready, sb);
        if (r < 0) {
            /* Its callbacks must not reach sb, which is freed below. */
            jailer_set_callbacks(j, &discard_cb, h);
            jailer_kill(j);
            sb->jail = NULL;
            goto fail;
        }
    } else {
        sb->state = SB_CREATING;
        r = host_jail_create(h, id, &spec->limits, spec->fs, &sandbox_jail_cb, sb, &sb->jail, err);
        if (r < 0)
            goto fail;
    }
    /* Building the next warm jail costs the loop about a millisecond; do it
     * after the answer to this create has gone out, not before. */
    if (!loop_timer_armed(h->retry))
        (void)loop_timer_arm(h->retry, now_msec() + POOL_REFILL_MS);
    *ret = &sb->pub;
    return 0;
fail:
    local_free(&sb->pub);
    return r;
}

/* Takes over a sandbox an earlier process left (jailer.h): ready at once
 * when it is, its old processes not ours. */
static int
local_adopt(struct sandbox_host *pub, const char *orphan, const char *id,
            const struct sandbox_spec *spec, sandbox_ready_fn ready, void *ud, struct sandbox **ret,
            struct err *err)
{
    struct local_host *h = LHOST(pub);
    struct local_sb *sb = NULL;
    if (!host_fds_fit(h, SANDBOX_JAIL_FDS))
        return err_set(err, EMFILE,
                       "abxd has no descriptors left for another sandbox (%u of %u in use)", h->fds,
                       h->fd_budget);
    int r = sb_new(h, id, spec, ready, ud, &sb, err);
    if (r < 0)
        return r;
    r = jailer_adopt(h->jr, orphan, &sandbox_jail_cb, sb, &sb->jail, err);
    if (r < 0) {
        local_free(&sb->pub);
        return r;
    }
    h->fds += SANDBOX_JAIL_FDS;
    if (jailer_is_ready(sb->jail)) {
        sb->state = SB_READY;
        sb->was_ready = true;
        if ((r = loop_defer(h->loop, deferred_ready, sb)) < 0) {
            jailer_set_callbacks(sb->jail, &discard_cb, h);
            jailer_kill(sb->jail);
            sb->jail = NULL; /* discard_cb frees it and gives its descriptors back */
            local_free(&sb->pub);
            return r;
        }
    } else {
        sb->state = SB_CREATING;
    }
    *ret = &sb->pub;
    return 0;
}

static int
local_host_tree_empty(struct sandbox_host *pub, int dirfd, struct err *err)
{
    return jailer_tree_empty(LHOST(pub)->jr, dirfd, err);
}

static int
local_host_kill_orphan(struct sandbox_host *pub, const char *id, struct err *err)
{
    struct local_host *h = LHOST(pub);
    struct jailer_jail *j = NULL;
    int r = jailer_adopt(h->jr, id, &discard_cb, h, &j, err);
    if (r < 0)
        return r;
    h->fds += SANDBOX_JAIL_FDS; /* discard_cb gives them back with the jail */
    jailer_kill(j);
    return 0;
}

static int
local_host_orphans(struct sandbox_host *pub, sandbox_orphan_fn fn, void *ud, struct err *err)
{
    return jailer_orphans(LHOST(pub)->jr, fn, ud, err);
}

static int
local_set_record(struct sandbox *pub, const void *record, size_t len, struct err *err)
{
    struct local_sb *sb = LSB(pub);
    if (!sb->jail)
        return -ESRCH;
    return jailer_set_record(sb->jail, record, len, err);
}

static void
local_kill(struct sandbox *pub)
{
    struct local_sb *sb = LSB(pub);
    if (sb->state == SB_DYING || sb->state == SB_GONE)
        return;
    if (sb->state == SB_READY) {
        sb->state = SB_DYING;
        fail_pending(sb, -ESRCH, "sandbox is being killed");
    }
    for (int i = 0; i < 2; i++)
        fileops_shutdown(sb->fo[i]);
    if (sb->jail)
        jailer_kill(sb->jail);
}

static void
local_free(struct sandbox *pub)
{
    struct local_sb *sb = LSB(pub);
    fail_pending(sb, -ESRCH, "sandbox is gone");
    while (!list_empty(&sb->procs))
        drop_entry(sb, list_entry(sb->procs.next, struct entry, link));
    for (int i = 0; i < 2; i++) {
        if (!sb->fo[i])
            continue;
        fileops_shutdown(sb->fo[i]);
        sb->fo[i] = fileops_unref(sb->fo[i]);
        if (jailer_mode(sb->host->jr) != JAIL_NONE)
            host_fds_release(sb->host, SANDBOX_FILEOPS_FDS);
    }
    host_jail_free(sb->host, sb->jail);
    for (size_t i = 0; sb->env && i < sb->nenv; i++)
        free(sb->env[i]);
    free(sb->env);
    free(sb);
}

static bool
local_is_ready(const struct sandbox *pub)
{
    const struct local_sb *sb = CLSB(pub);
    return sb->state == SB_READY;
}

static int
local_set_limits(struct sandbox *pub, const struct sandbox_limits *l, struct err *err)
{
    struct local_sb *sb = LSB(pub);
    if (sb->state != SB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    struct jail_limits jl = to_jail_limits(l);
    return jailer_set_limits(sb->jail, &jl, err);
}

static int
local_stats(struct sandbox *pub, struct sandbox_stats *ret)
{
    struct local_sb *sb = LSB(pub);
    if (!sb->jail || sb->state != SB_READY) {
        memset(ret, 0, sizeof(*ret));
        return -ESRCH;
    }
    struct cgroup_stats st;
    int r = jailer_stats(sb->jail, &st);
    if (r < 0) {
        memset(ret, 0, sizeof(*ret));
        return r;
    }
    *ret = (struct sandbox_stats){.memory_bytes = st.memory_bytes,
                                  .memory_peak = st.memory_peak,
                                  .pids = st.pids,
                                  .cpu_usec = st.cpu_usec,
                                  .oom_kills = st.oom_kills};
    return 0;
}

static int
local_disk_usage(struct sandbox *pub, uint64_t *ret_bytes)
{
    struct local_sb *sb = LSB(pub);
    return sb->jail ? jailer_disk_usage(sb->jail, ret_bytes) : -ESRCH;
}

/* --- exec --- */

static int
owner_signal(void *ud, pid_t pid, int sig, bool group)
{
    struct local_sb *sb = ud;
    if (sb->state != SB_READY)
        return -ESRCH;
    return jailer_signal(sb->jail, pid, sig, group);
}

static bool
owner_oom_killed(void *ud)
{
    struct local_sb *sb = ud;
    struct cgroup_stats st;
    if (!sb->jail || jailer_stats(sb->jail, &st) < 0 || st.oom_kills <= sb->oom_seen)
        return false;
    sb->oom_seen = st.oom_kills;
    return true;
}

static void
owner_finished(void *ud, struct proc *p)
{
    struct local_sb *sb = ud;
    struct entry *e = find_entry(sb, proc_pid(p));
    if (!e || e->p != p || e->exited)
        return;
    e->exited = true;
    sb->nrunning--;
    sb->nexited++;
    /* Ended: its pipes are closed (proc.h). */
    fds_release(sb, e->fds);
    e->fds = 0;
    /* Keep the newest finished processes; forget the oldest. */
    list_foreach_safe (l, tmp, &sb->procs) {
        if (sb->nexited <= SANDBOX_KEEP_EXITED)
            break;
        struct entry *x = list_entry(l, struct entry, link);
        if (x->exited && x != e)
            drop_entry(sb, x);
    }
}

static const struct proc_owner sandbox_proc_owner = {
        .signal = owner_signal,
        .oom_killed = owner_oom_killed,
        .finished = owner_finished,
};

/* env: defaults, then the sandbox's, then the request's; later keys win. */
static int
build_env(struct local_sb *sb, const struct sandbox_exec *x, const char **out, size_t max)
{
    static char home_buf[PATH_MAX_LEN + 8];
    const bool ns = jailer_mode(sb->host->jr) == JAIL_NS;
    size_t n = 0;

    (void)snprintf(home_buf, sizeof(home_buf), "HOME=%s", jailer_home(sb->jail, x->root));
    const char *defaults[] = {sb->host->path_env, home_buf,
                              x->root && ns ? "USER=root" : "USER=user",
                              x->root && ns ? "LOGNAME=root" : "LOGNAME=user", "LANG=C.UTF-8"};
    const char *const *layers[3] = {defaults, (const char *const *)sb->env, x->env};
    size_t counts[3] = {ELEMENTSOF(defaults), sb->nenv, 0};
    while (x->env && x->env[counts[2]])
        counts[2]++;
    for (int L = 0; L < 3; L++) {
        for (size_t i = 0; i < counts[L]; i++) {
            const char *kv = layers[L][i];
            const char *eq = strchr(kv, '=');
            if (!eq || eq == kv)
                return -EINVAL;
            size_t kl = (size_t)(eq - kv) + 1;
            size_t k = 0;
            for (; k < n; k++)
                if (!strncmp(out[k], kv, kl))
                    break;
            if (k == n) {
                if (n >= max)
                    return -E2BIG;
                n++;
            }
            out[k] = kv;
        }
    }
    out[n] = NULL;
    return (int)n;
}

static int
resolve_cwd(struct local_sb *sb, const struct sandbox_exec *x, char *out, size_t n)
{
    const char *home = jailer_home(sb->jail, x->root);
    const bool ns = jailer_mode(sb->host->jr) == JAIL_NS;
    const char *cwd = x->cwd && *x->cwd ? x->cwd : NULL;
    int w;

    if (!cwd)
        w = snprintf(out, n, "%s", home);
    else if (cwd[0] != '/')
        w = snprintf(out, n, "%s/%s", home, cwd);
    else if (!ns && (!strcmp(cwd, "/home/user") || !strncmp(cwd, "/home/user/", 11)))
        w = snprintf(out, n, "%s%s", jailer_workspace_path(sb->jail), cwd + 10);
    else
        w = snprintf(out, n, "%s", cwd);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* A terminal from the sandbox's own devpts instance (jailer.h): the
 * master stays here, the other side becomes the process's stdin, stdout
 * and stderr and, through init, its controlling terminal. */
static int
open_pty(struct local_sb *sb, const struct sandbox_exec *x, int *ret_master, int *ret_tty,
         struct err *err)
{
    return jailer_open_pty(sb->jail, x->root, x->pty_rows ? x->pty_rows : 24,
                           x->pty_cols ? x->pty_cols : 80, ret_master, ret_tty, err);
}

static int
local_exec(struct sandbox *pub, const struct sandbox_exec *x, sandbox_exec_fn cb, void *ud,
           struct err *err)
{
    struct local_sb *sb = LSB(pub);
    int in[2] = {-EBADF, -EBADF}, out[2] = {-EBADF, -EBADF}, er[2] = {-EBADF, -EBADF};
    int tty = -EBADF; /* the terminal's process side, with x->pty */
    _cleanup_free_ const char **env = NULL;
    char cwd[PATH_MAX_LEN + 64];
    struct proc *p = NULL;
    struct pending *pd = NULL;
    struct proc_spec ps;
    struct jail_spawn js;
    int r;

    if (sb->state != SB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    if (!x->argv || !x->argv[0] || !x->argv[0][0])
        return err_set(err, EINVAL, "argv must name a program");
    /* Starting ones count: init answers spawns later, and a burst of
     * requests would otherwise all pass while none is running yet. */
    if (sb->nrunning + sb->npending >= SANDBOX_MAX_RUNNING)
        return err_set(err, EAGAIN, "sandbox '%s' already runs %d processes, the most it may",
                       sb->pub.id, SANDBOX_MAX_RUNNING);
    /* What the process will hold here until it ends: stdout, stderr and
     * stdin's pipe, or a terminal's master and its duplicate. */
    bool want_stdin = x->stdin_len > 0 || x->stdin_open || x->pty;
    unsigned fds = x->pty ? 2 : want_stdin ? 3 : 2;
    uint32_t fd_limit = local_fd_limit(&sb->host->pub);
    if (sb->fds + fds > fd_limit)
        return err_set(err, EAGAIN,
                       "sandbox '%s' has %u of its %u descriptors in abxd in use (a process "
                       "holds 2 or 3)",
                       sb->pub.id, sb->fds, fd_limit);
    if (!host_fds_fit(sb->host, fds))
        return err_set(err, EMFILE,
                       "abxd has no descriptors left for another process (%u of %u in use)",
                       sb->host->fds, sb->host->fd_budget);
    env = calloc(SANDBOX_ENV_MAX + 1, sizeof(char *));
    if (!env)
        return -ENOMEM;
    r = build_env(sb, x, env, SANDBOX_ENV_MAX);
    if (r == -E2BIG)
        return err_set(err, E2BIG, "more than %d environment variables", SANDBOX_ENV_MAX);
    if (r < 0)
        return err_set(err, EINVAL, "environment entries must look like KEY=VALUE");
    r = resolve_cwd(sb, x, cwd, sizeof(cwd));
    if (r < 0)
        return err_set(err, ENAMETOOLONG, "cwd is too long");

    /* A process given no stdin reads /dev/null: no pipe to make and watch. */
    if (x->pty) {
        r = open_pty(sb, x, &out[0], &tty, err);
        if (r < 0)
            goto fail;
        in[1] = fcntl(out[0], F_DUPFD_CLOEXEC, 3);
        if (in[1] < 0) {
            r = err_setx(err, errno, "cannot duplicate the terminal");
            goto fail;
        }
    } else if ((want_stdin && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 ||
               pipe2(er, O_CLOEXEC) < 0) {
        r = err_setx(err, errno, "cannot create pipes");
        goto fail;
    }
    ps = (struct proc_spec){
            .argv = x->argv,
            .cwd = cwd,
            .root = x->root,
            .pty = x->pty,
            .background = x->background,
            .timeout_ms = x->timeout_ms,
            .idle_timeout_ms = x->idle_timeout_ms,
            .stdin_open = x->stdin_open,
            .stdin_data = x->stdin_data,
            .stdin_len = x->stdin_len,
            .unread_shared = &sb->unread,
    };
    r = proc_new(sb->host->loop, &ps, in[1], out[0], er[0], &sandbox_proc_owner, sb, &p);
    in[1] = out[0] = er[0] = -EBADF; /* owned by p (or closed) now */
    if (r < 0) {
        r = err_setx(err, -r, "cannot set up the process");
        goto fail;
    }
    pd = calloc(1, sizeof(*pd));
    if (!pd) {
        r = -ENOMEM;
        goto fail;
    }
    pd->token = ++sb->next_token;
    js = (struct jail_spawn){
            .root = x->root,
            .cwd = cwd,
            .argv = x->argv,
            .env = env,
            .fds = {want_stdin ? in[0] : sb->host->null_fd, out[1], er[1]},
    };
    if (x->pty)
        js.fds[0] = js.fds[1] = js.fds[2] = tty;
    r = jailer_spawn(sb->jail, pd->token, &js, err);
    if (r < 0)
        goto fail;
    safe_close(in[0]);
    safe_close(out[1]);
    safe_close(er[1]);
    safe_close(tty);
    pd->p = p;
    pd->cb = cb;
    pd->ud = ud;
    pd->fds = fds;
    list_add_tail(&sb->pending, &pd->link);
    sb->npending++;
    sb->fds += fds;
    sb->host->fds += fds;
    return 0;
fail:
    free(pd);
    if (p) {
        proc_spawn_failed(p);
        proc_free(p);
    }
    for (int i = 0; i < 2; i++) {
        safe_close(in[i]);
        safe_close(out[i]);
        safe_close(er[i]);
    }
    safe_close(tty);
    return r;
}

static struct proc *
local_proc_find(struct sandbox *pub, pid_t pid)
{
    struct local_sb *sb = LSB(pub);
    struct entry *e = find_entry(sb, pid);
    return e ? e->p : NULL;
}

static size_t
local_proc_count(const struct sandbox *pub, bool running_only)
{
    const struct local_sb *sb = CLSB(pub);
    return running_only ? sb->nrunning : sb->nrunning + sb->nexited;
}

static struct proc *
local_proc_next(struct sandbox *pub, struct proc *prev)
{
    struct local_sb *sb = LSB(pub);
    struct list *l = sb->procs.next;
    if (prev) {
        struct entry *e = find_entry(sb, proc_pid(prev));
        if (!e)
            return NULL;
        l = e->link.next;
    }
    return l == &sb->procs ? NULL : list_entry(l, struct entry, link)->p;
}

/* --- files --- */

static int
local_root_fd(const struct sandbox *pub)
{
    const struct local_sb *sb = CLSB(pub);
    return sb->jail ? jailer_workspace_fd(sb->jail) : -EBADF;
}

static int
local_view_fd(const struct sandbox *pub)
{
    const struct local_sb *sb = CLSB(pub);
    return sb->state == SB_READY ? jailer_view_fd(sb->jail) : -ESRCH;
}

static bool
local_has_view(const struct sandbox *pub)
{
    const struct local_sb *sb = CLSB(pub);
    return sb->state == SB_READY && jailer_has_view(sb->jail);
}

static int
make_fileops(struct local_sb *sb, bool as_root, struct fileops **ret, struct err *err)
{
    char label[96];
    (void)snprintf(label, sizeof(label), "sandbox '%s'", sb->pub.id);
    if (jailer_mode(sb->host->jr) == JAIL_NONE)
        return jailer_fileops(sb->jail, as_root, label, ret, err); /* in-process, no helper */
    if (!host_fds_fit(sb->host, SANDBOX_FILEOPS_FDS))
        return err_set(err, EMFILE,
                       "abxd has no descriptors left for file work in %s (%u of %u in use)", label,
                       sb->host->fds, sb->host->fd_budget);
    int r = jailer_fileops(sb->jail, as_root, label, ret, err);
    if (r == 0)
        sb->host->fds += SANDBOX_FILEOPS_FDS; /* the most it will hold, back in sandbox_free() */
    return r;
}

static int
local_fileops(struct sandbox *pub, bool as_root, struct fileops **ret, struct err *err)
{
    struct local_sb *sb = LSB(pub);
    if (sb->state != SB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    struct fileops **slot = &sb->fo[as_root ? 1 : 0];
    if (!*slot) {
        int r = make_fileops(sb, as_root, slot, err);
        if (r < 0)
            return r;
    }
    *ret = fileops_ref(*slot);
    return 0;
}

static int
local_freeze(struct sandbox *pub, bool frozen, struct err *err)
{
    struct local_sb *sb = LSB(pub);
    if (sb->state != SB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    return jailer_freeze(sb->jail, frozen, err);
}

static void
local_vfs_ids(const struct sandbox *pub, struct vfs_ids *ret)
{
    jailer_vfs_ids(CLSB(pub)->jail, ret);
}

static int
local_netns_socket(struct sandbox *pub, int family, int type, struct err *err)
{
    struct local_sb *sb = LSB(pub);
    char label[96];
    if (sb->state != SB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", pub->id);
    (void)snprintf(label, sizeof(label), "sandbox '%s'", pub->id);
    return jailer_netns_socket(sb->jail, family, type, label, err);
}

static uint64_t
local_max_file_bytes(const struct sandbox *pub)
{
    return CLSB(pub)->host->cfg.max_file_bytes;
}

static const struct sandbox_ops local_ops = {
        .free = local_free,
        .kill = local_kill,
        .is_ready = local_is_ready,
        .exec = local_exec,
        .proc_find = local_proc_find,
        .proc_count = local_proc_count,
        .proc_next = local_proc_next,
        .set_limits = local_set_limits,
        .stats = local_stats,
        .disk_usage = local_disk_usage,
        .freeze = local_freeze,
        .vfs_ids = local_vfs_ids,
        .netns_socket = local_netns_socket,
        .view_fd = local_view_fd,
        .has_view = local_has_view,
        .root_fd = local_root_fd,
        .fileops = local_fileops,
        .max_file_bytes = local_max_file_bytes,
        .set_record = local_set_record,
};

static const struct sandbox_host_ops local_host_ops = {
        .name = "local",
        .create = local_create,
        .drain_pool = local_host_drain_pool,
        .free = local_host_free,
        .pool_ready = local_host_pool_ready,
        .set_fd_budget = local_host_set_fd_budget,
        .fds = local_host_fds,
        .fd_limit = local_fd_limit,
        .has_layers = local_host_has_layers,
        .state_dir = local_host_state_dir,
        .area_create = local_host_area_create,
        .layers_dir = local_host_layers_dir,
        .layer_install = local_host_layer_install,
        .area_usage = local_host_area_usage,
        .area_destroy = local_host_area_destroy,
        .orphans = local_host_orphans,
        .adopt = local_adopt,
        .kill_orphan = local_host_kill_orphan,
        .tree_empty = local_host_tree_empty,
};
