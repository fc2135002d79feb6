/*
 * tree.c - the workspaces and their trees as every backend keeps them:
 * what each operation checks, in what order and with which error;
 * conditional writes (If-Match); the ancestors that a write, a mkdir or a
 * move creates; the pin that keeps GC off a write's blob until its entry
 * holds it; and which transactions all this runs in. The backends'
 * primitives (store-internal.h) only read and write rows.
 *
 * A change to a tree runs in one write transaction that first makes itself
 * the tree's only writer (ws_check with lock), so what it checked stays
 * true until it commits. Reads of one entry run in a read transaction (one
 * snapshot for the entry and, where the database holds it, the content);
 * listings run outside any, so their callbacks may use the store.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store-internal.h"
#include "util/fd.h"
#include "util/path.h"

#define CHECK_WS(ws)                                                                   \
    do {                                                                               \
        if (!store_ws_ok(ws))                                                          \
            return err_set(err, EINVAL, "invalid workspace id '%.80s'", ws ? ws : ""); \
    } while (0)

#define CHECK_PATH(p, root_ok)                                                \
    do {                                                                      \
        if (!store_path_ok(p, root_ok))                                       \
            return err_set(err, EINVAL, "invalid path '%.200s'", p ? p : ""); \
    } while (0)

/* 0 when ws exists, -ENOENT when not; lock as for ops->ws_check. */
static int
ws_need(struct store *s, const char *ws, bool lock, struct err *err)
{
    int r = s->ops->ws_check(s, ws, lock, err);
    if (r < 0)
        return r;
    return r ? 0 : err_set(err, ENOENT, "no workspace '%s'", ws);
}

/* 0 when dir (not the root) is a directory. */
static int
dir_need(struct store *s, const char *ws, const char *dir, struct err *err)
{
    struct store_entry e;
    int r = s->ops->get_entry(s, ws, dir, &e, err);
    if (r < 0)
        return r;
    if (r == 0)
        return err_set(err, ENOENT, "no such directory: '/%s'", dir);
    if (e.type != STORE_DIR)
        return err_set(err, ENOTDIR, "'/%s' is not a directory", dir);
    return 0;
}

/* path's parent and name, into buffers of PATH_MAX_LEN + 2 bytes. */
static int
split(const char *path, char *parent, char *name, struct err *err)
{
    int r = path_split(path, parent, name, PATH_MAX_LEN + 2);
    return r < 0 ? err_set(err, -r, "invalid path '%.200s'", path) : 0;
}

int
store_check_if_match(const char *path, const struct store_entry *cur, bool exists,
                     const char *if_match, struct err *err)
{
    if (!if_match)
        return 0;
    if (!*if_match) {
        if (exists)
            return err_set(err, ESTALE, "'/%s' exists (expected none)", path);
        return 0;
    }
    if (!exists)
        return err_set(err, ESTALE, "'/%s' does not exist (expected version %.16s...)", path,
                       if_match);
    if (cur->type != STORE_FILE || strcmp(cur->hash, if_match) != 0)
        return err_set(err, ESTALE, "'/%s' changed: it is at version %.16s..., not %.16s...", path,
                       cur->hash, if_match);
    return 0;
}

/*
 * mkdir -p inside a write transaction that holds the tree. Looks upwards
 * for the nearest existing ancestor (one lookup when the parent exists,
 * the usual case), then creates the missing levels below it: below a
 * directory that exists, nothing does yet (directories are honest). A
 * file on the way is -ENOTDIR. *created (may be NULL) says whether path
 * itself was made.
 */
static int
mkdir_all(struct store *s, const char *ws, const char *path, bool *created, struct err *err)
{
    char cur[PATH_MAX_LEN + 2], parent[PATH_MAX_LEN + 2], name[PATH_MAX_LEN + 2];
    size_t len = strlen(path), end = len;
    uint64_t now = store_now_ms();
    struct store_entry e;
    int r;

    if (created)
        *created = false;
    if (path_is_root(path))
        return 0; /* the root always exists */
    if (len >= sizeof(cur))
        return err_set(err, ENAMETOOLONG, "invalid path '%.200s'", path);
    for (;;) {
        memcpy(cur, path, end);
        cur[end] = '\0';
        r = s->ops->get_entry(s, ws, cur, &e, err);
        if (r < 0)
            return r;
        if (r == 1) {
            if (e.type != STORE_DIR)
                return err_set(err, ENOTDIR, "'/%s' is a file, not a directory", cur);
            break;
        }
        const char *slash = memrchr(path, '/', end);
        if (!slash) {
            end = 0; /* nothing on the way exists */
            break;
        }
        end = (size_t)(slash - path);
    }
    /* path[0, end) exists (or end is 0); create each level below it. */
    for (size_t i = end ? end + 1 : 0; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        memcpy(cur, path, i);
        cur[i] = '\0';
        if ((r = split(cur, parent, name, err)) < 0 ||
            (r = s->ops->insert_dir(s, ws, cur, parent, name, now, err)) < 0)
            return r;
        if (i == len && created)
            *created = true;
    }
    return 0;
}

/* --- workspaces --- */

static int
ws_create_tx(struct store *s, void *ctx, struct err *err)
{
    const struct store_ws *w = ctx;
    struct err e1 = {0};
    int r = s->ops->ws_insert(s, w, &e1);
    if (r == -EEXIST)
        return err_set(err, EEXIST, "workspace '%s' already exists", w->id);
    if (r < 0 && err && !err_isset(err))
        *err = e1;
    return r;
}

int
store_ws_create(struct store *s, const struct store_ws *ws, struct err *err)
{
    CHECK_WS(ws->id);
    return store_tx_run(s, STORE_TX_WRITE, ws_create_tx, (void *)(uintptr_t)ws, err);
}

int
store_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err)
{
    CHECK_WS(id);
    int r = s->ops->ws_get(s, id, ret, err);
    if (r < 0)
        return r;
    return r ? 0 : err_set(err, ENOENT, "no workspace '%s'", id);
}

int
store_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err)
{
    return s->ops->ws_list(s, fn, ud, err);
}

static int
ws_delete_tx(struct store *s, void *ctx, struct err *err)
{
    const char *id = ctx;
    int r = s->ops->ws_delete(s, id, err);
    if (r < 0)
        return r;
    return r ? 0 : err_set(err, ENOENT, "no workspace '%s'", id);
}

int
store_ws_delete(struct store *s, const char *id, struct err *err)
{
    CHECK_WS(id);
    return store_tx_run(s, STORE_TX_WRITE, ws_delete_tx, (void *)(uintptr_t)id, err);
}

int
store_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err)
{
    CHECK_WS(ws);
    memset(ret, 0, sizeof(*ret));
    int r = ws_need(s, ws, false, err);
    if (r < 0)
        return r;
    return s->ops->usage(s, ws, ret, err);
}

/* --- writes --- */

struct commit_ctx {
    const char *ws, *path, *if_match, *hash;
    uint32_t mode;
    int fd;
    uint64_t size, now;
    int64_t pin;
};

/* What must hold for the write to go ahead; with lock, from here on until
 * the transaction ends. */
static int
check_target(struct store *s, const struct commit_ctx *c, bool lock, struct err *err)
{
    struct store_entry cur;
    int r = ws_need(s, c->ws, lock, err);
    if (r < 0)
        return r;
    int have = s->ops->get_entry(s, c->ws, c->path, &cur, err);
    if (have < 0)
        return have;
    if (have && cur.type == STORE_DIR)
        return err_set(err, EISDIR, "'/%s' is a directory", c->path);
    return store_check_if_match(c->path, &cur, have, c->if_match, err);
}

static int
upload_tx(struct store *s, void *ctx, struct err *err)
{
    const struct commit_ctx *c = ctx;
    return s->ops->blob_upload(s, c->fd, c->hash, c->size, err);
}

static int
commit_tx(struct store *s, void *ctx, struct err *err)
{
    struct commit_ctx *c = ctx;
    char parent[PATH_MAX_LEN + 2], name[PATH_MAX_LEN + 2];
    int r;

    if ((r = split(c->path, parent, name, err)) < 0 || (r = check_target(s, c, true, err)) < 0 ||
        (r = mkdir_all(s, c->ws, parent, NULL, err)) < 0 ||
        (r = s->ops->blob_hold(s, c->fd, c->hash, c->size, err)) < 0)
        return r;
    c->now = store_now_ms();
    r = s->ops->upsert_file(s, c->ws, c->path, parent, name, c->hash, c->size, c->mode, c->now,
                            err);
    if (r < 0)
        return r;
    /* The entry holds the blob from the commit on: the pin goes with it. */
    return s->ops->unpin(s, c->pin, err);
}

int
store_commit(struct store *s, const char *ws, const char *path, uint32_t mode, const char *if_match,
             int fd, const char *hash, uint64_t size, struct store_entry *ret, struct err *err)
{
    struct commit_ctx c = {
            .ws = ws,
            .path = path,
            .if_match = if_match,
            .hash = hash,
            .mode = mode ? mode : 0644,
            .fd = fd,
            .size = size,
    };
    /* From the pin on, GC leaves this content alone, even before any entry
     * references it. */
    int r = s->ops->pin(s, hash, &c.pin, err);
    if (r < 0)
        return r;
    if (s->ops->blob_upload) {
        r = s->ops->blob_known(s, hash, err);
        if (r == 0) {
            /* New content: fail early rather than upload for nothing, then
             * upload without holding the tree; the pin keeps GC off the
             * blob until commit_tx references it. */
            r = check_target(s, &c, false, err);
            if (r >= 0)
                r = store_tx_run(s, STORE_TX_WRITE, upload_tx, &c, err);
        }
    }
    if (r >= 0)
        r = store_tx_run(s, STORE_TX_WRITE, commit_tx, &c, err);
    if (r < 0) {
        (void)s->ops->unpin(s, c.pin, NULL);
        return r;
    }
    memset(ret, 0, sizeof(*ret));
    (void)snprintf(ret->path, sizeof(ret->path), "%s", path);
    ret->type = STORE_FILE;
    ret->size = size;
    memcpy(ret->hash, hash, STORE_HASH_LEN + 1);
    ret->mode = c.mode;
    ret->mtime_ms = c.now;
    return 0;
}

/* --- reads --- */

struct read_ctx {
    const char *ws, *path;
    struct store_entry *e;
    int fd;
};

static int
read_tx(struct store *s, void *ctx, struct err *err)
{
    struct read_ctx *c = ctx;
    c->fd = safe_close(c->fd); /* an earlier attempt's */
    int r = ws_need(s, c->ws, false, err);
    if (r < 0)
        return r;
    r = s->ops->get_entry(s, c->ws, c->path, c->e, err);
    if (r < 0)
        return r;
    if (r == 0)
        return err_set(err, ENOENT, "no such file: '/%s'", c->path);
    if (c->e->type == STORE_DIR)
        return err_set(err, EISDIR, "'/%s' is a directory", c->path);
    return s->ops->blob_read(s, c->e, &c->fd, err);
}

int
store_read(struct store *s, const char *ws, const char *path, int *ret_fd, struct store_entry *ret,
           struct err *err)
{
    struct store_entry tmp;
    CHECK_WS(ws);
    CHECK_PATH(path, false);
    /* One snapshot for the entry and its content: where the database holds
     * both, a concurrent delete and GC cannot pull the blob out from under
     * the copy. */
    struct read_ctx c = {ws, path, ret ? ret : &tmp, -EBADF};
    int r = store_tx_run(s, STORE_TX_READ, read_tx, &c, err);
    if (r < 0) {
        safe_close(c.fd);
        return r;
    }
    *ret_fd = c.fd;
    return 0;
}

int
store_stat(struct store *s, const char *ws, const char *path, struct store_entry *ret,
           struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(path, true);
    if (path_is_root(path)) {
        memset(ret, 0, sizeof(*ret));
        (void)snprintf(ret->path, sizeof(ret->path), ".");
        ret->type = STORE_DIR;
        ret->mode = 0755;
        return ws_need(s, ws, false, err);
    }
    int r = ws_need(s, ws, false, err);
    if (r < 0)
        return r;
    r = s->ops->get_entry(s, ws, path, ret, err);
    if (r < 0)
        return r;
    return r ? 0 : err_set(err, ENOENT, "no such file or directory: '/%s'", path);
}

int
store_list(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
           struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(dir, true);
    int r = ws_need(s, ws, false, err);
    if (r < 0 || (!path_is_root(dir) && (r = dir_need(s, ws, dir, err)) < 0))
        return r;
    return s->ops->children(s, ws, dir, fn, ud, err);
}

int
store_walk(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
           struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(dir, true);
    int r = ws_need(s, ws, false, err);
    if (r < 0 || (!path_is_root(dir) && (r = dir_need(s, ws, dir, err)) < 0))
        return r;
    return s->ops->below(s, ws, dir, fn, ud, err);
}

/* --- tree changes --- */

struct remove_ctx {
    const char *ws, *path, *if_match;
};

static int
remove_tx(struct store *s, void *ctx, struct err *err)
{
    const struct remove_ctx *c = ctx;
    struct store_entry cur;
    int r = ws_need(s, c->ws, true, err);
    if (r < 0)
        return r;
    int have = s->ops->get_entry(s, c->ws, c->path, &cur, err);
    if (have < 0)
        return have;
    if ((r = store_check_if_match(c->path, &cur, have, c->if_match, err)) < 0)
        return r;
    if (!have)
        return err_set(err, ENOENT, "no such file: '/%s'", c->path);
    if (cur.type == STORE_DIR)
        return err_set(err, EISDIR, "'/%s' is a directory: use rmdir", c->path);
    return s->ops->delete_entry(s, c->ws, c->path, err);
}

int
store_delete(struct store *s, const char *ws, const char *path, const char *if_match,
             struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(path, false);
    struct remove_ctx c = {ws, path, if_match};
    return store_tx_run(s, STORE_TX_WRITE, remove_tx, &c, err);
}

struct mkdir_ctx {
    const char *ws, *path;
    bool created;
};

static int
mkdir_tx(struct store *s, void *ctx, struct err *err)
{
    struct mkdir_ctx *c = ctx;
    int r = ws_need(s, c->ws, true, err);
    if (r < 0)
        return r;
    return mkdir_all(s, c->ws, c->path, &c->created, err);
}

int
store_mkdir(struct store *s, const char *ws, const char *path, bool *ret_created, struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(path, true);
    if (path_is_root(path)) {
        *ret_created = false;
        return ws_need(s, ws, false, err);
    }
    struct mkdir_ctx c = {ws, path, false};
    int r = store_tx_run(s, STORE_TX_WRITE, mkdir_tx, &c, err);
    if (r < 0)
        return r;
    *ret_created = c.created;
    return 0;
}

static int
rmdir_tx(struct store *s, void *ctx, struct err *err)
{
    const struct remove_ctx *c = ctx;
    int r = ws_need(s, c->ws, true, err);
    if (r < 0 || (r = dir_need(s, c->ws, c->path, err)) < 0)
        return r;
    return s->ops->delete_tree(s, c->ws, c->path, err);
}

int
store_rmdir(struct store *s, const char *ws, const char *path, struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(path, true);
    if (path_is_root(path))
        return err_set(err, EINVAL, "the workspace root cannot be removed");
    struct remove_ctx c = {ws, path, NULL};
    return store_tx_run(s, STORE_TX_WRITE, rmdir_tx, &c, err);
}

struct rename_ctx {
    const char *ws, *from, *to;
    bool overwrite;
};

static int
rename_tx(struct store *s, void *ctx, struct err *err)
{
    const struct rename_ctx *c = ctx;
    struct store_entry src, dst;
    char parent[PATH_MAX_LEN + 2], name[PATH_MAX_LEN + 2];
    int r = ws_need(s, c->ws, true, err);
    if (r < 0)
        return r;
    int have = s->ops->get_entry(s, c->ws, c->from, &src, err);
    if (have <= 0)
        return have < 0 ? have : err_set(err, ENOENT, "no such file or directory: '/%s'", c->from);
    have = s->ops->get_entry(s, c->ws, c->to, &dst, err);
    if (have < 0)
        return have;
    if (have) {
        if (!c->overwrite)
            return err_set(err, EEXIST, "'/%s' already exists", c->to);
        if (dst.type == STORE_DIR || src.type == STORE_DIR)
            return err_set(err, EEXIST, "'/%s' exists and only a file may replace a file", c->to);
        if ((r = s->ops->delete_tree(s, c->ws, c->to, err)) < 0)
            return r;
    }
    if ((r = split(c->to, parent, name, err)) < 0 ||
        (r = mkdir_all(s, c->ws, parent, NULL, err)) < 0)
        return r;
    /* The entry itself, then everything below it (a directory's). */
    r = s->ops->move_entry(s, c->ws, c->from, c->to, parent, name, store_now_ms(), err);
    if (r < 0 || src.type != STORE_DIR)
        return r;
    return s->ops->move_below(s, c->ws, c->from, c->to, err);
}

int
store_rename(struct store *s, const char *ws, const char *from, const char *to, bool overwrite,
             struct err *err)
{
    CHECK_WS(ws);
    CHECK_PATH(from, false);
    CHECK_PATH(to, false);
    size_t n = strlen(from);
    if (!strcmp(from, to))
        return 0;
    if (!strncmp(to, from, n) && to[n] == '/')
        return err_set(err, EINVAL, "cannot move '/%.200s' into itself", from);
    struct rename_ctx c = {ws, from, to, overwrite};
    return store_tx_run(s, STORE_TX_WRITE, rename_tx, &c, err);
}
