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

#include "api/core/auth.h"
#include "template/template.h"
#include "util/buf.h"
#include "util/hashmap.h"
#include "util/json.h"
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
    bool no_records; /* the host keeps no records (sandbox_set_record()) */
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
    json_decref(e->env);
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
    table_record(e);
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
    table_record(e);
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
    e->env = json_array();
    for (size_t i = 0; e->env && c->spec->env && c->spec->env[i]; i++)
        if (json_array_append_new(e->env, json_string(c->spec->env[i])) < 0)
            e->env = (json_decref(e->env), NULL);
    e->op = calloc(1, sizeof(*e->op));
    if (!e->metadata || !e->env || !e->op ||
        loop_timer_new(t->loop, on_deadline, e, &e->deadline) < 0) {
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
    json_decref(e->env);
    free(e);
    return r;
}

/* --- records: sandboxes that outlive this process --- */

#define RECORD_VERSION 1
#define RECORD_ENV_MAX 1024 /* env entries a record may carry */

void
table_record(struct entry *e)
{
    struct table *t = e->table;
    struct err err = {0};
    if (t->no_records || e->state == E_DYING || !e->sb)
        return;
    const struct sandbox_limits *l = sandbox_limits(e->sb);
    json_t *lim = json_object();
    (void)json_set(lim, "memory", json_integer((json_int_t)l->memory_bytes));
    (void)json_set(lim, "cpu", json_integer((json_int_t)l->cpu_millis));
    (void)json_set(lim, "pids", json_integer((json_int_t)l->pids));
    (void)json_set(lim, "disk", json_integer((json_int_t)l->disk_bytes));
    json_t *r = json_object();
    (void)json_set(r, "v", json_integer(RECORD_VERSION));
    (void)json_set(r, "id", json_string(e->id));
    (void)json_set(r, "created", json_integer((json_int_t)e->created_wall_ms));
    (void)json_set(r, "end", json_integer((json_int_t)e->end_at_wall_ms));
    (void)json_set(r, "timeout", json_integer((json_int_t)e->timeout_s));
    (void)json_set(r, "template", e->tmpl ? json_string(e->tmpl->name) : json_null());
    (void)json_set(r, "caps", json_integer((json_int_t)e->caps));
    (void)json_set(r, "scope", e->scope ? json_string(e->scope->key) : json_null());
    (void)json_set(r, "meta", json_incref(e->metadata));
    (void)json_set(r, "env", json_incref(e->env));
    (void)json_set(r, "limits", lim);
    (void)json_set(r, "paused", json_boolean(e->paused));
    for (unsigned i = 0; i < t->n_hooks; i++) {
        if (!t->hooks[i].save || !t->hooks[i].name)
            continue;
        json_t *o = json_object();
        t->hooks[i].save(e, i, o);
        if (o && json_object_size(o))
            (void)json_set(r, t->hooks[i].name, o);
        else
            json_decref(o);
    }
    struct buf b;
    buf_init(&b, SANDBOX_RECORD_MAX + 1);
    int rc = r ? json_dump_buf(r, &b) : -ENOMEM;
    json_decref(r);
    if (rc == 0 && b.len > SANDBOX_RECORD_MAX) {
        log_warn("sandbox=%s: its record (%zu bytes) is over %d bytes: a restarted network "
                 "process will not take it over",
                 e->id, b.len, SANDBOX_RECORD_MAX);
        b.len = 0; /* cleared: it is not taken over half-known */
    }
    if (rc == 0)
        rc = sandbox_set_record(e->sb, b.data, b.len, &err);
    buf_done(&b);
    if (rc == -EOPNOTSUPP)
        t->no_records = true;
    else if (rc < 0)
        log_warn("sandbox=%s: cannot keep its record for a restart: %s", e->id,
                 err.msg[0] ? err.msg : strerror(-rc));
}

/* The sandbox_spec a record describes: limits and env (env borrowed from
 * rec, *ret_env the caller's to free). */
static int
record_spec(json_t *rec, struct sandbox_spec *spec, const char ***ret_env, struct err *err)
{
    json_t *lim = json_object_get(rec, "limits"), *env = NULL;
    uint64_t mem, cpu, pids, disk;
    int r;
    if (!json_is_object(lim))
        return err_set(err, EINVAL, "no limits");
    if ((r = json_get_u64(lim, "memory", true, UINT64_MAX, &mem, err)) < 0 ||
        (r = json_get_u64(lim, "cpu", true, UINT32_MAX, &cpu, err)) < 0 ||
        (r = json_get_u64(lim, "pids", true, UINT32_MAX, &pids, err)) < 0 ||
        (r = json_get_u64(lim, "disk", true, UINT64_MAX, &disk, err)) < 0 ||
        (r = json_get_str_array(rec, "env", true, 0, RECORD_ENV_MAX, SANDBOX_RECORD_MAX, &env,
                                err)) < 0)
        return r;
    const char **v = calloc(json_array_size(env) + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(env); i++)
        v[i] = json_string_value(json_array_get(env, i));
    *spec = (struct sandbox_spec){
            .limits = {.memory_bytes = mem,
                       .cpu_millis = (uint32_t)cpu,
                       .pids = (uint32_t)pids,
                       .disk_bytes = disk},
            .env = v,
    };
    *ret_env = v;
    return 0;
}

int
table_adopt(struct table *t, const char *orphan, const void *rec, size_t len,
            const struct table_resolve *res, struct entry **ret, struct err *err)
{
    const char *id = NULL;
    json_t *r = NULL, *meta = NULL, *env = NULL, *tv = NULL, *sv = NULL;
    const char *tname = NULL, *skey = NULL;
    uint64_t v, created, end, timeout, caps;
    bool paused = false;
    const struct template *tmpl = NULL;
    const struct api_scope *scope = NULL;
    struct sandbox_spec spec;
    const char **envv = NULL;
    struct entry *e = NULL;
    int rc;

    if ((rc = json_parse(rec, len, &r, err)) < 0)
        return rc;
    if (!json_is_object(r)) {
        rc = err_set(err, EINVAL, "the record is no object");
        goto out;
    }
    if ((rc = json_get_str(r, "id", true, &id, err)) < 0)
        goto out;
    if (strlen(id) != TABLE_ID_LEN ||
        strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789") != TABLE_ID_LEN) {
        rc = err_set(err, EINVAL, "'%.64s' is no sandbox id of ours", id);
        goto out;
    }
    if (hashmap_get(t->map, id)) {
        rc = err_set(err, EEXIST, "sandbox '%s' is in the table already", id);
        goto out;
    }
    tv = json_object_get(r, "template");
    sv = json_object_get(r, "scope");
    if ((rc = json_get_u64(r, "v", true, UINT32_MAX, &v, err)) < 0 ||
        (rc = json_get_u64(r, "created", true, UINT64_MAX, &created, err)) < 0 ||
        (rc = json_get_u64(r, "end", true, UINT64_MAX, &end, err)) < 0 ||
        (rc = json_get_u64(r, "timeout", true, UINT64_MAX, &timeout, err)) < 0 ||
        (rc = json_get_u64(r, "caps", true, UINT32_MAX, &caps, err)) < 0 ||
        (rc = json_get_bool(r, "paused", true, &paused, err)) < 0 ||
        (rc = json_get_str_map(r, "meta", SIZE_MAX, SIZE_MAX, &meta, err)) < 0 ||
        (rc = record_spec(r, &spec, &envv, err)) < 0)
        goto out;
    if (v != RECORD_VERSION) {
        rc = err_set(err, EINVAL, "a record of version %llu", (unsigned long long)v);
        goto out;
    }
    if ((tv && !json_is_string(tv) && !json_is_null(tv)) ||
        (sv && !json_is_string(sv) && !json_is_null(sv))) {
        rc = err_set(err, EINVAL, "template and scope are names");
        goto out;
    }
    tname = json_string_value(tv);
    skey = json_string_value(sv);
    if (tname && !(tmpl = res->tmpl(res->ud, tname))) {
        rc = err_set(err, ENOENT, "its template '%.64s' is no longer here", tname);
        goto out;
    }
    if (skey && res->scope(res->ud, skey, &scope) < 0) {
        rc = err_set(err, ENOENT, "the scoped key that made it is no longer here");
        goto out;
    }
    env = json_object_get(r, "env");
    e = calloc(1, sizeof(*e));
    if (!e) {
        rc = -ENOMEM;
        goto out;
    }
    e->table = t;
    memcpy(e->id, id, TABLE_ID_LEN + 1);
    e->tmpl = tmpl;
    e->caps = (unsigned)caps;
    e->scope = scope;
    e->state = E_CREATING;
    e->paused = paused;
    list_init(&e->kill_waiters);
    e->created_wall_ms = created;
    e->timeout_s = timeout;
    e->end_at_wall_ms = end;
    e->last_active_ms = now_msec();
    e->metadata = json_deep_copy(meta);
    e->env = json_deep_copy(env);
    if (!e->metadata || !e->env || loop_timer_new(t->loop, on_deadline, e, &e->deadline) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = sandbox_adopt(t->sh, orphan, e->id, &spec, on_ready, e, &e->sb, err)) < 0)
        goto fail;
    sandbox_set_gone_handler(e->sb, on_gone, e);
    list_add_tail(&t->entries, &e->link);
    t->count++;
    if ((rc = hashmap_put(t->map, e->id, e)) < 0) {
        table_kill(e); /* still listed: its end frees it */
        goto out;
    }
    for (unsigned i = 0; i < t->n_hooks; i++) {
        json_t *o = t->hooks[i].name ? json_object_get(r, t->hooks[i].name) : NULL;
        if (o && t->hooks[i].load && (rc = t->hooks[i].load(e, i, o)) < 0) {
            (void)err_set(err, -rc, "its %s state does not load", t->hooks[i].name);
            table_kill(e);
            goto out;
        }
    }
    *ret = e;
    rc = 0;
    goto out;
fail:
    loop_timer_free(e->deadline);
    json_decref(e->metadata);
    json_decref(e->env);
    free(e);
out:
    free(envv);
    json_decref(r);
    return rc;
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
