/*
 * api.c - routing, authentication, the table of live sandboxes with their
 * deadlines, and the operational routes (health, readiness, drain, metrics).
 */
#include "api/api.h"

#include <errno.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "template/set.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"

#define API_MAX_SEGMENTS 8

struct waiter {
    struct list link;
    struct http_req *req;
};

/* --- table --- */

static void entry_free(struct entry *e);
static void arm_deadline(struct entry *e);

static void
entry_unlink(struct api *a, struct entry *e)
{
    (void)hashmap_remove(a->map, e->id);
    list_remove(&e->link);
    a->count--;
    if (a->count == 0 && a->all_gone) {
        void (*fn)(void *) = a->all_gone;
        a->all_gone = NULL;
        fn(a->all_gone_ud);
    }
}

static void
on_gone(struct sandbox *sb, void *ud)
{
    struct entry *e = ud;
    struct api *a = e->api;
    (void)sb;

    if (e->state != E_DYING)
        log_warn("sandbox=%s ended on its own (init exited)", e->id);
    else
        log_debug("sandbox=%s killed", e->id);
    a->m.sandboxes_killed++;
    while (!list_empty(&e->waiters)) {
        struct waiter *w = list_entry(e->waiters.next, struct waiter, link);
        list_remove(&w->link);
        api_no_content(w->req);
        http_req_unref(w->req);
        free(w);
    }
    entry_unlink(a, e);
    entry_free(e);
}

static void
entry_free(struct entry *e)
{
    e2b_entry_free(e);
    ports_entry_free(e);
    loop_timer_free(e->deadline);
    sandbox_free(e->sb);
    json_decref(e->metadata);
    free(e);
}

static void
entry_kill(struct entry *e)
{
    if (e->state == E_DYING)
        return;
    e->state = E_DYING;
    loop_timer_disarm(e->deadline);
    e2b_entry_dying(e);
    sandbox_kill(e->sb);
}

void
api_entry_set_end(struct entry *e, uint64_t end_at_wall_ms)
{
    e->end_at_wall_ms = end_at_wall_ms;
    arm_deadline(e);
}

void
api_entry_kill(struct entry *e)
{
    entry_kill(e);
}

static void
on_deadline(struct loop_timer *t, void *ud)
{
    struct entry *e = ud;
    (void)t;
    log_info("sandbox=%s reached its timeout, killing it", e->id);
    entry_kill(e);
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
api_find(struct api *a, struct http_req *req, const char *id)
{
    struct entry *e = hashmap_get(a->map, id);
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
    api_touch(e);
    return e;
}

void
api_touch(struct entry *e)
{
    e->last_active_ms = now_msec();
}

void
api_stream_attached(struct api *a, const struct out_owner *o, bool attached)
{
    if (o->kind == OWNER_WORKSPACE) {
        if (a->ws)
            workspaces_stream_attached(a->ws, o->id, attached);
        return;
    }
    struct entry *e = hashmap_get(a->map, o->id);
    if (!e)
        return;
    if (attached)
        e->streams++;
    else if (e->streams > 0)
        e->streams--;
    api_touch(e);
}

static json_t *
time_json(uint64_t wall_ms)
{
    char b[40];
    if (!wall_ms)
        return json_null();
    format_rfc3339(wall_ms, b, sizeof(b));
    return json_string(b);
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
    (void)json_set(o, "created_at", time_json(e->created_wall_ms));
    (void)json_set(o, "end_at", time_json(e->end_at_wall_ms));
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

/* --- create / list / info / update / delete --- */

static bool
valid_env_key(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return false;
    for (; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return false;
    return true;
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

int
api_decode_disk_mb(struct api *a, json_t *body, uint64_t *ret_bytes, struct err *err)
{
    uint64_t mb;
    int r = json_get_u64(body, "disk_mb", false, API_DISK_MB_MAX, &mb, err);
    if (r <= 0)
        return r;
    if (mb < 1)
        return err_set(err, EINVAL, "'disk_mb' must be at least 1");
    if (!a->cfg.default_disk_bytes)
        return err_set(err, EINVAL,
                       "'disk_mb' needs a disk bound, and this host runs without one "
                       "(--disk-mb 0)");
    *ret_bytes = mb << 20;
    return 1;
}

static void
on_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct entry *e = ud;
    struct api *a = e->api;
    struct http_req *req = e->create_req;

    e->create_req = NULL;
    if (r < 0) {
        a->m.sandboxes_failed++;
        log_warn("sandbox=%s could not be created: %s", e->id, err ? err->msg : "");
        if (req) {
            if (e->e2b)
                e2b_error(req, 500, "%s", err && err->msg[0] ? err->msg : "cannot create");
            else
                api_error(req, r == -ECANCELED || r == -EOPNOTSUPP ? r : -EIO, err);
            http_req_unref(req);
        }
        entry_unlink(a, e);
        entry_free(e);
        return;
    }
    (void)sb;
    if (e->state == E_CREATING)
        e->state = E_READY;
    a->m.sandboxes_created++;
    const struct sandbox_timings *t = sandbox_get_timings(e->sb);
    a->m.create_us_sum += t->total_us;
    a->m.create_count++;
    arm_deadline(e);
    log_debug("sandbox=%s ready in %.3f ms%s", e->id, t->total_us / 1000.0,
              t->from_pool ? " (warm)" : "");
    if (e->post_ready) {
        void (*fn)(struct api *, struct entry *, struct http_req *) = e->post_ready;
        e->post_ready = NULL;
        fn(a, e, req); /* takes over req */
        return;
    }
    if (!req) {
        api_template_start(a, e, NULL, NULL);
        return;
    }
    if (e->answer) {
        api_template_start(a, e, req, e->answer(a, e));
        return;
    }
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

int
api_create(struct api *a, struct http_req *req, const struct api_create_req *c, struct entry **ret,
           struct err *err)
{
    const char *tenv[TEMPLATE_ENV_MAX * 4];
    const char **envv = NULL;
    struct entry *e = NULL;
    struct sandbox_spec spec;
    struct api_fs fsb;
    size_t n, i = 0;
    int nt, r;

    if (a->draining)
        return err_set(err, ESHUTDOWN, "abxd is draining and takes no new sandboxes");
    if (a->missing[0])
        return err_set(err, EOPNOTSUPP, "isolation is not available: %s", a->missing);
    if (a->count >= a->cfg.max_sandboxes)
        return err_set(err, EAGAIN, "this host already runs %u sandboxes", a->count);
    /* The template's env first (its bases before it), the request's over it. */
    nt = template_effective_env(a->templates, c->t, tenv, ELEMENTSOF(tenv));
    if (nt < 0)
        return err_set(err, E2BIG, "template '%s' has too many env entries", c->t->name);
    n = c->env ? json_object_size(c->env) : 0;
    envv = calloc(n + (size_t)nt + 1, sizeof(char *));
    if (!envv)
        return -ENOMEM;
    for (int k = 0; k < nt; k++) {
        if (!(envv[i] = strdup(tenv[k]))) {
            r = -ENOMEM;
            goto out;
        }
        i++;
    }
    if (c->env) {
        const char *k;
        json_t *v;
        json_object_foreach (c->env, k, v) {
            if (!valid_env_key(k)) {
                r = err_set(err, EINVAL, "env key '%.64s' is not a valid variable name", k);
                goto out;
            }
            char *kv = NULL;
            if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
                r = -ENOMEM;
                goto out;
            }
            envv[i++] = kv;
        }
    }
    e = calloc(1, sizeof(*e));
    if (!e) {
        r = -ENOMEM;
        goto out;
    }
    e->api = a;
    e->tmpl = c->t;
    e->caps = c->t->caps;
    e->scope = c->scope;
    e->state = E_CREATING;
    e->answer = c->answer;
    list_init(&e->waiters);
    e->created_wall_ms = wall_msec();
    e->timeout_s = c->timeout_s;
    e->end_at_wall_ms = c->timeout_s ? e->created_wall_ms + c->timeout_s * 1000u : 0;
    e->last_active_ms = now_msec();
    e->metadata = c->meta ? json_deep_copy(c->meta) : json_object();
    if (!e->metadata || loop_timer_new(a->loop, on_deadline, e, &e->deadline) < 0) {
        r = -ENOMEM;
        goto out;
    }
    do {
        r = rand_id(e->id, API_ID_LEN);
    } while (r == 0 && hashmap_get(a->map, e->id));
    if (r < 0)
        goto out;
    spec = (struct sandbox_spec){
            .limits = c->lim, .env = envv, .fs = api_template_fs(a, c->t, &fsb)};
    r = sandbox_create(a->sh, e->id, &spec, on_ready, e, &e->sb, err);
    if (r < 0)
        goto out;
    sandbox_set_gone_handler(e->sb, on_gone, e);
    r = hashmap_put(a->map, e->id, e);
    if (r < 0) {
        /* Cannot track it: let it go. on_ready will find no request. */
        sandbox_kill(e->sb);
        goto out;
    }
    list_add_tail(&a->entries, &e->link);
    a->count++;
    e->create_req = req;
    if (req)
        http_req_ref(req);
    *ret = e;
    e = NULL;
    r = 0;
out:
    if (e) {
        loop_timer_free(e->deadline);
        json_decref(e->metadata);
        free(e);
    }
    for (size_t k = 0; envv && envv[k]; k++)
        free((char *)(uintptr_t)envv[k]);
    free(envv);
    return r;
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
api_template_limits(struct api *a, const struct template *t, struct sandbox_limits *lim)
{
    double tcpu;
    uint64_t tmem, tpids;

    template_effective_resources(a->templates, t, &tcpu, &tmem, &tpids);
    if (tcpu > 0)
        lim->cpu_millis = (uint32_t)lround(tcpu * 1000.0);
    if (tmem)
        lim->memory_bytes = tmem << 20;
    if (tpids)
        lim->pids = (uint32_t)tpids;
    /* disk_mb also bounds the home, where the host bounds it at all. */
    uint64_t disk = 0;
    for (const struct template *c = t; c && !disk;
         c = strcmp(c->base, TEMPLATE_BASE_HOST) ? template_set_find(a->templates, c->base) : NULL)
        disk = c->disk_mb;
    if (disk && a->cfg.default_disk_bytes)
        lim->disk_bytes = disk << 20;
}

static void
list_sandboxes(struct api *a, struct http_req *req)
{
    json_t *arr = json_array();
    list_foreach (l, &a->entries) {
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
        e->end_at_wall_ms = timeout ? wall_msec() + timeout * 1000u : 0;
        arm_deadline(e);
    }
    json_decref(j);
    api_json(req, 200, api_entry_json(a, e, true));
    return;
fail:
    json_decref(j);
    api_error(req, r, &err);
}

static void
delete_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct api *a = q->api;
    (void)body;
    (void)len;
    struct entry *e = hashmap_get(a->map, q->id);
    if (!e) {
        api_error_msg(req, 404, "not_found", "no sandbox '%.64s'", q->id);
        return;
    }
    if (e->state == E_CREATING) {
        api_error_msg(req, 409, "conflict", "sandbox '%s' is still being created", q->id);
        return;
    }
    struct waiter *w = calloc(1, sizeof(*w));
    if (!w) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    w->req = req;
    http_req_ref(req);
    list_add_tail(&e->waiters, &w->link);
    entry_kill(e);
}

/* --- operations --- */

static void
healthz(struct http_req *req)
{
    static const char ok[] = "{\"status\":\"ok\"}\n";
    http_respond(req, 200, "application/json", ok, sizeof(ok) - 1);
}

static void
readyz(struct api *a, struct http_req *req)
{
    json_t *o = json_object();
    bool ready = !a->missing[0] && !a->draining;
    (void)json_set(o, "ready", json_boolean(ready));
    (void)json_set(o, "isolation", json_string(a->cfg.isolation));
    (void)json_set(o, "cgroup", json_string(a->cfg.cgroup));
    (void)json_set(o, "draining", json_boolean(a->draining));
    json_t *miss = json_array();
    if (a->missing[0]) {
        /* one entry per ';'-separated item */
        char tmp[sizeof(a->missing)];
        memcpy(tmp, a->missing, sizeof(tmp));
        char *save = NULL;
        for (char *t = strtok_r(tmp, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            while (*t == ' ')
                t++;
            (void)json_array_append_new(miss, json_string(t));
        }
    }
    (void)json_set(o, "missing", miss);
    api_json(req, ready ? 200 : 503, o);
}

static void
drain(struct api *a, struct http_req *req)
{
    api_drain(a);
    json_t *o = json_object();
    (void)json_set(o, "draining", json_true());
    (void)json_set(o, "sandboxes", json_integer(a->count));
    api_json(req, 200, o);
}

static void
metrics(struct api *a, struct http_req *req)
{
    struct buf b;
    buf_init(&b, 1024 * 1024);
    uint64_t running = 0;
    list_foreach (l, &a->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state == E_READY)
            running += sandbox_proc_count(e->sb, true);
    }
#define M(name, type, help, val)                                                                   \
    (void)buf_printf(                                                                              \
            &b, "# HELP abx_" name " " help "\n# TYPE abx_" name " " type "\nabx_" name " %llu\n", \
            (unsigned long long)(val))
    M("sandboxes", "gauge", "Live sandboxes.", a->count);
    M("sandboxes_created_total", "counter", "Sandboxes created.", a->m.sandboxes_created);
    M("sandboxes_failed_total", "counter", "Sandbox creations that failed.", a->m.sandboxes_failed);
    M("sandboxes_ended_total", "counter", "Sandboxes killed or ended.", a->m.sandboxes_killed);
    M("pool_ready", "gauge", "Warm sandboxes ready to hand out.", sandbox_host_pool_ready(a->sh));
    M("processes_running", "gauge", "Processes running in all sandboxes.", running);
    M("execs_total", "counter", "Exec requests started.", a->m.execs);
    M("exec_failures_total", "counter", "Exec requests that could not start.", a->m.exec_failures);
    M("requests_total", "counter", "HTTP requests.", a->m.requests);
    M("responses_4xx_total", "counter", "Requests refused as bad input.", a->m.errors_4xx);
    M("bytes_uploaded_total", "counter", "File bytes written through the API.",
      a->m.bytes_uploaded);
    M("store_damaged_reads_total", "counter",
      "Reads that found stored content damaged (and did not hand it out).", store_damaged_reads());
    M("draining", "gauge", "1 while draining.", a->draining ? 1 : 0);
    M("ready", "gauge", "1 when the configured isolation is available.", a->missing[0] ? 0 : 1);
#undef M
    (void)buf_printf(&b,
                     "# HELP abx_create_seconds_avg Mean time to create a sandbox.\n"
                     "# TYPE abx_create_seconds_avg gauge\nabx_create_seconds_avg %.6f\n",
                     a->m.create_count ? a->m.create_us_sum / 1e6 / a->m.create_count : 0.0);
    http_respond(req, 200, "text/plain; version=0.0.4", b.data, b.len);
    buf_done(&b);
}

/* --- routing --- */

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

static bool
authorized(struct api *a, struct http_req *req, const struct api_scope **ret_scope)
{
    const char *h = http_req_header(req, "Authorization");
    const char *tok = NULL;
    *ret_scope = NULL;
    if (h && !strncasecmp(h, "Bearer ", 7))
        tok = h + 7;
    size_t kl = strlen(a->api_key);
    if (tok && strlen(tok) == kl && CRYPTO_memcmp(tok, a->api_key, kl) == 0)
        return true;
    if (tok && (*ret_scope = api_scope_of(a, tok, strlen(tok))))
        return true;
    http_req_add_header(req, "WWW-Authenticate", "Bearer");
    api_error_msg(req, 401, "unauthorized",
                  tok ? "the API key is not valid"
                      : "missing 'Authorization: Bearer <key>' header");
    return false;
}

static bool
is(const struct http_req *req, const char *m)
{
    return !strcmp(http_req_method(req), m);
}

/* What a scoped key may reach: its templates, the sandboxes it created and
 * their commands. Answers 403 (or 404 for someone else's sandbox) and
 * returns false for the rest. */
static bool
scope_allows(struct api *a, struct http_req *req, const struct api_scope *s, char **seg, int n)
{
    bool ok = n >= 2 && !strcmp(seg[0], "v1") &&
              (!strcmp(seg[1], "templates") ||
               (!strcmp(seg[1], "sandboxes") &&
                (n == 2   ? is(req, "POST")
                 : n == 3 ? is(req, "GET") || is(req, "DELETE")
                          : (n == 4 || n == 5) && !strcmp(seg[3], "commands"))));
    if (!ok) {
        api_error_msg(req, 403, "forbidden",
                      "this key may only use its templates, the sandboxes it creates and their "
                      "commands");
        return false;
    }
    if (n >= 3 && !strcmp(seg[1], "sandboxes")) {
        struct entry *e = hashmap_get(a->map, seg[2]);
        if (!e || e->scope != s) {
            api_error_msg(req, 404, "not_found", "no sandbox '%.64s'", seg[2]);
            return false;
        }
    }
    return true;
}

static void
method_not_allowed(struct http_req *req, const char *allow)
{
    http_req_add_header(req, "Allow", allow);
    api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on %.200s (allowed: %s)",
                  http_req_method(req), http_req_path(req), allow);
}

int
api_split(char *path, char **seg, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == max)
            return -1;
        seg[n++] = t;
    }
    return n;
}

void
api_begin(struct http_req *req, void *ud)
{
    struct api *a = ud;
    const char *path = http_req_path(req);
    char copy[512];
    char *seg[API_MAX_SEGMENTS];

    a->m.requests++;
    http_req_set_userdata(req, a, NULL);
    /* Port forwarding (ports.c) comes before every route, health included. */
    uint16_t fwd_port;
    char fwd_id[PORTS_ID_MAX + 1];
    if (ports_match_host(http_req_header(req, "Host"), a->cfg.e2b_domain, &fwd_port, fwd_id,
                         sizeof(fwd_id))) {
        ports_begin(a, req, fwd_port, fwd_id);
        return;
    }
    if (!strcmp(path, "/healthz")) {
        if (is(req, "GET") || is(req, "HEAD"))
            healthz(req);
        else
            method_not_allowed(req, "GET");
        return;
    }
    if (!strcmp(path, "/readyz")) {
        if (is(req, "GET") || is(req, "HEAD"))
            readyz(a, req);
        else
            method_not_allowed(req, "GET");
        return;
    }
    /* E2B's SDK speaks its own auth (X-API-KEY, envd access tokens). */
    if (e2b_claims(req, path)) {
        e2b_begin(a, req, path);
        return;
    }
    const struct api_scope *scope = NULL;
    if (!authorized(a, req, &scope)) {
        a->m.errors_4xx++;
        return;
    }
    if (scope) {
        if (strlen(path) >= sizeof(copy)) {
            api_error_msg(req, 404, "not_found", "no route for that path");
            return;
        }
        strcpy(copy, path);
        int ns = api_split(copy, seg, API_MAX_SEGMENTS);
        if (!scope_allows(a, req, scope, seg, ns))
            return;
    }
    if (!strcmp(path, "/drain")) {
        if (is(req, "POST"))
            drain(a, req);
        else
            method_not_allowed(req, "POST");
        return;
    }
    if (!strcmp(path, "/metrics")) {
        if (is(req, "GET"))
            metrics(a, req);
        else
            method_not_allowed(req, "GET");
        return;
    }
    if (!strncmp(path, "/v1/workspaces", 14) && (path[14] == '\0' || path[14] == '/')) {
        wire_workspaces(a, req, path + 14);
        return;
    }
    if (!strcmp(path, "/v1/tools") || !strncmp(path, "/v1/tools/", 10) ||
        !strcmp(path, "/v1/tool-packages")) {
        wire_tools(a, req, path);
        return;
    }
    if (!strcmp(path, "/v1/templates") || !strncmp(path, "/v1/templates/", 14)) {
        wire_templates(a, req, path, scope);
        return;
    }
    if (!strncmp(path, "/v1/store/", 10)) {
        wire_store(a, req, path + 10);
        return;
    }
    /* /v1/sandboxes/{id}/files/{path...} keeps its tail verbatim. */
    const char *files_prefix = NULL;
    if (!strncmp(path, "/v1/sandboxes/", 14)) {
        const char *p = path + 14;
        const char *slash = strchr(p, '/');
        if (slash && !strncmp(slash, "/files/", 7)) {
            size_t idlen = (size_t)(slash - p);
            char id[64];
            if (idlen == 0 || idlen >= sizeof(id)) {
                api_error_msg(req, 404, "not_found", "no sandbox with that id");
                return;
            }
            memcpy(id, p, idlen);
            id[idlen] = '\0';
            files_prefix = slash + 7;
            struct entry *e = api_find(a, req, id);
            if (e)
                wire_files(a, req, e, "files", files_prefix);
            return;
        }
    }
    if (strlen(path) >= sizeof(copy)) {
        api_error_msg(req, 404, "not_found", "no route for %s %.100s...", http_req_method(req),
                      path);
        return;
    }
    strcpy(copy, path);
    int n = api_split(copy, seg, API_MAX_SEGMENTS);
    if (n >= 2 && !strcmp(seg[0], "v1") && !strcmp(seg[1], "sandboxes")) {
        if (n == 2) {
            if (is(req, "POST")) {
                struct rq *q = api_rq(a, req, NULL);
                if (q) {
                    q->scope = scope;
                    http_req_read_body(req, API_JSON_MAX, create_done);
                }
            } else if (is(req, "GET"))
                list_sandboxes(a, req);
            else
                method_not_allowed(req, "GET, POST");
            return;
        }
        if (n == 3) {
            if (is(req, "GET")) {
                struct entry *e = api_find(a, req, seg[2]);
                if (e)
                    api_json(req, 200, api_entry_json(a, e, true));
            } else if (is(req, "PATCH")) {
                if (api_rq(a, req, seg[2]))
                    http_req_read_body(req, API_JSON_MAX, update_done);
            } else if (is(req, "DELETE")) {
                if (api_rq(a, req, seg[2]))
                    http_req_read_body(req, 0, delete_done);
            } else {
                method_not_allowed(req, "GET, PATCH, DELETE");
            }
            return;
        }
        if ((n == 4 || n == 5) && !strcmp(seg[3], "commands")) {
            api_commands(a, req, seg[2], "commands", n == 5 ? seg[4] : NULL, scope);
            return;
        }
        if (n == 4 && !strcmp(seg[3], "code")) {
            api_commands(a, req, seg[2], "code", NULL, scope);
            return;
        }
        if (n == 5 && !strcmp(seg[3], "tools")) {
            /* A template's own commands run without shell, as on /commands. */
            struct entry *e = api_find(a, req, seg[2]);
            if (!e || (!template_find_command(e->tmpl, seg[4]) &&
                       !api_need_cap(req, e, TEMPLATE_CAP_SHELL)))
                return;
            struct out_owner o = {.kind = OWNER_SANDBOX};
            (void)snprintf(o.id, sizeof(o.id), "%s", seg[2]);
            api_tool_call(a, req, &o, seg[4]);
            return;
        }
        wire_sandboxes(a, req, seg, n);
        return;
    }
    api_error_msg(req, 404, "not_found", "no route for %s %.200s", http_req_method(req), path);
}

/* --- lifecycle --- */

void
api_set_workspaces(struct api *a, struct workspaces *ws)
{
    a->ws = ws;
}

void
api_set_templates(struct api *a, struct template_set *templates)
{
    a->templates = templates;
}

void
api_set_tools(struct api *a, const struct tools_registry *tools, const char *mount)
{
    a->tools = tools;
    (void)snprintf(a->tools_mount, sizeof(a->tools_mount), "%s", mount ? mount : "");
}

int
api_new(struct loop *loop, struct sandbox_host *sh, const struct api_config *c, struct api **ret)
{
    struct api *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->sh = sh;
    a->cfg = *c;
    a->api_key = strdup(c->api_key);
    list_init(&a->entries);
    a->started_wall_ms = wall_msec();
    if (!a->api_key || hashmap_new(&a->map) < 0) {
        free(a->api_key);
        free(a);
        return -ENOMEM;
    }
    a->cfg.api_key = a->api_key;
    *ret = a;
    return 0;
}

void
api_free(struct api *a)
{
    if (!a)
        return;
    e2b_snaps_free(a);
    ports_free(a);
    while (!list_empty(&a->entries)) {
        struct entry *e = list_entry(a->entries.next, struct entry, link);
        list_remove(&e->link);
        while (!list_empty(&e->waiters)) {
            struct waiter *w = list_entry(e->waiters.next, struct waiter, link);
            list_remove(&w->link);
            http_req_unref(w->req);
            free(w);
        }
        if (e->create_req)
            http_req_unref(e->create_req);
        entry_free(e);
    }
    hashmap_free(a->map);
    api_keys_free(a);
    free(a->api_key);
    free(a);
}

void
api_set_missing(struct api *a, const char *missing)
{
    (void)snprintf(a->missing, sizeof(a->missing), "%s", missing);
}

void
api_drain(struct api *a)
{
    if (a->draining)
        return;
    a->draining = true;
    log_info("draining: no new sandboxes; %u still running", a->count);
    sandbox_host_drain_pool(a->sh);
}

bool
api_draining(const struct api *a)
{
    return a->draining;
}

int
api_sweep_idle(struct api *a)
{
    if (!a->cfg.idle_timeout_s)
        return 0;
    uint64_t now = now_msec();
    int n = 0;
    list_foreach_safe (l, tmp, &a->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state != E_READY || e->streams > 0)
            continue;
        if (now - e->last_active_ms < a->cfg.idle_timeout_s * 1000u)
            continue;
        log_info("sandbox=%s idle for %llu s, killing it", e->id,
                 (unsigned long long)((now - e->last_active_ms) / 1000u));
        entry_kill(e);
        n++;
    }
    return n;
}

void
api_kill_all(struct api *a, void (*done)(void *ud), void *ud)
{
    a->all_gone = done;
    a->all_gone_ud = ud;
    if (a->count == 0) {
        a->all_gone = NULL;
        done(ud);
        return;
    }
    list_foreach_safe (l, tmp, &a->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state == E_CREATING)
            sandbox_kill(e->sb);
        else
            entry_kill(e);
    }
}

uint32_t
api_sandbox_count(const struct api *a)
{
    return a->count;
}
