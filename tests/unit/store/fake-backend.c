/*
 * fake-backend.c - see fake-backend.h. Every primitive logs its name (and
 * the path it is about) and may be made to fail; a table of entries
 * searched linearly stands in for the database.
 */
#include "fake-backend.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct fake *
F(struct store *s)
{
    return (struct fake *)s;
}

static void
logf_(struct fake *f, const char *op, const char *arg)
{
    size_t n = strlen(f->log);
    (void)snprintf(f->log + n, sizeof(f->log) - n, arg ? "%s:%s " : "%s ", op, arg);
}

/* Logs op and fails it if it is due to fail. */
static int
hit(struct fake *f, const char *op, const char *arg, struct err *err)
{
    logf_(f, op, arg);
    if (f->fail_op && f->fail_times > 0 && !strcmp(f->fail_op, op)) {
        f->fail_times--;
        return err_set(err, f->fail_errno, "fake: %s failed", op);
    }
    return 0;
}

static int
find(const struct fake_state *st, const char *ws, const char *path)
{
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->ws[i], ws) && !strcmp(st->e[i].path, path))
            return i;
    return -1;
}

static bool
ws_exists(const struct fake_state *st, const char *ws)
{
    for (int i = 0; i < st->nws; i++)
        if (!strcmp(st->wss[i], ws))
            return true;
    return false;
}

static void
parent_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        (void)snprintf(out, n, ".");
    else
        (void)snprintf(out, n, "%.*s", (int)(slash - path), path);
}

/* Whether path's parent is a directory: the invariant every insert keeps. */
static bool
parent_ok(const struct fake_state *st, const char *ws, const char *path)
{
    char parent[PATH_MAX_LEN + 2];
    parent_of(path, parent, sizeof(parent));
    if (!strcmp(parent, "."))
        return true;
    int i = find(st, ws, parent);
    return i >= 0 && st->e[i].type == STORE_DIR;
}

static void
put(struct fake_state *st, const char *ws, const char *path, enum store_type type, const char *hash,
    uint64_t size, uint32_t mode, uint64_t now)
{
    int i = find(st, ws, path);
    if (i < 0) {
        assert(st->n < FAKE_ENTRIES);
        i = st->n++;
    }
    (void)snprintf(st->ws[i], sizeof(st->ws[i]), "%s", ws);
    store_entry_row(&st->e[i], path, type, hash, (int64_t)size, mode, (int64_t)now);
}

static void
drop(struct fake_state *st, int i)
{
    st->n--;
    if (i != st->n) {
        memcpy(st->ws[i], st->ws[st->n], sizeof(st->ws[i]));
        st->e[i] = st->e[st->n];
    }
}

static bool
below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strcmp(dir, ".") || (!strncmp(path, dir, n) && path[n] == '/');
}

/* --- transactions --- */

static int
fk_begin(struct store *s, enum store_tx kind, struct err *err)
{
    struct fake *f = F(s);
    assert(!f->in_tx);
    int r = hit(f, kind == STORE_TX_READ ? "begin-read" : "begin", NULL, err);
    if (r < 0)
        return r;
    f->saved = f->st;
    f->in_tx = true;
    return 0;
}

static int
fk_commit(struct store *s, struct err *err)
{
    struct fake *f = F(s);
    assert(f->in_tx);
    int r = hit(f, "commit", NULL, err);
    if (r < 0)
        return r; /* still open: the runner rolls it back */
    f->in_tx = false;
    return 0;
}

static void
fk_rollback(struct store *s)
{
    struct fake *f = F(s);
    if (!f->in_tx)
        return;
    logf_(f, "rollback", NULL);
    f->st = f->saved;
    f->in_tx = false;
}

static bool
fk_retry(struct store *s)
{
    return F(s)->retry;
}

/* --- workspaces --- */

static int
fk_ws_insert(struct store *s, const struct store_ws *w, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "ws_insert", w->id, err);
    if (r < 0)
        return r;
    if (ws_exists(&f->st, w->id))
        return err_set(err, EEXIST, "fake: duplicate key");
    assert(f->st.nws < FAKE_WS);
    (void)snprintf(f->st.wss[f->st.nws++], sizeof(f->st.wss[0]), "%s", w->id);
    return 0;
}

static int
fk_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "ws_get", id, err);
    if (r < 0 || !ws_exists(&f->st, id))
        return r;
    store_ws_row(ret, id, 1, "base", 0, 0, 0, 0);
    return 1;
}

static int
fk_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "ws_list", NULL, err);
    for (int i = 0; r >= 0 && i < f->st.nws; i++) {
        struct store_ws w;
        store_ws_row(&w, f->st.wss[i], 1, "base", 0, 0, 0, 0);
        r = fn(&w, ud);
    }
    return r;
}

static int
fk_ws_delete(struct store *s, const char *id, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "ws_delete", id, err);
    if (r < 0)
        return r;
    for (int i = 0; i < f->st.nws; i++) {
        if (strcmp(f->st.wss[i], id) != 0)
            continue;
        memcpy(f->st.wss[i], f->st.wss[--f->st.nws], sizeof(f->st.wss[0]));
        for (int j = f->st.n - 1; j >= 0; j--)
            if (!strcmp(f->st.ws[j], id))
                drop(&f->st, j);
        return 1;
    }
    return 0;
}

static int
fk_ws_check(struct store *s, const char *id, bool lock, struct err *err)
{
    struct fake *f = F(s);
    assert(!lock || f->in_tx);
    int r = hit(f, lock ? "ws_check+lock" : "ws_check", NULL, err);
    if (r < 0)
        return r;
    return ws_exists(&f->st, id);
}

static int
fk_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "usage", NULL, err);
    for (int i = 0; r >= 0 && i < f->st.n; i++) {
        if (strcmp(f->st.ws[i], ws) != 0)
            continue;
        if (f->st.e[i].type == STORE_FILE) {
            ret->files++;
            ret->bytes += f->st.e[i].size;
        } else {
            ret->dirs++;
        }
    }
    return r;
}

/* --- entries --- */

static int
fk_get_entry(struct store *s, const char *ws, const char *path, struct store_entry *ret,
             struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "get", path, err);
    if (r < 0)
        return r;
    int i = find(&f->st, ws, path);
    if (i < 0)
        return 0;
    *ret = f->st.e[i];
    return 1;
}

static int
fk_insert_dir(struct store *s, const char *ws, const char *path, const char *parent,
              const char *name, uint64_t now, struct err *err)
{
    struct fake *f = F(s);
    char want[PATH_MAX_LEN + 2];
    assert(f->in_tx);
    int r = hit(f, "mkdir", path, err);
    if (r < 0)
        return r;
    parent_of(path, want, sizeof(want));
    assert(!strcmp(parent, want));
    assert(!strcmp(name, strrchr(path, '/') ? strrchr(path, '/') + 1 : path));
    if (find(&f->st, ws, path) >= 0)
        return err_set(err, EEXIST, "fake: '%s' is there", path);
    assert(parent_ok(&f->st, ws, path));
    put(&f->st, ws, path, STORE_DIR, NULL, 0, 0755, now);
    return 0;
}

static int
fk_upsert_file(struct store *s, const char *ws, const char *path, const char *parent,
               const char *name, const char *hash, uint64_t size, uint32_t mode, uint64_t now,
               struct err *err)
{
    struct fake *f = F(s);
    (void)parent;
    (void)name;
    assert(f->in_tx);
    int r = hit(f, "put", path, err);
    if (r < 0)
        return r;
    assert(parent_ok(&f->st, ws, path));
    put(&f->st, ws, path, STORE_FILE, hash, size, mode, now);
    return 0;
}

static int
fk_delete_entry(struct store *s, const char *ws, const char *path, struct err *err)
{
    struct fake *f = F(s);
    assert(f->in_tx);
    int r = hit(f, "del", path, err);
    if (r < 0)
        return r;
    int i = find(&f->st, ws, path);
    if (i >= 0)
        drop(&f->st, i);
    return 0;
}

static int
fk_delete_tree(struct store *s, const char *ws, const char *path, struct err *err)
{
    struct fake *f = F(s);
    assert(f->in_tx);
    int r = hit(f, "deltree", path, err);
    for (int i = f->st.n - 1; r >= 0 && i >= 0; i--)
        if (!strcmp(f->st.ws[i], ws) &&
            (!strcmp(f->st.e[i].path, path) || below(f->st.e[i].path, path)))
            drop(&f->st, i);
    return r;
}

static int
fk_move_entry(struct store *s, const char *ws, const char *from, const char *to, const char *parent,
              const char *name, uint64_t now, struct err *err)
{
    struct fake *f = F(s);
    (void)parent;
    (void)name;
    assert(f->in_tx);
    int r = hit(f, "move", from, err);
    if (r < 0)
        return r;
    int i = find(&f->st, ws, from);
    assert(i >= 0 && find(&f->st, ws, to) < 0);
    (void)snprintf(f->st.e[i].path, sizeof(f->st.e[i].path), "%s", to);
    f->st.e[i].mtime_ms = now;
    return 0;
}

static int
fk_move_below(struct store *s, const char *ws, const char *from, const char *to, struct err *err)
{
    struct fake *f = F(s);
    size_t n = strlen(from);
    assert(f->in_tx);
    int r = hit(f, "movebelow", from, err);
    for (int i = 0; r >= 0 && i < f->st.n; i++) {
        if (strcmp(f->st.ws[i], ws) != 0 || !below(f->st.e[i].path, from))
            continue;
        char p[PATH_MAX_LEN + 2];
        (void)snprintf(p, sizeof(p), "%s%s", to, f->st.e[i].path + n);
        (void)snprintf(f->st.e[i].path, sizeof(f->st.e[i].path), "%s", p);
    }
    return r;
}

static int
by_path(const void *a, const void *b)
{
    return strcmp(((const struct store_entry *)a)->path, ((const struct store_entry *)b)->path);
}

/* Entries of ws below dir (children only, or all), sorted by path: for
 * the children of one directory that is also the order of their names. */
static int
each(struct fake *f, const char *ws, const char *dir, bool children, store_entry_fn fn, void *ud)
{
    static struct store_entry out[FAKE_ENTRIES];
    char parent[PATH_MAX_LEN + 2];
    int n = 0, r = 0;
    for (int i = 0; i < f->st.n; i++) {
        if (strcmp(f->st.ws[i], ws) != 0 || !below(f->st.e[i].path, dir))
            continue;
        parent_of(f->st.e[i].path, parent, sizeof(parent));
        if (children && strcmp(parent, dir) != 0)
            continue;
        out[n++] = f->st.e[i];
    }
    qsort(out, (size_t)n, sizeof(out[0]), by_path);
    for (int i = 0; r >= 0 && i < n; i++)
        r = fn(&out[i], ud);
    return r;
}

static int
fk_children(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
            struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "children", dir, err);
    return r < 0 ? r : each(f, ws, dir, true, fn, ud);
}

static int
fk_below(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
         struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "below", dir, err);
    return r < 0 ? r : each(f, ws, dir, false, fn, ud);
}

/* --- blobs --- */

static bool
blob_there(const struct fake_state *st, const char *hash)
{
    for (int i = 0; i < st->nblobs; i++)
        if (!strcmp(st->blobs[i], hash))
            return true;
    return false;
}

static void
blob_add(struct fake_state *st, const char *hash)
{
    if (blob_there(st, hash))
        return;
    assert(st->nblobs < FAKE_BLOBS);
    (void)snprintf(st->blobs[st->nblobs++], sizeof(st->blobs[0]), "%s", hash);
}

static int
fk_pin(struct store *s, const char *hash, int64_t *ret_id, struct err *err)
{
    struct fake *f = F(s);
    (void)hash;
    assert(!f->in_tx);
    int r = hit(f, "pin", NULL, err);
    if (r < 0)
        return r;
    assert(f->st.npins < FAKE_PINS);
    *ret_id = ++f->next_pin;
    f->st.pins[f->st.npins++] = *ret_id;
    return 0;
}

static int
fk_unpin(struct store *s, int64_t id, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "unpin", NULL, err);
    if (r < 0)
        return r;
    for (int i = 0; i < f->st.npins; i++)
        if (f->st.pins[i] == id) {
            f->st.pins[i] = f->st.pins[--f->st.npins];
            break;
        }
    return 0;
}

static int
fk_blob_hold(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    struct fake *f = F(s);
    (void)fd;
    (void)size;
    assert(f->in_tx);
    int r = hit(f, "hold", NULL, err);
    if (r < 0)
        return r;
    blob_add(&f->st, hash);
    return 0;
}

static int
fk_blob_read(struct store *s, const struct store_entry *e, int *ret_fd, struct err *err)
{
    struct fake *f = F(s);
    (void)e;
    assert(f->in_tx);
    int r = hit(f, "read", NULL, err);
    if (r < 0)
        return r;
    int fd = memfd_create("fake-blob", MFD_CLOEXEC);
    assert(fd >= 0);
    *ret_fd = fd;
    return 0;
}

static int
fk_blob_known(struct store *s, const char *hash, struct err *err)
{
    struct fake *f = F(s);
    assert(!f->in_tx);
    int r = hit(f, "known", NULL, err);
    return r < 0 ? r : blob_there(&f->st, hash);
}

static int
fk_blob_upload(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    struct fake *f = F(s);
    (void)fd;
    (void)size;
    assert(f->in_tx);
    int r = hit(f, "upload", NULL, err);
    if (r < 0)
        return r;
    blob_add(&f->st, hash);
    return 0;
}

/* --- GC --- */

static int
fk_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from, bool *ret_held,
         struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, from ? "lease-from" : "lease", from, err);
    if (r < 0)
        return r;
    bool ok = from ? !strcmp(f->st.holder, from)
                   : f->st.expires_ms < f->clock_ms || !strcmp(f->st.holder, holder);
    if (ok) {
        (void)snprintf(f->st.holder, sizeof(f->st.holder), "%s", holder);
        f->st.expires_ms = f->clock_ms + lease_ms;
    }
    *ret_held = ok;
    return 0;
}

static int
fk_lease_holder(struct store *s, char *buf, size_t n, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "holder", NULL, err);
    if (r >= 0)
        (void)snprintf(buf, n, "%s", f->st.holder);
    return r;
}

static int
fk_lease_release(struct store *s, const char *holder, struct err *err)
{
    struct fake *f = F(s);
    int r = hit(f, "release", NULL, err);
    if (r >= 0 && !strcmp(f->st.holder, holder)) {
        f->st.holder[0] = '\0';
        f->st.expires_ms = 0;
    }
    return r;
}

static int
fk_collect(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
           struct err *err)
{
    struct fake *f = F(s);
    (void)holder;
    (void)lease_ms;
    int r = hit(f, "collect", NULL, err);
    if (r >= 0) {
        f->collects++;
        ret->blobs_seen = (uint64_t)f->st.nblobs;
    }
    return r;
}

static int
fk_check(struct store *s, struct store_check_report *ret, struct err *err)
{
    (void)ret;
    return hit(F(s), "check", NULL, err);
}

static void
fk_close(struct store *s)
{
    (void)s;
}

#define FAKE_OPS                                                                                 \
    .kind = "fake", .close = fk_close, .tx_begin = fk_begin, .tx_commit = fk_commit,             \
    .tx_rollback = fk_rollback, .tx_retry = fk_retry, .ws_insert = fk_ws_insert,                 \
    .ws_get = fk_ws_get, .ws_list = fk_ws_list, .ws_delete = fk_ws_delete,                       \
    .ws_check = fk_ws_check, .usage = fk_usage, .get_entry = fk_get_entry,                       \
    .insert_dir = fk_insert_dir, .upsert_file = fk_upsert_file, .delete_entry = fk_delete_entry, \
    .delete_tree = fk_delete_tree, .move_entry = fk_move_entry, .move_below = fk_move_below,     \
    .children = fk_children, .below = fk_below, .pin = fk_pin, .unpin = fk_unpin,                \
    .blob_hold = fk_blob_hold, .blob_read = fk_blob_read, .lease = fk_lease,                     \
    .lease_holder = fk_lease_holder, .lease_release = fk_lease_release, .collect = fk_collect,   \
    .check = fk_check

static const struct store_ops fake_ops = {FAKE_OPS};
static const struct store_ops fake_upload_ops = {
        FAKE_OPS,
        .blob_known = fk_blob_known,
        .blob_upload = fk_blob_upload,
};

struct fake *
fake_new(bool upload_first)
{
    struct fake *f = calloc(1, sizeof(*f));
    assert(f);
    f->base.ops = upload_first ? &fake_upload_ops : &fake_ops;
    /* Where store_write() stages its data. */
    f->base.tmp_fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert(f->base.tmp_fd >= 0);
    f->clock_ms = 1000000;
    return f;
}

void
fake_free(struct fake *f)
{
    if (f)
        close(f->base.tmp_fd);
    free(f);
}

void
fake_add_ws(struct fake *f, const char *ws)
{
    assert(f->st.nws < FAKE_WS);
    (void)snprintf(f->st.wss[f->st.nws++], sizeof(f->st.wss[0]), "%s", ws);
}

void
fake_add(struct fake *f, const char *ws, const char *path, enum store_type type, const char *hash)
{
    assert(parent_ok(&f->st, ws, path));
    put(&f->st, ws, path, type, hash, hash ? 1 : 0, type == STORE_DIR ? 0755 : 0644, 1);
}

const struct store_entry *
fake_find(struct fake *f, const char *ws, const char *path)
{
    int i = find(&f->st, ws, path);
    return i < 0 ? NULL : &f->st.e[i];
}

void
fake_log_clear(struct fake *f)
{
    f->log[0] = '\0';
}
