/*
 * e2b-platform.c - E2B's platform REST API over the api's sandbox table.
 *
 * Create (v2 and v1 paths), connect/resume, info, list with filters and
 * pagination, kill, timeout, pause (cgroup freeze), metrics from the
 * cgroup. Errors are {"code": <int>, "message": ...}: the SDK branches on
 * the body's code (404 → SandboxNotFoundError, or false from kill), not on
 * the status. Routing, auth and the claim of the E2B paths are here too.
 */
#include <errno.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/e2b-internal.h"
#include "template/set.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"

#define E2B_DEFAULT_TIMEOUT_S 300
#define E2B_V1_TIMEOUT_S      15
#define E2B_LIST_MAX          100

/* --- claims, errors --- */

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
e2b_error(struct http_req *req, unsigned status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    (void)json_set(o, "code", json_integer(status));
    (void)json_set(o, "message", json_string_lossy(msg));
    api_json(req, status, o);
}

static void
e2b_fail(struct http_req *req, int r, const struct err *err)
{
    int e = r < 0 ? -r : r;
    unsigned status = e == EINVAL || e == E2BIG           ? 400
                      : e == ENOENT                       ? 404
                      : e == EAGAIN                       ? 429
                      : e == ESHUTDOWN || e == EOPNOTSUPP ? 503
                      : e == EMFILE || e == ENFILE        ? 503
                                                          : 500;
    char tmp[128];
    e2b_error(req, status, "%s", err && err->msg[0] ? err->msg : strerror_r(e, tmp, sizeof(tmp)));
}

void
e2b_begin(struct api *a, struct http_req *req, const char *path)
{
    if (http_req_header(req, "E2b-Sandbox-Id") || !strcmp(path, "/files"))
        e2b_envd(a, req, path);
    else
        e2b_platform(a, req, path);
}

/* --- the table --- */

void
e2b_entry_dying(struct entry *e)
{
    if (!e->e2b)
        return;
    if (e->state == E_DYING) {
        /* The kill thaws a frozen sandbox (sandbox.h). */
        e->e2b->paused = false;
        e->e2b->snapshotting = false;
    }
    /* Cut every stream without an end frame: the SDK's health probe then
     * sees 502 and reports the sandbox's end. */
    while (!list_empty(&e->e2b->streams)) {
        struct e2b_stream *s = list_entry(e->e2b->streams.next, struct e2b_stream, link);
        list_remove(&s->link);
        list_init(&s->link);
        s->cut(s);
    }
}

void
e2b_entry_free(struct entry *e)
{
    if (!e->e2b)
        return;
    e2b_entry_dying(e);
    e2b_snapshots_entry_gone(e);
    struct e2b_cold *c = e->e2b->cold;
    if (c && c->live == e) {
        /* The last sandbox that ran as it: the E2B sandbox ends. */
        list_remove(&c->link);
        json_decref(c->meta);
        free(c);
    }
    free(e->e2b);
    e->e2b = NULL;
}

void
e2b_stream_attach(struct entry *e, struct e2b_stream *s)
{
    list_add_tail(&e->e2b->streams, &s->link);
}

void
e2b_stream_detach(struct e2b_stream *s)
{
    list_remove(&s->link);
    list_init(&s->link);
}

static json_t *
time_json(uint64_t ms)
{
    char b[40];
    format_rfc3339(ms, b, sizeof(b));
    return json_string(b);
}

static const char *
template_id(const struct entry *e)
{
    return e->tmpl ? e->tmpl->name : "base";
}

static json_t *
sandbox_json(struct api *a, struct entry *e)
{
    json_t *o = json_object();
    (void)json_set(o, "sandboxID", json_string(e2b_public_id(e)));
    (void)json_set(o, "templateID", json_string(template_id(e)));
    if (e->e2b && e->e2b->alias[0])
        (void)json_set(o, "alias", json_string(e->e2b->alias));
    (void)json_set(o, "clientID", json_string("abx"));
    (void)json_set(o, "envdVersion", json_string(E2B_ENVD_VERSION));
    if (e->e2b)
        (void)json_set(o, "envdAccessToken", json_string(e->e2b->token));
    (void)json_set(o, "trafficAccessToken", json_null());
    (void)json_set(o, "domain",
                   a->cfg.e2b_domain && *a->cfg.e2b_domain ? json_string(a->cfg.e2b_domain)
                                                           : json_null());
    return o;
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
    (void)json_set(o, "templateID", json_string(template_id(e)));
    if (e->e2b && e->e2b->alias[0])
        (void)json_set(o, "alias", json_string(e->e2b->alias));
    (void)json_set(o, "clientID", json_string("abx"));
    (void)json_set(o, "startedAt", time_json(e->created_wall_ms));
    (void)json_set(o, "endAt", time_json(e->end_at_wall_ms ? e->end_at_wall_ms : wall_msec()));
    (void)json_set(o, "state", json_string(e->e2b && e->e2b->paused ? "paused" : "running"));
    (void)json_set(o, "cpuCount", json_integer(cpus ? cpus : 1));
    (void)json_set(o, "memoryMB", json_integer((json_int_t)(mem >> 20)));
    (void)json_set(o, "diskSizeMB", json_integer((json_int_t)disk));
    (void)json_set(o, "envdVersion", json_string(E2B_ENVD_VERSION));
    (void)json_set(o, "metadata", json_incref(e->metadata));
    if (detail) {
        if (e->e2b)
            (void)json_set(o, "envdAccessToken", json_string(e->e2b->token));
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

/* The entry the caller may see: live, and created with its key when that
 * is a scoped key (the full key sees every sandbox). */
static struct entry *
find(struct api *a, struct http_req *req, const char *id, const struct api_scope *scope)
{
    struct entry *e = e2b_lookup(a, id);
    if (!e || e->state != E_READY || (scope && e->scope != scope)) {
        if (req)
            e2b_error(req, 404, "sandbox '%.64s' not found", id);
        return NULL;
    }
    return e;
}

/* --- create --- */

struct preq {
    struct api *api;
    const struct api_scope *scope;
    char id[API_ID_LEN + 8];
    bool v1;
};

static void
preq_close(struct http_req *req, void *ud)
{
    (void)req;
    free(ud);
}

static int
read_timeout(json_t *j, uint64_t max_s, uint64_t *ret, struct err *err)
{
    json_t *v = json_object_get(j, "timeout");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return err_set(err, EINVAL, "'timeout' must be a non-negative integer of seconds");
    if (max_s && (uint64_t)json_integer_value(v) > max_s)
        return err_set(err, EINVAL, "'timeout' may be at most %llu seconds",
                       (unsigned long long)max_s);
    *ret = (uint64_t)json_integer_value(v);
    return 1;
}

static json_t *
create_answer(struct api *a, struct entry *e)
{
    return sandbox_json(a, e);
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
    struct preq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j = NULL;
    const char *tmpl = NULL;
    struct api_create_req c = {
            .timeout_s = q->v1 ? E2B_V1_TIMEOUT_S : E2B_DEFAULT_TIMEOUT_S,
            .lim = {a->cfg.default_memory_bytes, a->cfg.default_cpu_millis, a->cfg.default_pids,
                    a->cfg.default_disk_bytes},
            .scope = q->scope,
            .answer = create_answer,
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
        (r = read_timeout(j, a->cfg.max_timeout_s, &c.timeout_s, &err)) < 0 ||
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
    e->e2b = x;
    x = NULL;
    /* Before it is ready, so nothing can answer first; on failure the
     * sandbox is killed and on_ready answers 500. */
    if (from_snap && (r = e2b_restore_attach(a, e, snap.id, NULL, NULL)) < 0)
        api_entry_kill(e);
    goto out;
fail:
    e2b_fail(req, r, &err);
out:
    free(x);
    json_decref(j);
}

/* --- list --- */

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One percent-decoding pass in place ('+' as a space when form is set):
 * '%' and exactly two hex digits (not "%00"), else the bytes stay. */
static void
pct_decode(char *s, bool form)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        int hi = *p == '%' ? hex_digit(p[1]) : -1, lo = hi >= 0 ? hex_digit(p[2]) : -1;
        if (lo >= 0 && hi * 16 + lo > 0) {
            *w++ = (char)(hi * 16 + lo);
            p += 2;
            continue;
        }
        *w++ = form && *p == '+' ? ' ' : *p;
    }
    *w = '\0';
}

int
e2b_meta_filter_parse(struct e2b_meta_filter *m, const char *v, struct err *err)
{
    m->n = 0;
    if (strlen(v) >= sizeof(m->buf))
        return err_set(err, EINVAL, "'metadata' is too long");
    strcpy(m->buf, v);
    char *save = NULL;
    for (char *pair = strtok_r(m->buf, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        if (m->n == ELEMENTSOF(m->keys))
            return err_set(err, EINVAL, "'metadata' has too many pairs");
        char *eq = strchr(pair, '=');
        if (!eq)
            return err_set(err, EINVAL, "'metadata' must be key=value pairs");
        *eq = '\0';
        /* form-decoded once, then percent-decoded once more */
        pct_decode(pair, true);
        pct_decode(eq + 1, true);
        pct_decode(pair, false);
        pct_decode(eq + 1, false);
        m->keys[m->n] = pair;
        m->vals[m->n++] = eq + 1;
    }
    return 0;
}

struct filter {
    struct e2b_meta_filter meta;
    bool running, paused;
    uint64_t started_after;
    const char *tmpl;
};

static int
decode_filter(struct http_req *req, struct filter *f, struct err *err)
{
    const char *v;
    f->running = f->paused = true;
    if ((v = http_req_query(req, "state"))) {
        f->running = strstr(v, "running") != NULL;
        f->paused = strstr(v, "paused") != NULL;
    }
    if ((v = http_req_query(req, "startedAfter")) && *v && parse_rfc3339(v, &f->started_after) < 0)
        return err_set(err, EINVAL, "'startedAfter' must be an RFC 3339 time");
    f->tmpl = http_req_query(req, "template");
    if ((v = http_req_query(req, "metadata")) && *v)
        return e2b_meta_filter_parse(&f->meta, v, err);
    return 0;
}

/* One row of a listing: a live entry or a sandbox paused without memory. */
struct item {
    uint64_t created;
    const char *id; /* the E2B id */
    struct entry *e;
    struct e2b_cold *c;
};

static bool
matches(struct api *a, const struct item *it, const struct filter *f, const struct api_scope *scope)
{
    const struct template *et = it->e ? it->e->tmpl : it->c->t;
    json_t *meta = it->e ? it->e->metadata : it->c->meta;
    bool paused = it->e ? it->e->e2b->paused : true;
    if (it->e && (it->e->state != E_READY || (scope && it->e->scope != scope)))
        return false;
    if (it->c && scope && it->c->scope != scope)
        return false;
    if (!(paused ? f->paused : f->running))
        return false;
    if (it->created < f->started_after)
        return false;
    if (f->tmpl && *f->tmpl) {
        const struct template *t = template_set_find(a->templates, f->tmpl);
        if (!t || t != et)
            return false;
    }
    for (size_t i = 0; i < f->meta.n; i++) {
        json_t *v = json_object_get(meta, f->meta.keys[i]);
        if (!v || !json_is_string(v) || strcmp(json_string_value(v), f->meta.vals[i]))
            return false;
    }
    return true;
}

/* Start time, then id; ud points to a bool: ascending. */
static int
cmp_items(const void *pa, const void *pb, void *ud)
{
    const struct item *x = pa, *y = pb;
    int c = x->created < y->created ? -1 : x->created > y->created;
    if (c == 0)
        c = strcmp(x->id, y->id);
    return *(const bool *)ud ? c : -c;
}

/* The cold record id names while paused (NULL when none or running). */
static struct e2b_cold *
find_cold(struct api *a, const char *id, const struct api_scope *scope)
{
    if (!a->snaps || e2b_snaps_closing(a))
        return NULL;
    list_foreach (l, e2b_cold_list(a)) {
        struct e2b_cold *c = list_entry(l, struct e2b_cold, link);
        if (!strcmp(c->id, id) && !c->live && (!scope || c->scope == scope))
            return c;
    }
    return NULL;
}

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
    (void)json_set(o, "startedAt", time_json(c->created_wall_ms));
    (void)json_set(o, "endAt", time_json(wall_msec()));
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
    struct filter f = {0};
    struct err err = {0};
    uint64_t limit = E2B_LIST_MAX;
    const char *v;
    struct item *all = NULL;
    size_t n = 0, start = 0, ncold = 0;
    struct list *cold = a->snaps && !e2b_snaps_closing(a) ? e2b_cold_list(a) : NULL;

    if (decode_filter(req, &f, &err) < 0) {
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    if ((v = http_req_query(req, "limit"))) {
        char *end;
        unsigned long long l = strtoull(v, &end, 10);
        if (*v == '\0' || *end || l < 1 || l > E2B_LIST_MAX) {
            e2b_error(req, 400, "'limit' must be between 1 and %d", E2B_LIST_MAX);
            return;
        }
        limit = l;
    }
    v = http_req_query(req, "order");
    bool sort_asc = v && !strcasecmp(v, "asc");
    if (v && !sort_asc && strcasecmp(v, "desc")) {
        e2b_error(req, 400, "'order' must be asc or desc");
        return;
    }
    if (cold)
        list_foreach (l, cold)
            ncold++;
    all = calloc(a->count + ncold + 1, sizeof(*all));
    if (!all) {
        e2b_error(req, 500, "out of memory");
        return;
    }
    list_foreach (l, &a->entries) {
        struct entry *e = list_entry(l, struct entry, link);
        struct item it = {.created = e->created_wall_ms, .id = e2b_public_id(e), .e = e};
        if (n < a->count && e->e2b && matches(a, &it, &f, scope))
            all[n++] = it;
    }
    if (cold)
        list_foreach (l, cold) {
            struct e2b_cold *c = list_entry(l, struct e2b_cold, link);
            struct item it = {.created = c->created_wall_ms, .id = c->id, .c = c};
            if (!c->live && n < a->count + ncold && matches(a, &it, &f, scope))
                all[n++] = it;
        }
    qsort_r(all, n, sizeof(*all), cmp_items, &sort_asc);
    /* The token is the last item sent, "<created ms>.<id>": the next page
     * starts after it, whatever was killed in between. */
    if ((v = http_req_query(req, "nextToken")) && *v) {
        unsigned long long ms;
        char id[API_ID_LEN + 1];
        if (sscanf(v, "%llu.%20[a-z0-9]", &ms, id) != 2) {
            free(all);
            e2b_error(req, 400, "'nextToken' is not a token this server gave");
            return;
        }
        struct item key = {.created = ms, .id = id};
        while (start < n && cmp_items(&all[start], &key, &sort_asc) <= 0)
            start++;
    }
    json_t *arr = json_array();
    size_t end = start + limit < n ? start + limit : n;
    for (size_t i = start; i < end; i++)
        (void)json_array_append_new(arr, all[i].e ? detail_json(a, all[i].e, false)
                                                  : cold_json(a, all[i].c, false));
    if (end < n) {
        char tok[64];
        (void)snprintf(tok, sizeof(tok), "%llu.%s", (unsigned long long)all[end - 1].created,
                       all[end - 1].id);
        http_req_add_header(req, "X-Next-Token", tok);
    }
    free(all);
    api_json(req, 200, arr);
}

/* --- per-sandbox operations --- */

static void
timeout_done(struct http_req *req, const char *body, size_t len)
{
    struct preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    uint64_t t = 0;
    int r;
    struct entry *e = find(q->api, req, q->id, q->scope);
    if (!e)
        return;
    if ((r = json_parse(body, len, &j, &err)) < 0 || !json_is_object(j) ||
        (r = read_timeout(j, q->api->cfg.max_timeout_s, &t, &err)) <= 0) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "'timeout' (seconds) is required");
        return;
    }
    json_decref(j);
    e->timeout_s = t;
    if (!e->e2b || !e->e2b->paused)
        api_entry_set_end(e, wall_msec() + t * 1000u);
    api_no_content(req);
}

static int
set_frozen(struct entry *e, bool frozen, struct err *err)
{
    int r = sandbox_freeze(e->sb, frozen, err);
    if (r < 0)
        return r;
    e->e2b->paused = frozen;
    return 0;
}

static unsigned
snap_status(int r)
{
    int e = r < 0 ? -r : r;
    /* The sandbox's files over a snapshot limit (bytes, entries, depth). */
    return e == EFBIG || e == E2BIG || e == ELOOP ? 507
           : e == EBUSY                           ? 409
           : e == EINVAL                          ? 400
           : e == ENOENT || e == ESRCH            ? 404
           : e == ESHUTDOWN || e == EOPNOTSUPP    ? 503
                                                  : 500;
}

static void
snap_fail(struct http_req *req, int r, const struct err *err)
{
    char tmp[128];
    e2b_error(req, snap_status(r), "%s",
              err && err->msg[0] ? err->msg : strerror_r(r < 0 ? -r : r, tmp, sizeof(tmp)));
}

/* --- pause without memory --- */

static void
cold_drop(struct api *a, struct e2b_cold *c)
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
    struct entry *e = closing ? NULL : hashmap_get(a->map, cc->eid);
    struct e2b_cold *c = NULL;
    struct list *l = closing ? NULL : e2b_cold_list(a);

    if (closing)
        goto out;
    if (r < 0) {
        snap_fail(cc->req, r, err);
        goto out;
    }
    if (!e || e->state != E_READY || !e->e2b || !l) {
        (void)e2b_snapshot_delete(a, snap_id);
        e2b_error(cc->req, 404, "sandbox '%s' went while it was paused", cc->eid);
        goto out;
    }
    c = e->e2b->cold;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c || !(c->meta = json_deep_copy(e->metadata))) {
            free(c);
            (void)e2b_snapshot_delete(a, snap_id);
            e2b_error(cc->req, 500, "out of memory");
            goto out;
        }
        memcpy(c->id, e->id, sizeof(c->id));
        memcpy(c->token, e->e2b->token, sizeof(c->token));
        memcpy(c->alias, e->e2b->alias, sizeof(c->alias));
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
    e->e2b->cold = NULL; /* its end no longer ends the E2B sandbox */
    api_entry_kill(e);   /* every process and the jail go */
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
        snap_fail(req, r, &err);
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
            .answer = create_answer,
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
    e->e2b = x;
    x->cold = c;
    e->created_wall_ms = c->created_wall_ms; /* startedAt stays the first start */
    if ((r = e2b_restore_attach(a, e, c->snap, cold_resumed, c)) < 0) {
        api_entry_kill(e); /* on_ready answers the request */
        return;
    }
    c->resuming = true;
}

static void
connect_done(struct http_req *req, const char *body, size_t len)
{
    struct preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    uint64_t t = E2B_DEFAULT_TIMEOUT_S;
    int r, has;
    struct e2b_cold *c = find_cold(q->api, q->id, q->scope);
    struct entry *e = c ? NULL : find(q->api, req, q->id, q->scope);
    if (!e && !c)
        return;
    if (len > 0 && ((r = json_parse(body, len, &j, &err)) < 0 || !json_is_object(j) ||
                    (has = read_timeout(j, q->api->cfg.max_timeout_s, &t, &err)) < 0)) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "the body must be a JSON object");
        return;
    }
    json_decref(j);
    if (c) {
        cold_resume(q->api, req, c, t);
        return;
    }
    if (!e->e2b) {
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    unsigned status = 200;
    if (e->e2b->paused) {
        if ((r = set_frozen(e, false, &err)) < 0) {
            e2b_fail(req, r, &err);
            return;
        }
        log_info("sandbox=%s resumed", e->id);
        api_entry_set_end(e, wall_msec() + t * 1000u);
        status = 201;
    } else {
        /* Connecting never shortens a sandbox's life. */
        uint64_t end = wall_msec() + t * 1000u;
        if (e->end_at_wall_ms && end > e->end_at_wall_ms)
            api_entry_set_end(e, end);
    }
    api_json(req, status, sandbox_json(q->api, e));
}

static void
pause_done(struct http_req *req, const char *body, size_t len)
{
    struct preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    int r;
    if (find_cold(q->api, q->id, q->scope)) {
        e2b_error(req, 409, "sandbox '%s' is already paused", q->id);
        return;
    }
    struct entry *e = find(q->api, req, q->id, q->scope);
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
    if (!e->e2b) {
        e2b_error(req, 404, "sandbox '%s' was not created through the E2B API", e->id);
        return;
    }
    if (e->e2b->paused) {
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
    api_entry_set_end(e, 0); /* a paused sandbox waits for resume */
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
            snap_fail(sc->req, r, err);
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

static void
snapshot_done(struct http_req *req, const char *body, size_t len)
{
    struct preq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j;
    const char *name = NULL;
    int r;
    struct entry *e = find(q->api, req, q->id, q->scope);
    if (!e || !body_object(req, body, len, &j))
        return;
    if (j && (r = json_get_str(j, "name", false, &name, &err)) < 0) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    if (!e->e2b) {
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
        snap_fail(req, r, &err);
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
    json_t *o = json_object(), *e = json_object();
    (void)json_set(e, "code", json_integer(status));
    (void)json_set(e, "message", json_string(msg));
    (void)json_set(o, "error", e);
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
        (void)json_set(item, "sandbox", sandbox_json(a, e));
    } else {
        item = error_item(snap_status(r), err && err->msg[0]
                                                  ? err->msg
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
            .answer = create_answer,
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
        e->e2b = TAKE_PTR(x);
        r = e2b_restore_attach(a, e, f->snap, fork_child_done, &f->child[i]);
        if (r < 0) {
            api_entry_kill(e); /* on_ready frees it: nothing is reported */
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
        snap_fail(f->req, r, err);
        fork_free(f);
        return;
    }
    (void)snprintf(f->snap, sizeof(f->snap), "%s", snap_id);
    f->pending = f->n + 1; /* settled once more after the loop */
    for (size_t i = 0; i < f->n; i++)
        fork_spawn(f, i);
    fork_settle(f);
}

static void
fork_done(struct http_req *req, const char *body, size_t len)
{
    struct preq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j;
    uint64_t t = E2B_DEFAULT_TIMEOUT_S, count = 1;
    int r;
    struct entry *e = find(a, req, q->id, q->scope);
    if (!e || !body_object(req, body, len, &j))
        return;
    if (j && ((r = read_timeout(j, a->cfg.max_timeout_s, &t, &err)) < 0 ||
              (r = json_get_u64(j, "count", false, E2B_FORK_MAX, &count, &err)) < 0 ||
              (count == 0 && (r = err_set(&err, EINVAL, "'count' must be at least 1")) < 0))) {
        json_decref(j);
        e2b_error(req, 400, "%s", err.msg);
        return;
    }
    json_decref(j);
    if (t == 0)
        t = E2B_DEFAULT_TIMEOUT_S;
    if (!e->e2b) {
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
    (void)snprintf(f->alias, sizeof(f->alias), "%s", e->e2b->alias);
    for (size_t i = 0; i < count; i++)
        (void)json_array_append_new(f->items, json_null());
    f->req = req;
    http_req_ref(req);
    if ((r = e2b_snapshot_take(a, e, NULL, true, fork_snapped, f, &err)) < 0) {
        snap_fail(req, r, &err);
        fork_free(f);
    }
}

static void
metrics(struct api *a, struct http_req *req, struct entry *e)
{
    uint64_t now = wall_msec(), start = e->created_wall_ms, end = now;
    const char *v;
    if ((v = http_req_query(req, "start")))
        start = strtoull(v, NULL, 10) * 1000u;
    if ((v = http_req_query(req, "end")))
        end = strtoull(v, NULL, 10) * 1000u;
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
        (void)json_set(m, "timestamp", time_json(now));
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

static struct preq *
preq_new(struct api *a, struct http_req *req, const struct api_scope *scope, const char *id)
{
    struct preq *q = calloc(1, sizeof(*q));
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
    size_t kl = strlen(a->api_key);
    *ret_scope = NULL;
    if (k && strlen(k) == kl && CRYPTO_memcmp(k, a->api_key, kl) == 0)
        return true;
    if (k && (*ret_scope = api_scope_of(a, k, strlen(k))))
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
    struct preq *q;

    if (!authorized(a, req, &scope))
        return;
    if (strlen(path) >= sizeof(copy)) {
        e2b_error(req, 404, "no route for that path");
        return;
    }
    strcpy(copy, path);
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
            struct e2b_cold *c = find_cold(a, s[1], scope);
            if (is(req, "GET")) {
                struct entry *e = c ? NULL : find(a, req, s[1], scope);
                if (c)
                    api_json(req, 200, cold_json(a, c, true));
                else if (e)
                    api_json(req, 200, detail_json(a, e, true));
            } else if (is(req, "DELETE")) {
                struct entry *e = c ? NULL : find(a, req, s[1], scope);
                if (c && !c->resuming) {
                    cold_drop(a, c);
                    api_no_content(req);
                } else if (c) {
                    e2b_error(req, 409, "sandbox '%s' is being resumed", c->id);
                } else if (e) {
                    api_entry_kill(e); /* leaves the lists at once */
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
                    http_req_read_body(req, API_JSON_MAX, connect_done);
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
                    http_req_read_body(req, API_JSON_MAX, pause_done);
                return;
            }
            if (!strcmp(op, "metrics") && is(req, "GET")) {
                struct entry *e = find(a, req, s[1], scope);
                if (e)
                    metrics(a, req, e);
                return;
            }
            if (!strcmp(op, "snapshots") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, snapshot_done);
                return;
            }
            if (!strcmp(op, "fork") && is(req, "POST")) {
                if ((q = preq_new(a, req, scope, s[1])))
                    http_req_read_body(req, API_JSON_MAX, fork_done);
                return;
            }
            if (!strcmp(op, "network") && is(req, "PUT")) {
                if (find(a, req, s[1], scope))
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
            snap_fail(req, r, NULL);
        return;
    }
    e2b_error(req, 404, "no route for %s %.200s", http_req_method(req), path);
}
