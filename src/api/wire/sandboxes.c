/*
 * sandboxes.c - the native wire's sandboxes: create, list, info, update
 * (limits and timeout) and delete, the per-request state of the native
 * routes, and the lookups and descriptions the other native files share
 * (a ready sandbox by id, capabilities by name).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "template/set.h"
#include "util/json.h"
#include "util/timeutil.h"

static void
rq_close(struct http_req *req, void *ud)
{
    (void)req;
    free(ud);
}

struct rq *
api_rq(struct api *a, struct http_req *req, const char *id)
{
    struct rq *q = calloc(1, sizeof(*q));
    if (!q) {
        api_error(req, -ENOMEM, NULL);
        return NULL;
    }
    q->api = a;
    if (id)
        (void)snprintf(q->id, sizeof(q->id), "%s", id);
    http_req_set_userdata(req, q, rq_close);
    return q;
}

/* The capabilities in caps (a template's or a sandbox's), by name. */
static const unsigned all_caps[] = {TEMPLATE_CAP_SHELL, TEMPLATE_CAP_FILES, TEMPLATE_CAP_CODE,
                                    TEMPLATE_CAP_TERMINAL, TEMPLATE_CAP_PORTS};

json_t *
api_caps_json(unsigned caps)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < ELEMENTSOF(all_caps); i++)
        if (caps & all_caps[i])
            (void)json_array_append_new(arr, json_string(template_cap_name(all_caps[i])));
    return arr;
}

struct entry *
api_find(struct api *a, struct http_req *req, const char *id)
{
    struct entry *e = table_find(a->table, id);
    if (!e || e->state == E_DYING) {
        if (req)
            api_error_msg(req, 404, "not_found", "no sandbox '%.64s'", id);
        return NULL;
    }
    if (e->state == E_CREATING) {
        if (req)
            api_error_msg(req, 409, "conflict", "sandbox '%s' is still being created", id);
        return NULL;
    }
    table_touch(e);
    return e;
}

json_t *
api_entry_json(struct api *a, struct entry *e, bool with_usage)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    const struct sandbox_limits *l = sandbox_limits(e->sb);
    (void)json_set(o, "id", json_string(e->id));
    (void)json_set(o, "template", json_string(e->tmpl ? e->tmpl->name : "base"));
    (void)json_set(o, "capabilities", api_caps_json(e->caps));
    (void)json_set(o, "state",
                   json_string(e->state == E_READY      ? "running"
                               : e->state == E_CREATING ? "creating"
                                                        : "stopping"));
    (void)json_set(o, "created_at", api_time_json_or_null(e->created_wall_ms));
    (void)json_set(o, "end_at", api_time_json_or_null(e->end_at_wall_ms));
    (void)json_set(o, "timeout_s", json_integer((json_int_t)e->timeout_s));
    (void)json_set(o, "cpu", json_real(l->cpu_millis / 1000.0));
    (void)json_set(o, "memory_mb", json_integer((json_int_t)(l->memory_bytes >> 20)));
    (void)json_set(o, "pids", json_integer(l->pids));
    (void)json_set(o, "disk_mb",
                   l->disk_bytes ? json_integer((json_int_t)(l->disk_bytes >> 20)) : json_null());
    (void)json_set(o, "isolation", json_string(a->cfg.isolation));
    (void)json_set(o, "metadata", json_incref(e->metadata));
    (void)json_set(
            o, "processes",
            json_integer((json_int_t)(e->state == E_READY ? sandbox_proc_count(e->sb, true) : 0)));
    if (with_usage && e->state == E_READY) {
        struct sandbox_stats st;
        if (sandbox_stats(e->sb, &st) == 0) {
            json_t *u = json_object();
            (void)json_set(u, "memory_bytes", json_integer((json_int_t)st.memory_bytes));
            (void)json_set(u, "pids", json_integer((json_int_t)st.pids));
            (void)json_set(u, "cpu_usec", json_integer((json_int_t)st.cpu_usec));
            (void)json_set(u, "oom_kills", json_integer((json_int_t)st.oom_kills));
            uint64_t disk;
            if (sandbox_disk_usage(e->sb, &disk) == 0)
                (void)json_set(u, "disk_bytes", json_integer((json_int_t)disk));
            (void)json_set(o, "usage", u);
        }
    }
    return o;
}

/* Decodes cpu/memory_mb/pids/disk_mb into l (keeping what is absent). */
static int
decode_limits(struct api *a, json_t *body, struct sandbox_limits *l, struct err *err)
{
    double cpu;
    uint64_t mem, pids, disk;
    int r;

    r = api_decode_disk_mb(a, body, &disk, err);
    if (r < 0)
        return r;
    if (r > 0)
        l->disk_bytes = disk;
    r = json_get_num(body, "cpu", false, 0.01, (double)a->cfg.host_cpus, &cpu, err);
    if (r < 0)
        return r;
    if (r > 0)
        l->cpu_millis = (uint32_t)lround(cpu * 1000.0);
    r = json_get_u64(body, "memory_mb", false, a->cfg.host_memory_bytes >> 20, &mem, err);
    if (r < 0)
        return r;
    if (r > 0) {
        if (mem < 16)
            return err_set(err, EINVAL, "'memory_mb' must be at least 16");
        l->memory_bytes = mem << 20;
    }
    r = json_get_u64(body, "pids", false, 1u << 22, &pids, err);
    if (r < 0)
        return r;
    if (r > 0) {
        if (pids < 8)
            return err_set(err, EINVAL, "'pids' must be at least 8");
        l->pids = (uint32_t)pids;
    }
    return 0;
}

/* The native create's answer: 201 with the entry and its timings, once the
 * template's start and ready commands say so. */
static void
native_ready(struct api *a, struct entry *e, int r, const struct err *err, struct http_req *req)
{
    if (r < 0) {
        if (req) {
            api_error(req, r == -ECANCELED || r == -EOPNOTSUPP ? r : -EIO, err);
            http_req_unref(req);
        }
        return;
    }
    if (!req) {
        api_template_start(a, e, NULL, NULL);
        return;
    }
    const struct sandbox_timings *t = sandbox_get_timings(e->sb);
    json_t *o = api_entry_json(a, e, false);
    json_t *tj = json_object();
    if (o && tj) {
        (void)json_set(tj, "total_ms", json_real(t->total_us / 1000.0));
        (void)json_set(tj, "from_pool", json_boolean(t->from_pool));
        if (!t->from_pool) {
            (void)json_set(tj, "prepare_ms", json_real(t->prepare_us / 1000.0));
            (void)json_set(tj, "clone_ms", json_real(t->clone_us / 1000.0));
            (void)json_set(tj, "init_ms", json_real(t->init_us / 1000.0));
        }
        (void)json_set(o, "timings", tj);
    } else {
        json_decref(tj);
    }
    api_template_start(a, e, req, o); /* answers when ready_cmd says so */
}

static void
create_done(struct http_req *req, const char *body, size_t len)
{
    struct api *a = ((struct rq *)http_req_userdata(req))->api;
    static const char *const allowed[] = {"template", "env",       "cpu",      "memory_mb", "pids",
                                          "disk_mb",  "timeout_s", "metadata", NULL};
    struct err err = {0};
    json_t *j = NULL;
    const char *tmpl = "base";
    struct api_create_req c = {
            .timeout_s = a->cfg.default_timeout_s,
            .lim = {a->cfg.default_memory_bytes, a->cfg.default_cpu_millis, a->cfg.default_pids,
                    a->cfg.default_disk_bytes},
            .scope = ((struct rq *)http_req_userdata(req))->scope,
    };
    struct entry *e;
    int r;

    c.ready = native_ready;
    if (len == 0) {
        j = json_object();
    } else if ((r = json_parse(body, len, &j, &err)) < 0) {
        api_error(req, r, &err);
        return;
    }
    if ((r = json_check_object(j, allowed, &err)) < 0 ||
        (r = json_get_str(j, "template", false, &tmpl, &err)) < 0)
        goto fail;
    c.t = template_set_find(a->templates, tmpl);
    if (!c.t || !api_scope_template(c.scope, c.t)) {
        api_error_msg(req, 404, "not_found", "no template '%.64s'", tmpl);
        goto out;
    }
    api_template_limits(a, c.t, &c.lim);
    if ((r = json_get_str_map(j, "env", API_ENV_MAX, API_ENV_BYTES, &c.env, &err)) < 0 ||
        (r = json_get_str_map(j, "metadata", API_META_MAX, API_META_BYTES, &c.meta, &err)) < 0 ||
        (r = json_get_u64(j, "timeout_s", false, a->cfg.max_timeout_s, &c.timeout_s, &err)) < 0 ||
        (r = decode_limits(a, j, &c.lim, &err)) < 0)
        goto fail;
    if ((r = api_create(a, req, &c, &e, &err)) < 0)
        goto fail;
    goto out;
fail:
    api_error(req, r, &err);
out:
    json_decref(j);
}

void
wire_sandbox_list(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    (void)r;
    json_t *arr = json_array();
    list_foreach (l, table_entries(a->table)) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state != E_CREATING)
            (void)json_array_append_new(arr, api_entry_json(a, e, false));
    }
    json_t *o = json_object();
    (void)json_set(o, "sandboxes", arr);
    api_json(req, 200, o);
}

static void
update_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct api *a = q->api;
    static const char *const allowed[] = {"cpu", "memory_mb", "pids", "disk_mb", "timeout_s", NULL};
    struct err err = {0};
    json_t *j = NULL;
    uint64_t timeout;
    struct sandbox_limits lim;
    int r, has_timeout;

    struct entry *e = api_find(a, req, q->id);
    if (!e)
        return;
    lim = *sandbox_limits(e->sb);
    if ((r = json_parse(body, len, &j, &err)) < 0 || (r = json_check_object(j, allowed, &err)) < 0)
        goto fail;
    if ((r = decode_limits(a, j, &lim, &err)) < 0)
        goto fail;
    has_timeout = json_get_u64(j, "timeout_s", false, a->cfg.max_timeout_s, &timeout, &err);
    if (has_timeout < 0) {
        r = has_timeout;
        goto fail;
    }
    if (memcmp(&lim, sandbox_limits(e->sb), sizeof(lim)) != 0 &&
        (r = sandbox_set_limits(e->sb, &lim, &err)) < 0) {
        if (r == -EBUSY)
            (void)err_set(&err, EBUSY, "the sandbox uses more than the new limit");
        goto fail;
    }
    if (has_timeout) {
        /* Like E2B: the new timeout counts from now. */
        e->timeout_s = timeout;
        table_set_end(e, timeout ? wall_msec() + timeout * 1000u : 0);
    }
    json_decref(j);
    api_json(req, 200, api_entry_json(a, e, true));
    return;
fail:
    json_decref(j);
    api_error(req, r, &err);
}

static void
delete_answer(void *ud)
{
    struct http_req *req = ud;
    api_no_content(req);
    http_req_unref(req);
}

static void
delete_drop(void *ud)
{
    http_req_unref(ud);
}

static void
delete_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct api *a = q->api;
    (void)body;
    (void)len;
    struct entry *e = table_find(a->table, q->id);
    if (!e) {
        api_error_msg(req, 404, "not_found", "no sandbox '%.64s'", q->id);
        return;
    }
    if (e->state == E_CREATING) {
        api_error_msg(req, 409, "conflict", "sandbox '%s' is still being created", q->id);
        return;
    }
    http_req_ref(req);
    if (table_kill_wait(e, delete_answer, delete_drop, req) < 0) {
        http_req_unref(req);
        api_error(req, -ENOMEM, NULL);
    }
}

/* --- routes --- */

void
wire_sandbox_create(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    struct rq *q = api_rq(a, req, NULL);
    if (q) {
        q->scope = r->scope;
        http_req_read_body(req, API_JSON_MAX, create_done);
    }
}

void
wire_sandbox_info(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    struct entry *e = api_find(a, req, r->id);
    if (e)
        api_json(req, 200, api_entry_json(a, e, true));
}

void
wire_sandbox_update(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    if (api_rq(a, req, r->id))
        http_req_read_body(req, API_JSON_MAX, update_done);
}

void
wire_sandbox_delete(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    if (api_rq(a, req, r->id))
        http_req_read_body(req, 0, delete_done);
}
