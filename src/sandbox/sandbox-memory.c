/*
 * sandbox-memory.c - the memory Sandbox (sandbox-memory.h), for unit tests.
 *
 * One loop timer per host drives everything asynchronous: each time it
 * fires it does one pending step (a sandbox becomes ready or fails, a
 * process starts, prints and exits, a killed sandbox goes), then looks
 * again from the start, so a callback may free what it was given.
 */
#include "sandbox/sandbox-memory.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/fileops.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/vfs.h"
#include "util/fd.h"
#include "util/list.h"
#include "util/timeutil.h"

#define MEMORY_STEPS 64 /* steps per timer run before the loop gets a turn */

enum mp_state { MP_STARTING, MP_RUNNING, MP_EXITED };

struct mproc {
    struct list link;
    struct memory_sb *sb;
    struct proc *p;
    pid_t pid;
    enum mp_state state;
    bool hang, exit_due, finished;
    int status;      /* wait(2) format, once exit_due */
    int start_error; /* < 0: the start fails */
    int in_rd, out_wr, err_wr;
    char *out, *err;
    size_t out_len, err_len;
    sandbox_exec_fn cb;
    void *ud;
};

enum msb_state { MSB_CREATING, MSB_READY, MSB_DYING, MSB_GONE };

struct memory_host {
    struct sandbox_host pub;
    struct loop *loop;
    struct sandbox_memory_config cfg;
    struct loop_timer *tick;
    struct list sandboxes;
    int fail_creates;
    unsigned created, live, execs;
};

struct memory_sb {
    struct sandbox pub;
    struct list link;
    struct memory_host *host;
    enum msb_state state;
    int create_error; /* < 0: becomes gone instead of ready */
    bool frozen;
    uint64_t t0;
    sandbox_ready_fn ready;
    void *ready_ud;
    struct list procs;
    size_t nrunning, nexited;
    pid_t next_pid;
    int ws_fd;
    struct fileops *fo[2];
    struct proc_rate unread;
};

static const struct sandbox_ops memory_ops;
static const struct sandbox_host_ops memory_host_ops;

#define MHOST(p)  container_of(p, struct memory_host, pub)
#define CMHOST(p) const_container_of(p, struct memory_host, pub)
#define MSB(p)    container_of(p, struct memory_sb, pub)
#define CMSB(p)   const_container_of(p, struct memory_sb, pub)

static void
kick(struct memory_host *h)
{
    if (!loop_timer_armed(h->tick))
        (void)loop_timer_arm(h->tick, now_msec());
}

/* --- processes --- */

static void
mproc_close(struct mproc *m)
{
    m->in_rd = safe_close(m->in_rd);
    m->out_wr = safe_close(m->out_wr);
    m->err_wr = safe_close(m->err_wr);
}

static void
mproc_free(struct mproc *m)
{
    list_remove(&m->link);
    if (m->state == MP_EXITED)
        m->sb->nexited--;
    else if (m->state == MP_RUNNING)
        m->sb->nrunning--;
    mproc_close(m);
    proc_free(m->p);
    free(m->out);
    free(m->err);
    free(m);
}

static struct mproc *
find_pid(struct memory_sb *sb, pid_t pid)
{
    list_foreach (l, &sb->procs) {
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->state != MP_STARTING && m->pid == pid)
            return m;
    }
    return NULL;
}

static int
owner_signal(void *ud, pid_t pid, int sig, bool group)
{
    struct memory_sb *sb = ud;
    (void)group;
    struct mproc *m = find_pid(sb, pid);
    if (!m || m->state != MP_RUNNING || sb->state != MSB_READY)
        return -ESRCH;
    if (m->exit_due || sig == 0 || sig == SIGWINCH || sig == SIGCHLD || sig == SIGCONT ||
        sig == SIGURG)
        return 0;
    /* Every other signal kills it (nothing here handles any). */
    m->exit_due = true;
    m->status = W_EXITCODE(0, sig);
    kick(sb->host);
    return 0;
}

static bool
owner_oom_killed(void *ud)
{
    (void)ud;
    return false;
}

static void
owner_finished(void *ud, struct proc *p)
{
    struct memory_sb *sb = ud;
    list_foreach (l, &sb->procs) {
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->p == p && m->state == MP_RUNNING) {
            m->state = MP_EXITED;
            sb->nrunning--;
            sb->nexited++;
            mproc_close(m);
            return;
        }
    }
}

static const struct proc_owner memory_proc_owner = {
        .signal = owner_signal,
        .oom_killed = owner_oom_killed,
        .finished = owner_finished,
};

/* Forgets the oldest finished processes past SANDBOX_KEEP_EXITED (done at
 * exec, never from a proc callback, which may run inside a list walk). */
static void
trim_exited(struct memory_sb *sb)
{
    list_foreach_safe (l, tmp, &sb->procs) {
        if (sb->nexited < SANDBOX_KEEP_EXITED)
            break;
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->state == MP_EXITED)
            mproc_free(m);
    }
}

static int
copy_out(char **dst, size_t *dst_len, const char *src, size_t len)
{
    *dst_len = 0;
    if (!len)
        return 0;
    if (len > SANDBOX_MEMORY_OUTPUT_MAX)
        return -EFBIG;
    *dst = malloc(len);
    if (!*dst)
        return -ENOMEM;
    memcpy(*dst, src, len);
    *dst_len = len;
    return 0;
}

static int
memory_exec(struct sandbox *pub, const struct sandbox_exec *x, sandbox_exec_fn cb, void *ud,
            struct err *err)
{
    struct memory_sb *sb = MSB(pub);
    struct sandbox_memory_run run = {0};
    int in[2] = {-EBADF, -EBADF}, out[2] = {-EBADF, -EBADF}, er[2] = {-EBADF, -EBADF};
    struct mproc *m = NULL;
    bool want_stdin = x->stdin_len > 0 || x->stdin_open;
    struct proc_spec ps = {
            .argv = x->argv,
            .cwd = x->cwd && *x->cwd ? x->cwd : "/home/user",
            .root = x->root,
            .background = x->background,
            .timeout_ms = x->timeout_ms,
            .idle_timeout_ms = x->idle_timeout_ms,
            .stdin_open = x->stdin_open,
            .stdin_data = x->stdin_data,
            .stdin_len = x->stdin_len,
            .unread_shared = &sb->unread,
    };
    int r;

    if (sb->state != MSB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    if (!x->argv || !x->argv[0] || !x->argv[0][0])
        return err_set(err, EINVAL, "argv must name a program");
    if (x->pty)
        return err_set(err, EOPNOTSUPP, "terminals need a sandbox with its own /dev");
    size_t starting = 0;
    list_foreach (l, &sb->procs)
        starting += list_entry(l, struct mproc, link)->state == MP_STARTING;
    if (sb->nrunning + starting >= SANDBOX_MAX_RUNNING)
        return err_set(err, EAGAIN, "sandbox '%s' already runs %d processes, the most it may",
                       sb->pub.id, SANDBOX_MAX_RUNNING);
    trim_exited(sb);
    if (sb->host->cfg.run)
        sb->host->cfg.run(sb->host->cfg.run_ud, pub, x, &run);

    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->sb = sb;
    m->in_rd = m->out_wr = m->err_wr = -EBADF;
    m->hang = run.hang;
    m->start_error = run.start_error < 0 ? run.start_error : 0;
    m->status =
            run.signal > 0 ? W_EXITCODE(0, run.signal & 0x7f) : W_EXITCODE(run.exit_code & 0xff, 0);
    m->cb = cb;
    m->ud = ud;
    r = copy_out(&m->out, &m->out_len, run.out, run.out_len);
    if (r == 0)
        r = copy_out(&m->err, &m->err_len, run.err, run.err_len);
    if (r < 0) {
        (void)err_set(err, -r, "the scripted output is too large (at most %d bytes a stream)",
                      SANDBOX_MEMORY_OUTPUT_MAX);
        goto fail;
    }
    if ((want_stdin && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 ||
        pipe2(er, O_CLOEXEC | O_NONBLOCK) < 0) {
        r = err_setx(err, errno, "cannot create pipes");
        goto fail;
    }
    r = proc_new(sb->host->loop, &ps, in[1], out[0], er[0], &memory_proc_owner, sb, &m->p);
    in[1] = out[0] = er[0] = -EBADF; /* owned by the proc (or closed) now */
    if (r < 0) {
        r = err_setx(err, -r, "cannot set up the process");
        goto fail;
    }
    m->in_rd = in[0];
    m->out_wr = out[1];
    m->err_wr = er[1];
    m->state = MP_STARTING;
    list_add_tail(&sb->procs, &m->link);
    sb->host->execs++;
    kick(sb->host);
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        safe_close(in[i]);
        safe_close(out[i]);
        safe_close(er[i]);
    }
    if (m->p) {
        proc_spawn_failed(m->p);
        proc_free(m->p);
    }
    free(m->out);
    free(m->err);
    free(m);
    return r;
}

/* The start answer: like init's, on a later turn. */
static void
start_one(struct mproc *m)
{
    struct memory_sb *sb = m->sb;
    sandbox_exec_fn cb = m->cb;
    void *ud = m->ud;

    if (m->start_error < 0) {
        struct err err = {0};
        int r = m->start_error;
        (void)err_setx(&err, -r, "cannot start the process: execve failed");
        proc_spawn_failed(m->p);
        mproc_free(m);
        cb(&sb->pub, NULL, r, &err, ud);
        return;
    }
    m->state = MP_RUNNING;
    m->pid = ++sb->next_pid;
    m->exit_due = !m->hang;
    sb->nrunning++;
    /* It prints at once what it was scripted to; an empty pipe holds
     * SANDBOX_MEMORY_OUTPUT_MAX, so the writes are whole. */
    if (m->out_len)
        (void)!write(m->out_wr, m->out, m->out_len);
    if (m->err_len)
        (void)!write(m->err_wr, m->err, m->err_len);
    proc_started(m->p, m->pid);
    cb(&sb->pub, m->p, 0, NULL, ud);
}

/* The process exits (its output is in the pipes already). */
static void
exit_one(struct mproc *m)
{
    m->exit_due = false;
    mproc_close(m);
    proc_exited(m->p, m->status);
}

static void
fail_starting(struct memory_sb *sb)
{
    list_foreach (l, &sb->procs) {
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->state == MP_STARTING) {
            m->start_error = -ESRCH;
            start_one(m);
            return; /* once per step: the callback may free sb */
        }
    }
}

/* --- the steps --- */

/* Does one pending step of sb: true if it did one (sb may be gone). */
static bool
step_sandbox(struct memory_sb *sb)
{
    if (sb->state == MSB_CREATING) {
        if (sb->create_error < 0) {
            struct err err = {0};
            (void)err_setx(&err, -sb->create_error, "cannot create sandbox '%s'", sb->pub.id);
            sb->state = MSB_GONE;
            sb->ready(&sb->pub, sb->create_error, &err, sb->ready_ud);
            return true;
        }
        sb->state = MSB_READY;
        sb->pub.timings.total_us = now_usec() - sb->t0;
        sb->ready(&sb->pub, 0, NULL, sb->ready_ud);
        return true;
    }
    if (sb->state == MSB_DYING) {
        list_foreach (l, &sb->procs) {
            struct mproc *m = list_entry(l, struct mproc, link);
            if (m->state == MP_STARTING) {
                fail_starting(sb);
                return true;
            }
        }
        sb->state = MSB_GONE;
        list_foreach_safe (l, tmp, &sb->procs) {
            struct mproc *m = list_entry(l, struct mproc, link);
            if (m->state == MP_RUNNING) {
                mproc_close(m);
                proc_abandon(m->p);
            }
        }
        if (sb->pub.gone)
            sb->pub.gone(&sb->pub, sb->pub.gone_ud);
        return true;
    }
    if (sb->state != MSB_READY)
        return false;
    list_foreach (l, &sb->procs) {
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->state == MP_STARTING) {
            start_one(m);
            return true;
        }
        if (m->state == MP_RUNNING && m->exit_due) {
            exit_one(m);
            return true;
        }
    }
    return false;
}

static void
on_tick(struct loop_timer *t, void *ud)
{
    struct memory_host *h = ud;
    (void)t;
    for (int n = 0; n < MEMORY_STEPS; n++) {
        bool did = false;
        list_foreach (l, &h->sandboxes) {
            if (step_sandbox(list_entry(l, struct memory_sb, link))) {
                did = true;
                break; /* the list may have changed */
            }
        }
        if (!did)
            return;
    }
    kick(h);
}

/* --- host --- */

static int
memory_create(struct sandbox_host *pub, const char *id, const struct sandbox_spec *spec,
              sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err)
{
    struct memory_host *h = MHOST(pub);
    int r;

    if (spec->fs && spec->fs->nlayers > SANDBOX_MAX_LAYERS)
        return err_set(err, E2BIG, "more than %d file system layers", SANDBOX_MAX_LAYERS);
    struct memory_sb *sb = calloc(1, sizeof(*sb));
    if (!sb)
        return -ENOMEM;
    r = sandbox_init(&sb->pub, &memory_ops, id, &spec->limits, err);
    if (r < 0) {
        free(sb);
        return r;
    }
    sb->host = h;
    sb->ready = ready;
    sb->ready_ud = ud;
    sb->t0 = now_usec();
    sb->create_error = h->fail_creates;
    sb->ws_fd = -EBADF;
    list_init(&sb->procs);
    proc_rate_init(&sb->unread, SANDBOX_UNREAD_RATE, SANDBOX_UNREAD_BURST);
    if (h->cfg.dir_fd >= 0) {
        if (mkdirat(h->cfg.dir_fd, id, 0700) < 0 && errno != EEXIST) {
            r = err_setx(err, errno, "cannot make the workspace of sandbox '%s'", id);
            free(sb);
            return r;
        }
        sb->ws_fd = openat(h->cfg.dir_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->ws_fd < 0) {
            r = err_setx(err, errno, "cannot open the workspace of sandbox '%s'", id);
            free(sb);
            return r;
        }
    }
    list_add_tail(&h->sandboxes, &sb->link);
    h->created++;
    h->live++;
    kick(h);
    *ret = &sb->pub;
    return 0;
}

static void
memory_host_free(struct sandbox_host *pub)
{
    struct memory_host *h = MHOST(pub);
    /* Sandboxes are their owners' to free first; any left lose their host
     * (and may then only be freed). */
    list_foreach_safe (l, tmp, &h->sandboxes) {
        struct memory_sb *sb = list_entry(l, struct memory_sb, link);
        list_remove(l);
        list_init(l);
        sb->host = NULL;
    }
    loop_timer_free(h->tick);
    free(h);
}

static uint64_t
memory_max_file_bytes(const struct sandbox *pub)
{
    uint64_t max = CMSB(pub)->host->cfg.max_file_bytes;
    return max ? max : UINT64_MAX;
}

int
sandbox_memory_host_new(struct loop *loop, const struct sandbox_memory_config *c,
                        struct sandbox_host **ret)
{
    struct memory_host *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->pub.ops = &memory_host_ops;
    h->loop = loop;
    h->cfg = *c;
    list_init(&h->sandboxes);
    int r = loop_timer_new(loop, on_tick, h, &h->tick);
    if (r < 0) {
        free(h);
        return r;
    }
    *ret = &h->pub;
    return 0;
}

void
sandbox_memory_fail_creates(struct sandbox_host *h, int r)
{
    MHOST(h)->fail_creates = r < 0 ? r : 0;
}

unsigned
sandbox_memory_created(const struct sandbox_host *h)
{
    return CMHOST(h)->created;
}

unsigned
sandbox_memory_live(const struct sandbox_host *h)
{
    return CMHOST(h)->live;
}

unsigned
sandbox_memory_execs(const struct sandbox_host *h)
{
    return CMHOST(h)->execs;
}

int
sandbox_memory_ws_fd(const struct sandbox *sb)
{
    return CMSB(sb)->ws_fd;
}

bool
sandbox_memory_frozen(const struct sandbox *sb)
{
    return CMSB(sb)->frozen;
}

/* --- one sandbox --- */

static void
memory_kill(struct sandbox *pub)
{
    struct memory_sb *sb = MSB(pub);
    if (sb->state == MSB_CREATING && !sb->create_error)
        sb->create_error = -ESRCH; /* ready then fails, as a killed jail's does */
    if (sb->state != MSB_READY)
        return;
    sb->state = MSB_DYING;
    sb->frozen = false;
    for (int i = 0; i < 2; i++)
        fileops_shutdown(sb->fo[i]);
    kick(sb->host);
}

static void
memory_free(struct sandbox *pub)
{
    struct memory_sb *sb = MSB(pub);
    while (!list_empty(&sb->procs)) {
        struct mproc *m = list_entry(sb->procs.next, struct mproc, link);
        if (m->state == MP_STARTING)
            proc_spawn_failed(m->p);
        mproc_free(m);
    }
    for (int i = 0; i < 2; i++) {
        fileops_shutdown(sb->fo[i]);
        sb->fo[i] = fileops_unref(sb->fo[i]);
    }
    list_remove(&sb->link);
    if (sb->host)
        sb->host->live--;
    safe_close(sb->ws_fd);
    free(sb);
}

static bool
memory_is_ready(const struct sandbox *pub)
{
    return CMSB(pub)->state == MSB_READY;
}

static int
memory_set_limits(struct sandbox *pub, const struct sandbox_limits *l, struct err *err)
{
    struct memory_sb *sb = MSB(pub);
    (void)l; /* recorded by sandbox.c, never enforced */
    if (sb->state != MSB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    return 0;
}

static int
memory_stats(struct sandbox *pub, struct sandbox_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (MSB(pub)->state != MSB_READY)
        return -ESRCH;
    ret->pids = MSB(pub)->nrunning;
    return 0;
}

static int
memory_freeze(struct sandbox *pub, bool frozen, struct err *err)
{
    struct memory_sb *sb = MSB(pub);
    if (sb->state != MSB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    sb->frozen = frozen;
    return 0;
}

static struct proc *
memory_proc_find(struct sandbox *pub, pid_t pid)
{
    struct mproc *m = find_pid(MSB(pub), pid);
    return m ? m->p : NULL;
}

static size_t
memory_proc_count(const struct sandbox *pub, bool running_only)
{
    const struct memory_sb *sb = CMSB(pub);
    return running_only ? sb->nrunning : sb->nrunning + sb->nexited;
}

static struct proc *
memory_proc_next(struct sandbox *pub, struct proc *prev)
{
    struct memory_sb *sb = MSB(pub);
    bool after = !prev;
    list_foreach (l, &sb->procs) {
        struct mproc *m = list_entry(l, struct mproc, link);
        if (m->state == MP_STARTING)
            continue;
        if (after)
            return m->p;
        after = m->p == prev;
    }
    return NULL;
}

static void
memory_vfs_ids(const struct sandbox *pub, struct vfs_ids *ret)
{
    (void)pub;
    *ret = (struct vfs_ids){.root_uid = getuid(),
                            .root_gid = getgid(),
                            .user_uid = getuid(),
                            .user_gid = getgid(),
                            .range_first = getuid(),
                            .range_len = 1};
}

static int
memory_root_fd(const struct sandbox *pub)
{
    return CMSB(pub)->ws_fd;
}

static int
memory_fileops(struct sandbox *pub, bool as_root, struct fileops **ret, struct err *err)
{
    struct memory_sb *sb = MSB(pub);
    if (sb->state != MSB_READY)
        return err_set(err, ESRCH, "sandbox '%s' is not running", sb->pub.id);
    if (sb->ws_fd < 0)
        return err_set(err, EOPNOTSUPP, "sandbox '%s' has no files (no directory given)",
                       sb->pub.id);
    struct fileops **slot = &sb->fo[as_root ? 1 : 0];
    if (!*slot) {
        struct vfs_ids ids;
        memory_vfs_ids(pub, &ids);
        int r = fileops_new_direct(sb->ws_fd, -1, &ids, getuid(), getgid(), as_root, slot);
        if (r < 0)
            return err_setx(err, -r, "cannot start file work in sandbox '%s'", sb->pub.id);
    }
    *ret = fileops_ref(*slot);
    return 0;
}

static const struct sandbox_ops memory_ops = {
        .free = memory_free,
        .kill = memory_kill,
        .is_ready = memory_is_ready,
        .exec = memory_exec,
        .proc_find = memory_proc_find,
        .proc_count = memory_proc_count,
        .proc_next = memory_proc_next,
        .set_limits = memory_set_limits,
        .stats = memory_stats,
        .freeze = memory_freeze,
        .vfs_ids = memory_vfs_ids,
        .root_fd = memory_root_fd,
        .fileops = memory_fileops,
        .max_file_bytes = memory_max_file_bytes,
};

static const struct sandbox_host_ops memory_host_ops = {
        .name = "memory",
        .create = memory_create,
        .free = memory_host_free,
};
