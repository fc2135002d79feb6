/*
 * store-pg-tree.c - the PostgreSQL store's workspaces, entries and blobs:
 * the statements behind tree.c's operations, one primitive each (their
 * contracts are in store-internal.h; why a write cannot lose its blob to
 * GC is at the top of store-pg.c). A blob is its row in blobs and its
 * content in STORE_CHUNK rows of blob_chunks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store-pg-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"

/* --- rows --- */

static void
row_entry(const PGresult *res, int row, struct store_entry *e)
{
    store_entry_row(e, PQgetvalue(res, row, 0), r_int(res, row, 1), PQgetvalue(res, row, 2),
                    r_int(res, row, 3), r_int(res, row, 4), r_int(res, row, 5));
}

static void
row_ws(const PGresult *res, int row, struct store_ws *w)
{
    store_ws_row(w, PQgetvalue(res, row, 0), r_int(res, row, 1), PQgetvalue(res, row, 2),
                 r_int(res, row, 3), r_int(res, row, 4), r_int(res, row, 5), r_int(res, row, 6));
}

/* --- workspaces --- */

int
store_pg_ws_insert(struct store *s, const struct store_ws *w, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, w->id);
    p_int(&p, (int64_t)(w->created_ms ? w->created_ms : store_now_ms()));
    p_text(&p, w->template_name[0] ? w->template_name : "base");
    p_int(&p, w->cpu_millis);
    p_int(&p, (int64_t)w->memory_bytes);
    p_int(&p, w->pids);
    p_int(&p, (int64_t)w->disk_bytes);
    return store_pg_run(
            PG(s), "create workspace",
            "INSERT INTO workspaces (id, created_ms, template, cpu_millis, memory_bytes, pids,"
            " disk_bytes) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &p, NULL, err); /* -EEXIST */
}

int
store_pg_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, id);
    int r = store_pg_run(PG(s), "lookup workspace",
                         "SELECT " STORE_WS_COLS " FROM workspaces WHERE id = $1", &p, &res, err);
    if (r < 0)
        return r;
    if (PQntuples(res) == 0)
        return 0;
    row_ws(res, 0, ret);
    return 1;
}

int
store_pg_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err)
{
    struct pg *q = PG(s);
    struct store_ws w;
    int64_t after_ms = -1;
    char after_id[sizeof(w.id)] = "";

    /* Page by page (keyset), so memory stays bounded and fn may use the
     * store meanwhile. */
    for (;;) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_int(&p, after_ms);
        p_text(&p, after_id);
        p_int(&p, PAGE_ROWS);
        int r = store_pg_run(q, "list workspaces",
                             "SELECT " STORE_WS_COLS
                             " FROM workspaces WHERE (created_ms, id) > ($1, $2)"
                             " ORDER BY created_ms, id LIMIT $3",
                             &p, &res, err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            row_ws(res, i, &w);
            r = fn(&w, ud);
            if (r < 0)
                return r;
        }
        if (n < PAGE_ROWS)
            return 0;
        after_ms = (int64_t)w.created_ms;
        memcpy(after_id, w.id, sizeof(after_id));
    }
}

int
store_pg_ws_delete(struct store *s, const char *id, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, id);
    int r = store_pg_run(PG(s), "delete workspace", "DELETE FROM workspaces WHERE id = $1", &p,
                         &res, err);
    if (r < 0)
        return r;
    return store_pg_affected(res) > 0;
}

/* With lock, FOR NO KEY UPDATE: it conflicts with itself and with deleting
 * the workspace, not with the FOR KEY SHARE that inserting entries takes. */
int
store_pg_ws_check(struct store *s, const char *ws, bool lock, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, ws);
    int r = store_pg_run(PG(s), "lookup workspace",
                         lock ? "SELECT 1 FROM workspaces WHERE id = $1 FOR NO KEY UPDATE"
                              : "SELECT 1 FROM workspaces WHERE id = $1",
                         &p, &res, err);
    if (r < 0)
        return r;
    return PQntuples(res) > 0;
}

int
store_pg_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, ws);
    int r = store_pg_run(PG(s), "usage",
                         "SELECT COALESCE(SUM(size), 0)::bigint, count(*) FILTER (WHERE type = 1),"
                         " count(*) FILTER (WHERE type = 2) FROM entries WHERE ws = $1",
                         &p, &res, err);
    if (r < 0)
        return r;
    ret->bytes = (uint64_t)r_int(res, 0, 0);
    ret->files = (uint64_t)r_int(res, 0, 1);
    ret->dirs = (uint64_t)r_int(res, 0, 2);
    return 0;
}

/* --- entries --- */

int
store_pg_get_entry(struct store *s, const char *ws, const char *path, struct store_entry *e,
                   struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, path);
    int r = store_pg_run(PG(s), "lookup",
                         "SELECT " STORE_ENTRY_COLS " FROM entries WHERE ws = $1 AND path = $2", &p,
                         &res, err);
    if (r < 0)
        return r;
    if (PQntuples(res) == 0)
        return 0;
    row_entry(res, 0, e);
    return 1;
}

int
store_pg_insert_dir(struct store *s, const char *ws, const char *path, const char *parent,
                    const char *name, uint64_t now, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, path);
    p_path(&p, parent);
    p_path(&p, name);
    p_int(&p, (int64_t)now);
    return store_pg_run(
            PG(s), "insert directory",
            "INSERT INTO entries (ws, path, parent, name, type, hash, size, mode, mtime_ms)"
            " VALUES ($1, $2, $3, $4, 2, NULL, 0, 493, $5)",
            &p, NULL, err);
}

int
store_pg_upsert_file(struct store *s, const char *ws, const char *path, const char *parent,
                     const char *name, const char *hash, uint64_t size, uint32_t mode, uint64_t now,
                     struct err *err)
{
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, path);
    p_path(&p, parent);
    p_path(&p, name);
    p_text(&p, hash);
    p_int(&p, (int64_t)size);
    p_int(&p, mode);
    p_int(&p, (int64_t)now);
    return store_pg_run(
            PG(s), "write entry",
            "INSERT INTO entries (ws, path, parent, name, type, hash, size, mode, mtime_ms)"
            " VALUES ($1, $2, $3, $4, 1, $5, $6, $7::integer, $8)"
            " ON CONFLICT (ws, path) DO UPDATE SET hash = excluded.hash,"
            " size = excluded.size, mode = excluded.mode, mtime_ms = excluded.mtime_ms",
            &p, NULL, err);
}

int
store_pg_delete_entry(struct store *s, const char *ws, const char *path, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, path);
    return store_pg_run(PG(s), "delete", "DELETE FROM entries WHERE ws = $1 AND path = $2", &p,
                        NULL, err);
}

/* Binds the range of paths strictly below dir (store_range_below()). */
static void
p_below(struct pgp *p, const char *dir, char *lo, char *hi)
{
    store_range_below(dir, lo, hi);
    p_path(p, lo);
    p_path(p, hi);
}

int
store_pg_delete_tree(struct store *s, const char *ws, const char *path, struct err *err)
{
    char lo[STORE_RANGE_MAX], hi[STORE_RANGE_MAX];
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, path);
    p_below(&p, path, lo, hi);
    return store_pg_run(
            PG(s), "remove tree",
            "DELETE FROM entries WHERE ws = $1 AND (path = $2 OR (path > $3 AND path < $4))", &p,
            NULL, err);
}

int
store_pg_move_entry(struct store *s, const char *ws, const char *from, const char *to,
                    const char *parent, const char *name, uint64_t now, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, ws);
    p_path(&p, from);
    p_path(&p, to);
    p_path(&p, parent);
    p_path(&p, name);
    p_int(&p, (int64_t)now);
    return store_pg_run(PG(s), "rename",
                        "UPDATE entries SET path = $3, parent = $4, name = $5, mtime_ms = $6"
                        " WHERE ws = $1 AND path = $2",
                        &p, NULL, err);
}

int
store_pg_move_below(struct store *s, const char *ws, const char *from, const char *to,
                    struct err *err)
{
    char lo[STORE_RANGE_MAX], hi[STORE_RANGE_MAX];
    struct pgp t = {0};
    p_text(&t, ws);
    p_below(&t, from, lo, hi);
    p_path(&t, to);
    p_int(&t, (int64_t)strlen(from) + 1);
    return store_pg_run(PG(s), "rename tree",
                        "UPDATE entries SET path = $4 || substr(path, $5::integer),"
                        " parent = $4 || substr(parent, $5::integer)"
                        " WHERE ws = $1 AND path > $2 AND path < $3",
                        &t, NULL, err);
}

int
store_pg_children(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                  struct err *err)
{
    struct pg *q = PG(s);
    struct store_entry e;
    char after[PATH_MAX_LEN + 2] = "";
    for (;;) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, ws);
        p_path(&p, dir);
        p_path(&p, after);
        p_int(&p, PAGE_ROWS);
        int r = store_pg_run(q, "list",
                             "SELECT " STORE_ENTRY_COLS
                             " FROM entries WHERE ws = $1 AND parent = $2 AND name > $3"
                             " ORDER BY name LIMIT $4",
                             &p, &res, err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            row_entry(res, i, &e);
            r = fn(&e, ud);
            if (r < 0)
                return r;
        }
        if (n < PAGE_ROWS)
            return 0;
        const char *slash = strrchr(e.path, '/');
        (void)snprintf(after, sizeof(after), "%s", slash ? slash + 1 : e.path);
    }
}

int
store_pg_below(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
               struct err *err)
{
    struct pg *q = PG(s);
    struct store_entry e;
    char lo[STORE_RANGE_MAX] = "", hi[STORE_RANGE_MAX] = "";
    bool root = !strcmp(dir, ".");
    if (!root)
        store_range_below(dir, lo, hi);
    /* lo moves up to the last path seen, page by page. */
    for (;;) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, ws);
        p_path(&p, lo);
        if (!root)
            p_path(&p, hi);
        p_int(&p, PAGE_ROWS);
        int r = store_pg_run(
                q, "walk",
                root ? "SELECT " STORE_ENTRY_COLS " FROM entries WHERE ws = $1 AND path > $2"
                       " ORDER BY path LIMIT $3"
                     : "SELECT " STORE_ENTRY_COLS " FROM entries WHERE ws = $1 AND path > $2"
                       " AND path < $3 ORDER BY path LIMIT $4",
                &p, &res, err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            row_entry(res, i, &e);
            r = fn(&e, ud);
            if (r < 0)
                return r;
        }
        if (n < PAGE_ROWS)
            return 0;
        (void)snprintf(lo, sizeof(lo), "%s", e.path);
    }
}

/* --- blobs --- */

static int
pread_exact(int fd, void *buf, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ENODATA;
        done += (size_t)k;
    }
    return 0;
}

/* Inserts the blob row and, when it was not there, its chunks read from fd
 * one STORE_CHUNK at a time. 1 when this transaction inserted it, 0 when a
 * committed row was there already (a concurrent insert is waited for). */
static int
blob_insert(struct pg *q, int fd, const char *hash, uint64_t size, struct err *err)
{
    _cleanup_free_ char *b = NULL;
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    int r;

    p_text(&p, hash);
    p_int(&p, (int64_t)size);
    p_int(&p, (int64_t)store_now_ms());
    r = store_pg_run(q, "insert blob",
                     "INSERT INTO blobs (hash, size, created_ms) VALUES ($1, $2, $3)"
                     " ON CONFLICT (hash) DO NOTHING",
                     &p, &res, err);
    if (r < 0)
        return r;
    if (store_pg_affected(res) == 0)
        return 0;
    if (size > 0 && !(b = malloc(MIN(size, (uint64_t)STORE_CHUNK))))
        return err_set(err, ENOMEM, "store: out of memory");
    for (uint64_t off = 0, seq = 0; off < size; off += STORE_CHUNK, seq++) {
        size_t n = (size_t)MIN((uint64_t)STORE_CHUNK, size - off);
        r = pread_exact(fd, b, n, off);
        if (r == -ENODATA)
            return err_set(err, EIO, "store: the staged data is shorter than %llu bytes",
                           (unsigned long long)size);
        if (r < 0)
            return err_setx(err, -r, "store: cannot read the staged data");
        struct pgp c = {0};
        p_text(&c, hash);
        p_int(&c, (int64_t)seq);
        p_bytes(&c, b, n);
        r = store_pg_run(q, "store blob chunk",
                         "INSERT INTO blob_chunks (hash, seq, data) VALUES ($1, $2::integer, $3)",
                         &c, NULL, err);
        if (r < 0)
            return r;
    }
    return 1;
}

/* Makes sure the blob row exists and stays until this transaction ends:
 * locks it FOR KEY SHARE, or inserts it with its chunks (see the top of the
 * file for why this defeats a concurrent GC). */
int
store_pg_blob_hold(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    struct pg *q = PG(s);
    for (int i = 0; i < 3; i++) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, hash);
        int r = store_pg_run(q, "lock blob", "SELECT 1 FROM blobs WHERE hash = $1 FOR KEY SHARE",
                             &p, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 1)
            return 0;
        /* Gone (collected) or never there: bring it (back). 0 means another
         * writer committed it meanwhile: lock that one. */
        r = blob_insert(q, fd, hash, size, err);
        if (r != 0)
            return r < 0 ? r : 0;
    }
    return err_set(err, EBUSY, "store: blob %.16s... keeps disappearing", hash);
}

int
store_pg_blob_known(struct store *s, const char *hash, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, hash);
    int r = store_pg_run(PG(s), "lookup blob", "SELECT 1 FROM blobs WHERE hash = $1", &p, &res,
                         err);
    if (r < 0)
        return r;
    return PQntuples(res) > 0;
}

/* A new blob in its own transaction, before the tree's: see the top of the
 * file. */
int
store_pg_blob_upload(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    int r = blob_insert(PG(s), fd, hash, size, err);
    return r < 0 ? r : 0;
}

/* --- pins --- */

/* Pins hash for STORE_PIN_MS; the pin's commit does not wait for the disk. */
int
store_pg_pin(struct store *s, const char *hash, int64_t *ret_id, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, hash);
    p_int(&p, STORE_PIN_MS);
    int r = store_pg_run(PG(s), "pin blob",
                         "INSERT INTO pins (hash, expires_ms) SELECT $1, " NOW_MS
                         " + $2 FROM " ASYNC_COMMIT " RETURNING id",
                         &p, &res, err);
    if (r < 0)
        return r;
    if (PQntuples(res) != 1)
        return err_set(err, EIO, "store: pin blob: no id returned");
    *ret_id = r_int(res, 0, 0);
    return 0;
}

/* Inside a transaction, part of it (ASYNC_COMMIT there would make the
 * whole transaction's commit asynchronous); outside one, a statement whose
 * commit does not wait for the disk. */
int
store_pg_unpin(struct store *s, int64_t id, struct err *err)
{
    struct pg *q = PG(s);
    struct pgp p = {0};
    p_int(&p, id);
    if (q->in_tx)
        return store_pg_run(q, "unpin blob", "DELETE FROM pins WHERE id = $1", &p, NULL, err);
    return store_pg_run(q, "unpin blob", "DELETE FROM pins USING " ASYNC_COMMIT " WHERE id = $1",
                        &p, NULL, err);
}

/* --- reads --- */

/* Copies the chunks of e's blob into fd, in order, hashing them on the
 * way: damaged content (a chunk missing, of the wrong length, or bytes that
 * do not hash to the blob's name) is -EBADMSG before anyone sees a byte. */
static int
copy_chunks(struct pg *q, const struct store_entry *e, int fd, struct err *err)
{
    struct store_verify v;
    uint64_t off = 0;
    int r = store_verify_begin(&v, e);
    if (r < 0)
        return err_set(err, -r, "store: out of memory");
    for (int64_t seq = 0; off < e->size; seq++) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, e->hash);
        p_int(&p, seq);
        r = store_pg_run(q, "read blob chunk",
                         "SELECT data FROM blob_chunks WHERE hash = $1 AND seq = $2::integer", &p,
                         &res, err);
        if (r < 0)
            goto out;
        size_t want = (size_t)MIN((uint64_t)STORE_CHUNK, e->size - off);
        if (PQntuples(res) != 1 || (size_t)PQgetlength(res, 0, 0) != want) {
            store_note_damaged();
            r = err_set(err, EBADMSG, "blob %.16s... is damaged in the database (chunk %lld)",
                        e->hash, (long long)seq);
            goto out;
        }
        store_verify_update(&v, PQgetvalue(res, 0, 0), want);
        r = write_full(fd, PQgetvalue(res, 0, 0), want);
        if (r == -ENOSPC || r == -EDQUOT) {
            r = err_set(err, ENOSPC, "no space left to stage the file for reading");
            goto out;
        }
        if (r < 0) {
            r = err_setx(err, -r, "cannot write the staging file");
            goto out;
        }
        off += want;
    }
    r = store_verify_end(&v, err);
out:
    store_verify_done(&v);
    return r;
}

/* Copies e's content into an unnamed file in the staging directory, inside
 * the caller's read transaction (one snapshot for the entry and every
 * chunk), checked on the way. */
int
store_pg_blob_read(struct store *s, const struct store_entry *e, int *ret_fd, struct err *err)
{
    struct pg *q = PG(s);
    _cleanup_close_ int fd = openat(q->base.tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_setx(err, errno, "cannot create a staging file");
    int r = copy_chunks(q, e, fd, err);
    if (r < 0)
        return r;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return err_setx(err, errno, "cannot rewind the staging file");
    *ret_fd = TAKE_FD(fd);
    return 0;
}
