/*
 * table.c - the table of live sandboxes (see table.h).
 *
 * An entry is born E_CREATING by table_create(), becomes E_READY when its
 * sandbox is, and E_DYING when something kills it; it leaves the table when
 * the sandbox is gone (sandbox_set_gone_handler). Deadlines are wall-clock
 * (E2B's endAt), armed on a monotonic loop timer. What a surface keeps per
 * sandbox is not here: it lives in e->ext, released by its hooks.
 */
#include "api/core/table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hashmap.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"

struct table {
    struct loop *loop;
    struct sandbox_host *sh;
    void *owner;
    struct table_config cfg;
    struct hashmap *map; /* id -> entry */
    struct list entries;
    uint32_t count;
    bool draining;
    char missing[1024];
    struct table_stats st;
    struct table_hooks hooks[TABLE_EXT_MAX];
    unsigned n_hooks;
    void (*all_gone)(void *ud);
    void *all_gone_ud;
};

struct table_create_op {
    table_ready_fn ready;
    table_drop_fn drop;
    void *ud;
};

struct kill_waiter {
    struct list link;
    void (*done)(void *ud);
    void (*drop)(void *ud);
    void *ud;
};

static void arm_deadline(struct entry *e);

static void
entry_unlink(struct table *t, struct entry *e)
{
    (void)hashmap_remove(t->map, e->id);
    list_remove(&e->link);
    t->count--;
    if (t->count == 0 && t->all_gone) {
        void (*fn)(void *) = t->all_gone;
        t->all_gone = NULL;
        fn(t->all_gone_ud);
    }
}

/* Frees e and what the surfaces keep for it; e is out of the table. */
static void
entry_free(struct entry *e)
{
    struct table *t = e->table;
    for (unsigned i = 0; i < t->n_hooks; i++)
        if (t->hooks[i].free)
            t->hooks[i].free(e, i);
    while (!list_empty(&e->kill_waiters)) {
        struct kill_waiter *w = list_entry(e->kill_waiters.next, struct kill_waiter, link);
        list_remove(&w->link);
        if (w->drop)
            w->drop(w->ud);
        free(w);
    }
    if (e->op) {
        if (e->op->drop)
            e->op->drop(e->op->ud);
        free(e->op);
    }
    loop_timer_free(e->deadline);
    sandbox_free(e->sb);
    json_decref(e->metadata);
    free(e);
}

static void
on_gone(struct sandbox *sb, void *ud)
{
    struct entry *e = ud;
    struct table *t = e->table;
    (void)sb;

    if (e->state != E_DYING)
        log_warn("sandbox=%s ended on its own (init exited)", e->id);
    else
        log_debug("sandbox=%s killed", e->id);
    t->st.ended++;
    while (!list_empty(&e->kill_waiters)) {
        struct kill_waiter *w = list_entry(e->kill_waiters.next, struct kill_waiter, link);
        list_remove(&w->link);
        w->done(w->ud);
        free(w);
    }
    entry_unlink(t, e);
    entry_free(e);
}

void
table_kill(struct entry *e)
{
    struct table *t = e->table;
    if (e->state == E_DYING)
        return;
    e->state = E_DYING;
    loop_timer_disarm(e->deadline);
    for (unsigned i = 0; i < t->n_hooks; i++)
        if (t->hooks[i].dying)
            t->hooks[i].dying(e, i);
    sandbox_kill(e->sb);
}

int
table_kill_wait(struct entry *e, void (*done)(void *ud), void (*drop)(void *ud), void *ud)
{
    struct kill_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->done = done;
    w->drop = drop;
    w->ud = ud;
    list_add_tail(&e->kill_waiters, &w->link);
    table_kill(e);
    return 0;
}

void
table_set_end(struct entry *e, uint64_t end_at_wall_ms)
{
    e->end_at_wall_ms = end_at_wall_ms;
    arm_deadline(e);
}

static void
on_deadline(struct loop_timer *lt, void *ud)
{
    struct entry *e = ud;
    (void)lt;
    log_info("sandbox=%s reached its timeout, killing it", e->id);
    table_kill(e);
}

static void
arm_deadline(struct entry *e)
{
    if (e->end_at_wall_ms == 0) {
        loop_timer_disarm(e->deadline);
        return;
    }
    uint64_t now = wall_msec();
    uint64_t in = e->end_at_wall_ms > now ? e->end_at_wall_ms - now : 0;
    (void)loop_timer_arm(e->deadline, now_msec() + in);
}

struct entry *
table_find(struct table *t, const char *id)
{
    return hashmap_get(t->map, id);
}

void *
table_owner(const struct table *t)
{
    return t->owner;
}

const struct list *
table_entries(const struct table *t)
{
    return &t->entries;
}

uint32_t
table_count(const struct table *t)
{
    return t->count;
}

const struct table_stats *
table_stats(const struct table *t)
{
    return &t->st;
}

void
table_touch(struct entry *e)
{
    e->last_active_ms = now_msec();
}

void
table_stream_attached(struct entry *e, bool attached)
{
    if (attached)
        e->streams++;
    else if (e->streams > 0)
        e->streams--;
    table_touch(e);
}

static void
on_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct entry *e = ud;
    struct table *t = e->table;
    struct table_create_op *op = e->op;
    (void)sb;

    e->op = NULL;
    if (r < 0) {
        t->st.failed++;
        log_warn("sandbox=%s could not be created: %s", e->id, err ? err->msg : "");
        if (op)
            op->ready(e, r, err, op->ud);
        free(op);
        entry_unlink(t, e);
        entry_free(e);
        return;
    }
    if (e->state == E_CREATING)
        e->state = E_READY;
    t->st.created++;
    const struct sandbox_timings *tm = sandbox_get_timings(e->sb);
    t->st.create_us_sum += tm->total_us;
    t->st.create_count++;
    arm_deadline(e);
    log_debug("sandbox=%s ready in %.3f ms%s", e->id, tm->total_us / 1000.0,
              tm->from_pool ? " (warm)" : "");
    if (op)
        op->ready(e, 0, NULL, op->ud);
    free(op);
}

int
table_admits(const struct table *t, struct err *err)
{
    if (t->draining)
        return err_set(err, ESHUTDOWN, "abxd is draining and takes no new sandboxes");
    if (t->missing[0])
        return err_set(err, EOPNOTSUPP, "isolation is not available: %s", t->missing);
    if (t->count >= t->cfg.max_sandboxes)
        return err_set(err, EAGAIN, "this host already runs %u sandboxes", t->count);
    return 0;
}

int
table_create(struct table *t, const struct table_create *c, table_ready_fn ready,
             table_drop_fn drop, void *ud, struct entry **ret, struct err *err)
{
    struct entry *e = NULL;
    int r;

    if ((r = table_admits(t, err)) < 0)
        return r;
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->table = t;
    e->tmpl = c->tmpl;
    e->caps = c->caps;
    e->scope = c->scope;
    e->state = E_CREATING;
    list_init(&e->kill_waiters);
    e->created_wall_ms = wall_msec();
    e->timeout_s = c->timeout_s;
    e->end_at_wall_ms = c->timeout_s ? e->created_wall_ms + c->timeout_s * 1000u : 0;
    e->last_active_ms = now_msec();
    e->metadata = c->meta ? json_deep_copy(c->meta) : json_object();
    e->op = calloc(1, sizeof(*e->op));
    if (!e->metadata || !e->op || loop_timer_new(t->loop, on_deadline, e, &e->deadline) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    do {
        r = rand_id(e->id, TABLE_ID_LEN);
    } while (r == 0 && hashmap_get(t->map, e->id));
    if (r < 0)
        goto fail;
    r = sandbox_create(t->sh, e->id, c->spec, on_ready, e, &e->sb, err);
    if (r < 0)
        goto fail;
    sandbox_set_gone_handler(e->sb, on_gone, e);
    list_add_tail(&t->entries, &e->link);
    t->count++;
    r = hashmap_put(t->map, e->id, e);
    if (r < 0) {
        /* Cannot be found: let it go, still listed so that its end frees
         * it. on_ready finds no creator. */
        free(e->op);
        e->op = NULL;
        table_kill(e);
        return r;
    }
    *e->op = (struct table_create_op){.ready = ready, .drop = drop, .ud = ud};
    *ret = e;
    return 0;
fail:
    free(e->op);
    loop_timer_free(e->deadline);
    json_decref(e->metadata);
    free(e);
    return r;
}

int
table_add_hooks(struct table *t, const struct table_hooks *h, unsigned *ret_slot)
{
    if (t->n_hooks == TABLE_EXT_MAX)
        return -ENOSPC;
    t->hooks[t->n_hooks] = *h;
    *ret_slot = t->n_hooks++;
    return 0;
}

void
table_set_missing(struct table *t, const char *missing)
{
    (void)snprintf(t->missing, sizeof(t->missing), "%s", missing);
}

const char *
table_missing(const struct table *t)
{
    return t->missing;
}

void
table_drain(struct table *t)
{
    if (t->draining)
        return;
    t->draining = true;
    log_info("draining: no new sandboxes; %u still running", t->count);
    sandbox_host_drain_pool(t->sh);
}

bool
table_draining(const struct table *t)
{
    return t->draining;
}

int
table_sweep_idle(struct table *t)
{
    if (!t->cfg.idle_timeout_s)
        return 0;
    uint64_t now = now_msec();
    int n = 0;
    list_foreach_safe (l, tmp, &t->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state != E_READY || e->streams > 0)
            continue;
        if (now - e->last_active_ms < t->cfg.idle_timeout_s * 1000u)
            continue;
        log_info("sandbox=%s idle for %llu s, killing it", e->id,
                 (unsigned long long)((now - e->last_active_ms) / 1000u));
        table_kill(e);
        n++;
    }
    return n;
}

void
table_kill_all(struct table *t, void (*done)(void *ud), void *ud)
{
    t->all_gone = done;
    t->all_gone_ud = ud;
    if (t->count == 0) {
        t->all_gone = NULL;
        done(ud);
        return;
    }
    list_foreach_safe (l, tmp, &t->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state == E_CREATING)
            sandbox_kill(e->sb);
        else
            table_kill(e);
    }
}

int
table_new(struct loop *loop, struct sandbox_host *sh, void *owner, const struct table_config *c,
          struct table **ret)
{
    struct table *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->loop = loop;
    t->sh = sh;
    t->owner = owner;
    t->cfg = *c;
    list_init(&t->entries);
    if (hashmap_new(&t->map) < 0) {
        free(t);
        return -ENOMEM;
    }
    *ret = t;
    return 0;
}

void
table_free(struct table *t)
{
    if (!t)
        return;
    while (!list_empty(&t->entries)) {
        struct entry *e = list_entry(t->entries.next, struct entry, link);
        list_remove(&e->link);
        entry_free(e);
    }
    hashmap_free(t->map);
    free(t);
}
