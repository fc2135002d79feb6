/*
 * files.c - envd's filesystem.Filesystem RPCs and its /files route.
 *
 * Paths are the sandbox's own view (/home/user/a.txt, /tmp, /root), made
 * absolute for the acting user ("~" and relative paths below its home) and
 * resolved by vfs inside the sandbox's pinned root: nothing a sandbox
 * plants leads out of it. Uploads stream (multipart, or octet-stream with
 * optional gzip) straight into the file; downloads are sent from the open
 * descriptor. X-Metadata-* headers become user.e2b.* attributes.
 *
 * Signed URLs (downloadUrl/uploadUrl) carry no sandbox id: the signature,
 * v1_ + base64(sha256("<path>:<op>:<user>:<token>[:<exp>]")), names the
 * sandbox whose token makes it.
 */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/e2b/e2b-internal.h"
#include "http/inflate.h"
#include "http/multipart.h"
#include "sandbox/vfs.h"
#include "template/template.h"
#include "util/b64.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"

#define SMALL_READ_MAX       (16 * 1024 * 1024) /* files whose size stat cannot tell */
#define E2B_UPLOAD_FILES_MAX 256                /* files one POST /files may write */
#define E2B_GZIP_RATIO_MAX   1024               /* decoded bytes per gzip byte, at most */
#define E2B_GZIP_RATIO_FREE  (1024 * 1024)      /* decoded bytes before the ratio counts */
#define E2B_GZIP_SLICE       4096               /* gzip bytes decoded at a time */

/* --- entries --- */

static const char *
type_name(enum vfs_type t)
{
    switch (t) {
    case VFS_FILE:
        return "FILE_TYPE_FILE";
    case VFS_DIR:
        return "FILE_TYPE_DIRECTORY";
    case VFS_SYMLINK:
        return "FILE_TYPE_SYMLINK";
    default:
        return "FILE_TYPE_UNSPECIFIED";
    }
}

/* k as valid UTF-8 in out (U+FFFD for each bad byte): JSON object keys
 * must be, and an xattr name from the sandbox need not be. */
static const char *
lossy_key(const char *k, char *out, size_t outsz)
{
    json_t *v = json_string_lossy(k);
    (void)snprintf(out, outsz, "%s", v ? json_string_value(v) : "");
    json_decref(v);
    return out;
}

static json_t *
meta_json(const struct vfs_meta *m)
{
    char key[3 * VFS_META_KEY_MAX + 1];
    json_t *o = json_object();
    for (uint32_t i = 0; i < m->n; i++)
        (void)json_object_set_new(o, lossy_key(vfs_meta_key(m, i), key, sizeof(key)),
                                  json_string_lossy(vfs_meta_value(m, i)));
    return o;
}

json_t *
e2b_entry_json(const struct vfs_entry *v)
{
    char size[32], mtime[64];
    struct tm tm;
    time_t t = (time_t)v->mtime_sec;
    json_t *o = json_object();
    (void)snprintf(size, sizeof(size), "%llu", (unsigned long long)v->size);
    gmtime_r(&t, &tm);
    size_t n = strftime(mtime, sizeof(mtime), "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(mtime + n, sizeof(mtime) - n, ".%09uZ", v->mtime_nsec);
    /* Names that are not UTF-8 go as U+FFFD for each bad byte, as in
     * watch events: EntryInfo has string fields only, and envd (Go's
     * protojson) would fail the whole answer instead. */
    (void)json_set(o, "name", json_string_lossy(v->name));
    (void)json_set(o, "type", json_string(type_name(v->type)));
    (void)json_set(o, "path", json_string_lossy(v->path));
    (void)json_set(o, "size", json_string(size));
    (void)json_set(o, "mode", json_integer(v->mode));
    (void)json_set(o, "permissions", json_string(v->perms));
    (void)json_set(o, "owner", json_string(v->owner));
    (void)json_set(o, "group", json_string(v->group));
    (void)json_set(o, "modifiedTime", json_string(mtime));
    if (v->has_target)
        (void)json_set(o, "symlinkTarget", json_string_lossy(v->target));
    if (v->meta.n)
        (void)json_set(o, "metadata", meta_json(&v->meta));
    return o;
}

/* --- filesystem.Filesystem --- */

/* File work as the call's user (fileops.h: with that user's rights in the
 * sandbox, never more); the handle is the context's until fs_done(). */
struct fsctx {
    struct fileops *fo;
    const struct e2b_user *user;
};

static void
fs_done(struct fsctx *f)
{
    f->fo = fileops_unref(f->fo);
}

static int
fs_open(struct http_req *req, struct e2b_call *c, struct fsctx *f)
{
    struct entry *e = e2b_call_entry(c);
    if (!e) {
        e2b_rpc_error(req, "unavailable", "the sandbox is gone");
        return -ESRCH;
    }
    if (!api_need_cap(req, e, TEMPLATE_CAP_FILES))
        return -EPERM;
    if (!sandbox_has_view(e->sb)) {
        e2b_rpc_error(req, "unimplemented",
                      "this sandbox has no file system view of its own (isolation mode)");
        return -EOPNOTSUPP;
    }
    struct err err = {0};
    f->fo = NULL;
    if (sandbox_fileops(e->sb, c->user.root, &f->fo, &err) < 0) {
        e2b_rpc_error(req, e2b_code_for_errno(-err.errnum), "%s", err.msg);
        return -EIO;
    }
    f->user = &c->user;
    return 0;
}

/* The message's path field made absolute for the user; answers on error. */
static int
msg_path(struct http_req *req, const struct fsctx *f, json_t *msg, const char *key, char *out,
         size_t n)
{
    struct err err = {0};
    const char *p = "";
    if (json_get_str(msg, key, false, &p, &err) < 0 ||
        vfs_resolve(p, f->user->home, out, n, &err) < 0) {
        e2b_rpc_error(req, "invalid_argument", "%s", err.msg);
        return -EINVAL;
    }
    return 0;
}

/* The Connect code of a file operation's errno: the surface's table, with
 * what only file operations meet (a socket or device, a read-only or busy
 * mount) named for what it is rather than "internal". */
static const char *
fs_code(int r)
{
    switch (-r) {
    case ENXIO:
    case ENODEV:
        return "invalid_argument";
    case EROFS:
    case ETXTBSY:
        return "permission_denied";
    case EBUSY:
    case ENOTEMPTY:
        return "failed_precondition";
    default:
        return e2b_code_for_errno(r);
    }
}

static void
fs_fail(struct http_req *req, int r, const struct err *err, const char *path)
{
    if (r == -ENOENT)
        e2b_rpc_error(req, "not_found", "path '%s' does not exist", path);
    else
        e2b_rpc_error(req, fs_code(r), "%s", err && err->msg[0] ? err->msg : strerror(-r));
}

struct list_acc {
    json_t *arr;
};

static int
list_one(void *ud, const struct vfs_entry *e)
{
    struct list_acc *acc = ud;
    return json_array_append_new(acc->arr, e2b_entry_json(e)) < 0 ? -ENOMEM : 0;
}

/* Stat, MakeDir and Move: all answer {"entry": ...}. */
static void
entry_op(struct http_req *req, struct e2b_call *c, const struct fsctx *f, const char *method,
         json_t *msg, struct vfs_entry *v)
{
    struct err err = {0};
    char path[PATH_MAX_LEN + 1], dst[PATH_MAX_LEN + 1];
    int r;

    if (!strcmp(method, "Move")) {
        if (msg_path(req, f, msg, "source", path, sizeof(path)) < 0 ||
            msg_path(req, f, msg, "destination", dst, sizeof(dst)) < 0)
            return;
        r = fileops_vrename(f->fo, path, dst, &err);
        if (r < 0) {
            fs_fail(req, r, &err, path);
            return;
        }
        (void)strscpy(path, dst, sizeof(path)); /* dst is as large */
    } else if (msg_path(req, f, msg, "path", path, sizeof(path)) < 0) {
        return;
    }
    if (!strcmp(method, "MakeDir")) {
        bool created = false;
        r = fileops_vmkdir(f->fo, path, &created, &err);
        if (r == 0 && !created) {
            e2b_rpc_error(req, "already_exists", "directory '%s' already exists", path);
            return;
        }
        if (r < 0) {
            fs_fail(req, r == -ENOTDIR || r == -EEXIST ? -EINVAL : r, &err, path);
            return;
        }
    }
    r = fileops_vstat(f->fo, path, v, &err);
    if (r < 0) {
        fs_fail(req, r, &err, path);
        return;
    }
    json_t *o = json_object();
    (void)json_set(o, "entry", e2b_entry_json(v));
    e2b_rpc_ok(req, o);
}

bool
e2b_filesystem_is_stream(const char *method)
{
    return !strcmp(method, "WatchDir");
}

static void fs_call(struct http_req *req, struct e2b_call *c, struct fsctx *fp, const char *method,
                    json_t *msg);

void
e2b_filesystem(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg)
{
    struct fsctx f;

    if (fs_open(req, c, &f) < 0)
        return;
    fs_call(req, c, &f, method, msg);
    fs_done(&f);
}

/* One filesystem RPC on an open context. */
static void
fs_call(struct http_req *req, struct e2b_call *c, struct fsctx *fp, const char *method, json_t *msg)
{
    struct fsctx f = *fp;
    struct err err = {0};
    char path[PATH_MAX_LEN + 1];
    int r;

    if (!strcmp(method, "Stat") || !strcmp(method, "MakeDir") || !strcmp(method, "Move")) {
        struct vfs_entry *v = malloc(sizeof(*v));
        if (!v)
            e2b_rpc_error(req, "internal", "out of memory");
        else
            entry_op(req, c, &f, method, msg, v);
        free(v);
        return;
    }
    if (!strcmp(method, "ListDir")) {
        uint64_t depth = 1;
        if (msg_path(req, &f, msg, "path", path, sizeof(path)) < 0)
            return;
        if (json_get_u64(msg, "depth", false, VFS_MAX_DEPTH, &depth, &err) < 0) {
            e2b_rpc_error(req, "invalid_argument", "%s", err.msg);
            return;
        }
        struct list_acc acc = {json_array()};
        r = fileops_vlist(f.fo, path, (unsigned)depth, list_one, &acc, &err);
        if (r < 0) {
            json_decref(acc.arr);
            if (r == -ENOTDIR)
                e2b_rpc_error(req, "invalid_argument", "path '%s' is not a directory", path);
            else
                fs_fail(req, r, &err, path);
            return;
        }
        json_t *o = json_object();
        (void)json_set(o, "entries", acc.arr);
        e2b_rpc_ok(req, o);
        return;
    }
    if (!strcmp(method, "Remove")) {
        if (msg_path(req, &f, msg, "path", path, sizeof(path)) < 0)
            return;
        r = fileops_vremove(f.fo, path, &err);
        if (r < 0)
            fs_fail(req, r, &err, path);
        else
            e2b_rpc_ok(req, NULL);
        return;
    }
    e2b_rpc_error(req, "unimplemented", "filesystem.Filesystem/%.64s does not exist", method);
}

/* --- /files --- */

/* v1_ + unpadded base64 of sha256("<path>:<op>:<user>:<token>[:<exp>]"). */
static int
signature(const char *path, const char *op, const char *user, const char *token, const char *exp,
          char *out, size_t n)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    struct buf in, b;
    int r;
    buf_init(&in, 3 * PATH_MAX_LEN);
    r = buf_printf(&in, "%s:%s:%s:%s", path, op, user, token);
    if (r == 0 && exp)
        r = buf_printf(&in, ":%s", exp);
    if (r < 0) {
        buf_done(&in);
        return r;
    }
    (void)SHA256((const unsigned char *)in.data, in.len, md);
    buf_done(&in);
    buf_init(&b, 128);
    r = buf_puts(&b, "v1_");
    if (r == 0)
        r = b64_encode(&b, md, sizeof(md));
    while (r == 0 && b.len && b.data[b.len - 1] == '=')
        b.len--;
    if (r == 0 && b.len < n) {
        memcpy(out, b.data, b.len);
        out[b.len] = '\0';
    } else if (r == 0) {
        r = -ENAMETOOLONG;
    }
    buf_done(&b);
    return r;
}

static bool
signature_matches(struct entry *e, struct http_req *req)
{
    const char *sig = http_req_query(req, "signature");
    const char *path = http_req_query(req, "path");
    const char *user = http_req_query(req, "username");
    const char *exp = http_req_query(req, "signature_expiration");
    const char *op = strcmp(http_req_method(req), "POST") ? "read" : "write";
    char want[128];
    if (!sig || signature(path ? path : "", op, user ? user : "", e2b_of(e)->token, exp, want,
                          sizeof(want)) < 0)
        return false;
    size_t n = strlen(want);
    return strlen(sig) == n && CRYPTO_memcmp(sig, want, n) == 0;
}

/* Checks token or signature; answers 401 and returns false when neither
 * opens the sandbox. */
static bool
files_authorized(struct entry *e, struct http_req *req, const char *tok)
{
    if (tok) {
        size_t n = strlen(e2b_of(e)->token);
        if (strlen(tok) == n && CRYPTO_memcmp(tok, e2b_of(e)->token, n) == 0)
            return true;
        e2b_error(req, 401, "access token present in header but does not match");
        return false;
    }
    if (!http_req_query(req, "signature")) {
        e2b_error(req, 401, "missing access token or signature");
        return false;
    }
    if (!signature_matches(e, req)) {
        e2b_error(req, 401, "invalid signature");
        return false;
    }
    const char *exp = http_req_query(req, "signature_expiration");
    if (exp) {
        uint64_t t;
        int r = parse_u64(exp, &t);
        if (r == -ERANGE)
            t = UINT64_MAX; /* past any clock: the signature covers it */
        else if (r < 0)
            t = 0;
        if (t < (uint64_t)time(NULL)) {
            e2b_error(req, 401, "signature is already expired");
            return false;
        }
    }
    return true;
}

static void
files_get(struct http_req *req, const struct fsctx *f, const char *path)
{
    struct err err = {0};
    int fd = -1;
    uint64_t size = 0;
    int r = fileops_vopen_read(f->fo, path, &fd, &size, &err);
    if (r == -ENOENT) {
        e2b_error(req, 404, "path '%s' does not exist", path);
        return;
    }
    if (r == -EISDIR) {
        e2b_error(req, 400, "path '%s' is a directory", path);
        return;
    }
    if (r < 0) {
        unsigned status = r == -EACCES || r == -EPERM ? 403
                          : r == -EINVAL || r == -ENXIO || r == -ENODEV || r == -ELOOP ||
                                          r == -ENOTDIR || r == -ENAMETOOLONG
                                  ? 400
                                  : 500;
        e2b_error(req, status, "%s", err.msg[0] ? err.msg : strerror(-r));
        return;
    }
    const char *base = strrchr(path, '/');
    char name[PATH_NAME_MAX + 1], disp[PATH_NAME_MAX + 64];
    (void)snprintf(name, sizeof(name), "%s", base ? base + 1 : path);
    /* The name is the sandbox's to choose: no quote, backslash or control
     * byte reaches the header (a CR/LF would start a header of its own). */
    for (char *p = name; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '_';
    (void)snprintf(disp, sizeof(disp), "inline; filename=\"%s\"", name);
    http_req_add_header(req, "Content-Disposition", disp);
    if (size > 0) {
        http_respond_fd(req, 200, "application/octet-stream", fd, size);
        return;
    }
    /* Size unknown (procfs) or empty: read to EOF. */
    struct buf b;
    buf_init(&b, SMALL_READ_MAX);
    char tmp[65536];
    for (;;) {
        ssize_t k = read(fd, tmp, sizeof(tmp));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || buf_put(&b, tmp, (size_t)k) < 0)
            break;
    }
    (void)close(fd);
    http_respond(req, 200, "application/octet-stream", b.data, b.len);
    buf_done(&b);
}

/* One upload (POST /files), streamed. Every file of it is staged
 * (vfs_upload_begin()) and all are put in place only when the whole body
 * has arrived and decoded: a bad body, a gzip error, a limit or a client
 * that goes away leaves every target as it was. */
struct upload {
    struct http_req *req; /* outlives the upload (freed when it closes) */
    struct api *api;
    char id[API_ID_LEN + 1];
    struct fsctx f;
    struct e2b_user user;
    char query_path[PATH_MAX_LEN + 1];
    bool has_query_path;
    struct multipart *mp;
    struct inflate *z;
    uint64_t encoded, decoded; /* gzip: body bytes in, file bytes out */
    struct vfs_meta meta;
    struct fileops_upload *staged[E2B_UPLOAD_FILES_MAX];
    size_t n_staged;
    struct fileops_upload *cur; /* the file the body goes to now; NULL: a part we skip */
    uint64_t max, bytes;
    struct err err; /* why a write failed */
    json_t *answer;
    bool failed;
};

static void
up_abort_all(struct upload *u)
{
    for (size_t i = 0; i < u->n_staged; i++)
        fileops_upload_abort(TAKE_PTR(u->staged[i]));
    u->n_staged = 0;
    u->cur = NULL;
}

static void
upload_close(struct http_req *req, void *ud)
{
    struct upload *u = ud;
    (void)req;
    up_abort_all(u); /* the body never completed: nothing changes */
    fs_done(&u->f);
    multipart_free(u->mp);
    inflate_free(u->z);
    json_decref(u->answer);
    free(u);
}

static int
up_fail(struct http_req *req, struct upload *u, unsigned status, const char *msg)
{
    up_abort_all(u);
    if (!u->failed) {
        u->failed = true;
        e2b_error(req, status, "%s", msg);
    }
    return -EIO;
}

static int
up_errno(struct http_req *req, struct upload *u, int r, const struct err *err)
{
    unsigned status = r == -ENOSPC || r == -EDQUOT ? 507
                      : r == -EFBIG || r == -E2BIG ? 413
                      : r == -EISDIR || r == -EINVAL || r == -ENOTDIR || r == -ENAMETOOLONG ||
                                      r == -EEXIST || r == -ELOOP || r == -ENXIO
                              ? 400
                      : r == -EACCES || r == -EPERM || r == -EROFS ? 403
                      : r == -EBUSY || r == -ETXTBSY               ? 409
                                                                   : 500;
    char tmp[128];
    (void)snprintf(tmp, sizeof(tmp), "%s", strerror(-r));
    return up_fail(req, u, status, err && err->msg[0] ? err->msg : tmp);
}

/* The sandbox may have gone while the body streamed, its root with it. */
static bool
up_sandbox_ready(struct upload *u)
{
    struct entry *e = table_find(u->api->table, u->id);
    if (!e || e->state != E_READY || !e2b_of(e) || e->paused)
        return false;
    return sandbox_has_view(e->sb);
}

/* Stages the next file of the upload; rel is what the client named. */
static int
up_open(struct http_req *req, struct upload *u, const char *rel)
{
    struct err err = {0};
    char path[PATH_MAX_LEN + 1];
    struct fileops_upload *up = NULL;
    if (!up_sandbox_ready(u))
        return up_fail(req, u, 502, "The sandbox was not found");
    int r = vfs_resolve(rel, u->user.home, path, sizeof(path), &err);
    if (r < 0)
        return up_fail(req, u, 400, err.msg);
    for (size_t i = 0; i < json_array_size(u->answer); i++) {
        /* Compared as sent (lossy): two names that differ only in bytes
         * that are not UTF-8 are refused too, which harms nothing. */
        json_t *was = json_object_get(json_array_get(u->answer, i), "path");
        json_t *now = json_string_lossy(path);
        bool same = !now || !was || json_equal(was, now);
        json_decref(now);
        if (same)
            return up_fail(req, u, 400, "two parts of the upload write the same path");
    }
    if (u->n_staged == E2B_UPLOAD_FILES_MAX) {
        char msg[96];
        (void)snprintf(msg, sizeof(msg), "one upload may write at most %d files",
                       E2B_UPLOAD_FILES_MAX);
        return up_fail(req, u, 413, msg);
    }
    r = fileops_vupload_begin(u->f.fo, path, u->max, &up, &err);
    if (r < 0)
        return up_errno(req, u, r, &err);
    u->staged[u->n_staged++] = up;
    /* Metadata goes on the staged file: it appears together with the data. */
    r = fileops_vset_meta(u->f.fo, fileops_upload_fd(up), &u->meta, &err);
    if (r < 0 && !(r == -EOPNOTSUPP && u->meta.n == 0))
        return up_errno(req, u, r, &err);
    u->cur = up;
    const char *base = strrchr(path, '/');
    json_t *o = json_object();
    (void)json_set(o, "name", json_string_lossy(base && base[1] ? base + 1 : path));
    (void)json_set(o, "path", json_string_lossy(path));
    (void)json_set(o, "type", json_string("file"));
    if (u->meta.n)
        (void)json_set(o, "metadata", meta_json(&u->meta));
    if (json_array_append_new(u->answer, o) < 0)
        return up_fail(req, u, 500, "out of memory");
    return 0;
}

static int
up_write(void *ud, const void *data, size_t n)
{
    struct upload *u = ud;
    if (!u->cur)
        return 0; /* a part we skip */
    int r = fileops_upload_write(u->cur, data, n, &u->err);
    if (r < 0)
        return r;
    u->bytes += n;
    return 0;
}

/* Decoded gzip output: counts against the file's limit (in up_write) and
 * against E2B_GZIP_RATIO_MAX, checked on every piece, so that a bomb
 * stops within about E2B_GZIP_RATIO_MAX * E2B_GZIP_SLICE bytes (4 MiB) of
 * output past the free allowance, long before the size limit. */
static int
gz_write(void *ud, const void *data, size_t n)
{
    struct upload *u = ud;
    u->decoded += n;
    if (u->decoded > E2B_GZIP_RATIO_FREE && u->decoded / E2B_GZIP_RATIO_MAX > u->encoded)
        return err_set(&u->err, EFBIG,
                       "the gzip body expands more than %d-fold (%llu bytes from %llu): refused "
                       "as a decompression bomb",
                       E2B_GZIP_RATIO_MAX, (unsigned long long)u->decoded,
                       (unsigned long long)u->encoded);
    return up_write(u, data, n);
}

static int
part_begin(void *ud, const struct multipart_part *p)
{
    struct upload *u = ud;
    u->cur = NULL;
    if (!p->name || strcmp(p->name, "file"))
        return 0; /* only parts named "file" */
    const char *rel = p->filename && *p->filename ? p->filename : NULL;
    if (!rel && u->has_query_path)
        rel = u->query_path;
    if (!rel)
        return up_fail(u->req, u, 400, "a part has no filename and the request no path");
    return up_open(u->req, u, rel);
}

static int
part_end(void *ud)
{
    struct upload *u = ud;
    u->cur = NULL; /* complete; put in place with the others at the end */
    return 0;
}

static const struct multipart_cb mp_cb = {part_begin, up_write, part_end};

static int
up_chunk(struct http_req *req, const char *data, size_t len)
{
    struct upload *u = http_req_userdata(req);
    struct err err = {0};
    int r;
    if (u->failed)
        return -EIO;
    if (u->mp) {
        r = multipart_feed(u->mp, data, len, &err);
    } else if (u->z) {
        /* In slices: the ratio is checked against what was fed so far, so
         * a bomb stops within one slice's expansion, not one chunk's. */
        r = 0;
        for (size_t o = 0, n; r == 0 && o < len; o += n) {
            n = MIN(len - o, (size_t)E2B_GZIP_SLICE);
            u->encoded += n;
            r = inflate_feed(u->z, data + o, n, gz_write, u, &err);
        }
    } else {
        r = up_write(u, data, len);
    }
    if (r < 0 && !u->failed) {
        if (r == -EFBIG)
            return up_fail(req, u, 413, u->err.msg[0] ? u->err.msg : "the file is too large");
        if (r == -EPROTO || r == -EINVAL || r == -EMSGSIZE)
            return up_fail(req, u, 400, err.msg[0] ? err.msg : "malformed body");
        return up_errno(req, u, r, u->err.msg[0] ? &u->err : &err);
    }
    return r < 0 ? -EIO : 0;
}

static void
up_done(struct http_req *req)
{
    struct upload *u = http_req_userdata(req);
    struct err err = {0};
    int r = 0;
    if (u->failed)
        return;
    if (u->mp)
        r = multipart_finish(u->mp, &err);
    else if (u->z)
        r = inflate_finish(u->z, &err);
    if (u->failed)
        return;
    if (r < 0) {
        (void)up_fail(req, u, 400, err.msg[0] ? err.msg : "malformed body");
        return;
    }
    if (json_array_size(u->answer) == 0) {
        (void)up_fail(req, u, 400, "the upload names no file (parts must be named \"file\")");
        return;
    }
    if (!up_sandbox_ready(u)) {
        (void)up_fail(req, u, 502, "The sandbox was not found");
        return;
    }
    /* The whole body is in: now every file goes in place. */
    for (size_t i = 0; i < u->n_staged; i++) {
        r = fileops_vupload_commit(TAKE_PTR(u->staged[i]), NULL, &err);
        if (r < 0) {
            (void)up_errno(req, u, r, &err);
            return;
        }
    }
    u->n_staged = 0;
    u->api->m.bytes_uploaded += u->bytes;
    json_t *a = u->answer;
    u->answer = NULL;
    api_json(req, 200, a);
}

struct meta_acc {
    struct vfs_meta *m;
    int r;
    char bad[128];
};

static int
meta_header(void *ud, const char *name, const char *value)
{
    struct meta_acc *acc = ud;
    if (strncasecmp(name, "X-Metadata-", 11) || !name[11])
        return 0;
    char key[VFS_META_KEY_MAX + 2];
    size_t n = strlen(name + 11);
    if (n > VFS_META_KEY_MAX) {
        acc->r = -EINVAL;
        (void)snprintf(acc->bad, sizeof(acc->bad), "metadata key is longer than %d bytes",
                       VFS_META_KEY_MAX);
        return acc->r;
    }
    for (size_t i = 0; i <= n; i++)
        key[i] = (char)tolower((unsigned char)name[11 + i]);
    if (vfs_meta_add(acc->m, key, value) < 0) {
        acc->r = -EINVAL;
        (void)snprintf(acc->bad, sizeof(acc->bad), "metadata exceeds %d pairs or %d bytes",
                       VFS_META_MAX, VFS_META_BYTES);
        return acc->r;
    }
    return 0;
}

static void
files_post(struct api *a, struct http_req *req, struct entry *e, const struct fsctx *f)
{
    struct err err = {0};
    const char *ct = http_req_header(req, "Content-Type");
    const char *enc = http_req_header(req, "Content-Encoding");
    const char *qp = http_req_query(req, "path");
    struct upload *u = calloc(1, sizeof(*u));
    if (!u) {
        e2b_error(req, 500, "out of memory");
        return;
    }
    u->req = req;
    u->api = a;
    memcpy(u->id, e->id, sizeof(u->id));
    u->f.fo = fileops_ref(f->fo);
    u->user = *f->user;
    u->f.user = &u->user;
    u->max = a->cfg.max_file_bytes;
    u->answer = json_array();
    http_req_set_userdata(req, u, upload_close);
    if (qp) {
        if (strscpy(u->query_path, qp, sizeof(u->query_path)) < 0) {
            e2b_error(req, 400, "'path' is too long");
            return;
        }
        u->has_query_path = true;
    }
    struct meta_acc acc = {.m = &u->meta};
    if (http_req_headers(req, meta_header, &acc) < 0) {
        e2b_error(req, 400, "%s", acc.bad);
        return;
    }
    if (enc && strcasecmp(enc, "identity") && strcasecmp(enc, "gzip")) {
        e2b_error(req, 400, "unsupported Content-Encoding '%.32s' (gzip only)", enc);
        return;
    }
    if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
        char boundary[MULTIPART_BOUNDARY_MAX + 1];
        if (enc && !strcasecmp(enc, "gzip")) {
            e2b_error(req, 400, "gzip is accepted with application/octet-stream only");
            return;
        }
        if (multipart_boundary(ct, boundary, sizeof(boundary), &err) < 0 ||
            multipart_new(boundary, &mp_cb, u, &u->mp) < 0) {
            e2b_error(req, 400, "%s", err.msg[0] ? err.msg : "bad multipart boundary");
            return;
        }
    } else {
        if (!u->has_query_path) {
            e2b_error(req, 400, "an octet-stream upload needs the 'path' query parameter");
            return;
        }
        const char *cl = http_req_header(req, "Content-Length");
        uint64_t len;
        bool gzip = enc && !strcasecmp(enc, "gzip");
        if (!gzip && cl && parse_u64(cl, &len) == 0 && len > u->max) {
            e2b_error(req, 413, "files may be at most %llu bytes", (unsigned long long)u->max);
            return;
        }
        if (gzip && inflate_new(&u->z) < 0) {
            e2b_error(req, 500, "out of memory");
            return;
        }
        if (up_open(req, u, u->query_path) < 0)
            return;
    }
    http_req_stream_body(req, up_chunk, up_done);
}

static void files_do(struct api *a, struct http_req *req, struct entry *e, struct fsctx *fp,
                     const struct e2b_user *up);

static void
files_route(struct api *a, struct http_req *req, struct entry *e)
{
    struct fsctx f;
    struct e2b_user user;
    struct err err = {0};
    const char *uname = http_req_query(req, "username");

    if (!api_need_cap(req, e, TEMPLATE_CAP_FILES))
        return;
    if (http_req_nul_escaped(req)) {
        e2b_error(req, 400, "a path cannot hold a NUL byte (%%00)");
        return;
    }
    if (e2b_user_named(uname, &user) < 0) {
        e2b_error(req, 401, "invalid user: '%.64s'", uname);
        return;
    }
    if (!sandbox_has_view(e->sb)) {
        e2b_error(req, 501, "this sandbox has no file system view of its own (isolation mode)");
        return;
    }
    f.user = &user;
    f.fo = NULL;
    if (sandbox_fileops(e->sb, user.root, &f.fo, &err) < 0) {
        e2b_error(req, 500, "%s", err.msg);
        return;
    }
    table_touch(e);
    files_do(a, req, e, &f, &user);
    fs_done(&f);
}

static void
files_do(struct api *a, struct http_req *req, struct entry *e, struct fsctx *fp,
         const struct e2b_user *up)
{
    struct fsctx f = *fp;
    struct e2b_user user = *up;
    char path[PATH_MAX_LEN + 1];
    struct err err = {0};
    if (!strcmp(http_req_method(req), "GET") || http_req_is_head(req)) {
        const char *p = http_req_query(req, "path");
        if (vfs_resolve(p ? p : "", user.home, path, sizeof(path), &err) < 0) {
            e2b_error(req, 400, "%s", err.msg);
            return;
        }
        files_get(req, &f, path);
        return;
    }
    if (!strcmp(http_req_method(req), "POST")) {
        files_post(a, req, e, &f);
        return;
    }
    e2b_error(req, 405, "use GET or POST on /files");
}

void
e2b_files(struct api *a, struct http_req *req, struct entry *e, const char *tok)
{
    if (files_authorized(e, req, tok))
        files_route(a, req, e);
}

void
e2b_files_signed(struct api *a, struct http_req *req)
{
    if (!http_req_query(req, "signature")) {
        e2b_error(req, 401, "a /files request needs E2b-Sandbox-Id or a signature");
        return;
    }
    list_foreach (l, table_entries(a->table)) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state != E_READY || !e2b_of(e) || !signature_matches(e, req))
            continue;
        if (e->paused) {
            e2b_error(req, 502, "The sandbox was not found");
            return;
        }
        if (files_authorized(e, req, http_req_header(req, "X-Access-Token")))
            files_route(a, req, e);
        return;
    }
    e2b_error(req, 401, "invalid signature");
}
