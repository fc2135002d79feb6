/*
 * store-sqlite-tree.c - the SQLite store's workspaces, entries and blobs:
 * the statements behind tree.c's operations, one primitive each (their
 * contracts are in store-internal.h). A blob is its row in blobs and its
 * file in blobs/ (blob.c); a write places both under the write lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store-sqlite-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"

/* --- rows --- */

static const char *
col_text(sqlite3_stmt *st, int col)
{
    return (const char *)sqlite3_column_text(st, col);
}

static void
row_entry(sqlite3_stmt *st, struct store_entry *e)
{
    store_entry_row(e, col_text(st, 0), sqlite3_column_int64(st, 1), col_text(st, 2),
                    sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4),
                    sqlite3_column_int64(st, 5));
}

static void
row_ws(sqlite3_stmt *st, struct store_ws *w)
{
    store_ws_row(w, col_text(st, 0), sqlite3_column_int64(st, 1), col_text(st, 2),
                 sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4),
                 sqlite3_column_int64(st, 5), sqlite3_column_int64(st, 6));
}

/* Steps st to its end, handing each row to fn as an entry. */
static int
each_entry(struct sq *q, sqlite3_stmt *st, store_entry_fn fn, void *ud, const char *what,
           struct err *err)
{
    struct store_entry e;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        row_entry(st, &e);
        int r = fn(&e, ud);
        if (r < 0)
            return r;
    }
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, what);
}

/* --- workspaces --- */

int
store_sqlite_ws_insert(struct store *s, const struct store_ws *w, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "INSERT INTO workspaces (id, created_ms, template, cpu_millis, memory_bytes, pids,"
                 " disk_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, w->id);
    (void)sqlite3_bind_int64(st, 2,
                             (sqlite3_int64)(w->created_ms ? w->created_ms : store_now_ms()));
    bind_text(st, 3, w->template_name[0] ? w->template_name : "base");
    (void)sqlite3_bind_int64(st, 4, w->cpu_millis);
    (void)sqlite3_bind_int64(st, 5, (sqlite3_int64)w->memory_bytes);
    (void)sqlite3_bind_int64(st, 6, w->pids);
    (void)sqlite3_bind_int64(st, 7, (sqlite3_int64)w->disk_bytes);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "create workspace"); /* -EEXIST */
}

int
store_sqlite_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "SELECT " STORE_WS_COLS " FROM workspaces WHERE id = ?1", &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_ws(st, ret);
        return 1;
    }
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "lookup workspace");
}

int
store_sqlite_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "SELECT " STORE_WS_COLS " FROM workspaces ORDER BY created_ms, id", &st, err);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_ws w;
        row_ws(st, &w);
        r = fn(&w, ud);
        if (r < 0)
            return r;
    }
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "list workspaces");
}

int
store_sqlite_ws_delete(struct store *s, const char *id, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "DELETE FROM workspaces WHERE id = ?1", &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "delete workspace");
    return sqlite3_changes(q->db) > 0;
}

/* BEGIN IMMEDIATE made the transaction the store's only writer already:
 * lock asks for nothing more. */
int
store_sqlite_ws_check(struct store *s, const char *ws, bool lock, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    (void)lock;
    int r = prep(q, "SELECT 1 FROM workspaces WHERE id = ?1", &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "lookup");
}

int
store_sqlite_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(
            q,
            "SELECT COALESCE(SUM(size), 0), COALESCE(SUM(type = 1), 0), COALESCE(SUM(type = 2), 0)"
            " FROM entries WHERE ws = ?1",
            &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return sq_fail(q, rc, err, "usage");
    ret->bytes = (uint64_t)sqlite3_column_int64(st, 0);
    ret->files = (uint64_t)sqlite3_column_int64(st, 1);
    ret->dirs = (uint64_t)sqlite3_column_int64(st, 2);
    return 0;
}

/* --- entries --- */

int
store_sqlite_get_entry(struct store *s, const char *ws, const char *path, struct store_entry *e,
                       struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "SELECT " STORE_ENTRY_COLS " FROM entries WHERE ws = ?1 AND path = ?2", &st,
                 err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, path);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_entry(st, e);
        return 1;
    }
    if (rc == SQLITE_DONE)
        return 0;
    return sq_fail(q, rc, err, "lookup");
}

int
store_sqlite_insert_dir(struct store *s, const char *ws, const char *path, const char *parent,
                        const char *name, uint64_t now, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "INSERT INTO entries (ws, path, parent, name, type, hash, size, mode, mtime_ms)"
                 " VALUES (?1, ?2, ?3, ?4, 2, NULL, 0, 493, ?5)",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, path);
    bind_text(st, 3, parent);
    bind_text(st, 4, name);
    (void)sqlite3_bind_int64(st, 5, (sqlite3_int64)now);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "insert directory");
}

int
store_sqlite_upsert_file(struct store *s, const char *ws, const char *path, const char *parent,
                         const char *name, const char *hash, uint64_t size, uint32_t mode,
                         uint64_t now, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "INSERT INTO entries (ws, path, parent, name, type, hash, size, mode, mtime_ms)"
                 " VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8)"
                 " ON CONFLICT (ws, path) DO UPDATE SET hash = excluded.hash,"
                 " size = excluded.size, mode = excluded.mode, mtime_ms = excluded.mtime_ms",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, path);
    bind_text(st, 3, parent);
    bind_text(st, 4, name);
    bind_text(st, 5, hash);
    (void)sqlite3_bind_int64(st, 6, (sqlite3_int64)size);
    (void)sqlite3_bind_int(st, 7, (int)mode);
    (void)sqlite3_bind_int64(st, 8, (sqlite3_int64)now);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "write entry");
}

int
store_sqlite_delete_entry(struct store *s, const char *ws, const char *path, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "DELETE FROM entries WHERE ws = ?1 AND path = ?2", &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, path);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "delete");
}

/* Binds the range of paths strictly below dir (store_range_below()). */
static void
bind_below(sqlite3_stmt *st, int i, const char *dir, char *lo, char *hi)
{
    store_range_below(dir, lo, hi);
    bind_text(st, i, lo);
    bind_text(st, i + 1, hi);
}

int
store_sqlite_delete_tree(struct store *s, const char *ws, const char *path, struct err *err)
{
    struct sq *q = SQ(s);
    char lo[STORE_RANGE_MAX], hi[STORE_RANGE_MAX];
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "DELETE FROM entries WHERE ws = ?1 AND (path = ?4 OR (path > ?2 AND path < ?3))",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_below(st, 2, path, lo, hi);
    bind_text(st, 4, path);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "remove tree");
}

int
store_sqlite_move_entry(struct store *s, const char *ws, const char *from, const char *to,
                        const char *parent, const char *name, uint64_t now, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "UPDATE entries SET path = ?3, parent = ?4, name = ?5, mtime_ms = ?6"
                 " WHERE ws = ?1 AND path = ?2",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, from);
    bind_text(st, 3, to);
    bind_text(st, 4, parent);
    bind_text(st, 5, name);
    (void)sqlite3_bind_int64(st, 6, (sqlite3_int64)now);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "rename");
}

int
store_sqlite_move_below(struct store *s, const char *ws, const char *from, const char *to,
                        struct err *err)
{
    struct sq *q = SQ(s);
    char lo[STORE_RANGE_MAX], hi[STORE_RANGE_MAX];
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    /* substr() counts characters in TEXT and bytes in a BLOB; ?5 is a
     * byte offset, so the old prefix is cut as bytes (a directory named
     * "\xc3\xa9" is one character but two bytes). */
    int r = prep(q,
                 "UPDATE entries SET path = ?4 || CAST(substr(CAST(path AS BLOB), ?5) AS TEXT),"
                 " parent = ?4 || CAST(substr(CAST(parent AS BLOB), ?5) AS TEXT)"
                 " WHERE ws = ?1 AND path > ?2 AND path < ?3",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_below(st, 2, from, lo, hi);
    bind_text(st, 4, to);
    (void)sqlite3_bind_int(st, 5, (int)strlen(from) + 1);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "rename tree");
}

int
store_sqlite_children(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                      struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q,
                 "SELECT " STORE_ENTRY_COLS
                 " FROM entries WHERE ws = ?1 AND parent = ?2 ORDER BY name",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    bind_text(st, 2, dir);
    return each_entry(q, st, fn, ud, "list", err);
}

int
store_sqlite_below(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                   struct err *err)
{
    struct sq *q = SQ(s);
    char lo[STORE_RANGE_MAX], hi[STORE_RANGE_MAX];
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    bool root = !strcmp(dir, ".");
    int r = prep(q,
                 root ? "SELECT " STORE_ENTRY_COLS " FROM entries WHERE ws = ?1 ORDER BY path"
                      : "SELECT " STORE_ENTRY_COLS
                        " FROM entries WHERE ws = ?1 AND path > ?2 AND path < ?3"
                        " ORDER BY path",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, ws);
    if (!root)
        bind_below(st, 2, dir, lo, hi);
    return each_entry(q, st, fn, ud, "walk", err);
}

/* --- blobs --- */

int
store_sqlite_pin(struct store *s, const char *hash, int64_t *ret_id, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    /* A pin matters only while this process runs: it need not be durable. */
    int r = sq_exec(q, "PRAGMA synchronous = NORMAL", err);
    if (r < 0)
        return r;
    r = prep(q, "INSERT INTO pins (hash, expires_ms) VALUES (?1, ?2)", &st, err);
    if (r == 0) {
        bind_text(st, 1, hash);
        (void)sqlite3_bind_int64(st, 2, (sqlite3_int64)(store_now_ms() + STORE_PIN_MS));
        int rc = sqlite3_step(st);
        r = rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "pin blob");
        *ret_id = sqlite3_last_insert_rowid(q->db);
    }
    int r2 = sq_exec(q, "PRAGMA synchronous = FULL", err);
    return r < 0 ? r : r2;
}

/* Best effort wherever it runs: a pin left behind expires. */
int
store_sqlite_unpin(struct store *s, int64_t id, struct err *err)
{
    struct sq *q = SQ(s);
    sqlite3_stmt *st = NULL;
    (void)err;
    if (sqlite3_prepare_v2(q->db, "DELETE FROM pins WHERE rowid = ?1", -1, &st, NULL) ==
        SQLITE_OK) {
        (void)sqlite3_bind_int64(st, 1, id);
        (void)sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return 0;
}

/* Under the write lock: the blob's row and its file, placing the file (see
 * blob_place()) unless the row has a file already, and inserting the row
 * unless it is there. */
int
store_sqlite_blob_hold(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "SELECT 1 FROM blobs WHERE hash = ?1", &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, hash);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "lookup blob");
    bool have_row = rc == SQLITE_ROW;
    if (have_row) {
        /* The row is not proof of the file (a file deleted by hand, a
         * store restored from an incomplete backup). We hold the write
         * lock, so what we see now stays true until commit. */
        _cleanup_close_ int d = blob_dir(q->blobs_fd, hash, false, NULL);
        if (d >= 0 && faccessat(d, hash, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            return 0;
    }
    r = blob_place(q->blobs_fd, fd, hash, err);
    if (r < 0 || have_row)
        return r;
    _cleanup_stmt_ sqlite3_stmt *ins = NULL;
    r = prep(q, "INSERT INTO blobs (hash, size, created_ms) VALUES (?1, ?2, ?3)", &ins, err);
    if (r < 0)
        return r;
    bind_text(ins, 1, hash);
    (void)sqlite3_bind_int64(ins, 2, (sqlite3_int64)size);
    (void)sqlite3_bind_int64(ins, 3, (sqlite3_int64)store_now_ms());
    rc = sqlite3_step(ins);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "insert blob");
}

/* The blob file itself. A short or long file is damaged whatever it
 * holds; say so before the caller has sent anything. The content is the
 * caller's to check on the way (store_verify_*): reading it twice costs
 * too much. */
int
store_sqlite_blob_read(struct store *s, const struct store_entry *e, int *ret_fd, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_close_ int fd = blob_open(q->blobs_fd, e->hash, err);
    if (fd < 0)
        return fd;
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return err_setx(err, errno, "cannot stat blob %.16s...", e->hash);
    if ((uint64_t)sb.st_size != e->size) {
        store_note_damaged();
        return err_set(err, EBADMSG, "blob %.16s... is damaged: %llu bytes where %llu are recorded",
                       e->hash, (unsigned long long)sb.st_size, (unsigned long long)e->size);
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}
