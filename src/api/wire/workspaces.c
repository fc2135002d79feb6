/*
 * workspaces.c - /v1/workspaces: durable workspaces on the native wire, and
 * the store's administrative routes (/v1/store/check, /v1/store/gc).
 *
 * File requests are decoded here and handed to workspace/files.c, which
 * settles the workspace and routes them (warm to its sandbox, cold to the
 * store; only exec wakes a workspace); the result is answered here.
 * Uploads are staged (and hashed) as they arrive, because where they go is
 * only known once the body is in. Writes and deletes may carry If-Match: a
 * version we handed out (warm: the sandbox's 16-hex stamp), or a content
 * hash (64 hex, good in both states), or "" for "must not exist"; a
 * mismatch is 412.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/timeutil.h"
#include "workspace/files.h"

#define WS_ID_MAX 64

static bool
valid_ws_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > WS_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-' ||
              id[i] == '_'))
            return false;
    return true;
}

static void
slash_path(const char *rel, char *out, size_t n)
{
    (void)snprintf(out, n, "/%s", path_is_root(rel) ? "" : rel);
}

static json_t *
store_entry_json(const struct store_entry *e)
{
    char p[4100];
    json_t *o = json_object();
    slash_path(e->path, p, sizeof(p));
    (void)json_set_name(o, "path", p);
    (void)json_set(o, "type", json_string(e->type == STORE_DIR ? "dir" : "file"));
    (void)json_set(o, "size", json_integer((json_int_t)e->size));
    (void)json_set(o, "mode", json_integer(e->mode));
    if (e->type == STORE_FILE) {
        (void)json_set(o, "version", json_string(e->hash));
        (void)json_set(o, "hash", json_string(e->hash));
    } else {
        (void)json_set(o, "version", json_string(""));
    }
    return o;
}

static json_t *
files_stat_json(const char *rel, const struct files_stat *st, const char *hash)
{
    char p[4100];
    json_t *o = json_object();
    slash_path(rel, p, sizeof(p));
    (void)json_set_name(o, "path", p);
    (void)json_set(o, "type", json_string(files_type_name(st->type)));
    (void)json_set(o, "size", json_integer((json_int_t)st->size));
    (void)json_set(o, "mode", json_integer(st->mode));
    (void)json_set(o, "version", json_string(st->version));
    if (hash)
        (void)json_set(o, "hash", json_string(hash));
    return o;
}

static json_t *
report_json(const struct sync_report *rep)
{
    json_t *o = json_object();
    (void)json_set(o, "files", json_integer(rep ? (json_int_t)rep->files : 0));
    (void)json_set(o, "dirs", json_integer(rep ? (json_int_t)rep->dirs : 0));
    (void)json_set(o, "deleted", json_integer(rep ? (json_int_t)rep->deleted : 0));
    (void)json_set(o, "bytes", json_integer(rep ? (json_int_t)rep->bytes : 0));
    (void)json_set(o, "unchanged", json_integer(rep ? (json_int_t)rep->unchanged : 0));
    (void)json_set(o, "ignored", json_integer(rep ? (json_int_t)rep->ignored : 0));
    (void)json_set(o, "skipped", json_integer(rep ? (json_int_t)rep->skipped : 0));
    json_t *skips = json_array();
    for (size_t i = 0; rep && i < rep->n_skips; i++) {
        const struct sync_skip *k = &rep->skips[i];
        json_t *s = json_object();
        char p[SYNC_SKIP_PATH_MAX + 2];
        slash_path(k->path, p, sizeof(p));
        (void)json_set_name(s, "path", p);
        if (k->cut)
            (void)json_set(s, "truncated", json_true());
        (void)json_set(s, "error",
                       json_string(k->error == ELOOP          ? "too_deep"
                                   : k->error == ENAMETOOLONG ? "name_too_long"
                                                              : "invalid_name"));
        (void)json_set(s, "message", json_string(sync_skip_reason(k->error)));
        (void)json_array_append_new(skips, s);
    }
    (void)json_set(o, "skipped_entries", skips);
    uint64_t us = rep ? rep->duration_us : 0;
    (void)json_set(o, "duration_ms", json_integer((json_int_t)((us + 500) / 1000)));
    (void)json_set(o, "duration_us", json_integer((json_int_t)us));
    return o;
}

/* The If-Match header without ETag quotes; NULL when absent. */
static const char *
if_match(struct http_req *req, char *buf, size_t n)
{
    const char *h = http_req_header(req, "If-Match");
    if (!h)
        return NULL;
    size_t l = strlen(h);
    if (l >= 2 && h[0] == '"' && h[l - 1] == '"') {
        h++;
        l -= 2;
    }
    if (l >= n)
        l = n - 1;
    memcpy(buf, h, l);
    buf[l] = '\0';
    return buf;
}

/* --- a generic asynchronous request: a store job answering req --- */

struct wjob {
    struct api *api;
    struct http_req *req;
    char ws[WS_ID_MAX + 1];
    int r;
    struct err err;
    json_t *out; /* the answer (200 or status) */
    unsigned status;
    struct store_ws meta;
    struct store_usage usage;
    void (*run)(struct store *s, struct wjob *j);
};

static struct wjob *
wjob_new(struct api *a, struct http_req *req, const char *ws)
{
    struct wjob *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->api = a;
    j->req = req;
    j->status = 200;
    (void)snprintf(j->ws, sizeof(j->ws), "%s", ws);
    http_req_ref(req);
    return j;
}

static void
wjob_free(struct wjob *j)
{
    json_decref(j->out);
    http_req_unref(j->req);
    free(j);
}

static void
wjob_run(struct store *s, void *ud)
{
    struct wjob *j = ud;
    j->run(s, j);
}

/* A cold download: the store's bytes are hashed on their way out, and the
 * last of them go only once they are known to be the recorded content (see
 * http_respond_fd_checked()). Damage ends the download as an error, is
 * logged and counted (store_damaged_reads(), in /metrics). */
struct blob_out {
    struct store_verify v;
    char ws[WS_ID_MAX + 1];
};

static int
blob_out_piece(void *ud, const void *data, size_t n)
{
    struct blob_out *b = ud;
    store_verify_update(&b->v, data, n);
    return 0;
}

static int
blob_out_end(void *ud, int r)
{
    struct blob_out *b = ud;
    struct err err = {0};
    if (r < 0 && r != -ENODATA) {
        store_note_damaged();
        log_err_errno(r, "workspace '%s': cannot read blob %.16s...: the download was cut off",
                      b->ws, b->v.hash);
        return r;
    }
    /* -ENODATA (the file ended early) is a short count for the verifier. */
    r = store_verify_end(&b->v, &err);
    if (r < 0)
        log_err("workspace '%s': %s: the download was cut off", b->ws, err.msg);
    return r;
}

static void
blob_out_free(void *ud)
{
    struct blob_out *b = ud;
    store_verify_done(&b->v);
    free(b);
}

static const struct http_body_check blob_out_check = {blob_out_piece, blob_out_end, blob_out_free};

static void
respond_blob(struct http_req *req, const char *ws, int fd, const struct store_entry *e)
{
    struct blob_out *b = calloc(1, sizeof(*b));
    if (!b || store_verify_begin(&b->v, e) < 0) {
        free(b);
        safe_close(fd);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    (void)snprintf(b->ws, sizeof(b->ws), "%s", ws);
    http_respond_fd_checked(req, 200, "application/octet-stream", fd, e->size, &blob_out_check, b);
}

static void
wjob_done(void *ud)
{
    struct wjob *j = ud;
    if (j->r < 0) {
        api_error(j->req, j->r, &j->err);
    } else if (j->status == 204) {
        api_no_content(j->req);
    } else {
        api_json(j->req, j->status, j->out);
        j->out = NULL;
    }
    wjob_free(j);
}

static void
wjob_submit(struct wjob *j, void (*run)(struct store *, struct wjob *))
{
    j->run = run;
    if (workspaces_run(j->api->ws, wjob_run, wjob_done, j) < 0) {
        api_error(j->req, -ENOMEM, NULL);
        wjob_free(j);
    }
}

/* --- create, list, info, delete --- */

/* A workspace's record with the resources its sandboxes get (the host's
 * defaults where the record names none). */
static json_t *
ws_json(struct api *a, const struct store_ws *m, enum ws_state st)
{
    const struct api_config *c = &a->cfg;
    uint32_t cpu = m->cpu_millis ? m->cpu_millis : c->default_cpu_millis;
    uint64_t mem = m->memory_bytes ? m->memory_bytes : c->default_memory_bytes;
    json_t *o = json_object();
    (void)json_set(o, "id", json_string(m->id));
    (void)json_set(o, "state", json_string(ws_state_name(st)));
    (void)json_set(o, "template", json_string(m->template_name));
    (void)json_set(o, "created_at", api_time_json(m->created_ms));
    (void)json_set(o, "cpu", json_real(cpu / 1000.0));
    (void)json_set(o, "memory_mb", json_integer((json_int_t)(mem >> 20)));
    (void)json_set(o, "pids", json_integer(m->pids ? m->pids : c->default_pids));
    uint64_t disk = workspace_disk_bound(m, a->cfg.default_disk_bytes);
    (void)json_set(o, "disk_mb", disk ? json_integer((json_int_t)(disk >> 20)) : json_null());
    return o;
}

static void
run_create(struct store *s, struct wjob *j)
{
    j->r = store_ws_create(s, &j->meta, &j->err);
    if (j->r == 0)
        j->r = store_ws_get(s, j->meta.id, &j->meta, &j->err);
    if (j->r < 0)
        return;
    j->status = 201;
    j->out = ws_json(j->api, &j->meta, WS_COLD);
}

static void
create_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct api *a = q->api;
    static const char *const allowed[] = {"id",   "template", "cpu", "memory_mb",
                                          "pids", "disk_mb",  NULL};
    struct err err = {0};
    json_t *j = NULL;
    const char *id = NULL, *tmpl = "base";
    double cpu = 0;
    uint64_t mem = 0, pids = 0, disk = 0;
    struct wjob *wj = NULL;
    int r;

    if (len == 0)
        j = json_object();
    else if ((r = json_parse(body, len, &j, &err)) < 0)
        goto fail;
    if ((r = json_check_object(j, allowed, &err)) < 0 ||
        (r = json_get_str(j, "id", false, &id, &err)) < 0 ||
        (r = json_get_str(j, "template", false, &tmpl, &err)) < 0 ||
        (r = json_get_num(j, "cpu", false, 0.01, (double)a->cfg.host_cpus, &cpu, &err)) < 0 ||
        (r = json_get_u64(j, "memory_mb", false, a->cfg.host_memory_bytes >> 20, &mem, &err)) < 0 ||
        (r = json_get_u64(j, "pids", false, 1u << 22, &pids, &err)) < 0 ||
        (r = api_decode_disk_mb(a, j, &disk, &err)) < 0)
        goto fail;
    if (id && !valid_ws_id(id)) {
        r = err_set(&err, EINVAL, "'id' must be 1-64 of a-z, 0-9, '-' and '_'");
        goto fail;
    }
    if (strcmp(tmpl, "base") != 0) {
        api_error_msg(req, 404, "not_found", "no template '%.64s' (this host offers 'base')", tmpl);
        json_decref(j);
        return;
    }
    if (mem && mem < 16) {
        r = err_set(&err, EINVAL, "'memory_mb' must be at least 16");
        goto fail;
    }
    if (pids && pids < 8) {
        r = err_set(&err, EINVAL, "'pids' must be at least 8");
        goto fail;
    }
    wj = wjob_new(a, req, "");
    if (!wj) {
        r = -ENOMEM;
        goto fail;
    }
    if (id)
        (void)snprintf(wj->meta.id, sizeof(wj->meta.id), "%s", id);
    else
        (void)rand_id(wj->meta.id, 20);
    (void)snprintf(wj->meta.template_name, sizeof(wj->meta.template_name), "%s", tmpl);
    wj->meta.cpu_millis = (uint32_t)(cpu * 1000.0 + 0.5);
    wj->meta.memory_bytes = mem << 20;
    wj->meta.pids = (uint32_t)pids;
    wj->meta.disk_bytes = disk;
    json_decref(j);
    wjob_submit(wj, run_create);
    return;
fail:
    json_decref(j);
    api_error(req, r, &err);
}

struct list_ctx {
    json_t *arr;
};

static int
list_one(const struct store_ws *w, void *ud)
{
    struct list_ctx *c = ud;
    json_t *o = json_object();
    (void)json_set(o, "id", json_string(w->id));
    (void)json_set(o, "template", json_string(w->template_name));
    (void)json_set(o, "created_at", api_time_json(w->created_ms));
    return json_array_append_new(c->arr, o) < 0 ? -ENOMEM : 0;
}

static void
run_list(struct store *s, struct wjob *j)
{
    struct list_ctx c = {json_array()};
    j->r = store_ws_list(s, list_one, &c, &j->err);
    j->out = c.arr;
}

static void
list_done(void *ud)
{
    struct wjob *j = ud;
    if (j->r == 0) {
        size_t i;
        json_t *o;
        json_array_foreach (j->out, i, o) {
            const char *id = json_string_value(json_object_get(o, "id"));
            (void)json_set(o, "state",
                           json_string(ws_state_name(workspaces_state(j->api->ws, id ? id : ""))));
        }
        json_t *wrap = json_object();
        (void)json_set(wrap, "workspaces", j->out);
        j->out = wrap;
    }
    wjob_done(j);
}

static void
run_info(struct store *s, struct wjob *j)
{
    j->r = store_ws_get(s, j->ws, &j->meta, &j->err);
    if (j->r == 0)
        j->r = store_usage(s, j->ws, &j->usage, &j->err);
}

static void
info_done(void *ud)
{
    struct wjob *j = ud;
    if (j->r == 0) {
        json_t *o = ws_json(j->api, &j->meta, workspaces_state(j->api->ws, j->ws));
        json_t *u = json_object();
        (void)json_set(u, "bytes", json_integer((json_int_t)j->usage.bytes));
        (void)json_set(u, "files", json_integer((json_int_t)j->usage.files));
        (void)json_set(u, "dirs", json_integer((json_int_t)j->usage.dirs));
        (void)json_set(o, "usage", u);
        struct sandbox *sb = workspaces_peek(j->api->ws, j->ws);
        (void)json_set(o, "processes",
                       json_integer(sb ? (json_int_t)sandbox_proc_count(sb, true) : 0));
        j->out = o;
    }
    wjob_done(j);
}

static void
run_delete(struct store *s, struct wjob *j)
{
    j->r = store_ws_delete(s, j->ws, &j->err);
    j->status = 204;
}

static void
delete_discarded(void *ud, int r, const struct err *err, const struct sync_report *rep)
{
    struct wjob *j = ud;
    (void)r;
    (void)err;
    (void)rep;
    wjob_submit(j, run_delete);
}

/* --- exec --- */

struct ws_exec {
    struct api *api;
    struct http_req *req;
    struct exec_req *x;
    char ws[WS_ID_MAX + 1];
};

static void
exec_ready(void *ud, int r, const struct err *err, struct sandbox *sb)
{
    struct ws_exec *e = ud;
    if (r < 0) {
        api_error(e->req, r, err);
    } else if (!http_req_closed(e->req)) {
        struct out_owner owner = {.kind = OWNER_WORKSPACE};
        (void)snprintf(owner.id, sizeof(owner.id), "%s", e->ws);
        api_exec_run(e->api, e->req, sb, &owner, e->x);
    }
    api_exec_req_free(e->x);
    http_req_unref(e->req);
    free(e);
}

static void
exec_body(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct err err = {0};
    struct exec_req *x = NULL;
    int r = api_exec_decode(q->api, body, len, &x, &err);
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    struct ws_exec *e = calloc(1, sizeof(*e));
    if (!e) {
        api_exec_req_free(x);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    e->api = q->api;
    e->req = req;
    e->x = x;
    (void)snprintf(e->ws, sizeof(e->ws), "%s", q->id);
    http_req_ref(req);
    workspaces_ensure(q->api->ws, q->id, exec_ready, e);
}

/* --- file operations: decoded here, routed by workspace/files.c --- */

enum fop { FOP_GET, FOP_HEAD, FOP_PUT, FOP_DELETE, FOP_WALK, FOP_MKDIR, FOP_RMDIR, FOP_RENAME };

/* A file request: its arguments (and, for a put, the upload staged as the
 * body comes in) until its answer. */
struct fcall {
    struct api *api;
    struct http_req *req;
    enum fop op;
    char ws[WS_ID_MAX + 1];
    char rel[PATH_MAX_LEN + 2], rel2[PATH_MAX_LEN + 2];
    char match[80];
    bool has_match, overwrite;
    struct store_writer *wr; /* put: the staged upload */
    struct err err;
};

static struct fcall *
fcall_new(struct api *a, struct http_req *req, const char *ws, enum fop op, const char *rel)
{
    struct fcall *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->api = a;
    f->req = req;
    f->op = op;
    (void)snprintf(f->ws, sizeof(f->ws), "%s", ws);
    (void)snprintf(f->rel, sizeof(f->rel), "%s", rel);
    f->has_match = if_match(req, f->match, sizeof(f->match)) != NULL;
    http_req_ref(req);
    return f;
}

static void
fcall_free(struct fcall *f)
{
    store_writer_abort(f->wr);
    http_req_unref(f->req);
    free(f);
}

static json_t *
walk_entry_json(const struct workspace_file_entry *e)
{
    json_t *o = json_object();
    (void)json_set_name(o, "path", e->path);
    (void)json_set(o, "type", json_string(files_type_name(e->type)));
    (void)json_set(o, "size", json_integer((json_int_t)e->size));
    (void)json_set(o, "mode", json_integer(e->mode));
    (void)json_set(o, "version", json_string(e->version));
    if (e->hash[0])
        (void)json_set(o, "hash", json_string(e->hash));
    if (e->target)
        (void)json_set_name(o, "target", e->target);
    return o;
}

static void
answer_walk(struct fcall *f, const struct workspace_file_result *res)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < res->n_entries; i++)
        if (json_array_append_new(arr, walk_entry_json(&res->entries[i])) < 0) {
            json_decref(arr);
            api_error(f->req, -ENOMEM, NULL);
            return;
        }
    json_t *o = json_object();
    (void)json_set(o, "entries", arr);
    (void)json_set(o, "state", json_string(res->warm ? "warm" : "cold"));
    api_json(f->req, 200, o);
}

/* GET and HEAD: the file's bytes, or (HEAD of a directory) its type. */
static void
answer_read(struct fcall *f, struct workspace_file_result *res)
{
    struct http_req *req = f->req;
    char etag[80];

    if (res->warm) {
        if (res->fd < 0) {
            http_req_add_header(req, "X-Abx-Type", files_type_name(res->st.type));
            http_req_add_header(req, "X-Abx-Version", res->st.version);
            http_req_add_header(req, "X-Abx-State", "warm");
            http_respond(req, 200, NULL, "", 0);
            return;
        }
        (void)snprintf(etag, sizeof(etag), "\"%s\"", res->st.version);
        http_req_add_header(req, "ETag", etag);
        http_req_add_header(req, "X-Abx-Version", res->st.version);
        http_req_add_header(req, "X-Abx-Type", "file");
        http_req_add_header(req, "X-Abx-State", "warm");
        http_respond_fd(req, 200, "application/octet-stream", TAKE_FD(res->fd), res->st.size);
        return;
    }
    if (res->fd < 0) {
        http_req_add_header(req, "X-Abx-Type", "dir");
        http_req_add_header(req, "X-Abx-State", "cold");
        http_respond(req, 200, NULL, "", 0);
        return;
    }
    (void)snprintf(etag, sizeof(etag), "\"%s\"", res->e.hash);
    http_req_add_header(req, "ETag", etag);
    http_req_add_header(req, "X-Abx-Version", res->e.hash);
    http_req_add_header(req, "X-Abx-Hash", res->e.hash);
    http_req_add_header(req, "X-Abx-Type", "file");
    http_req_add_header(req, "X-Abx-State", "cold");
    respond_blob(req, f->ws, TAKE_FD(res->fd), &res->e);
}

static void
fop_answered(void *ud, struct workspace_file_result *res)
{
    struct fcall *f = ud;
    struct http_req *req = f->req;

    if (res->r < 0) {
        api_error(req, res->r, &res->err);
        fcall_free(f);
        return;
    }
    switch (f->op) {
    case FOP_GET:
    case FOP_HEAD:
        answer_read(f, res);
        break;
    case FOP_PUT:
        api_json(req, res->created ? 201 : 200,
                 res->warm ? files_stat_json(f->rel, &res->st, res->hash)
                           : store_entry_json(&res->e));
        break;
    case FOP_DELETE:
    case FOP_RMDIR:
        api_no_content(req);
        break;
    case FOP_WALK:
        answer_walk(f, res);
        break;
    case FOP_MKDIR: {
        json_t *o = json_object();
        char p[4100];
        slash_path(f->rel, p, sizeof(p));
        (void)json_set_name(o, "path", p);
        (void)json_set(o, "created", json_boolean(res->created));
        api_json(req, res->created ? 201 : 200, o);
        break;
    }
    case FOP_RENAME:
        api_json(req, 200,
                 res->warm ? files_stat_json(f->rel2, &res->st, NULL) : store_entry_json(&res->e));
        break;
    }
    fcall_free(f);
}

/* Hands the request to workspace/files.c, which settles and routes it. */
static void
fop_route(struct fcall *f)
{
    static void (*const call[])(struct workspaces *, const struct workspace_file_req *,
                                workspace_file_fn, void *) = {
            [FOP_GET] = workspace_file_get,       [FOP_HEAD] = workspace_file_stat,
            [FOP_DELETE] = workspace_file_delete, [FOP_WALK] = workspace_file_walk,
            [FOP_MKDIR] = workspace_file_mkdir,   [FOP_RMDIR] = workspace_file_rmdir,
            [FOP_RENAME] = workspace_file_rename,
    };
    struct workspace_file_req q = {
            .ws = f->ws,
            .rel = f->rel,
            .rel2 = f->rel2,
            .match = f->has_match ? f->match : NULL,
            .overwrite = f->overwrite,
            .default_disk_bytes = f->api->cfg.default_disk_bytes,
    };
    if (f->op == FOP_PUT)
        workspace_file_put(f->api->ws, &q, TAKE_PTR(f->wr), fop_answered, f);
    else
        call[f->op](f->api->ws, &q, fop_answered, f);
}

static void
fop_start(struct api *a, struct http_req *req, const char *ws, enum fop op, const char *rel,
          const char *rel2, bool overwrite)
{
    struct fcall *f = fcall_new(a, req, ws, op, rel);
    if (!f) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    if (rel2)
        (void)snprintf(f->rel2, sizeof(f->rel2), "%s", rel2);
    f->overwrite = overwrite;
    fop_route(f);
}

/* --- uploads: staged (and hashed) as they arrive, routed once in --- */

static void
put_close(struct http_req *req, void *ud)
{
    (void)req;
    struct fcall *f = ud;
    if (f)
        fcall_free(f); /* the request ended before the body did */
}

static int
put_chunk(struct http_req *req, const char *data, size_t len)
{
    struct fcall *f = http_req_userdata(req);
    int r = store_writer_write(f->wr, data, len, &f->err);
    if (r < 0) {
        api_error(req, r, &f->err);
        return r;
    }
    return 0;
}

static void
put_done(struct http_req *req)
{
    struct fcall *f = http_req_userdata(req);
    /* The call now owns itself (and its reference to req). */
    http_req_set_userdata(req, NULL, NULL);
    fop_route(f);
}

static void
put_begin(struct api *a, struct http_req *req, const char *ws, const char *rel)
{
    struct err err = {0};
    const char *cl = http_req_header(req, "Content-Length");
    uint64_t len;
    if (cl && parse_u64(cl, &len) == 0 && len > a->cfg.max_file_bytes) {
        api_error_msg(req, 413, "too_large", "files may be at most %llu bytes",
                      (unsigned long long)a->cfg.max_file_bytes);
        return;
    }
    if (path_is_root(rel)) {
        api_error_msg(req, 409, "is_a_directory", "'/' is the workspace directory");
        return;
    }
    struct fcall *f = fcall_new(a, req, ws, FOP_PUT, rel);
    if (!f) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    int r = store_writer_begin(workspaces_loop_store(a->ws), a->cfg.max_file_bytes, &f->wr, &err);
    if (r == 0 && cl && parse_u64(cl, &len) == 0)
        r = store_writer_expect(f->wr, len, &err); /* refused before the body, not after */
    if (r < 0) {
        fcall_free(f);
        api_error(req, r, &err);
        return;
    }
    http_req_set_userdata(req, f, put_close);
    http_req_stream_body(req, put_chunk, put_done);
}

/* --- the manifest: the store's view, whatever the state --- */

struct walk_acc {
    json_t *arr;
};

static int
walk_store_one(const struct store_entry *e, void *ud)
{
    struct walk_acc *w = ud;
    return json_array_append_new(w->arr, store_entry_json(e)) < 0 ? -ENOMEM : 0;
}

static void
run_manifest(struct store *s, struct wjob *j)
{
    struct walk_acc w = {json_array()};
    j->r = store_ws_get(s, j->ws, &j->meta, &j->err);
    if (j->r == 0)
        j->r = store_walk(s, j->ws, ".", walk_store_one, &w, &j->err);
    j->out = json_object();
    (void)json_set(j->out, "entries", w.arr);
}

static int
norm(struct http_req *req, const char *raw, char *out, size_t n)
{
    int r = api_path_nul_check(req);
    if (r < 0)
        return r;
    r = path_normalize(raw, strlen(raw), out, n);
    if (r == -ENAMETOOLONG)
        api_error_msg(req, 400, "bad_request", "path is too long (%d bytes, %d per name at most)",
                      PATH_MAX_LEN, PATH_NAME_MAX);
    else if (r < 0)
        api_error_msg(req, 400, "bad_request",
                      "path must be '/'-rooted in the workspace, without '..'");
    return r;
}

static void
dir_body(struct http_req *req, const char *body, size_t len, enum fop op)
{
    struct rq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    bool overwrite = false, to = false;
    char a[PATH_MAX_LEN + 2], b[PATH_MAX_LEN + 2] = "";
    int r;

    if ((r = json_parse(body, len, &j, &err)) < 0)
        goto fail;
    if (op == FOP_RENAME) {
        static const char *const allowed[] = {"from",   "from_b64",  "to",
                                              "to_b64", "overwrite", NULL};
        if ((r = json_check_object(j, allowed, &err)) < 0 ||
            (r = api_body_path(j, "from", a, sizeof(a), &err)) < 0 ||
            (r = api_body_path(j, "to", b, sizeof(b), &err)) < 0 ||
            (r = json_get_bool(j, "overwrite", false, &overwrite, &err)) < 0)
            goto fail;
        to = true;
    } else {
        static const char *const allowed[] = {"path", "path_b64", NULL};
        if ((r = json_check_object(j, allowed, &err)) < 0 ||
            (r = api_body_path(j, "path", a, sizeof(a), &err)) < 0)
            goto fail;
    }
    if ((op == FOP_RENAME && (path_is_root(a) || path_is_root(b))) ||
        (op == FOP_RMDIR && path_is_root(a))) {
        r = err_set(&err, EINVAL, "the workspace root cannot be moved or removed");
        goto fail;
    }
    json_decref(j);
    fop_start(q->api, req, q->id, op, a, to ? b : NULL, overwrite);
    return;
fail:
    json_decref(j);
    api_error(req, r, &err);
}

static void
mkdir_body(struct http_req *req, const char *body, size_t len)
{
    dir_body(req, body, len, FOP_MKDIR);
}

static void
rmdir_body(struct http_req *req, const char *body, size_t len)
{
    dir_body(req, body, len, FOP_RMDIR);
}

static void
rename_body(struct http_req *req, const char *body, size_t len)
{
    dir_body(req, body, len, FOP_RENAME);
}

/* --- flush and close --- */

struct sync_waiter {
    struct http_req *req;
};

static void
sync_answered(void *ud, int r, const struct err *err, const struct sync_report *rep)
{
    struct sync_waiter *s = ud;
    if (r < 0)
        api_error(s->req, r, err);
    else
        api_json(s->req, 200, report_json(rep));
    http_req_unref(s->req);
    free(s);
}

/* A cold workspace has nothing to mirror; it only has to exist. */
static void
run_exists(struct store *s, struct wjob *j)
{
    j->r = store_ws_get(s, j->ws, &j->meta, &j->err);
    if (j->r == 0)
        j->out = report_json(NULL);
}

static void
flush_or_close(struct api *a, struct http_req *req, const char *ws, bool close)
{
    struct err lost = {0};
    int r = workspaces_lost(a->ws, ws, &lost);
    if (r < 0) {
        api_error(req, r, &lost);
        return;
    }
    if (workspaces_state(a->ws, ws) == WS_COLD) {
        struct wjob *j = wjob_new(a, req, ws);
        if (!j)
            api_error(req, -ENOMEM, NULL);
        else
            wjob_submit(j, run_exists);
        return;
    }
    struct sync_waiter *s = calloc(1, sizeof(*s));
    if (!s) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    s->req = req;
    http_req_ref(req);
    if (close)
        workspaces_close(a->ws, ws, sync_answered, s);
    else
        workspaces_flush(a->ws, ws, sync_answered, s);
}

static void
flush_body(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    (void)body;
    (void)len;
    flush_or_close(q->api, req, q->id, false);
}

static void
close_body(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    (void)body;
    (void)len;
    flush_or_close(q->api, req, q->id, true);
}

static void
delete_body(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    (void)body;
    (void)len;
    struct wjob *j = wjob_new(q->api, req, q->id);
    if (!j) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    workspaces_discard(q->api->ws, q->id, delete_discarded, j);
}

/* --- the store's administration --- */

static void
run_check(struct store *s, struct wjob *j)
{
    struct store_check_report rep;
    j->r = store_check(s, &rep, &j->err);
    if (j->r < 0)
        return;
    j->out = json_object();
    bool ok = !rep.missing_blobs && !rep.corrupt_blobs && !rep.orphan_entries;
    (void)json_set(j->out, "ok", json_boolean(ok));
    (void)json_set(j->out, "store", json_string(store_kind(s)));
    (void)json_set(j->out, "files", json_integer((json_int_t)rep.files));
    (void)json_set(j->out, "blobs", json_integer((json_int_t)rep.blobs));
    (void)json_set(j->out, "missing_blobs", json_integer((json_int_t)rep.missing_blobs));
    (void)json_set(j->out, "corrupt_blobs", json_integer((json_int_t)rep.corrupt_blobs));
    (void)json_set(j->out, "orphan_entries", json_integer((json_int_t)rep.orphan_entries));
    (void)json_set(j->out, "first_problem",
                   rep.first_problem[0] ? json_string_lossy(rep.first_problem) : json_null());
}

static void
run_gc(struct store *s, struct wjob *j)
{
    struct store_gc_stats st;
    j->r = store_gc(s, j->api->cfg.gc_holder, j->api->cfg.gc_lease_ms, &st, &j->err);
    if (j->r < 0)
        return;
    j->out = json_object();
    (void)json_set(j->out, "held_lease", json_boolean(st.held_lease));
    (void)json_set(j->out, "blobs_deleted", json_integer((json_int_t)st.blobs_deleted));
    (void)json_set(j->out, "bytes_freed", json_integer((json_int_t)st.bytes_freed));
}

/* --- routing --- */

static bool
method_is(struct http_req *req, const char *m, const char *allow)
{
    if (!strcmp(http_req_method(req), m))
        return true;
    http_req_add_header(req, "Allow", allow);
    api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here (allowed: %s)",
                  http_req_method(req), allow);
    return false;
}

static void
simple_job(struct api *a, struct http_req *req, const char *ws,
           void (*run)(struct store *, struct wjob *), void (*done)(void *))
{
    struct wjob *j = wjob_new(a, req, ws);
    if (!j) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    j->run = run;
    http_req_answer_later(req);
    if (workspaces_run(a->ws, wjob_run, done, j) < 0) {
        api_error(req, -ENOMEM, NULL);
        wjob_free(j);
    }
}

void
wire_store(struct api *a, struct http_req *req, const char *what)
{
    if (!a->ws) {
        api_error_msg(req, 404, "not_found", "this abxd has no store configured");
        return;
    }
    if (!strcmp(what, "check")) {
        if (method_is(req, "GET", "GET"))
            simple_job(a, req, "", run_check, wjob_done);
        return;
    }
    if (!strcmp(what, "gc")) {
        if (method_is(req, "POST", "POST"))
            simple_job(a, req, "", run_gc, wjob_done);
        return;
    }
    api_error_msg(req, 404, "not_found", "no route for %s %.200s", http_req_method(req),
                  http_req_path(req));
}

/* path is what follows "/v1/workspaces" ("" or "/..."). */
void
wire_workspaces(struct api *a, struct http_req *req, const char *path)
{
    const char *m = http_req_method(req);
    char id[WS_ID_MAX + 1];

    if (!a->ws) {
        api_error_msg(req, 404, "not_found", "this abxd has no store configured for workspaces");
        return;
    }
    if (!*path || !strcmp(path, "/")) {
        if (!strcmp(m, "POST")) {
            if (table_draining(a->table)) {
                api_error_msg(req, 503, "draining", "abxd is draining");
                return;
            }
            if (api_rq(a, req, NULL))
                http_req_read_body(req, API_JSON_MAX, create_done);
        } else if (!strcmp(m, "GET")) {
            simple_job(a, req, "", run_list, list_done);
        } else {
            http_req_add_header(req, "Allow", "GET, POST");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here", m);
        }
        return;
    }
    const char *p = path + 1;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || n > WS_ID_MAX) {
        api_error_msg(req, 404, "not_found", "no such workspace");
        return;
    }
    memcpy(id, p, n);
    id[n] = '\0';
    if (!valid_ws_id(id)) {
        api_error_msg(req, 404, "not_found", "no workspace '%.64s'", id);
        return;
    }
    const char *rest = slash ? slash : "";
    if (*rest)
        workspaces_touch(a->ws, id); /* looking at the record is not using it */
    if (!*rest) {
        if (!strcmp(m, "GET"))
            simple_job(a, req, id, run_info, info_done);
        else if (!strcmp(m, "DELETE")) {
            if (api_rq(a, req, id))
                http_req_read_body(req, 0, delete_body);
        } else {
            http_req_add_header(req, "Allow", "GET, DELETE");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here", m);
        }
        return;
    }
    if (!strncmp(rest, "/files/", 7) || !strcmp(rest, "/files")) {
        char rel[PATH_MAX_LEN + 2];
        const char *raw = rest[6] ? rest + 7 : "";
        if (norm(req, *raw ? raw : "/", rel, sizeof(rel)) < 0)
            return;
        if (strcmp(m, "PUT") != 0)
            http_req_answer_later(req);
        if (!strcmp(m, "PUT"))
            put_begin(a, req, id, rel);
        else if (!strcmp(m, "GET"))
            fop_start(a, req, id, FOP_GET, rel, NULL, false);
        else if (!strcmp(m, "HEAD"))
            fop_start(a, req, id, FOP_HEAD, rel, NULL, false);
        else if (!strcmp(m, "DELETE")) {
            if (path_is_root(rel)) {
                api_error_msg(req, 409, "is_a_directory", "'/' is the workspace directory");
                return;
            }
            fop_start(a, req, id, FOP_DELETE, rel, NULL, false);
        } else {
            http_req_add_header(req, "Allow", "GET, HEAD, PUT, DELETE");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on files", m);
        }
        return;
    }
    struct {
        const char *name, *method;
        void (*body)(struct http_req *, const char *, size_t);
        size_t max;
    } routes[] = {
            {"/exec", "POST", exec_body, API_EXEC_BODY_MAX},
            {"/mkdir", "POST", mkdir_body, API_JSON_MAX},
            {"/rmdir", "POST", rmdir_body, API_JSON_MAX},
            {"/rename", "POST", rename_body, API_JSON_MAX},
            {"/flush", "POST", flush_body, API_JSON_MAX},
            {"/close", "POST", close_body, API_JSON_MAX},
    };
    for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
        if (strcmp(rest, routes[i].name) != 0)
            continue;
        if (!method_is(req, routes[i].method, routes[i].method))
            return;
        if (api_rq(a, req, id))
            http_req_read_body(req, routes[i].max, routes[i].body);
        return;
    }
    if (!strncmp(rest, "/processes", 10) && (rest[10] == '\0' || rest[10] == '/')) {
        char copy[256], *seg[4];
        int ns = strlen(rest) < sizeof(copy) ? api_split(strcpy(copy, rest), seg, 4) : -1;
        if (ns < 1) {
            api_error_msg(req, 404, "not_found", "no route for %s %.200s", m, http_req_path(req));
            return;
        }
        struct out_owner o = {.kind = OWNER_WORKSPACE};
        (void)snprintf(o.id, sizeof(o.id), "%s", id);
        api_processes(a, req, &o, seg, ns);
        return;
    }
    if (!strncmp(rest, "/tools/", 7) && rest[7] && !strchr(rest + 7, '/')) {
        struct out_owner o = {.kind = OWNER_WORKSPACE};
        (void)snprintf(o.id, sizeof(o.id), "%s", id);
        api_tool_call(a, req, &o, rest + 7);
        return;
    }
    if (!strcmp(rest, "/walk")) {
        if (!method_is(req, "GET", "GET"))
            return;
        char rel[PATH_MAX_LEN + 2];
        const char *q = http_req_query(req, "path");
        if (norm(req, q ? q : "/", rel, sizeof(rel)) < 0)
            return;
        http_req_answer_later(req);
        fop_start(a, req, id, FOP_WALK, rel, NULL, false);
        return;
    }
    if (!strcmp(rest, "/manifest")) {
        if (method_is(req, "GET", "GET"))
            simple_job(a, req, id, run_manifest, wjob_done);
        return;
    }
    api_error_msg(req, 404, "not_found", "no route for %s %.200s", m, http_req_path(req));
}
