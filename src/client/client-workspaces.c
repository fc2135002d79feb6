/*
 * client-workspaces.c - workspaces and the store's administration.
 *
 * POST/GET/DELETE /v1/workspaces[/{ws}], flush, close and manifest, and
 * /v1/store/check and /v1/store/gc. A workspace's exec and file routes are
 * the sandbox's under another prefix: their functions here are one call each
 * into client-exec.c and client-files.c with CLIENT_WORKSPACE. Answers are
 * decoded into typed structs; the JSON text is kept beside the fields.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/client-internal.h"
#include "util/cleanup.h"

#define ANSWER_MAX CLIENT_BODY_MAX

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_workspace_info *, abx_workspace_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_workspace_list *, abx_workspace_list_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_sync_report *, abx_sync_report_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_store_check *, abx_store_check_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_store_gc *, abx_store_gc_free)

struct abx_workspace_info *
abx_workspace_info_free(struct abx_workspace_info *w)
{
    if (!w)
        return NULL;
    free(w->id);
    free(w->state);
    free(w->template_name);
    free(w->created_at);
    free(w->json);
    free(w);
    return NULL;
}

struct abx_workspace_list *
abx_workspace_list_free(struct abx_workspace_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        abx_workspace_info_free(l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

struct abx_sync_report *
abx_sync_report_free(struct abx_sync_report *r)
{
    if (!r)
        return NULL;
    free(r->json);
    free(r);
    return NULL;
}

struct abx_store_check *
abx_store_check_free(struct abx_store_check *r)
{
    if (!r)
        return NULL;
    free(r->store);
    free(r->first_problem);
    free(r->json);
    free(r);
    return NULL;
}

struct abx_store_gc *
abx_store_gc_free(struct abx_store_gc *r)
{
    if (!r)
        return NULL;
    free(r->json);
    free(r);
    return NULL;
}

/* --- decoding --- */

/* Decodes one workspace object; text (optional) is its JSON as sent. */
static int
workspace_from(json_t *o, const char *text, struct abx_workspace_info **ret)
{
    _cleanup_(abx_workspace_info_freep) struct abx_workspace_info *w = NULL;
    json_t *usage;

    if (!json_is_object(o) || !json_is_string(json_object_get(o, "id")))
        return -EBADMSG;
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    if (client_dup_str(o, "id", &w->id) < 0 || client_dup_str(o, "state", &w->state) < 0 ||
        client_dup_str(o, "template", &w->template_name) < 0 ||
        client_dup_str(o, "created_at", &w->created_at) < 0)
        return -ENOMEM;
    /* null (the host default) reads as 0. */
    w->cpu = client_get_num(o, "cpu");
    w->memory_mb = client_get_u64(o, "memory_mb");
    w->pids = client_get_u64(o, "pids");
    usage = json_object_get(o, "usage");
    if (json_is_object(usage)) {
        w->has_usage = true;
        w->usage.bytes = client_get_u64(usage, "bytes");
        w->usage.files = client_get_u64(usage, "files");
        w->usage.dirs = client_get_u64(usage, "dirs");
    }
    w->processes = client_get_u64(o, "processes");
    w->json = text ? strdup(text) : json_dumps(o, JSON_COMPACT);
    if (!w->json)
        return -ENOMEM;
    *ret = TAKE_PTR(w);
    return 0;
}

/* Decodes a single-workspace answer into *ret (when ret is not NULL). */
static int
answer_to_workspace(struct abx_client *c, const struct buf *body, struct abx_workspace_info **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_free_ char *text = NULL;
    int r;

    if (!ret)
        return 0;
    if ((r = client_parse(c, body->data, body->len, "a workspace", &j)) < 0)
        return r;
    text = client_strip(body);
    if (!text)
        return client_fail(c, -ENOMEM, "out of memory");
    r = workspace_from(j, text, ret);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer is not a workspace (no 'id')");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    return 0;
}

/* One request that may take long (a mirror, a store scan): no total deadline.
 * The 2xx answer is kept in answer. */
static int
long_call(struct abx_client *c, const char *method, const struct buf *path, struct buf *answer)
{
    struct client_req rq;

    client_req_init(&rq, method, path);
    rq.stream = true;
    rq.resp = CLIENT_RESP_BUFFER;
    rq.out = answer;
    return client_request(c, &rq);
}

/* --- lifecycle --- */

int
abx_workspace_create(struct abx_client *c, const struct abx_workspace_spec *spec,
                     struct abx_workspace_info **ret)
{
    static const struct abx_workspace_spec defaults = {0};
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r = 0;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!spec)
        spec = &defaults;
    if (!(spec->cpu >= 0 && isfinite(spec->cpu)))
        return client_fail(c, -EINVAL, "cpu must be a number of cores >= 0");
    if (spec->memory_mb > INT64_MAX || spec->pids > INT64_MAX)
        return client_fail(c, -EINVAL, "a limit is out of range");
    body = json_object();
    if (!body)
        return client_fail(c, -ENOMEM, "out of memory");
    /* abxd checks the id's characters; here it only has to be JSON. */
    if (spec->id && json_object_set_new(body, "id", json_string(spec->id)) < 0)
        return client_fail(c, -EINVAL, "the workspace id must be UTF-8");
    if (spec->template_name &&
        json_object_set_new(body, "template", json_string(spec->template_name)) < 0)
        return client_fail(c, -EINVAL, "the template name must be UTF-8");
    if (spec->cpu > 0)
        r |= json_object_set_new(body, "cpu", json_real(spec->cpu));
    if (spec->memory_mb)
        r |= json_object_set_new(body, "memory_mb", json_integer((json_int_t)spec->memory_mb));
    if (spec->pids)
        r |= json_object_set_new(body, "pids", json_integer((json_int_t)spec->pids));
    if (r || (r = buf_puts(&path, "/v1/workspaces")) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    r = client_call(c, "POST", &path, TAKE_PTR(body), EEXIST, &answer, NULL);
    if (r < 0)
        return r;
    return answer_to_workspace(c, &answer, ret);
}

int
abx_workspace_list(struct abx_client *c, struct abx_workspace_list **ret)
{
    _cleanup_(abx_workspace_list_freep) struct abx_workspace_list *l = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    json_t *arr, *v;
    size_t i;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, "/v1/workspaces")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = client_get_list(c, &path, 0, "the workspace list", "workspaces", &answer, &j, &arr)) <
        0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = workspace_from(v, NULL, &l->items[l->n]);
        if (r == -EBADMSG)
            return client_fail(c, r, "abxd's workspace list has an entry without 'id'");
        if (r < 0)
            return client_fail(c, r, "out of memory");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

int
abx_workspace_get(struct abx_client *c, const char *ws, struct abx_workspace_info **ret)
{
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, CLIENT_WORKSPACE, ws, NULL)) < 0)
        return r;
    if ((r = client_call(c, "GET", &path, NULL, EBUSY, &answer, NULL)) < 0)
        return r;
    return answer_to_workspace(c, &answer, ret);
}

int
abx_workspace_delete(struct abx_client *c, const char *ws)
{
    _cleanup_buf_ struct buf path;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, CLIENT_WORKSPACE, ws, NULL)) < 0)
        return r;
    return client_call(c, "DELETE", &path, NULL, EBUSY, NULL, NULL);
}

/* --- exec and files: the sandbox's routes under /v1/workspaces/{ws} --- */

int
abx_workspace_exec(struct abx_client *c, const char *ws, const struct abx_exec_spec *spec,
                   abx_started_fn started, abx_output_fn output, void *userdata,
                   struct abx_exec_result *ret)
{
    return client_exec(c, CLIENT_WORKSPACE, ws, spec, started, output, userdata, ret);
}

int
abx_workspace_exec_background(struct abx_client *c, const char *ws,
                              const struct abx_exec_spec *spec, struct abx_process_info **ret)
{
    return client_exec_background(c, CLIENT_WORKSPACE, ws, spec, ret);
}

int
abx_workspace_file_upload(struct abx_client *c, const char *ws, const char *path, int fd,
                          const char *if_match, struct abx_file_info **ret)
{
    if (c && fd < 0) {
        client_clear(c);
        return client_fail(c, -EBADF, "no file descriptor to upload from");
    }
    return client_file_upload(c, CLIENT_WORKSPACE, ws, path, fd, NULL, 0, if_match, ret);
}

int
abx_workspace_file_put(struct abx_client *c, const char *ws, const char *path, const void *data,
                       size_t len, const char *if_match, struct abx_file_info **ret)
{
    return client_file_upload(c, CLIENT_WORKSPACE, ws, path, -EBADF, data, len, if_match, ret);
}

int
abx_workspace_file_download(struct abx_client *c, const char *ws, const char *path, int fd,
                            uint64_t *ret_bytes)
{
    return client_file_download(c, CLIENT_WORKSPACE, ws, path, fd, ret_bytes);
}

int
abx_workspace_file_exists(struct abx_client *c, const char *ws, const char *path,
                          enum abx_file_type *ret_type)
{
    return client_file_exists(c, CLIENT_WORKSPACE, ws, path, ret_type);
}

int
abx_workspace_file_delete(struct abx_client *c, const char *ws, const char *path,
                          const char *if_match)
{
    return client_file_delete(c, CLIENT_WORKSPACE, ws, path, if_match);
}

int
abx_workspace_walk(struct abx_client *c, const char *ws, const char *path,
                   struct abx_walk_list **ret)
{
    return client_walk(c, CLIENT_WORKSPACE, ws, path, ret);
}

int
abx_workspace_mkdir(struct abx_client *c, const char *ws, const char *path)
{
    long status = 0;
    int r = client_dir_call(c, CLIENT_WORKSPACE, ws, "/mkdir", path, &status);
    return r < 0 ? r : status == 201;
}

int
abx_workspace_rmdir(struct abx_client *c, const char *ws, const char *path)
{
    return client_dir_call(c, CLIENT_WORKSPACE, ws, "/rmdir", path, NULL);
}

int
abx_workspace_rename(struct abx_client *c, const char *ws, const char *from, const char *to,
                     bool overwrite, struct abx_file_info **ret)
{
    return client_rename(c, CLIENT_WORKSPACE, ws, from, to, overwrite, ret);
}

/* --- flush, close, manifest --- */

static int
mirror(struct abx_client *c, const char *ws, const char *op, struct abx_sync_report **ret)
{
    _cleanup_(abx_sync_report_freep) struct abx_sync_report *rep = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, CLIENT_ERRBODY_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, CLIENT_WORKSPACE, ws, op)) < 0)
        return r;
    if ((r = long_call(c, "POST", &path, &answer)) < 0)
        return r;
    if (!ret)
        return 0;
    if ((r = client_parse(c, answer.data, answer.len, "a mirror report", &j)) < 0)
        return r;
    rep = calloc(1, sizeof(*rep));
    if (!rep || !(rep->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    rep->files = client_get_u64(j, "files");
    rep->dirs = client_get_u64(j, "dirs");
    rep->deleted = client_get_u64(j, "deleted");
    rep->bytes = client_get_u64(j, "bytes");
    rep->unchanged = client_get_u64(j, "unchanged");
    rep->ignored = client_get_u64(j, "ignored");
    rep->skipped = client_get_u64(j, "skipped");
    rep->duration_ms = client_get_num(j, "duration_ms");
    *ret = TAKE_PTR(rep);
    return 0;
}

int
abx_workspace_flush(struct abx_client *c, const char *ws, struct abx_sync_report **ret)
{
    return mirror(c, ws, "/flush", ret);
}

int
abx_workspace_close(struct abx_client *c, const char *ws, struct abx_sync_report **ret)
{
    return mirror(c, ws, "/close", ret);
}

int
abx_workspace_manifest(struct abx_client *c, const char *ws, struct abx_walk_list **ret)
{
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, CLIENT_WORKSPACE, ws, "/manifest")) < 0)
        return r;
    if ((r = client_call(c, "GET", &path, NULL, EBUSY, &answer, NULL)) < 0)
        return r;
    return client_walk_from(c, &answer, "a manifest", ret);
}

/* --- the store --- */

int
abx_store_check(struct abx_client *c, struct abx_store_check **ret)
{
    _cleanup_(abx_store_check_freep) struct abx_store_check *rep = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, CLIENT_ERRBODY_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, "/v1/store/check")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = long_call(c, "GET", &path, &answer)) < 0)
        return r;
    if ((r = client_parse(c, answer.data, answer.len, "the store check", &j)) < 0)
        return r;
    if (!json_is_boolean(json_object_get(j, "ok")))
        return client_fail(c, -EBADMSG, "abxd's store check has no 'ok'");
    rep = calloc(1, sizeof(*rep));
    if (!rep || !(rep->json = client_strip(&answer)) ||
        client_dup_str(j, "store", &rep->store) < 0 ||
        client_dup_str(j, "first_problem", &rep->first_problem) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    rep->ok = client_get_bool(j, "ok");
    rep->files = client_get_u64(j, "files");
    rep->blobs = client_get_u64(j, "blobs");
    rep->missing_blobs = client_get_u64(j, "missing_blobs");
    rep->corrupt_blobs = client_get_u64(j, "corrupt_blobs");
    rep->orphan_entries = client_get_u64(j, "orphan_entries");
    r = rep->ok;
    if (ret)
        *ret = TAKE_PTR(rep);
    return r;
}

int
abx_store_gc(struct abx_client *c, struct abx_store_gc **ret)
{
    _cleanup_(abx_store_gc_freep) struct abx_store_gc *rep = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, CLIENT_ERRBODY_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, "/v1/store/gc")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = long_call(c, "POST", &path, &answer)) < 0)
        return r;
    if (!ret)
        return 0;
    if ((r = client_parse(c, answer.data, answer.len, "the store gc", &j)) < 0)
        return r;
    rep = calloc(1, sizeof(*rep));
    if (!rep || !(rep->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    rep->held_lease = client_get_bool(j, "held_lease");
    rep->blobs_deleted = client_get_u64(j, "blobs_deleted");
    rep->bytes_freed = client_get_u64(j, "bytes_freed");
    *ret = TAKE_PTR(rep);
    return 0;
}
