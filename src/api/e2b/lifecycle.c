/*
 * lifecycle.c - an E2B sandbox's life past create: pause (the cgroup
 * frozen, memory kept), pause without memory (its files a hidden
 * snapshot, its jail gone) and resume by connect, snapshots of a live
 * sandbox, and fork (sandboxes made from one snapshot of it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b/e2b-internal.h"
#include "template/set.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"

static int
set_frozen(struct entry *e, bool frozen, struct err *err)
{
    int r = sandbox_freeze(e->sb, frozen, err);
    if (r < 0)
        return r;
    e->paused = frozen;
    table_record(e);
    return 0;
}

/* --- pause without memory --- */

void
e2b_cold_drop(struct api *a, struct e2b_cold *c)
{
    if (c->snap[0])
        (void)e2b_snapshot_delete(a, c->snap);
    list_remove(&c->link);
    json_decref(c->meta);
    free(c);
}

struct cold_call {
    struct http_req *req;
    char eid[API_ID_LEN + 1]; /* the internal id of the sandbox paused */
};

static void
cold_snapped(struct api *a, int r, const struct err *err, const char *snap_id, bool closing,
             void *ud)
{
    struct cold_call *cc = ud;
    struct entry *e = closing ? NULL : table_find(a->table, cc->eid);
    struct e2b_cold *c = NULL;
    struct list *l = closing ? NULL : e2b_cold_list(a);

    if (closing)
        goto out;
    if (r < 0) {
        e2b_snap_fail(cc->req, r, err);
        goto out;
    }
    if (!e || e->state != E_READY || !e2b_of(e) || !l) {
        (void)e2b_snapshot_delete(a, snap_id);
        e2b_error(cc->req, 404, "sandbox '%s' went while it was paused", cc->eid);
        goto out;
    }
    c = e2b_of(e)->cold;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c || !(c->meta = json_deep_copy(e->metadata))) {
            free(c);
            (void)e2b_snapshot_delete(a, snap_id);
            e2b_error(cc->req, 500, "out of memory");
            goto out;
        }
        memcpy(c->id, e->id, sizeof(c->id));
        memcpy(c->token, e2b_of(e)->token, sizeof(c->token));
        memcpy(c->alias, e2b_of(e)->alias, sizeof(c->alias));
        c->t = e->tmpl;
        c->scope = e->scope;
        c->created_wall_ms = e->created_wall_ms;
        list_add_tail(l, &c->link);
    } else {
        json_decref(c->meta);
        c->meta = json_deep_copy(e->metadata);
        if (!c->meta)
            c->meta = json_object();
    }
    c->timeout_s = e->timeout_s;
    c->lim = *sandbox_limits(e->sb);
    (void)snprintf(c->snap, sizeof(c->snap), "%s", snap_id);
    c->live = NULL;
    e2b_of(e)->cold = NULL; /* its end no longer ends the E2B sandbox */
    table_kill(e);          /* every process and the jail go */
    log_info("sandbox=%s paused without memory (snapshot=%s)", c->id, snap_id);
    api_no_content(cc->req);
out:
    http_req_unref(cc->req);
    free(cc);
}

/* Pause with {"memory": false}: keep the files, end everything else. */
static void
cold_pause(struct api *a, struct http_req *req, struct entry *e)
{
    struct err err = {0};
    struct cold_call *cc = calloc(1, sizeof(*cc));
    if (!cc) {
        e2b_error(req, 500, "out of memory");
        return;
    }
    cc->req = req;
    memcpy(cc->eid, e->id, sizeof(cc->eid));
    http_req_ref(req);
    int r = e2b_snapshot_take(a, e, NULL, true, cold_snapped, cc, &err);
    if (r < 0) {
        http_req_unref(req);
        free(cc);
        e2b_snap_fail(req, r, &err);
    }
}

static void
cold_resumed(struct api *a, struct entry *e, int r, const struct err *err, void *ud)
{
    struct e2b_cold *c = ud;
    (void)err;
    c->resuming = false;
    if (r < 0 || !e)
        return; /* still paused: connect may try again */
    c->live = e;
    (void)e2b_snapshot_delete(a, c->snap);
    c->snap[0] = '\0';
    log_info("sandbox=%s resumed as a new boot (internal id %s)", c->id, e->id);
}

/* Connect to a sandbox paused without memory: a new sandbox of its
 * template with its files, answered (201) under its old id and token. */
static void
cold_resume(struct api *a, struct http_req *req, struct e2b_cold *c, uint64_t timeout_s)
{
    struct err err = {0};
    struct entry *e = NULL;
    struct api_create_req cr = {
            .t = c->t,
            .scope = c->scope,
            .meta = c->meta,
            .timeout_s = timeout_s,
            .lim = c->lim,
            .ready = e2b_create_ready,
    };
    struct e2b_sb *x;
    int r;

    if (c->resuming) {
        e2b_error(req, 409, "sandbox '%s' is being resumed", c->id);
        return;
    }
    x = calloc(1, sizeof(*x));
    if (!x) {
        e2b_error(req, 500, "out of memory");
        return;
    }
    list_init(&x->streams);
    memcpy(x->token, c->token, sizeof(x->token));
    memcpy(x->alias, c->alias, sizeof(x->alias));
    if ((r = api_create(a, req, &cr, &e, &err)) < 0) {
        free(x);
        e2b_fail(req, r, &err);
        return;
    }
    e->ext[e2b_slot(e)] = x;
    x->cold = c;
    e->created_wall_ms = c->created_wall_ms; /* startedAt stays the first start */
    if ((r = e2b_restore_attach(a, e, c->snap, cold_resumed, c)) < 0) {
        table_kill(e); /* on_ready answers the request */
        return;
    }
    c->resuming = true;
}

void
e2b_connect_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    uint64_t t = E2B_DEFAULT_TIMEOUT_S;
    int r, has;
    struct e2b_cold *c = e2b_find_cold(q->api, q->id, q->scope);
    struct entry *e = c ? NULL : e2b_find(q->api, req, q->id, q->scope);
    if (!e && !c)
        return;
    if (len > 0 && ((r = json_parse(body, len, &j, &err)) < 0 || !json_is_object(j) ||
                    (has = e2b_read_timeout(j, q->api->cfg.max_timeout_s, &t, &err)) < 0)) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "the body must be a JSON object");
        return;
    }
    json_decref(j);
    if (c) {
        cold_resume(q->api, req, c, t);
        return;
    }
    if (!e2b_of(e)) {
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    unsigned status = 200;
    if (e->paused) {
        if ((r = set_frozen(e, false, &err)) < 0) {
            e2b_fail(req, r, &err);
            return;
        }
        log_info("sandbox=%s resumed", e->id);
        table_set_end(e, wall_msec() + t * 1000u);
        status = 201;
    } else {
        /* Connecting never shortens a sandbox's life. */
        uint64_t end = wall_msec() + t * 1000u;
        if (e->end_at_wall_ms && end > e->end_at_wall_ms)
            table_set_end(e, end);
    }
    api_json(req, status, e2b_create_answer(q->api, e));
}

void
e2b_pause_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    int r;
    if (e2b_find_cold(q->api, q->id, q->scope)) {
        e2b_error(req, 409, "sandbox '%s' is already paused", q->id);
        return;
    }
    struct entry *e = e2b_find(q->api, req, q->id, q->scope);
    if (!e)
        return;
    if (len > 0 && (json_parse(body, len, &j, &err) < 0 || !json_is_object(j))) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "the body must be a JSON object");
        return;
    }
    json_t *mem = j ? json_object_get(j, "memory") : NULL;
    bool keep_memory = !mem || !json_is_false(mem);
    json_decref(j);
    if (!e2b_of(e)) {
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    if (e->paused) {
        e2b_error(req, 409, "sandbox '%s' is already paused", e->id);
        return;
    }
    if (!keep_memory) {
        cold_pause(q->api, req, e);
        return;
    }
    e2b_entry_dying(e); /* open streams end; processes stay, frozen */
    if ((r = set_frozen(e, true, &err)) < 0) {
        e2b_fail(req, r, &err);
        return;
    }
    table_set_end(e, 0); /* a paused sandbox waits for resume */
    log_info("sandbox=%s paused", e->id);
    api_no_content(req);
}

/* --- snapshots and fork --- */

struct snap_call {
    struct http_req *req;
    char name[160];
};

static void
snap_answer(struct api *a, int r, const struct err *err, const char *snap_id, bool closing,
            void *ud)
{
    struct snap_call *sc = ud;
    (void)a;
    if (!closing) {
        if (r < 0) {
            e2b_snap_fail(sc->req, r, err);
        } else {
            json_t *o = json_object(), *names = json_array();
            if (sc->name[0])
                (void)json_array_append_new(names, json_string(sc->name));
            (void)json_set(o, "snapshotID", json_string(snap_id));
            (void)json_set(o, "names", names);
            api_json(sc->req, 201, o);
        }
    }
    http_req_unref(sc->req);
    free(sc);
}

/* Parses an optional JSON object body; answers 400 and returns NULL-ish
 * false when it is not one. */
static bool
body_object(struct http_req *req, const char *body, size_t len, json_t **ret)
{
    struct err err = {0};
    *ret = NULL;
    if (len == 0)
        return true;
    if (json_parse(body, len, ret, &err) < 0 || !json_is_object(*ret)) {
        json_decref(*ret);
        *ret = NULL;
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "the body must be a JSON object");
        return false;
    }
    return true;
}

void
e2b_snapshot_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j;
    const char *name = NULL;
    int r;
    struct entry *e = e2b_find(q->api, req, q->id, q->scope);
    if (!e || !body_object(req, body, len, &j))
        return;
    if (j && (r = json_get_str(j, "name", false, &name, &err)) < 0) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    if (!e2b_of(e)) {
        json_decref(j);
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    struct snap_call *sc = calloc(1, sizeof(*sc));
    if (!sc) {
        json_decref(j);
        e2b_error(req, 500, "out of memory");
        return;
    }
    sc->req = req;
    if (name)
        (void)snprintf(sc->name, sizeof(sc->name), "%s", name);
    http_req_ref(req);
    r = e2b_snapshot_take(q->api, e, name && *name ? name : NULL, false, snap_answer, sc, &err);
    json_decref(j);
    if (r < 0) {
        http_req_unref(req);
        free(sc);
        e2b_snap_fail(req, r, &err);
    }
}

/* A fork: one hidden snapshot, then count sandboxes made from it. */
struct fork {
    struct api *api;
    struct http_req *req;
    const struct template *t;
    const struct api_scope *scope;
    json_t *meta;
    char alias[128];
    char snap[64];
    uint64_t timeout_s;
    struct sandbox_limits lim;
    size_t n, pending;
    json_t *items; /* n slots, null until known */
    struct fork_child {
        struct fork *f;
        size_t i;
    } child[E2B_FORK_MAX];
};

static void
fork_free(struct fork *f)
{
    if (f->req)
        http_req_unref(f->req);
    json_decref(f->meta);
    json_decref(f->items);
    free(f);
}

static json_t *
error_item(unsigned status, const char *msg)
{
    json_t *o = json_object();
    (void)json_set(o, "error", e2b_error_json(status, msg));
    return o;
}

static void
fork_settle(struct fork *f)
{
    if (--f->pending > 0)
        return;
    if (!e2b_snaps_closing(f->api)) {
        api_json(f->req, 201, json_incref(f->items));
        (void)e2b_snapshot_delete(f->api, f->snap); /* the forks have their files */
    }
    fork_free(f);
}

static void
fork_child_done(struct api *a, struct entry *e, int r, const struct err *err, void *ud)
{
    struct fork_child *c = ud;
    char tmp[128];
    json_t *item;
    if (r == 0 && e) {
        item = json_object();
        (void)json_set(item, "sandbox", e2b_create_answer(a, e));
    } else {
        item = error_item(e2b_snap_status(r),
                          err && err->msg[0] ? err->msg
                                             : strerror_r(r < 0 ? -r : EIO, tmp, sizeof(tmp)));
    }
    (void)json_array_set_new(c->f->items, c->i, item);
    fork_settle(c->f);
}

static void
fork_spawn(struct fork *f, size_t i)
{
    struct api *a = f->api;
    struct err err = {0};
    struct entry *e = NULL;
    struct api_create_req c = {
            .t = f->t,
            .scope = f->scope,
            .meta = f->meta,
            .timeout_s = f->timeout_s,
            .lim = f->lim,
            .ready = e2b_create_ready,
    };
    struct e2b_sb *x = calloc(1, sizeof(*x));
    int r = x ? 0 : -ENOMEM;
    f->child[i] = (struct fork_child){.f = f, .i = i};
    if (x) {
        list_init(&x->streams);
        (void)snprintf(x->alias, sizeof(x->alias), "%s", f->alias);
        r = rand_hex(x->token, E2B_TOKEN_LEN / 2);
    }
    if (r == 0)
        r = api_create(a, NULL, &c, &e, &err);
    if (r == 0) {
        e->ext[e2b_slot(e)] = TAKE_PTR(x);
        r = e2b_restore_attach(a, e, f->snap, fork_child_done, &f->child[i]);
        if (r < 0) {
            table_kill(e); /* on_ready frees it: nothing is reported */
            e = NULL;
        }
    }
    free(x);
    if (r < 0)
        fork_child_done(a, NULL, r, &err, &f->child[i]);
}

static void
fork_snapped(struct api *a, int r, const struct err *err, const char *snap_id, bool closing,
             void *ud)
{
    struct fork *f = ud;
    (void)a;
    if (closing) {
        fork_free(f);
        return;
    }
    if (r < 0) {
        e2b_snap_fail(f->req, r, err);
        fork_free(f);
        return;
    }
    (void)snprintf(f->snap, sizeof(f->snap), "%s", snap_id);
    f->pending = f->n + 1; /* settled once more after the loop */
    for (size_t i = 0; i < f->n; i++)
        fork_spawn(f, i);
    fork_settle(f);
}

void
e2b_fork_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j;
    uint64_t t = E2B_DEFAULT_TIMEOUT_S, count = 1;
    int r;
    struct entry *e = e2b_find(a, req, q->id, q->scope);
    if (!e || !body_object(req, body, len, &j))
        return;
    if (j && ((r = e2b_read_timeout(j, a->cfg.max_timeout_s, &t, &err)) < 0 ||
              (r = json_get_u64(j, "count", false, E2B_FORK_MAX, &count, &err)) < 0 ||
              (count == 0 && (r = err_set(&err, EINVAL, "'count' must be at least 1")) < 0))) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    json_decref(j);
    if (t == 0)
        t = E2B_DEFAULT_TIMEOUT_S;
    if (!e2b_of(e)) {
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    struct fork *f = calloc(1, sizeof(*f));
    if (!f || !(f->items = json_array()) || !(f->meta = json_deep_copy(e->metadata))) {
        if (f)
            fork_free(f);
        e2b_error(req, 500, "out of memory");
        return;
    }
    f->api = a;
    f->t = e->tmpl;
    f->scope = e->scope;
    f->n = count;
    f->timeout_s = t;
    f->lim = *sandbox_limits(e->sb);
    (void)snprintf(f->alias, sizeof(f->alias), "%s", e2b_of(e)->alias);
    for (size_t i = 0; i < count; i++)
        (void)json_array_append_new(f->items, json_null());
    f->req = req;
    http_req_ref(req);
    if ((r = e2b_snapshot_take(a, e, NULL, true, fork_snapped, f, &err)) < 0) {
        e2b_snap_fail(req, r, &err);
        fork_free(f);
    }
}
