/*
 * files.c - file routes of the native wire.
 *
 * Paths are '/'-rooted at the workspace and normalized once here; uploads
 * stream from the request body into the workspace and downloads stream
 * from the file (sendfile), so a file's bytes never sit in memory whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "template/template.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/path.h"

static int
normalize(struct http_req *req, const char *raw, char *out, size_t outsz)
{
    int r = api_path_nul_check(req);
    if (r < 0)
        return r;
    r = path_normalize(raw, strlen(raw), out, outsz);
    if (r == -ENAMETOOLONG)
        api_error_msg(req, 400, "bad_request", "path is too long (%d bytes, %d per name at most)",
                      PATH_MAX_LEN, PATH_NAME_MAX);
    else if (r < 0)
        api_error_msg(req, 400, "bad_request",
                      "path must be '/'-rooted in the workspace, without '..'");
    return r;
}

static json_t *
stat_json(const char *rel, const struct files_stat *st)
{
    json_t *o = json_object();
    char p[PATH_MAX_LEN + 2];
    (void)snprintf(p, sizeof(p), "/%s", path_is_root(rel) ? "" : rel);
    (void)json_set_name(o, "path", p);
    (void)json_set(o, "type", json_string(files_type_name(st->type)));
    (void)json_set(o, "size", json_integer((json_int_t)st->size));
    (void)json_set(o, "mode", json_integer(st->mode));
    (void)json_set(o, "version", json_string(st->version));
    return o;
}

/* --- upload --- */

struct upload_op {
    struct api *api;
    struct fileops_upload *up;
    char rel[PATH_MAX_LEN + 1];
};

static void
upload_close(struct http_req *req, void *ud)
{
    struct upload_op *u = ud;
    (void)req;
    fileops_upload_abort(u->up); /* no-op after commit */
    free(u);
}

static int
upload_chunk(struct http_req *req, const char *data, size_t len)
{
    struct upload_op *u = http_req_userdata(req);
    struct err err = {0};
    int r = fileops_upload_write(u->up, data, len, &err);
    if (r < 0) {
        api_error(req, r, &err);
        fileops_upload_abort(u->up);
        u->up = NULL;
        return r;
    }
    u->api->m.bytes_uploaded += len;
    return 0;
}

static void
upload_done(struct http_req *req)
{
    struct upload_op *u = http_req_userdata(req);
    struct err err = {0};
    struct files_stat st;
    bool created;
    int r = fileops_upload_commit(u->up, &st, &created, &err);
    u->up = NULL;
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    api_json(req, created ? 201 : 200, stat_json(u->rel, &st));
}

static void
upload(struct api *a, struct http_req *req, struct entry *e, const char *rel)
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
    struct upload_op *u = calloc(1, sizeof(*u));
    if (!u) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    u->api = a;
    (void)strscpy(u->rel, rel, sizeof(u->rel));
    int r = sandbox_upload_begin(e->sb, rel, &u->up, &err);
    if (r < 0) {
        free(u);
        api_error(req, r, &err);
        return;
    }
    http_req_set_userdata(req, u, upload_close);
    http_req_stream_body(req, upload_chunk, upload_done);
}

/* --- download, exists, delete --- */

static void
version_headers(struct http_req *req, const struct files_stat *st)
{
    char etag[FILES_VERSION_LEN + 3];
    (void)snprintf(etag, sizeof(etag), "\"%s\"", st->version);
    http_req_add_header(req, "ETag", etag);
    http_req_add_header(req, "X-Abx-Version", st->version);
    http_req_add_header(req, "X-Abx-Type", files_type_name(st->type));
}

static void
download(struct api *a, struct http_req *req, struct entry *e, const char *rel)
{
    struct err err = {0};
    struct files_stat st;
    int fd;

    if (http_req_is_head(req)) {
        int r = sandbox_file_stat(e->sb, rel, &st, &err);
        if (r < 0) {
            api_error(req, r, &err);
            return;
        }
        if (st.type != FILES_FILE) {
            version_headers(req, &st);
            http_respond(req, 200, NULL, "", 0);
            return;
        }
    }
    int r = sandbox_file_open_read(e->sb, rel, &fd, &st, &err);
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    a->m.bytes_downloaded += st.size;
    version_headers(req, &st);
    http_respond_fd(req, 200, "application/octet-stream", fd, st.size);
}

static void
delete_file(struct http_req *req, struct entry *e, const char *rel)
{
    struct err err = {0};
    if (path_is_root(rel)) {
        api_error_msg(req, 409, "is_a_directory", "'/' is the workspace directory");
        return;
    }
    int r = sandbox_file_delete(e->sb, rel, &err);
    if (r < 0)
        api_error(req, r, &err);
    else
        api_no_content(req);
}

/* --- walk --- */

struct walk_ctx {
    json_t *arr;
};

static int
walk_entry(const struct files_entry *fe, void *ud)
{
    struct walk_ctx *w = ud;
    json_t *o = json_object();
    if (!o)
        return -ENOMEM;
    (void)json_set_name(o, "path", fe->path);
    (void)json_set(o, "type", json_string(files_type_name(fe->st.type)));
    (void)json_set(o, "size", json_integer((json_int_t)fe->st.size));
    (void)json_set(o, "mode", json_integer(fe->st.mode));
    (void)json_set(o, "version", json_string(fe->st.version));
    if (fe->target)
        (void)json_set_name(o, "target", fe->target);
    return json_array_append_new(w->arr, o) < 0 ? -ENOMEM : 0;
}

static void
walk(struct http_req *req, struct entry *e)
{
    char rel[PATH_MAX_LEN + 2];
    struct err err = {0};
    const char *p = http_req_query(req, "path");
    if (normalize(req, p ? p : "/", rel, sizeof(rel)) < 0)
        return;
    struct walk_ctx w = {json_array()};
    int r = sandbox_walk(e->sb, rel, walk_entry, &w, &err);
    if (r < 0) {
        json_decref(w.arr);
        api_error(req, r, &err);
        return;
    }
    json_t *o = json_object();
    (void)json_set(o, "entries", w.arr);
    api_json(req, 200, o);
}

/* --- mkdir, rmdir, rename --- */

static int
body_path(struct http_req *req, json_t *j, const char *key, char *out, size_t n, struct err *err)
{
    (void)req;
    return api_body_path(j, key, out, n, err);
}

static void
dir_op(struct http_req *req, const char *body, size_t len, const char *op)
{
    struct rq *q = http_req_userdata(req);
    struct err err = {0};
    json_t *j = NULL;
    char a[PATH_MAX_LEN + 2], b[PATH_MAX_LEN + 2];
    int r;

    struct entry *e = api_find(q->api, req, q->id);
    if (!e)
        return;
    if ((r = json_parse(body, len, &j, &err)) < 0)
        goto fail;
    if (!strcmp(op, "rename")) {
        static const char *const allowed[] = {"from",   "from_b64",  "to",
                                              "to_b64", "overwrite", NULL};
        bool overwrite = false;
        if ((r = json_check_object(j, allowed, &err)) < 0 ||
            (r = body_path(req, j, "from", a, sizeof(a), &err)) < 0 ||
            (r = body_path(req, j, "to", b, sizeof(b), &err)) < 0 ||
            (r = json_get_bool(j, "overwrite", false, &overwrite, &err)) < 0 ||
            (r = sandbox_rename(e->sb, a, b, overwrite, &err)) < 0)
            goto fail;
        struct files_stat st;
        if ((r = sandbox_file_stat(e->sb, b, &st, &err)) < 0)
            goto fail;
        api_json(req, 200, stat_json(b, &st));
    } else {
        static const char *const allowed[] = {"path", "path_b64", NULL};
        if ((r = json_check_object(j, allowed, &err)) < 0 ||
            (r = body_path(req, j, "path", a, sizeof(a), &err)) < 0)
            goto fail;
        if (!strcmp(op, "mkdir")) {
            bool created;
            if ((r = sandbox_mkdir(e->sb, a, &created, &err)) < 0)
                goto fail;
            json_t *o = json_object();
            char p[PATH_MAX_LEN + 4];
            (void)snprintf(p, sizeof(p), "/%s", path_is_root(a) ? "" : a);
            (void)json_set_name(o, "path", p);
            (void)json_set(o, "created", json_boolean(created));
            api_json(req, created ? 201 : 200, o);
        } else {
            if ((r = sandbox_rmdir(e->sb, a, &err)) < 0)
                goto fail;
            api_no_content(req);
        }
    }
    json_decref(j);
    return;
fail:
    json_decref(j);
    api_error(req, r, &err);
}

static void
mkdir_done(struct http_req *req, const char *body, size_t len)
{
    dir_op(req, body, len, "mkdir");
}

static void
rmdir_done(struct http_req *req, const char *body, size_t len)
{
    dir_op(req, body, len, "rmdir");
}

static void
rename_done(struct http_req *req, const char *body, size_t len)
{
    dir_op(req, body, len, "rename");
}

void
wire_files(struct api *a, struct http_req *req, struct entry *e, const char *op, const char *rest)
{
    const char *m = http_req_method(req);

    if (!api_need_cap(req, e, TEMPLATE_CAP_FILES))
        return;
    if (!strcmp(op, "files")) {
        char rel[PATH_MAX_LEN + 2];
        if (normalize(req, rest && *rest ? rest : "/", rel, sizeof(rel)) < 0)
            return;
        if (!strcmp(m, "PUT"))
            upload(a, req, e, rel);
        else if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
            download(a, req, e, rel);
        else if (!strcmp(m, "DELETE"))
            delete_file(req, e, rel);
        else {
            http_req_add_header(req, "Allow", "GET, HEAD, PUT, DELETE");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on files", m);
        }
        return;
    }
    if (!strcmp(op, "walk")) {
        if (!strcmp(m, "GET"))
            walk(req, e);
        else {
            http_req_add_header(req, "Allow", "GET");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on walk", m);
        }
        return;
    }
    if (strcmp(m, "POST") != 0) {
        http_req_add_header(req, "Allow", "POST");
        api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on %s", m, op);
        return;
    }
    if (!api_rq(a, req, e->id))
        return;
    if (!strcmp(op, "mkdir"))
        http_req_read_body(req, API_JSON_MAX, mkdir_done);
    else if (!strcmp(op, "rmdir"))
        http_req_read_body(req, API_JSON_MAX, rmdir_done);
    else
        http_req_read_body(req, API_JSON_MAX, rename_done);
}
