/*
 * workspace.c - the lifecycle of warm and cold workspaces.
 *
 * States: COLD -> WAKING (read the record, create the sandbox, restore) ->
 * WARM -> SLEEPING (final mirror, kill) -> COLD. Requests that find a
 * workspace between states wait on its lists and are answered when it
 * settles. One mirror runs per workspace at a time; a flush arriving while
 * one runs queues exactly one more. Jobs (record lookup, restore, mirror)
 * run on the worker pool and own a duplicate of the workspace root
 * descriptor, so a sandbox dying under a job cannot pull the tree from
 * under it; the job's result is then simply dropped.
 */
#include "workspace/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/hashmap.h"
#include "util/list.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"
#include "util/workq.h"

enum wait_kind { WAIT_READY, WAIT_SETTLE, WAIT_FLUSH, WAIT_CLOSE };

/* A workspace sandbox's record with the host: this, then the id. */
#define WS_RECORD_PREFIX "abx-workspace:"

struct waiter {
    struct list link;
    enum wait_kind kind;
    ws_ready_fn ready;
    ws_settled_fn settled;
    ws_result_fn result;
    void *ud;
    bool covered; /* a flush: a mirror that began after it was asked runs */
};

struct wsx {
    struct list link;
    struct workspaces *w;
    char id[65];
    enum ws_state state;
    struct sandbox *sb;
    struct sync_state *sync;
    struct list waiters;
    struct store_ws meta;
    unsigned jobs;    /* worker jobs in flight that point at us */
    unsigned streams; /* output streams attached */
    bool mirroring, mirror_again, close_after, discard;
    bool dirty; /* touched since the last mirror began */
    /* The sandbox died while warm: what it wrote since its last mirror is
     * gone. Flush and close say so (lost_error()) until the next wake. */
    bool lost;
    uint64_t last_mirror_ms, last_active_ms; /* monotonic */
    int wake_r;
    struct err wake_err;
    struct sync_report last_report;
    int last_mirror_r;
    struct err last_mirror_err;
};

struct workspaces {
    struct loop *loop;
    struct sandbox_host *sh;
    struct workspaces_config cfg;
    char *store_where, *tmp_dir, *holder;
    struct workq *wq;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct store **handles;
    bool *busy;
    unsigned nhandles;
    struct store *loop_store;
    struct hashmap *map;
    struct list all;
    unsigned warm;
    void (*drained)(void *ud);
    void *drained_ud;
    bool draining;
};

const char *
ws_state_name(enum ws_state s)
{
    switch (s) {
    case WS_COLD:
        return "cold";
    case WS_WAKING:
        return "waking";
    case WS_WARM:
        return "warm";
    default:
        return "sleeping";
    }
}

/* --- the worker pool --- */

struct job {
    struct workspaces *w;
    ws_store_fn fn;
    ws_done_fn done;
    void *ud;
};

static struct store *
take_handle(struct workspaces *w)
{
    pthread_mutex_lock(&w->mu);
    for (;;) {
        for (unsigned i = 0; i < w->nhandles; i++)
            if (!w->busy[i]) {
                w->busy[i] = true;
                pthread_mutex_unlock(&w->mu);
                return w->handles[i];
            }
        pthread_cond_wait(&w->cv, &w->mu);
    }
}

static void
give_handle(struct workspaces *w, struct store *s)
{
    pthread_mutex_lock(&w->mu);
    for (unsigned i = 0; i < w->nhandles; i++)
        if (w->handles[i] == s)
            w->busy[i] = false;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void
job_run(void *ud)
{
    struct job *j = ud;
    struct store *s = take_handle(j->w);
    j->fn(s, j->ud);
    give_handle(j->w, s);
}

static void
job_done(void *ud)
{
    struct job *j = ud;
    if (j->done)
        j->done(j->ud);
    free(j);
}

int
workspaces_run(struct workspaces *w, ws_store_fn fn, ws_done_fn done, void *ud)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct job){w, fn, done, ud};
    int r = workq_submit(w->wq, job_run, job_done, j);
    if (r < 0)
        free(j);
    return r;
}

struct store *
workspaces_loop_store(struct workspaces *w)
{
    return w->loop_store;
}

/* --- entries --- */

static struct wsx *
find(struct workspaces *w, const char *id)
{
    return hashmap_get(w->map, id);
}

static struct wsx *
get(struct workspaces *w, const char *id)
{
    struct wsx *x = find(w, id);
    if (x)
        return x;
    x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->w = w;
    (void)snprintf(x->id, sizeof(x->id), "%s", id);
    x->state = WS_COLD;
    list_init(&x->waiters);
    x->last_active_ms = now_msec();
    if (hashmap_put(w->map, x->id, x) < 0) {
        free(x);
        return NULL;
    }
    list_add_tail(&w->all, &x->link);
    return x;
}

/* During a drain: calls its done() once nothing is warm or waking. */
static void
check_drained(struct workspaces *w)
{
    if (!w->draining || !w->drained || w->warm)
        return;
    list_foreach (l, &w->all) {
        if (list_entry(l, struct wsx, link)->state == WS_WAKING)
            return;
    }
    void (*fn)(void *) = w->drained;
    w->drained = NULL;
    fn(w->drained_ud);
}

static void
maybe_free(struct wsx *x)
{
    if (x->state != WS_COLD || x->jobs || x->streams || x->mirroring || x->lost ||
        !list_empty(&x->waiters))
        return;
    (void)hashmap_remove(x->w->map, x->id);
    list_remove(&x->link);
    sync_state_free(x->sync);
    free(x);
}

/* What flush and close answer while x->lost: -ENOTRECOVERABLE and why. */
static int
lost_error(const struct wsx *x, struct err *err)
{
    return err_set(err, ENOTRECOVERABLE,
                   "workspace '%s' lost its sandbox before its changes were saved; it holds what "
                   "its last mirror saw",
                   x->id);
}

static int
add_waiter(struct wsx *x, const struct waiter *proto)
{
    struct waiter *wt = calloc(1, sizeof(*wt));
    if (!wt)
        return -ENOMEM;
    *wt = *proto;
    list_add_tail(&x->waiters, &wt->link);
    return 0;
}

#define WAIT_FOR_READY(x, cb, ud) \
    add_waiter(x, &(struct waiter){.kind = WAIT_READY, .ready = (cb), .ud = (ud)})
#define WAIT_FOR_SETTLE(x, cb, ud) \
    add_waiter(x, &(struct waiter){.kind = WAIT_SETTLE, .settled = (cb), .ud = (ud)})
#define WAIT_FOR_RESULT(x, k, cb, ud) \
    add_waiter(x, &(struct waiter){.kind = (k), .result = (cb), .ud = (ud)})

/* Answers and removes the waiters of one kind; of flushes, with covered
 * >= 0, only those a finished mirror covered (1) or none began for (0). */
static void
notify_where(struct wsx *x, enum wait_kind kind, int covered, int r, const struct err *err,
             const struct sync_report *rep)
{
    struct list batch;
    list_init(&batch);
    list_foreach_safe (l, tmp, &x->waiters) {
        struct waiter *wt = list_entry(l, struct waiter, link);
        if (wt->kind != kind || (covered >= 0 && wt->covered != (covered > 0)))
            continue;
        list_remove(&wt->link);
        list_add_tail(&batch, &wt->link);
    }
    while (!list_empty(&batch)) {
        struct waiter *wt = list_entry(batch.next, struct waiter, link);
        list_remove(&wt->link);
        if (kind == WAIT_READY)
            wt->ready(wt->ud, r, err, r < 0 ? NULL : x->sb);
        else if (kind == WAIT_SETTLE)
            wt->settled(wt->ud, x->state == WS_WARM ? x->sb : NULL);
        else
            wt->result(wt->ud, r, err, rep);
        free(wt);
    }
}

static void
notify(struct wsx *x, enum wait_kind kind, int r, const struct err *err,
       const struct sync_report *rep)
{
    notify_where(x, kind, -1, r, err, rep);
}

static void
notify_flush(struct wsx *x, bool covered, int r, const struct err *err,
             const struct sync_report *rep)
{
    notify_where(x, WAIT_FLUSH, covered, r, err, rep);
}

static void
cover_flushes(struct wsx *x)
{
    list_foreach (l, &x->waiters) {
        struct waiter *wt = list_entry(l, struct waiter, link);
        if (wt->kind == WAIT_FLUSH)
            wt->covered = true;
    }
}

static bool
has_waiters(struct wsx *x, enum wait_kind kind)
{
    list_foreach (l, &x->waiters) {
        if (list_entry(l, struct waiter, link)->kind == kind)
            return true;
    }
    return false;
}

/* --- mirror --- */

struct sync_job {
    struct wsx *x;
    struct sync_sandbox sb;
    struct sync_report rep;
    struct err err;
    int r;
    bool restore;
};

static void
sync_job_run(struct store *s, void *ud)
{
    struct sync_job *j = ud;
    const struct sync_ignore *ig = j->x->w->cfg.ignore;
    if (j->restore)
        j->r = sync_restore(s, j->x->id, &j->sb, ig, j->x->sync, &j->rep, &j->err);
    else
        j->r = sync_mirror(s, j->x->id, &j->sb, ig, j->x->sync, &j->rep, &j->err);
}

static struct sync_job *
sync_job_new(struct wsx *x, bool restore)
{
    struct sync_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->x = x;
    j->restore = restore;
    /* The sandbox's user's file work: what it may not read is not ours. */
    if (sandbox_fileops(x->sb, false, &j->sb.fo, NULL) < 0) {
        free(j);
        return NULL;
    }
    return j;
}

static void sleep_now(struct wsx *x);
static void mirror_start(struct wsx *x);
static int start_wake(struct wsx *x);

/* Names what a mirror could not store, once: entries it tried this time
 * (an unchanged one is only counted in the report). */
static void
log_skips(struct wsx *x, const struct sync_report *rep)
{
    uint64_t named = 0;
    for (size_t i = 0; i < rep->n_skips; i++) {
        const struct sync_skip *k = &rep->skips[i];
        if (!k->fresh)
            continue;
        log_warn("workspace=%s cannot store '/%s'%s (%s): skipped, the rest is saved", x->id,
                 k->path, k->cut ? "..." : "", sync_skip_reason(k->error));
        named++;
    }
    if (rep->fresh_skips > named)
        log_warn("workspace=%s skipped %llu more entries it cannot store", x->id,
                 (unsigned long long)(rep->fresh_skips - named));
}

static void
mirror_done(void *ud)
{
    struct sync_job *j = ud;
    struct wsx *x = j->x;

    j->sb.fo = fileops_unref(j->sb.fo);
    x->jobs--;
    x->mirroring = false;
    x->last_mirror_ms = now_msec();
    x->last_mirror_r = j->r;
    x->last_mirror_err = j->err;
    x->last_report = j->rep;
    if (j->r < 0)
        log_warn("workspace=%s mirror failed: %s", x->id, j->err.msg);
    else
        log_skips(x, &j->rep);
    if (j->r == 0 && (j->rep.files || j->rep.deleted || j->rep.dirs))
        log_debug("workspace=%s mirrored: %llu files, %llu dirs, %llu deleted in %.1f ms", x->id,
                  (unsigned long long)j->rep.files, (unsigned long long)j->rep.dirs,
                  (unsigned long long)j->rep.deleted, j->rep.duration_us / 1000.0);
    free(j);

    /* This mirror answers the flushes asked for before it began; those
     * asked for since wait for the next one (on_gone answers them if the
     * sandbox dies first). */
    notify_flush(x, true, x->last_mirror_r, &x->last_mirror_err, &x->last_report);
    if (x->mirror_again && x->state != WS_COLD) {
        x->mirror_again = false;
        mirror_start(x);
        return;
    }
    x->mirror_again = false;
    if (x->state == WS_COLD) /* on_gone left a close to the mirror it was waiting for */
        notify(x, WAIT_CLOSE, x->last_mirror_r, &x->last_mirror_err, &x->last_report);
    if (x->state == WS_SLEEPING) {
        if (x->last_mirror_r < 0 && !x->w->draining) {
            /* Killing now would lose what the mirror could not save. */
            x->state = WS_WARM;
            notify(x, WAIT_CLOSE, x->last_mirror_r, &x->last_mirror_err, &x->last_report);
            notify(x, WAIT_SETTLE, 0, NULL, NULL);
        } else {
            if (x->last_mirror_r < 0)
                log_err("workspace=%s loses changes since its last mirror: %s", x->id,
                        x->last_mirror_err.msg);
            sleep_now(x);
        }
    }
    maybe_free(x);
}

static void
mirror_start(struct wsx *x)
{
    if (x->mirroring) {
        x->mirror_again = true;
        return;
    }
    if (!x->sb || (x->state != WS_WARM && x->state != WS_SLEEPING))
        return;
    struct sync_job *j = sync_job_new(x, false);
    if (!j || workspaces_run(x->w, sync_job_run, mirror_done, j) < 0) {
        if (j)
            j->sb.fo = fileops_unref(j->sb.fo);
        free(j);
        struct err e = {0};
        (void)err_set(&e, ENOMEM, "cannot start a mirror");
        notify(x, WAIT_FLUSH, -ENOMEM, &e, NULL);
        return;
    }
    x->jobs++;
    x->mirroring = true;
    x->dirty = false;
    cover_flushes(x);
}

/* --- sandbox life --- */

static void
on_gone(struct sandbox *sb, void *ud)
{
    struct wsx *x = ud;
    struct workspaces *w = x->w;
    enum ws_state was = x->state;

    if (was == WS_WARM || was == WS_SLEEPING)
        w->warm--;
    if (was == WS_WARM) {
        log_warn("workspace=%s lost its sandbox; it is cold until the next exec", x->id);
        x->lost = true;
    }
    x->state = WS_COLD;
    x->sb = NULL;
    sandbox_free(sb);
    /* What we knew of the sandbox's versions no longer applies. A mirror
     * job still running owns the state until it finishes. */
    if (!x->mirroring) {
        sync_state_free(x->sync);
        x->sync = NULL;
    }
    if (was == WS_WAKING) {
        if (!x->wake_r) {
            x->wake_r = -EIO;
            (void)err_set(&x->wake_err, EIO, "the sandbox of workspace '%s' died while waking",
                          x->id);
        }
        notify(x, WAIT_READY, x->wake_r, &x->wake_err, NULL);
        notify(x, WAIT_FLUSH, x->wake_r, &x->wake_err, NULL);
    } else {
        /* A flush is answered by a mirror that began after it was asked:
         * one running now answers those it covers (mirror_done), and no
         * other will run. Lost: what the rest were to save is gone; put
         * to sleep: its last mirror saved what there was. */
        struct err why = {0};
        int r = x->lost ? lost_error(x, &why) : x->last_mirror_r;
        const struct err *e = x->lost ? &why : &x->last_mirror_err;
        const struct sync_report *rep = x->lost ? NULL : &x->last_report;
        notify_flush(x, false, r, e, rep);
        if (!x->mirroring)
            notify_flush(x, true, r, e, rep);
    }
    struct err lost = {0};
    if (x->lost)
        notify(x, WAIT_CLOSE, lost_error(x, &lost), &lost, NULL);
    else if (was == WS_WAKING)
        notify(x, WAIT_CLOSE, -ESRCH, &x->wake_err, NULL);
    else if (!x->mirroring) /* else mirror_done answers */
        notify(x, WAIT_CLOSE, x->discard ? 0 : x->last_mirror_r, &x->last_mirror_err,
               &x->last_report);
    notify(x, WAIT_SETTLE, 0, NULL, NULL);
    /* An exec that arrived while we were going to sleep wakes us again. */
    if (was == WS_SLEEPING && has_waiters(x, WAIT_READY) && !w->draining)
        (void)start_wake(x);
    else if (was == WS_SLEEPING) {
        struct err e = {0};
        (void)err_set(&e, EOPNOTSUPP, "abxd is draining and wakes no workspaces");
        notify(x, WAIT_READY, -EOPNOTSUPP, &e, NULL);
    }
    /* A request that arrived while we slept may want us awake again. */
    maybe_free(x);
    check_drained(w);
}

static void
sleep_now(struct wsx *x)
{
    if (x->sb)
        sandbox_kill(x->sb); /* on_gone finishes the transition */
}

/* Tells the host whose the sandbox is, for a network process after this
 * one (workspaces_adopt()). Only once it is whole: one that dies with us
 * mid-restore is killed, not taken over half-restored. */
static void
keep_record(struct wsx *x)
{
    char rec[sizeof(WS_RECORD_PREFIX) + sizeof(x->id)];
    int n = snprintf(rec, sizeof(rec), "%s%s", WS_RECORD_PREFIX, x->id);
    struct err err = {0};
    int r = sandbox_set_record(x->sb, rec, (size_t)n, &err);
    if (r < 0 && r != -EOPNOTSUPP)
        log_warn("workspace=%s: cannot keep its record for a restart: %s", x->id,
                 err.msg[0] ? err.msg : strerror(-r));
}

/* The end of a wake (a restore, or a sandbox taken over): warm, the
 * waiters told. A mirror starts at once if mirror_now or a flush was asked
 * for meanwhile. */
static void
become_warm(struct wsx *x, bool mirror_now)
{
    x->state = WS_WARM;
    x->w->warm++;
    x->last_mirror_ms = now_msec();
    x->last_active_ms = now_msec();
    keep_record(x);
    notify(x, WAIT_READY, 0, NULL, NULL);
    notify(x, WAIT_SETTLE, 0, NULL, NULL);
    if (mirror_now || has_waiters(x, WAIT_FLUSH)) {
        x->dirty = true;
        mirror_start(x);
    }
    if (x->close_after) { /* a close, or a drain, came meanwhile */
        x->close_after = false;
        workspaces_close(x->w, x->id, NULL, NULL);
    }
}

static void
restore_done(void *ud)
{
    struct sync_job *j = ud;
    struct wsx *x = j->x;

    j->sb.fo = fileops_unref(j->sb.fo);
    x->jobs--;
    if (x->state != WS_WAKING || !x->sb) {
        free(j);
        maybe_free(x);
        return;
    }
    if (j->r < 0) {
        log_err("workspace=%s cannot wake: %s", x->id, j->err.msg);
        x->wake_r = j->r;
        x->wake_err = j->err;
        free(j);
        sandbox_kill(x->sb); /* on_gone tells the waiters why */
        return;
    }
    log_debug("workspace=%s restored %llu files (%llu bytes) in %.1f ms", x->id,
              (unsigned long long)j->rep.files, (unsigned long long)j->rep.bytes,
              j->rep.duration_us / 1000.0);
    free(j);
    become_warm(x, false);
}

/* A wake that ends before the sandbox was handed over: cold again. */
static void
wake_failed(struct wsx *x, int r, const struct err *err)
{
    struct workspaces *w = x->w;
    x->wake_r = r;
    if (err)
        x->wake_err = *err;
    x->state = WS_COLD;
    notify(x, WAIT_READY, r, &x->wake_err, NULL);
    notify(x, WAIT_SETTLE, 0, NULL, NULL);
    maybe_free(x);
    check_drained(w);
}

/* A sandbox the host made or handed over: false, and cold again, if that
 * failed. */
static bool
sandbox_came(struct wsx *x, struct sandbox *sb, int r, const struct err *err)
{
    if (r < 0) {
        sandbox_free(sb);
        x->sb = NULL;
        wake_failed(x, r, err);
        return false;
    }
    sandbox_set_gone_handler(sb, on_gone, x);
    return true;
}

static void
on_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct wsx *x = ud;

    if (!sandbox_came(x, sb, r, err))
        return;
    if (!x->sync && sync_state_new(&x->sync) < 0) {
        x->wake_r = -ENOMEM;
        sandbox_kill(sb);
        return;
    }
    struct sync_job *j = sync_job_new(x, true);
    if (!j || workspaces_run(x->w, sync_job_run, restore_done, j) < 0) {
        if (j)
            j->sb.fo = fileops_unref(j->sb.fo);
        free(j);
        x->wake_r = -ENOMEM;
        (void)err_set(&x->wake_err, ENOMEM, "cannot start the restore");
        sandbox_kill(sb);
        return;
    }
    x->jobs++;
}

struct meta_job {
    struct wsx *x;
    struct store_ws meta;
    struct err err;
    int r;
};

/* The sandbox limits of a workspace's record. */
static struct sandbox_limits
ws_limits(const struct workspaces *w, const struct store_ws *meta)
{
    struct sandbox_limits lim = w->cfg.default_limits;
    if (meta->memory_bytes)
        lim.memory_bytes = meta->memory_bytes;
    if (meta->cpu_millis)
        lim.cpu_millis = meta->cpu_millis;
    if (meta->pids)
        lim.pids = meta->pids;
    /* Only where the host bounds disks at all (a record may come from a
     * host that does, through a shared store). */
    if (meta->disk_bytes && lim.disk_bytes)
        lim.disk_bytes = meta->disk_bytes;
    return lim;
}

static void
meta_run(struct store *s, void *ud)
{
    struct meta_job *j = ud;
    j->r = store_ws_get(s, j->x->id, &j->meta, &j->err);
}

static void
meta_done(void *ud)
{
    struct meta_job *j = ud;
    struct wsx *x = j->x;
    struct workspaces *w = x->w;

    x->jobs--;
    if (j->r < 0) {
        struct err e = j->err;
        int r = j->r;
        free(j);
        wake_failed(x, r, &e);
        return;
    }
    x->meta = j->meta;
    free(j);
    struct sandbox_spec spec = {.limits = ws_limits(w, &x->meta)};
    char sid[21];
    struct err err = {0};
    int r = rand_id(sid, 20); /* the jail's own name; not shown anywhere */
    if (r == 0)
        r = sandbox_create(w->sh, sid, &spec, on_ready, x, &x->sb, &err);
    if (r < 0) {
        x->sb = NULL;
        wake_failed(x, r, &err);
    }
}

static void
begin_wake(struct wsx *x)
{
    x->state = WS_WAKING;
    x->lost = false; /* what it reports from now on is this sandbox's */
    x->wake_r = 0;
    err_clear(&x->wake_err);
}

/* --- taking over a sandbox another process left --- */

static void
on_adopted(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct wsx *x = ud;
    /* What it wrote since its last mirror (the one that process ran, or
     * never got to): saved now, not a window later. */
    if (sandbox_came(x, sb, r, err))
        become_warm(x, true);
}

bool
workspaces_is_record(const void *record, size_t len)
{
    size_t n = sizeof(WS_RECORD_PREFIX) - 1;
    return record && len > n && !memcmp(record, WS_RECORD_PREFIX, n);
}

int
workspaces_adopt(struct workspaces *w, const char *orphan, const void *record, size_t len,
                 struct err *err)
{
    size_t n = sizeof(WS_RECORD_PREFIX) - 1;
    char id[65];
    if (!workspaces_is_record(record, len) || len - n >= sizeof(id) ||
        memchr((const char *)record + n, '\0', len - n))
        return err_set(err, EINVAL, "not a workspace's record");
    memcpy(id, (const char *)record + n, len - n);
    id[len - n] = '\0';

    struct store_ws meta;
    int r = store_ws_get(w->loop_store, id, &meta, err);
    if (r < 0)
        return r; /* deleted meanwhile, or the store is down: not ours to keep */
    struct wsx *x = get(w, id);
    if (!x)
        return -ENOMEM;
    if (x->state != WS_COLD) {
        maybe_free(x);
        return err_set(err, EEXIST, "workspace '%s' has a sandbox already", id);
    }
    struct sync_state *st = NULL;
    if ((r = sync_state_new(&st)) < 0 ||
        (r = sync_state_seed(w->loop_store, id, w->cfg.ignore, st, err)) < 0) {
        sync_state_free(st);
        maybe_free(x);
        return r;
    }
    struct sandbox_spec spec = {.limits = ws_limits(w, &meta)};
    r = sandbox_adopt(w->sh, orphan, orphan, &spec, on_adopted, x, &x->sb, err);
    if (r < 0) {
        x->sb = NULL;
        sync_state_free(st);
        maybe_free(x);
        return r;
    }
    sync_state_free(x->sync);
    x->sync = st;
    x->meta = meta;
    begin_wake(x);
    log_info("workspace=%s: its sandbox taken over from the previous network process", id);
    return 0;
}

/* --- public operations --- */

static int
start_wake(struct wsx *x)
{
    struct err err = {0};
    begin_wake(x);
    struct meta_job *j = calloc(1, sizeof(*j));
    if (j)
        j->x = x;
    if (!j || workspaces_run(x->w, meta_run, meta_done, j) < 0) {
        free(j);
        x->state = WS_COLD;
        (void)err_set(&err, ENOMEM, "out of memory");
        notify(x, WAIT_READY, -ENOMEM, &err, NULL);
        notify(x, WAIT_SETTLE, 0, NULL, NULL);
        return -ENOMEM;
    }
    x->jobs++;
    return 0;
}

void
workspaces_ensure(struct workspaces *w, const char *id, ws_ready_fn cb, void *ud)
{
    struct err err = {0};
    struct wsx *x = get(w, id);

    if (!x) {
        (void)err_set(&err, ENOMEM, "out of memory");
        cb(ud, -ENOMEM, &err, NULL);
        return;
    }
    x->last_active_ms = now_msec();
    x->dirty = true;
    if (x->state == WS_WARM) {
        cb(ud, 0, NULL, x->sb);
        return;
    }
    if (w->draining) {
        (void)err_set(&err, EOPNOTSUPP, "abxd is draining and wakes no workspaces");
        cb(ud, -EOPNOTSUPP, &err, NULL);
        maybe_free(x);
        return;
    }
    if (WAIT_FOR_READY(x, cb, ud) < 0) {
        (void)err_set(&err, ENOMEM, "out of memory");
        cb(ud, -ENOMEM, &err, NULL);
        return;
    }
    if (x->state != WS_COLD)
        return; /* waking: wait; sleeping: on_gone wakes it again */
    (void)start_wake(x);
}

void
workspaces_settle(struct workspaces *w, const char *id, ws_settled_fn cb, void *ud)
{
    struct wsx *x = find(w, id);
    if (!x || x->state == WS_COLD || x->state == WS_WARM) {
        cb(ud, x && x->state == WS_WARM ? x->sb : NULL);
        return;
    }
    if (WAIT_FOR_SETTLE(x, cb, ud) < 0)
        cb(ud, NULL);
}

enum ws_state
workspaces_state(struct workspaces *w, const char *id)
{
    struct wsx *x = find(w, id);
    return x ? x->state : WS_COLD;
}

struct sandbox *
workspaces_peek(struct workspaces *w, const char *id)
{
    struct wsx *x = find(w, id);
    return x && x->state == WS_WARM ? x->sb : NULL;
}

void
workspaces_touch(struct workspaces *w, const char *id)
{
    struct wsx *x = find(w, id);
    if (x) {
        x->last_active_ms = now_msec();
        x->dirty = true;
    }
}

void
workspaces_stream_attached(struct workspaces *w, const char *id, bool attached)
{
    struct wsx *x = find(w, id);
    if (!x)
        return;
    if (attached)
        x->streams++;
    else if (x->streams)
        x->streams--;
    x->last_active_ms = now_msec();
    if (!attached)
        maybe_free(x);
}

int
workspaces_lost(struct workspaces *w, const char *id, struct err *err)
{
    struct wsx *x = find(w, id);
    if (!x || x->state != WS_COLD || !x->lost)
        return 0;
    return lost_error(x, err);
}

/* A cold workspace: nothing live to mirror, unless it got cold by losing
 * its sandbox. */
static bool
answer_cold(struct wsx *x, ws_result_fn cb, void *ud)
{
    struct sync_report none = {0};
    if (x && x->state != WS_COLD)
        return false;
    struct err lost = {0};
    if (x && x->lost)
        cb(ud, lost_error(x, &lost), &lost, NULL);
    else
        cb(ud, 0, NULL, &none);
    return true;
}

void
workspaces_flush(struct workspaces *w, const char *id, ws_result_fn cb, void *ud)
{
    struct wsx *x = find(w, id);
    if (answer_cold(x, cb, ud))
        return;
    if (x->state == WS_SLEEPING && !x->mirroring) {
        /* Its last mirror is done and it is being killed: that mirror
         * saved what there is. */
        cb(ud, x->last_mirror_r, &x->last_mirror_err, &x->last_report);
        return;
    }
    if (WAIT_FOR_RESULT(x, WAIT_FLUSH, cb, ud) < 0) {
        cb(ud, -ENOMEM, NULL, NULL);
        return;
    }
    /* waking: restore_done mirrors for the waiter once warm */
    if (x->state == WS_WARM || x->state == WS_SLEEPING)
        mirror_start(x);
}

void
workspaces_close(struct workspaces *w, const char *id, ws_result_fn cb, void *ud)
{
    struct wsx *x = find(w, id);
    if (!x || x->state == WS_COLD) {
        if (cb)
            (void)answer_cold(x, cb, ud);
        if (x)
            maybe_free(x);
        return;
    }
    if (cb && WAIT_FOR_RESULT(x, WAIT_CLOSE, cb, ud) < 0) {
        cb(ud, -ENOMEM, NULL, NULL);
        return;
    }
    if (x->state == WS_WAKING) {
        x->close_after = true;
        return;
    }
    if (x->state == WS_SLEEPING)
        return;
    x->state = WS_SLEEPING;
    if (x->discard) {
        sleep_now(x);
        return;
    }
    mirror_start(x); /* mirror_done puts it to sleep */
    if (!x->mirroring)
        sleep_now(x);
}

void
workspaces_discard(struct workspaces *w, const char *id, ws_result_fn cb, void *ud)
{
    struct wsx *x = find(w, id);
    if (x) {
        x->discard = true;
        x->lost = false; /* being deleted: there is nothing left to lose */
    }
    if (x && x->state == WS_WARM) {
        x->state = WS_SLEEPING;
        if (cb && WAIT_FOR_RESULT(x, WAIT_CLOSE, cb, ud) < 0) {
            cb(ud, -ENOMEM, NULL, NULL);
            return;
        }
        sleep_now(x);
        return;
    }
    workspaces_close(w, id, cb, ud);
}

void
workspaces_sweep(struct workspaces *w)
{
    uint64_t now = now_msec();
    list_foreach_safe (l, tmp, &w->all) {
        struct wsx *x = list_entry(l, struct wsx, link);
        if (x->state != WS_WARM)
            continue;
        bool busy = x->streams > 0 || sandbox_proc_count(x->sb, true) > 0;
        if (w->cfg.idle_ms && !busy && now - x->last_active_ms >= w->cfg.idle_ms) {
            log_info("workspace=%s idle for %llu s: mirroring and putting it to sleep", x->id,
                     (unsigned long long)((now - x->last_active_ms) / 1000u));
            workspaces_close(w, x->id, NULL, NULL);
            continue;
        }
        if (now - x->last_mirror_ms >= w->cfg.mirror_window_ms && (x->dirty || busy))
            mirror_start(x);
    }
}

void
workspaces_drain(struct workspaces *w, void (*done)(void *ud), void *ud)
{
    w->draining = true;
    w->drained = done;
    w->drained_ud = ud;
    unsigned n = 0;
    list_foreach_safe (l, tmp, &w->all) {
        struct wsx *x = list_entry(l, struct wsx, link);
        if (x->state == WS_WARM) {
            workspaces_close(w, x->id, NULL, NULL);
            n++;
        } else if (x->state == WS_WAKING) {
            x->close_after = true;
            n++;
        }
    }
    (void)n;
    check_drained(w);
}

unsigned
workspaces_warm_count(const struct workspaces *w)
{
    return w->warm;
}

const char *
workspaces_store_kind(const struct workspaces *w)
{
    return store_kind(w->loop_store);
}

/* --- setup --- */

int
workspaces_new(struct loop *loop, struct sandbox_host *sh, const struct workspaces_config *c,
               struct workspaces **ret, struct err *err)
{
    struct workspaces *w = calloc(1, sizeof(*w));
    unsigned n = c->workers ? c->workers : 4;
    int r;

    if (!w)
        return -ENOMEM;
    w->loop = loop;
    w->sh = sh;
    w->cfg = *c;
    w->store_where = strdup(c->store);
    w->tmp_dir = strdup(c->tmp_dir);
    w->holder = strdup(c->holder ? c->holder : "abxd");
    list_init(&w->all);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!w->store_where || !w->tmp_dir || !w->holder || hashmap_new(&w->map) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    w->cfg.store = w->store_where;
    w->cfg.tmp_dir = w->tmp_dir;
    w->cfg.holder = w->holder;
    w->handles = calloc(n, sizeof(*w->handles));
    w->busy = calloc(n, sizeof(*w->busy));
    if (!w->handles || !w->busy) {
        r = -ENOMEM;
        goto fail;
    }
    r = store_open(w->store_where, w->tmp_dir, &w->loop_store, err);
    if (r < 0)
        goto fail;
    store_set_floor(w->loop_store, c->floor_bytes);
    for (unsigned i = 0; i < n; i++) {
        r = store_open(w->store_where, w->tmp_dir, &w->handles[i], err);
        if (r < 0)
            goto fail;
        store_set_floor(w->handles[i], c->floor_bytes);
        w->nhandles++;
    }
    r = workq_new(loop, n, &w->wq);
    if (r < 0) {
        r = err_setx(err, -r, "cannot start the store workers");
        goto fail;
    }
    *ret = w;
    return 0;
fail:
    workspaces_free(w);
    return r;
}

void
workspaces_free(struct workspaces *w)
{
    if (!w)
        return;
    workq_free(w->wq); /* finishes jobs and runs their callbacks */
    while (!list_empty(&w->all)) {
        struct wsx *x = list_entry(w->all.next, struct wsx, link);
        list_remove(&x->link);
        (void)hashmap_remove(w->map, x->id);
        while (!list_empty(&x->waiters)) {
            struct waiter *wt = list_entry(x->waiters.next, struct waiter, link);
            list_remove(&wt->link);
            free(wt);
        }
        if (x->sb)
            sandbox_free(x->sb);
        sync_state_free(x->sync);
        free(x);
    }
    for (unsigned i = 0; i < w->nhandles; i++)
        store_close(w->handles[i]);
    /* No GC runs now (the workers are done): let the next collector in. */
    if (w->loop_store)
        (void)store_gc_release(w->loop_store, w->holder, NULL);
    store_close(w->loop_store);
    hashmap_free(w->map);
    free(w->handles);
    free(w->busy);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->store_where);
    free(w->tmp_dir);
    free(w->holder);
    free(w);
}
