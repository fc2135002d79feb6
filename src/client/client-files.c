/*
 * client-files.c - the file routes: upload, download, exists, delete, walk,
 * mkdir, rmdir, rename.
 *
 * A sandbox and a workspace have the same file routes under their own prefix
 * (/v1/sandboxes/<id>, /v1/workspaces/<ws>); they are implemented once here,
 * for either scope (client_file_*()), and the public abx_file_*() functions
 * are the sandbox's. A workspace's writes and deletes may carry If-Match.
 * File bodies stream between a caller's descriptor and the connection in
 * libcurl's buffer-sized pieces; a file is never held in memory whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client-internal.h"
#include "util/cleanup.h"

#define ANSWER_MAX CLIENT_BODY_MAX

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_file_info *, abx_file_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_walk_list *, abx_walk_list_free)

struct abx_file_info *
abx_file_info_free(struct abx_file_info *f)
{
    if (!f)
        return NULL;
    free(f->path);
    free(f->type_name);
    free(f->version);
    free(f->target);
    free(f->hash);
    free(f->json);
    free(f);
    return NULL;
}

struct abx_walk_list *
abx_walk_list_free(struct abx_walk_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        abx_file_info_free(l->items[i]);
    free(l->items);
    free(l->state);
    free(l->json);
    free(l);
    return NULL;
}

enum abx_file_type
client_file_type(const char *name)
{
    if (!name)
        return ABX_FILE_UNKNOWN;
    if (!strcmp(name, "file"))
        return ABX_FILE_REGULAR;
    if (!strcmp(name, "dir"))
        return ABX_FILE_DIRECTORY;
    if (!strcmp(name, "symlink"))
        return ABX_FILE_SYMLINK;
    if (!strcmp(name, "other"))
        return ABX_FILE_OTHER;
    return ABX_FILE_UNKNOWN;
}

int
client_file_info_from(json_t *o, struct abx_file_info **ret)
{
    _cleanup_(abx_file_info_freep) struct abx_file_info *f = NULL;

    if (!json_is_object(o) || !json_is_string(json_object_get(o, "path")))
        return -EBADMSG;
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    /* Names are bytes: "path_b64" carries them exactly when "path" cannot. */
    if (client_dup_name(o, "path", &f->path) < 0 || client_dup_str(o, "type", &f->type_name) < 0 ||
        client_dup_str(o, "version", &f->version) < 0 ||
        client_dup_name(o, "target", &f->target) < 0 || client_dup_str(o, "hash", &f->hash) < 0)
        return -ENOMEM;
    if (!f->path)
        return -EBADMSG;
    f->type = client_file_type(f->type_name);
    f->size = client_get_u64(o, "size");
    f->mode = (uint32_t)client_get_u64(o, "mode");
    f->json = json_dumps(o, JSON_COMPACT);
    if (!f->json)
        return -ENOMEM;
    *ret = TAKE_PTR(f);
    return 0;
}

/* Decodes a single-stat answer into *ret (when ret is not NULL). */
static int
answer_to_file(struct abx_client *c, const struct buf *body, struct abx_file_info **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_(abx_file_info_freep) struct abx_file_info *f = NULL;
    int r;

    if (!ret)
        return 0;
    if ((r = client_parse(c, body->data, body->len, "a file", &j)) < 0)
        return r;
    r = client_file_info_from(j, &f);
    if (r < 0)
        return client_fail(c, r, r == -ENOMEM ? "out of memory" : "abxd's answer is not a file");
    free(f->json);
    f->json = client_strip(body);
    if (!f->json)
        return client_fail(c, -ENOMEM, "out of memory");
    *ret = TAKE_PTR(f);
    return 0;
}

static int
file_url(struct abx_client *c, struct buf *b, enum client_scope scope, const char *id,
         const char *path)
{
    int r;

    if (!path || !*path)
        return client_fail(c, -EINVAL, "no file path given");
    if ((r = client_scope_url(c, b, scope, id, "/files")) < 0)
        return r;
    if ((r = client_put_path(b, path)) < 0)
        return client_fail(c, r == -EFBIG ? -ENAMETOOLONG : r, "the path is too long");
    return 0;
}

/* Checks if_match before any request, so the message says what is wrong. */
static int
check_if_match(struct abx_client *c, const char *if_match)
{
    if (if_match && client_check_if_match(if_match) < 0)
        return client_fail(c, -EINVAL,
                           "invalid If-Match value '%.64s': at most %u bytes, without '\"' or "
                           "control characters",
                           if_match, CLIENT_IF_MATCH_MAX);
    return 0;
}

int
client_file_upload(struct abx_client *c, enum client_scope scope, const char *id, const char *path,
                   int fd, const void *data, size_t len, const char *if_match,
                   struct abx_file_info **ret)
{
    _cleanup_buf_ struct buf url, answer;
    struct client_req rq;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (fd < 0 && len && !data)
        return client_fail(c, -EINVAL, "no data to upload");
    if ((r = check_if_match(c, if_match)) < 0 || (r = file_url(c, &url, scope, id, path)) < 0)
        return r;
    client_req_init(&rq, "PUT", &url);
    if (fd >= 0) {
        rq.upload_fd = fd;
    } else {
        rq.body = data ? data : "";
        rq.body_len = len;
        rq.body_upload = true;
    }
    rq.if_match = if_match;
    rq.stream = true;
    rq.resp = CLIENT_RESP_BUFFER;
    rq.out = &answer;
    if ((r = client_request(c, &rq)) < 0)
        return r;
    if ((r = answer_to_file(c, &answer, ret)) < 0)
        return r;
    return rq.status == 201;
}

int
abx_file_upload(struct abx_client *c, const char *id, const char *path, int fd,
                struct abx_file_info **ret)
{
    if (c && fd < 0) {
        client_clear(c);
        return client_fail(c, -EBADF, "no file descriptor to upload from");
    }
    return client_file_upload(c, CLIENT_SANDBOX, id, path, fd, NULL, 0, NULL, ret);
}

int
abx_file_put(struct abx_client *c, const char *id, const char *path, const void *data, size_t len,
             struct abx_file_info **ret)
{
    return client_file_upload(c, CLIENT_SANDBOX, id, path, -EBADF, data, len, NULL, ret);
}

int
client_file_download(struct abx_client *c, enum client_scope scope, const char *id,
                     const char *path, int fd, uint64_t *ret_bytes)
{
    _cleanup_buf_ struct buf url;
    struct client_req rq;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (fd < 0)
        return client_fail(c, -EBADF, "no file descriptor to download to");
    if ((r = file_url(c, &url, scope, id, path)) < 0)
        return r;
    client_req_init(&rq, "GET", &url);
    rq.stream = true;
    rq.resp = CLIENT_RESP_FD;
    rq.out_fd = fd;
    if ((r = client_request(c, &rq)) < 0)
        return r;
    if (ret_bytes)
        *ret_bytes = rq.out_bytes;
    return 0;
}

int
abx_file_download(struct abx_client *c, const char *id, const char *path, int fd,
                  uint64_t *ret_bytes)
{
    return client_file_download(c, CLIENT_SANDBOX, id, path, fd, ret_bytes);
}

int
client_file_exists(struct abx_client *c, enum client_scope scope, const char *id, const char *path,
                   enum abx_file_type *ret_type)
{
    _cleanup_buf_ struct buf url, owner;
    struct client_req rq;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    buf_init(&owner, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = file_url(c, &url, scope, id, path)) < 0)
        return r;
    client_req_init(&rq, "HEAD", &url);
    r = client_request(c, &rq);
    if (r == -ENOENT) {
        /* A HEAD answer has no body to say whether the file or its sandbox
         * (workspace) is missing; ask about the owner, which wakes nothing. */
        if ((r = client_scope_url(c, &owner, scope, id, NULL)) < 0)
            return r;
        r = client_call(c, "GET", &owner, NULL, EBUSY, NULL, NULL);
        if (r < 0)
            return r;
        client_clear(c);
        return 0;
    }
    if (r < 0)
        return r;
    if (ret_type)
        *ret_type = client_file_type(rq.abx_type);
    return 1;
}

int
abx_file_exists(struct abx_client *c, const char *id, const char *path,
                enum abx_file_type *ret_type)
{
    return client_file_exists(c, CLIENT_SANDBOX, id, path, ret_type);
}

int
client_file_delete(struct abx_client *c, enum client_scope scope, const char *id, const char *path,
                   const char *if_match)
{
    _cleanup_buf_ struct buf url;
    struct client_req rq;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = check_if_match(c, if_match)) < 0 || (r = file_url(c, &url, scope, id, path)) < 0)
        return r;
    client_req_init(&rq, "DELETE", &url);
    rq.if_match = if_match;
    rq.resp = CLIENT_RESP_BUFFER;
    return client_request(c, &rq);
}

int
abx_file_delete(struct abx_client *c, const char *id, const char *path)
{
    return client_file_delete(c, CLIENT_SANDBOX, id, path, NULL);
}

int
client_walk_from(struct abx_client *c, const struct buf *answer, const char *what,
                 struct abx_walk_list **ret)
{
    _cleanup_(abx_walk_list_freep) struct abx_walk_list *l = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    json_t *arr, *v;
    size_t i;
    int r;

    if ((r = client_parse(c, answer->data, answer->len, what, &j)) < 0)
        return r;
    arr = json_object_get(j, "entries");
    if (!json_is_array(arr))
        return client_fail(c, -EBADMSG, "abxd's answer has no 'entries' list");
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(answer)) || client_dup_str(j, "state", &l->state) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = client_file_info_from(v, &l->items[l->n]);
        if (r < 0)
            return client_fail(c, r,
                               r == -ENOMEM ? "out of memory"
                                            : "abxd's answer has an entry without 'path'");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

int
client_walk(struct abx_client *c, enum client_scope scope, const char *id, const char *path,
            struct abx_walk_list **ret)
{
    _cleanup_buf_ struct buf url, answer;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &url, scope, id, "/walk?path=")) < 0)
        return r;
    if (!path || !*path)
        path = "/";
    if ((path[0] != '/' && (r = buf_puts(&url, "%2F")) < 0) ||
        (r = client_put_encoded(&url, path, false)) < 0)
        return client_fail(c, r == -EFBIG ? -ENAMETOOLONG : r, "the path is too long");
    if ((r = client_call(c, "GET", &url, NULL, EBUSY, &answer, NULL)) < 0)
        return r;
    return client_walk_from(c, &answer, "a walk", ret);
}

int
abx_walk(struct abx_client *c, const char *id, const char *path, struct abx_walk_list **ret)
{
    return client_walk(c, CLIENT_SANDBOX, id, path, ret);
}

/* Sets body.key to a '/'-rooted copy of path, with key_b64 when it is not
 * UTF-8 (util/json.h): any byte but NUL may be in a name. */
static int
set_path(json_t *body, const char *key, const char *path)
{
    _cleanup_free_ char *p = NULL;
    if (path[0] == '/')
        return json_set_name(body, key, path);
    if (asprintf(&p, "/%s", path) < 0)
        return -ENOMEM;
    return json_set_name(body, key, p);
}

int
client_dir_call(struct abx_client *c, enum client_scope scope, const char *id, const char *op,
                const char *path, long *ret_status)
{
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf url;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!path || !*path)
        return client_fail(c, -EINVAL, "no directory path given");
    if ((r = client_scope_url(c, &url, scope, id, op)) < 0)
        return r;
    body = json_object();
    if (!body || set_path(body, "path", path) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    return client_call(c, "POST", &url, TAKE_PTR(body), EEXIST, NULL, ret_status);
}

int
abx_mkdir(struct abx_client *c, const char *id, const char *path)
{
    long status = 0;
    int r = client_dir_call(c, CLIENT_SANDBOX, id, "/mkdir", path, &status);
    return r < 0 ? r : status == 201;
}

int
abx_rmdir(struct abx_client *c, const char *id, const char *path)
{
    return client_dir_call(c, CLIENT_SANDBOX, id, "/rmdir", path, NULL);
}

int
client_rename(struct abx_client *c, enum client_scope scope, const char *id, const char *from,
              const char *to, bool overwrite, struct abx_file_info **ret)
{
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf url, answer;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!from || !*from || !to || !*to)
        return client_fail(c, -EINVAL, "rename needs a source and a destination path");
    if ((r = client_scope_url(c, &url, scope, id, "/rename")) < 0)
        return r;
    body = json_object();
    if (!body || set_path(body, "from", from) < 0 || set_path(body, "to", to) < 0 ||
        json_object_set_new(body, "overwrite", json_boolean(overwrite)) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    if ((r = client_call(c, "POST", &url, TAKE_PTR(body), EEXIST, &answer, NULL)) < 0)
        return r;
    return answer_to_file(c, &answer, ret);
}

int
abx_rename(struct abx_client *c, const char *id, const char *from, const char *to, bool overwrite,
           struct abx_file_info **ret)
{
    return client_rename(c, CLIENT_SANDBOX, id, from, to, overwrite, ret);
}
