/*
 * test-table.c - the sandbox table without a daemon or a jail: a fake
 * sandbox (below) that becomes ready, fails or goes when the test says.
 * Create and its refusals (draining, no isolation, full), find in every
 * state, ready and failed creates calling back once, kill waiters, the
 * surfaces' hooks (dying once per kill, free once per entry, in order),
 * the idle sweep sparing streams, kill-all, and table_free() dropping what
 * never got called back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The table under test, with its statics. */
#include "../../../src/api/core/table.c"

/* --- a fake sandbox --- */

struct sandbox {
    sandbox_ready_fn ready;
    void *ready_ud;
    sandbox_gone_fn gone;
    void *gone_ud;
    bool killed, adopted;
    struct sandbox_timings t;
    struct sandbox_limits limits;
    const char *env0; /* the spec's first env entry, as given (borrowed from a static) */
};

/* The last record a sandbox was given; records_r < 0: what set_record
 * answers instead (-EOPNOTSUPP: the host keeps none). */
static char record[SANDBOX_RECORD_MAX + 1];
static size_t record_len;
static int records_r, record_calls;

static int fake_create_r; /* what the next sandbox_create() returns */
static struct sandbox *last_sb;
static unsigned drained_pool;

int
sandbox_create(struct sandbox_host *h, const char *id, const struct sandbox_spec *spec,
               sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err)
{
    (void)h;
    (void)id;
    (void)spec;
    if (fake_create_r < 0)
        return err_set(err, -fake_create_r, "fake create fails");
    struct sandbox *sb = calloc(1, sizeof(*sb));
    assert_non_null(sb);
    sb->ready = ready;
    sb->ready_ud = ud;
    sb->limits = spec->limits;
    *ret = last_sb = sb;
    return 0;
}

int
sandbox_adopt(struct sandbox_host *h, const char *orphan, const char *id,
              const struct sandbox_spec *spec, sandbox_ready_fn ready, void *ud,
              struct sandbox **ret, struct err *err)
{
    (void)orphan;
    static char env0[64];
    int r = sandbox_create(h, id, spec, ready, ud, ret, err);
    if (r == 0) {
        (*ret)->adopted = true;
        (void)snprintf(env0, sizeof(env0), "%s", spec->env && spec->env[0] ? spec->env[0] : "");
        (*ret)->env0 = env0;
    }
    return r;
}

const struct sandbox_limits *
sandbox_limits(const struct sandbox *sb)
{
    return &sb->limits;
}

int
sandbox_set_record(struct sandbox *sb, const void *rec, size_t len, struct err *err)
{
    (void)sb;
    (void)err;
    record_calls++;
    if (records_r < 0)
        return records_r;
    assert_true(len <= SANDBOX_RECORD_MAX);
    memcpy(record, rec, len);
    record_len = len;
    return 0;
}

void
sandbox_set_gone_handler(struct sandbox *sb, sandbox_gone_fn fn, void *ud)
{
    sb->gone = fn;
    sb->gone_ud = ud;
}

void
sandbox_kill(struct sandbox *sb)
{
    sb->killed = true;
}

void
sandbox_free(struct sandbox *sb)
{
    free(sb);
}

const struct sandbox_timings *
sandbox_get_timings(const struct sandbox *sb)
{
    return &sb->t;
}

void
sandbox_host_drain_pool(struct sandbox_host *h)
{
    (void)h;
    drained_pool++;
}

static void
fake_ready(struct sandbox *sb, int r)
{
    struct err err = {0};
    if (r < 0)
        (void)err_set(&err, -r, "fake failure");
    sb->ready(sb, r, r < 0 ? &err : NULL, sb->ready_ud);
}

static void
fake_gone(struct sandbox *sb)
{
    sb->gone(sb, sb->gone_ud);
}

/* --- what the callbacks saw --- */

struct seen {
    int ready_calls, ready_r, drops, done, dying[2], freed[2];
    unsigned order[8], n_order;
    struct entry *e;
};
static struct seen seen;

static void
on_ready_cb(struct entry *e, int r, const struct err *err, void *ud)
{
    (void)err;
    assert_ptr_equal(ud, &seen);
    seen.ready_calls++;
    seen.ready_r = r;
    seen.e = e;
}

static void
on_drop_cb(void *ud)
{
    assert_ptr_equal(ud, &seen);
    seen.drops++;
}

static void
on_done_cb(void *ud)
{
    assert_ptr_equal(ud, &seen);
    seen.done++;
}

static void
hook_dying(struct entry *e, unsigned slot)
{
    (void)e;
    seen.dying[slot]++;
}

static void
hook_free(struct entry *e, unsigned slot)
{
    assert_ptr_equal(e->ext[slot], &seen.freed[slot]);
    seen.freed[slot]++;
    seen.order[seen.n_order++] = slot;
    e->ext[slot] = NULL;
}

static const struct table_hooks hooks = {.dying = hook_dying, .free = hook_free};

struct fixture {
    struct loop *loop;
    struct table *t;
    unsigned slot[2];
};

static int
setup(void **state)
{
    static struct fixture f;
    struct table_config c = {.max_sandboxes = 2, .idle_timeout_s = 1};

    memset(&seen, 0, sizeof(seen));
    fake_create_r = 0;
    drained_pool = 0;
    assert_int_equal(loop_new(&f.loop), 0);
    assert_int_equal(table_new(f.loop, NULL, &f, &c, &f.t), 0);
    assert_int_equal(table_add_hooks(f.t, &hooks, &f.slot[0]), 0);
    assert_int_equal(table_add_hooks(f.t, &hooks, &f.slot[1]), 0);
    *state = &f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    table_free(f->t);
    loop_free(f->loop);
    return 0;
}

static struct entry *
create(struct fixture *f, struct err *err)
{
    struct sandbox_spec spec = {0};
    struct table_create c = {.spec = &spec, .timeout_s = 0};
    struct entry *e = NULL;
    int r = table_create(f->t, &c, on_ready_cb, on_drop_cb, &seen, &e, err);
    if (r < 0)
        return NULL;
    e->ext[f->slot[0]] = &seen.freed[0];
    e->ext[f->slot[1]] = &seen.freed[1];
    return e;
}

static void
test_create_ready_find(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    assert_ptr_equal(table_owner(f->t), f);
    struct entry *e = create(f, &err);
    assert_non_null(e);
    assert_int_equal(strlen(e->id), TABLE_ID_LEN);
    assert_int_equal(e->state, E_CREATING);
    /* Found in every state; finding answers nothing and is no activity. */
    assert_ptr_equal(table_find(f->t, e->id), e);
    assert_null(table_find(f->t, "nope"));
    assert_int_equal(table_count(f->t), 1);
    assert_int_equal(seen.ready_calls, 0);

    fake_ready(e->sb, 0);
    assert_int_equal(seen.ready_calls, 1);
    assert_int_equal(seen.ready_r, 0);
    assert_int_equal(e->state, E_READY);
    assert_int_equal(table_stats(f->t)->created, 1);

    /* Killed: dying hooks once, even if killed again; gone: free hooks
     * in the order they were added, the waiter told, out of the table. */
    assert_int_equal(table_kill_wait(e, on_done_cb, on_drop_cb, &seen), 0);
    table_kill(e);
    assert_int_equal(e->state, E_DYING);
    assert_true(e->sb->killed);
    assert_int_equal(seen.dying[0], 1);
    assert_int_equal(seen.dying[1], 1);
    assert_ptr_equal(table_find(f->t, e->id), e); /* until it is gone */
    fake_gone(e->sb);
    assert_int_equal(seen.done, 1);
    assert_int_equal(seen.freed[0], 1);
    assert_int_equal(seen.freed[1], 1);
    assert_int_equal(seen.order[0], 0);
    assert_int_equal(seen.order[1], 1);
    assert_int_equal(seen.drops, 0);
    assert_int_equal(table_count(f->t), 0);
    assert_int_equal(table_stats(f->t)->ended, 1);
}

static void
test_create_fails(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    /* sandbox_create() refuses: nothing is called back, nothing is kept. */
    fake_create_r = -ENOSPC;
    assert_null(create(f, &err));
    assert_int_equal(err.errnum, ENOSPC);
    assert_int_equal(table_count(f->t), 0);
    assert_int_equal(seen.ready_calls + seen.drops, 0);

    /* Fails later: called back once with the error, then freed. */
    fake_create_r = 0;
    struct entry *e = create(f, &err);
    assert_non_null(e);
    fake_ready(e->sb, -EIO);
    assert_int_equal(seen.ready_calls, 1);
    assert_int_equal(seen.ready_r, -EIO);
    assert_int_equal(seen.freed[0], 1);
    assert_int_equal(seen.dying[0], 0);
    assert_int_equal(table_count(f->t), 0);
    assert_int_equal(table_stats(f->t)->failed, 1);
}

static void
test_refusals(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    table_set_missing(f->t, "user namespaces");
    assert_null(create(f, &err));
    assert_int_equal(err.errnum, EOPNOTSUPP);
    assert_string_equal(table_missing(f->t), "user namespaces");
    table_set_missing(f->t, "");

    err = (struct err){0}; /* the first cause stays in an err */
    assert_non_null(create(f, &err));
    assert_non_null(create(f, &err));
    assert_int_equal(table_admits(f->t, NULL), -EAGAIN); /* max_sandboxes 2 */
    assert_null(create(f, &err));
    assert_int_equal(err.errnum, EAGAIN);

    table_drain(f->t);
    table_drain(f->t);
    assert_true(table_draining(f->t));
    assert_int_equal(drained_pool, 1);
    assert_int_equal(table_admits(f->t, NULL), -ESHUTDOWN);
    /* The two never became ready: freed with the table, their creator's
     * ud dropped instead of called back (teardown checks nothing more). */
}

static void
test_free_drops(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    struct entry *a = create(f, &err), *b = create(f, &err);
    assert_non_null(a);
    assert_non_null(b);
    fake_ready(b->sb, 0);
    assert_int_equal(table_kill_wait(b, on_done_cb, on_drop_cb, &seen), 0);
    table_free(f->t);
    f->t = NULL;
    assert_int_equal(seen.drops, 2); /* a's creator, b's waiter */
    assert_int_equal(seen.ready_calls, 1);
    assert_int_equal(seen.done, 0);
    assert_int_equal(seen.freed[0], 2);
}

static void
test_idle_and_kill_all(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    struct entry *a = create(f, &err), *b = create(f, &err);
    fake_ready(a->sb, 0);
    fake_ready(b->sb, 0);
    /* Both idle past the backstop; b has a stream attached. */
    a->last_active_ms = b->last_active_ms = now_msec() - 5000;
    table_stream_attached(b, true);
    b->last_active_ms = now_msec() - 5000;
    assert_int_equal(table_sweep_idle(f->t), 1);
    assert_int_equal(a->state, E_DYING);
    assert_int_equal(b->state, E_READY);
    table_stream_attached(b, false);
    table_stream_attached(b, false); /* never below zero */
    assert_int_equal(b->streams, 0);
    assert_int_equal(table_sweep_idle(f->t), 0); /* detaching was activity */

    table_kill_all(f->t, on_done_cb, &seen);
    assert_int_equal(b->state, E_DYING);
    assert_int_equal(seen.done, 0);
    fake_gone(a->sb);
    assert_int_equal(seen.done, 0);
    fake_gone(b->sb);
    assert_int_equal(seen.done, 1);

    table_kill_all(f->t, on_done_cb, &seen); /* nothing left: at once */
    assert_int_equal(seen.done, 2);
}

static void
test_deadline(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};

    struct entry *e = create(f, &err);
    fake_ready(e->sb, 0);
    table_set_end(e, wall_msec() - 1); /* past: fires on the next turn */
    assert_true(loop_timer_armed(e->deadline));
    table_set_end(e, 0);
    assert_false(loop_timer_armed(e->deadline));
    assert_int_equal(e->state, E_READY);
}

static void
test_hooks_max(void **state)
{
    struct fixture *f = *state;
    unsigned slot;
    (void)state;

    for (unsigned i = 2; i < TABLE_EXT_MAX; i++)
        assert_int_equal(table_add_hooks(f->t, &hooks, &slot), 0);
    assert_int_equal(table_add_hooks(f->t, &hooks, &slot), -ENOSPC);
}

/* A record's round trip: what a ready entry records, a later table takes
 * over as the same entry; a record naming a gone template or scoped key,
 * or that does not parse, is refused; a host without records is asked
 * once. */
static const struct template *
no_template(void *ud, const char *name)
{
    (void)ud;
    (void)name;
    return NULL;
}

static int
any_scope(void *ud, const char *key, const struct api_scope **ret)
{
    (void)ud;
    *ret = NULL; /* the full key, for the test */
    return strcmp(key, "gone") ? 0 : -ENOENT;
}

static void
test_records(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    const char *env[] = {"A=1", "B=two", NULL};
    struct sandbox_spec spec = {.limits = {.memory_bytes = 64 << 20, .cpu_millis = 500, .pids = 9},
                                .env = env};
    json_t *meta = json_pack("{s:s}", "owner", "me");
    struct table_create c = {.spec = &spec, .timeout_s = 300, .meta = meta};
    struct entry *e = NULL;

    records_r = 0;
    assert_int_equal(table_create(f->t, &c, on_ready_cb, on_drop_cb, &seen, &e, &err), 0);
    json_decref(meta);
    e->ext[f->slot[0]] = &seen.freed[0];
    e->ext[f->slot[1]] = &seen.freed[1];
    e->paused = true;
    fake_ready(e->sb, 0);
    assert_true(record_len > 0);
    char saved[SANDBOX_RECORD_MAX + 1] = "";
    size_t saved_len = record_len;
    memcpy(saved, record, record_len);
    char id[TABLE_ID_LEN + 1];
    memcpy(id, e->id, sizeof(id));
    uint64_t created = e->created_wall_ms, end = e->end_at_wall_ms;
    assert_true(end > created);

    /* Taken over by another table (the next network process). */
    struct table *t2 = NULL;
    struct table_config tc = {.max_sandboxes = 4};
    assert_int_equal(table_new(f->loop, NULL, f, &tc, &t2), 0);
    if (!t2)
        abort();
    const struct table_resolve res = {.tmpl = no_template, .scope = any_scope};
    struct entry *e2 = NULL;
    assert_int_equal(table_adopt(t2, "pooljail", saved, saved_len, &res, &e2, &err), 0);
    assert_string_equal(e2->id, id);
    assert_true(e2->sb->adopted);
    assert_int_equal(e2->created_wall_ms, created);
    assert_int_equal(e2->end_at_wall_ms, end);
    assert_int_equal(e2->timeout_s, 300);
    assert_true(e2->paused);
    assert_string_equal(json_string_value(json_object_get(e2->metadata, "owner")), "me");
    assert_int_equal(e2->sb->limits.memory_bytes, 64 << 20);
    assert_int_equal(e2->sb->limits.cpu_millis, 500);
    assert_int_equal(e2->sb->limits.pids, 9);
    assert_string_equal(e2->sb->env0, "A=1");
    assert_int_equal(json_array_size(e2->env), 2);
    assert_ptr_equal(table_find(t2, id), e2);
    /* twice: refused */
    assert_int_equal(table_adopt(t2, "pooljail", saved, saved_len, &res, &e2, &err), -EEXIST);
    /* bad records: refused before anything is made */
    static const char *const bad[] = {"",
                                      "[]",
                                      "{\"v\":1}",
                                      "not json",
                                      "{\"v\":2,\"created\":1}",
                                      "{\"v\":1,\"id\":\"zzzzzzzzzzzzzzzzzzzz\"}",
                                      "{\"v\":1,\"id\":\"../zzzzzzzzzzzzzzzzz\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct entry *x = NULL;
        assert_true(table_adopt(t2, "other", bad[i], strlen(bad[i]), &res, &x, &err) < 0);
        assert_null(x);
        assert_null(table_find(t2, "zzzzzzzzzzzzzzzzzzzz"));
    }
    /* a record naming a scoped key that is gone: refused */
    json_t *j = json_loadb(saved, saved_len, 0, NULL);
    assert_non_null(j);
    json_object_set_new(j, "id", json_string("yyyyyyyyyyyyyyyyyyyy"));
    json_object_set_new(j, "scope", json_string("gone"));
    char *g = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    struct entry *x = NULL;
    assert_int_equal(table_adopt(t2, "other", g, strlen(g), &res, &x, &err), -ENOENT);
    free(g);
    assert_int_equal(table_count(t2), 1);
    table_free(t2);

    /* A host that keeps no records is asked once. */
    records_r = -EOPNOTSUPP;
    record_calls = 0;
    struct entry *e3 = create(f, &err);
    assert_non_null(e3);
    fake_ready(e3->sb, 0);
    table_set_end(e3, 0);
    assert_int_equal(record_calls, 1);
    records_r = 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_create_ready_find, setup, teardown),
            cmocka_unit_test_setup_teardown(test_create_fails, setup, teardown),
            cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
            cmocka_unit_test_setup_teardown(test_free_drops, setup, teardown),
            cmocka_unit_test_setup_teardown(test_idle_and_kill_all, setup, teardown),
            cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
            cmocka_unit_test_setup_teardown(test_hooks_max, setup, teardown),
            cmocka_unit_test_setup_teardown(test_records, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
