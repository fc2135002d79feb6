/*
 * platform.c - E2B's platform REST API over the api's sandbox table.
 *
 * Create (v2 and v1 paths), connect/resume, info, list with filters and
 * pagination, kill, timeout, pause (cgroup freeze), metrics from the
 * cgroup. Errors are {"code": <int>, "message": ...}: the SDK branches on
 * the body's code (404 → SandboxNotFoundError, or false from kill), not on
 * the status. Routing, auth and the claim of the E2B paths are here too.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/e2b/e2b-internal.h"
#include "template/set.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/rand.h"
#include "util/timeutil.h"

/* --- claims --- */

static bool
prefixed(const char *path, const char *p)
{
    size_t n = strlen(p);
    return !strncmp(path, p, n) && (path[n] == '\0' || path[n] == '/');
}

bool
e2b_claims(struct http_req *req, const char *path)
{
    if (http_req_header(req, "E2b-Sandbox-Id"))
        return true;
    if (!strcmp(path, "/files"))
        return true; /* signed URLs carry no sandbox id */
    return prefixed(path, "/sandboxes") || prefixed(path, "/v2/sandboxes") ||
           prefixed(path, "/snapshots") || !strncmp(path, "/templates/", 11);
}

void
e2b_begin(struct api *a, struct http_req *req, const char *path)
{
    if (http_req_header(req, "E2b-Sandbox-Id") || !strcmp(path, "/files"))
        e2b_envd(a, req, path);
    else
        e2b_platform(a, req, path);
}

static json_t *
detail_json(struct api *a, struct entry *e, bool detail)
{
    const struct sandbox_limits *l = sandbox_limits(e->sb);
    unsigned cpus = l->cpu_millis ? (l->cpu_millis + 999) / 1000 : a->cfg.host_cpus;
    uint64_t mem = l->memory_bytes ? l->memory_bytes : a->cfg.host_memory_bytes;
    /* The bound of its writable space, else the template's tmpfs size. */
    uint64_t disk = l->disk_bytes ? l->disk_bytes >> 20 : e->tmpl ? e->tmpl->disk_mb : 0;
    json_t *o = json_object();
    (void)json_set(o, "sandboxID", json_string(e2b_public_id(e)));
    (void)json_set(o, "templateID", json_string(e2b_template_id(e)));
    if (e2b_of(e) && e2b_of(e)->alias[0])
        (void)json_set(o, "alias", json_string(e2b_of(e)->alias));
    (void)json_set(o, "clientID", json_string("abx"));
    (void)json_set(o, "startedAt", api_time_json(e->created_wall_ms));
    (void)json_set(o, "endAt", api_time_json(e->end_at_wall_ms ? e->end_at_wall_ms : wall_msec()));
    (void)json_set(o, "state", json_string(e2b_of(e) && e->paused ? "paused" : "running"));
    (void)json_set(o, "cpuCount", json_integer(cpus ? cpus : 1));
    (void)json_set(o, "memoryMB", json_integer((json_int_t)(mem >> 20)));
    (void)json_set(o, "diskSizeMB", json_integer((json_int_t)disk));
    (void)json_set(o, "envdVersion", json_string(E2B_ENVD_VERSION));
    (void)json_set(o, "metadata", json_incref(e->metadata));
    if (detail) {
        if (e2b_of(e))
            (void)json_set(o, "envdAccessToken", json_string(e2b_of(e)->token));
        (void)json_set(o, "domain",
                       a->cfg.e2b_domain && *a->cfg.e2b_domain ? json_string(a->cfg.e2b_domain)
                                                               : json_null());
        (void)json_set(o, "allowInternetAccess", json_false());
        json_t *lc = json_object();
        (void)json_set(lc, "onTimeout", json_string("kill"));
        (void)json_set(lc, "autoResume", json_false());
        (void)json_set(o, "lifecycle", lc);
    }
    return o;
}

/* --- create --- */

static void
preq_close(struct http_req *req, void *ud)
{
    (void)req;
    free(ud);
}

static int
refuse_unsupported(json_t *j, struct err *err)
{
    json_t *v;
    if ((v = json_object_get(j, "mcp")) && !json_is_null(v))
        return err_set(err, EINVAL, "'mcp' (the MCP gateway) is not supported by abx");
    if ((v = json_object_get(j, "autoPause")) && json_is_true(v))
        return err_set(err, EINVAL,
                       "'autoPause' is not supported by abx: a sandbox is killed at its timeout");
    if ((v = json_object_get(j, "volumeMounts")) && json_is_array(v) && json_array_size(v) > 0)
        return err_set(err, EINVAL, "'volumeMounts' are not supported by abx; use workspaces");
    json_t *net = json_object_get(j, "network");
    if (net && json_is_object(net) &&
        ((v = json_object_get(net, "allowOut")) && json_is_array(v) && json_array_size(v) > 0))
        return err_set(err, EINVAL,
                       "'network.allowOut' cannot be honoured: abx sandboxes have no outbound "
                       "network (loopback only)");
    if (net && json_is_object(net) && (v = json_object_get(net, "egressProxy")) && !json_is_null(v))
        return err_set(err, EINVAL, "'network.egressProxy' is not supported by abx");
    return 0;
}

static void
create_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j = NULL;
    const char *tmpl = NULL;
    struct api_create_req c = {
            .timeout_s = q->v1 ? E2B_V1_TIMEOUT_S : E2B_DEFAULT_TIMEOUT_S,
            .lim = {a->cfg.default_memory_bytes, a->cfg.default_cpu_millis, a->cfg.default_pids,
                    a->cfg.default_disk_bytes},
            .scope = q->scope,
            .ready = e2b_create_ready,
    };
    struct entry *e = NULL;
    struct e2b_sb *x = NULL;
    struct e2b_snap_info snap;
    bool from_snap = false;
    int r;

    if ((r = json_parse(body, len, &j, &err)) < 0)
        goto fail;
    if (!json_is_object(j)) {
        r = err_set(&err, EINVAL, "the body must be a JSON object");
        goto fail;
    }
    /* Unknown fields are ignored: E2B adds options over time. */
    if ((r = json_get_str(j, "templateID", true, &tmpl, &err)) < 0 ||
        (r = e2b_read_timeout(j, a->cfg.max_timeout_s, &c.timeout_s, &err)) < 0 ||
        (r = json_get_str_map(j, "envVars", API_ENV_MAX, API_ENV_BYTES, &c.env, &err)) < 0 ||
        (r = json_get_str_map(j, "metadata", API_META_MAX, API_META_BYTES, &c.meta, &err)) < 0 ||
        (r = refuse_unsupported(j, &err)) < 0)
        goto fail;
    c.t = template_set_find(a->templates, tmpl);
    if (!c.t && e2b_snapshot_find(a, tmpl, &snap) == 0) {
        /* A snapshot: a sandbox of its template, then its files. */
        c.t = template_set_find(a->templates, snap.tmpl);
        from_snap = true;
    }
    if (!c.t || !api_scope_template(c.scope, c.t)) {
        e2b_error(req, 404, "template '%.64s' not found", tmpl);
        goto out;
    }
    if (c.timeout_s == 0)
        c.timeout_s = q->v1 ? E2B_V1_TIMEOUT_S : E2B_DEFAULT_TIMEOUT_S;
    api_template_limits(a, c.t, &c.lim);
    x = calloc(1, sizeof(*x));
    if (!x) {
        r = -ENOMEM;
        goto fail;
    }
    list_init(&x->streams);
    (void)snprintf(x->alias, sizeof(x->alias), "%s", tmpl);
    if ((r = rand_hex(x->token, E2B_TOKEN_LEN / 2)) < 0)
        goto fail;
    if ((r = api_create(a, req, &c, &e, &err)) < 0)
        goto fail;
    e->ext[e2b_slot(e)] = x;
    x = NULL;
    /* Before it is ready, so nothing can answer first; on failure the
     * sandbox is killed and on_ready answers 500. */
    if (from_snap && (r = e2b_restore_attach(a, e, snap.id, NULL, NULL)) < 0)
        table_kill(e);
    goto out;
fail:
    e2b_fail(req, r, &err);
out:
    free(x);
    json_decref(j);
}

/* --- list --- */

static json_t *
cold_json(struct api *a, const struct e2b_cold *c, bool detail)
{
    unsigned cpus = c->lim.cpu_millis ? (c->lim.cpu_millis + 999) / 1000 : a->cfg.host_cpus;
    uint64_t mem = c->lim.memory_bytes ? c->lim.memory_bytes : a->cfg.host_memory_bytes;
    json_t *o = json_object();
    (void)json_set(o, "sandboxID", json_string(c->id));
    (void)json_set(o, "templateID", json_string(c->t ? c->t->name : "base"));
    if (c->alias[0])
        (void)json_set(o, "alias", json_string(c->alias));
    (void)json_set(o, "clientID", json_string("abx"));
    (void)json_set(o, "startedAt", api_time_json(c->created_wall_ms));
    (void)json_set(o, "endAt", api_time_json(wall_msec()));
    (void)json_set(o, "state", json_string("paused"));
    (void)json_set(o, "cpuCount", json_integer(cpus ? cpus : 1));
    (void)json_set(o, "memoryMB", json_integer((json_int_t)(mem >> 20)));
    (void)json_set(o, "diskSizeMB",
                   json_integer((json_int_t)(c->lim.disk_bytes ? c->lim.disk_bytes >> 20
                                             : c->t            ? c->t->disk_mb
                                                               : 0)));
    (void)json_set(o, "envdVersion", json_string(E2B_ENVD_VERSION));
    (void)json_set(o, "metadata", json_incref(c->meta));
    if (detail) {
        (void)json_set(o, "envdAccessToken", json_string(c->token));
        (void)json_set(o, "domain",
                       a->cfg.e2b_domain && *a->cfg.e2b_domain ? json_string(a->cfg.e2b_domain)
                                                               : json_null());
        (void)json_set(o, "allowInternetAccess", json_false());
        json_t *lc = json_object();
        (void)json_set(lc, "onTimeout", json_string("kill"));
        (void)json_set(lc, "autoResume", json_false());
        (void)json_set(o, "lifecycle", lc);
    }
    return o;
}

static void
list(struct api *a, struct http_req *req, const struct api_scope *scope)
{
    struct e2b_filter f = {0};
    struct err err = {0};
    struct e2b_page pg;
    struct e2b_item *all = NULL;
    size_t n = 0, start, end, ncold = 0;
    struct list *cold = a->snaps && !e2b_snaps_closing(a) ? e2b_cold_list(a) : NULL;

    if (e2b_filter_decode(http_req_query(req, "state"), http_req_query(req, "startedAfter"),
                          http_req_query(req, "template"), http_req_query(req, "metadata"), &f,
                          &err) < 0 ||
        e2b_page_decode(http_req_query(req, "limit"), http_req_query(req, "order"),
                        http_req_query(req, "nextToken"), &pg, &err) < 0) {
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    if (cold)
        list_foreach (l, cold)
            ncold++;
    all = calloc(table_count(a->table) + ncold + 1, sizeof(*all));
    if (!all) {
        e2b_error(req, 500, "out of memory");
        return;
    }
    list_foreach (l, table_entries(a->table)) {
        struct entry *e = list_entry(l, struct entry, link);
        struct e2b_item it = {.created = e->created_wall_ms, .id = e2b_public_id(e), .e = e};
        if (n < table_count(a->table) && e2b_of(e) &&
            e2b_filter_matches(a->templates, &it, &f, scope))
            all[n++] = it;
    }
    if (cold)
        list_foreach (l, cold) {
            struct e2b_cold *c = list_entry(l, struct e2b_cold, link);
            struct e2b_item it = {.created = c->created_wall_ms, .id = c->id, .c = c};
            if (!c->live && n < table_count(a->table) + ncold &&
                e2b_filter_matches(a->templates, &it, &f, scope))
                all[n++] = it;
        }
    e2b_page_cut(all, n, &pg, &start, &end);
    json_t *arr = json_array();
    for (size_t i = start; i < end; i++)
        (void)json_array_append_new(arr, all[i].e ? detail_json(a, all[i].e, false)
                                                  : cold_json(a, all[i].c, false));
    if (end < n) {
        char tok[E2B_PAGE_TOKEN_MAX];
        e2b_page_token(&all[end - 1], tok, sizeof(tok));
        http_req_add_header(req, "X-Next-Token", tok);
    }
    free(all);
    api_json(req, 200, arr);
}

/* --- per-sandbox operations --- */

static void
timeout_done(struct http_req *req, const char *body, size_t len)
{
    struct e2b_preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    uint64_t t = 0;
    int r;
    struct entry *e = e2b_find(q->api, req, q->id, q->scope);
    if (!e)
        return;
    if ((r = json_parse(body, len, &j, &err)) < 0 || !json_is_object(j) ||
        (r = e2b_read_timeout(j, q->api->cfg.max_timeout_s, &t, &err)) <= 0) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "'timeout' (seconds) is required");
        return;
    }
    json_decref(j);
    e->timeout_s = t;
    if (!e2b_of(e) || !e->paused)
        table_set_end(e, wall_msec() + t * 1000u);
    api_no_content(req);
}

/* A Unix time in seconds from the query into ms; answers 400 otherwise. */
static int
query_seconds(struct http_req *req, const char *key, const char *v, uint64_t *ret_ms)
{
    uint64_t s;
    if (parse_u64(v, &s) < 0 || s > UINT64_MAX / 1000u) {
        e2b_error(req, 400, "'%s' must be a Unix time in seconds", key);
        return -EINVAL;
    }
    *ret_ms = s * 1000u;
    return 0;
}

static void
metrics(struct api *a, struct http_req *req, struct entry *e)
{
    uint64_t now = wall_msec(), start = e->created_wall_ms, end = now;
    const char *v;
    if ((v = http_req_query(req, "start")) && query_seconds(req, "start", v, &start) < 0)
        return;
    if ((v = http_req_query(req, "end")) && query_seconds(req, "end", v, &end) < 0)
        return;
    json_t *arr = json_array();
    struct sandbox_stats st;
    /* One live sample, read from the cgroup now, when now is in range. */
    if (now + 10000 >= start && now <= end + 10000 && end + 10000 >= e->created_wall_ms &&
        sandbox_stats(e->sb, &st) == 0) {
        const struct sandbox_limits *l = sandbox_limits(e->sb);
        unsigned cpus = l->cpu_millis ? (l->cpu_millis + 999) / 1000 : a->cfg.host_cpus;
        double life_us = (double)(now - e->created_wall_ms) * 1000.0 + 1.0;
        double pct = (double)st.cpu_usec / life_us / (cpus ? cpus : 1) * 100.0;
        json_t *m = json_object();
        (void)json_set(m, "timestamp", api_time_json(now));
        (void)json_set(m, "timestampUnix", json_integer((json_int_t)(now / 1000u)));
        (void)json_set(m, "cpuCount", json_integer(cpus ? cpus : 1));
        (void)json_set(m, "cpuUsedPct", json_real(pct > 100.0 ? 100.0 : pct));
        (void)json_set(m, "memUsed", json_integer((json_int_t)st.memory_bytes));
        (void)json_set(m, "memTotal",
                       json_integer((json_int_t)(l->memory_bytes ? l->memory_bytes
                                                                 : a->cfg.host_memory_bytes)));
        (void)json_set(m, "memCache", json_integer(0));
        uint64_t used = 0;
        (void)sandbox_disk_usage(e->sb, &used);
        (void)json_set(m, "diskUsed", json_integer((json_int_t)used));
        (void)json_set(m, "diskTotal", json_integer((json_int_t)l->disk_bytes));
        (void)json_array_append_new(arr, m);
    }
    api_json(req, 200, arr);
}

static struct e2b_preq *
preq_new(struct api *a, struct http_req *req, const struct api_scope *scope, const char *id)
{
    struct e2b_preq *q = calloc(1, sizeof(*q));
    if (!q) {
        e2b_error(req, 500, "out of memory");
        return NULL;
    }
    q->api = a;
    q->scope = scope;
    if (id)
        (void)snprintf(q->id, sizeof(q->id), "%s", id);
    http_req_set_userdata(req, q, preq_close);
    return q;
}

static bool
is(struct http_req *req, const char *m)
{
    return !strcmp(http_req_method(req), m);
}

static bool
authorized(struct api *a, struct http_req *req, const struct api_scope **ret_scope)
{
    const char *k = http_req_header(req, "X-API-KEY");
    if (api_key_check(a, k, ret_scope) == 0)
        return true;
    e2b_error(req, 401, k ? "the API key is not valid" : "missing X-API-KEY header");
    return false;
}

void
e2b_platform(struct api *a, struct http_req *req, const char *path)
{
    char copy[256];
    char *seg[6];
    const struct api_scope *scope;
    struct e2b_preq *q;

    if (!authorized(a, req, &scope))
        return;
    if (strscpy(copy, path, sizeof(copy)) < 0) {
        e2b_error(req, 404, "no route for that path");
        return;
    }
    int n = api_split(copy, seg, (int)ELEMENTSOF(seg));
    bool v2 = n >= 1 && !strcmp(seg[0], "v2");
    char **s = v2 ? seg + 1 : seg;
    int ns = v2 ? n - 1 : n;

    if (ns >= 1 && !strcmp(s[0], "sandboxes")) {
        if (ns == 1) {
            if (is(req, "POST")) {
                if ((q = preq_new(a, req, scope, NULL))) {
                    q->v1 = !v2;
                    http_req_read_body(req, API_JSON_MAX, create_done);
                }
            } else if (is(req, "GET")) {
                list(a, req, scope);
            } else {
                e2b_error(req, 405, "use GET or POST");
            }
            return;
        }
        if (ns == 2 && !v2) {
            struct e2b_cold *c = e2b_find_cold(a, s[1], scope);
            if (is(req, "GET")) {
                struct entry *e = c ? NULL : e2b_find(a, req, s[1], scope);
                if (c)
                    api_json(req, 200, cold_json(a, c, true));
                else if (e)
                    api_json(req, 200, detail_json(a, e, true));
            } else if (is(req, "DELETE")) {
                struct entry *e = c ? NULL : e2b_find(a, req, s[1], scope);
                if (c && !c->resuming) {
                    e2b_cold_drop(a, c);
                    api_no_content(req);
                } else if (c) {
                    e2b_error(req, 409, "sandbox '%s' is being resumed", c->id);
                } else if (e) {
                    table_kill(e); /* leaves the lists at once */
                    api_no_content(req);
                }
            } else {
                e2b_error(req, 405, "use GET or DELETE");
            }
            return;
        }
        if (ns == 3) {
            const char *op = s[2];
            if (!strcmp(op, "connect") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, e2b_connect_done);
                return;
            }
            if (v2) {
                e2b_error(req, 404, "no route for %s %s", http_req_method(req), path);
                return;
            }
            if (!strcmp(op, "timeout") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, timeout_done);
                return;
            }
            if (!strcmp(op, "pause") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, e2b_pause_done);
                return;
            }
            if (!strcmp(op, "metrics") && is(req, "GET")) {
                struct entry *e = e2b_find(a, req, s[1], scope);
                if (e)
                    metrics(a, req, e);
                return;
            }
            if (!strcmp(op, "snapshots") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, e2b_snapshot_done);
                return;
            }
            if (!strcmp(op, "fork") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, e2b_fork_done);
                return;
            }
            if (!strcmp(op, "network") && is(req, "PUT")) {
                if (e2b_find(a, req, s[1], scope))
                    e2b_error(req, 400,
                              "abx sandboxes have no outbound network (loopback only); network "
                              "rules cannot be changed");
                return;
            }
        }
    }
    if (!v2 && n == 1 && !strcmp(seg[0], "snapshots") && is(req, "GET")) {
        e2b_snapshot_list(a, req);
        return;
    }
    if (!v2 && n == 2 && !strcmp(seg[0], "templates") && is(req, "DELETE")) {
        int r = e2b_snapshot_delete(a, seg[1]);
        if (r == 0)
            api_no_content(req);
        else if (r == -ENOENT)
            e2b_error(req, 404, "snapshot '%.64s' not found", seg[1]);
        else
            e2b_snap_fail(req, r, NULL);
        return;
    }
    e2b_error(req, 404, "no route for %s %.200s", http_req_method(req), path);
}
