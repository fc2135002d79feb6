/*
 * store-sqlite.c - the embedded FileStore: SQLite (WAL) for metadata, blob
 * files beside it.
 *
 * Layout of the store directory:
 *   store.db          entries, blobs, workspaces, pins, the GC lease
 *   blobs/ab/abcd...  one immutable file per blob, named by its SHA-256
 *   tmp/              staging (O_TMPFILE: unnamed until linked)
 *
 * A write stages and fsyncs its data, pins the hash (so GC leaves the blob
 * alone), then in one BEGIN IMMEDIATE transaction links the staging file
 * into blobs/ unless the blob has a row and a file (replacing a file that
 * has no row, see blob_place()), fsyncs the directory, upserts the rows and
 * drops the pin; COMMIT is durable (synchronous=FULL). GC deletes
 * unreferenced, unpinned blobs' rows in one BEGIN IMMEDIATE transaction,
 * then their files, and blob files without rows, in others: every "this
 * file has no row, so it goes" is decided under the write lock, so a
 * writer and the collector never interleave on one blob.
 *
 * One process at a time: the directory's "lock" file is locked (flock)
 * while any handle of this process has the store open, and holds that
 * process's pid for the error message another process gets.
 *
 * The order of a write's steps and every check on the way are tree.c's;
 * this file supplies the statements (the primitives of store-internal.h),
 * and BEGIN IMMEDIATE makes each write transaction the store's one writer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

struct dirlock;

struct sq {
    struct store base;
    sqlite3 *db;
    int dirfd, blobs_fd;
    struct dirlock *lock;
};

static const char schema[] =
        "CREATE TABLE IF NOT EXISTS workspaces ("
        "  id TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, template TEXT NOT NULL,"
        "  cpu_millis INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, pids INTEGER NOT NULL,"
        "  disk_bytes INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE IF NOT EXISTS blobs ("
        "  hash TEXT PRIMARY KEY, size INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS entries ("
        "  ws TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,"
        "  path TEXT NOT NULL, parent TEXT NOT NULL, name TEXT NOT NULL,"
        "  type INTEGER NOT NULL, hash TEXT REFERENCES blobs(hash),"
        "  size INTEGER NOT NULL, mode INTEGER NOT NULL, mtime_ms INTEGER NOT NULL,"
        "  PRIMARY KEY (ws, path));"
        "CREATE INDEX IF NOT EXISTS entries_parent ON entries(ws, parent, name);"
        "CREATE INDEX IF NOT EXISTS entries_hash ON entries(hash);"
        "CREATE TABLE IF NOT EXISTS pins (hash TEXT NOT NULL, expires_ms INTEGER NOT NULL);"
        "CREATE INDEX IF NOT EXISTS pins_hash ON pins(hash);"
        "CREATE TABLE IF NOT EXISTS gc_lease ("
        "  id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL,"
        "  expires_ms INTEGER NOT NULL);";

/* --- sqlite helpers --- */

static int
sq_errno(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_CONSTRAINT:
        return -EEXIST;
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return -EROFS;
    default:
        return -EIO;
    }
}

static int
sq_fail(struct sq *q, int rc, struct err *err, const char *what)
{
    int r = sq_errno(rc);
    return err_set(err, -r, "store: %s: %s", what, sqlite3_errmsg(q->db));
}

static int
sq_exec(struct sq *q, const char *sql, struct err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(q->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int r = err_set(err, -sq_errno(rc), "store: %s: %s", sql, msg ? msg : "");
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

static void
finalizep(sqlite3_stmt **st)
{
    if (*st)
        sqlite3_finalize(*st);
}
#define _cleanup_stmt_ __attribute__((cleanup(finalizep)))

static int
prep(struct sq *q, const char *sql, sqlite3_stmt **ret, struct err *err)
{
    int rc = sqlite3_prepare_v2(q->db, sql, -1, ret, NULL);
    if (rc != SQLITE_OK)
        return sq_fail(q, rc, err, "prepare");
    return 0;
}

static void
bind_text(sqlite3_stmt *st, int i, const char *s)
{
    (void)sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

static struct sq *
SQ(struct store *s)
{
    return (struct sq *)s;
}

/* --- transactions (store_tx_run() drives them) --- */

/* A writer takes the store's one write lock at once (IMMEDIATE), so no
 * statement inside meets a lock it would not wait for; a reader's snapshot
 * starts with its first read. */
static int
sq_tx_begin(struct store *s, enum store_tx kind, struct err *err)
{
    return sq_exec(SQ(s), kind == STORE_TX_READ ? "BEGIN" : "BEGIN IMMEDIATE", err);
}

static int
sq_tx_commit(struct store *s, struct err *err)
{
    return sq_exec(SQ(s), "COMMIT", err);
}

static void
sq_tx_rollback(struct store *s)
{
    struct sq *q = SQ(s);
    if (!sqlite3_get_autocommit(q->db))
        (void)sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Never: the busy handler has waited up to 30 s for the write lock before
 * SQLITE_BUSY comes back, and with the lock taken at BEGIN no statement
 * can deadlock on it; another attempt would only make that wait longer. */
static bool
sq_tx_retry(struct store *s)
{
    (void)s;
    return false;
}

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

static int
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

/* Stores made before workspaces had disk_bytes get the column (0: the
 * host's default); ALTER is a no-op error when another open added it. */
static int
add_disk_column(struct sq *q, struct err *err)
{
    sqlite3_stmt *st = NULL;
    for (int i = 0; i < 2; i++) {
        if (sqlite3_prepare_v2(q->db, "SELECT disk_bytes FROM workspaces LIMIT 0", -1, &st, NULL) ==
            SQLITE_OK) {
            sqlite3_finalize(st);
            return 0;
        }
        (void)sqlite3_exec(
                q->db, "ALTER TABLE workspaces ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0",
                NULL, NULL, NULL);
    }
    return err_set(err, EIO, "store: cannot add column 'disk_bytes': %s", sqlite3_errmsg(q->db));
}

static int
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

static int
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

static int
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
static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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
static int
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
static int
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
static int
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

/* --- GC --- */

static int
store_sqlite_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
                   bool *ret_held, struct err *err)
{
    struct sq *q = SQ(s);
    uint64_t now = store_now_ms();
    _cleanup_stmt_ sqlite3_stmt *ins = NULL;
    int r = prep(q, "INSERT OR IGNORE INTO gc_lease (id, holder, expires_ms) VALUES (1, '', 0)",
                 &ins, err);
    if (r < 0)
        return r;
    int rc = sqlite3_step(ins);
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "lease");
    /* Compare and swap: free (expired) or already ours; or, taking over
     * from a dead holder, still that holder's. */
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    r = prep(q,
             from ? "UPDATE gc_lease SET holder = ?1, expires_ms = ?2 WHERE id = 1 AND holder = ?4"
                  : "UPDATE gc_lease SET holder = ?1, expires_ms = ?2"
                    " WHERE id = 1 AND (expires_ms < ?3 OR holder = ?1)",
             &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, holder);
    (void)sqlite3_bind_int64(st, 2, (sqlite3_int64)(now + MIN(lease_ms, (uint64_t)INT64_MAX / 2)));
    if (from)
        bind_text(st, 4, from);
    else
        (void)sqlite3_bind_int64(st, 3, (sqlite3_int64)now);
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "lease");
    *ret_held = sqlite3_changes(q->db) == 1;
    return 0;
}

static int
store_sqlite_lease_holder(struct store *s, char *buf, size_t n, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "SELECT holder FROM gc_lease WHERE id = 1", &st, err);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    buf[0] = '\0';
    if (rc == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(st, 0);
        (void)snprintf(buf, n, "%s", h ? h : "");
        return 0;
    }
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "lease");
}

static int
store_sqlite_lease_release(struct store *s, const char *holder, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r = prep(q, "UPDATE gc_lease SET holder = '', expires_ms = 0 WHERE id = 1 AND holder = ?1",
                 &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, holder);
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, rc, err, "release the lease");
}

#define GC_BATCH 256

struct unlink_ctx {
    const struct blob_name *items;
    int n;
    uint64_t min_age_ms;
    bool count;
    struct store_gc_stats *st_out;
};

/* Files unlinked stay unlinked whatever becomes of the transaction, so
 * they are counted as they go (a second run finds them gone). */
static int
unlink_tx(struct store *s, void *ctx, struct err *err)
{
    struct sq *q = SQ(s);
    const struct unlink_ctx *c = ctx;
    _cleanup_stmt_ sqlite3_stmt *sel = NULL;
    uint64_t now = store_now_ms();
    int r = prep(q, "SELECT 1 FROM blobs WHERE hash = ?1", &sel, err);
    if (r < 0)
        return r;
    for (int i = 0; i < c->n; i++) {
        const char *name = c->items[i].name;
        int kind = blob_name_kind(name);
        struct stat sb;
        _cleanup_close_ int d = blob_dir(q->blobs_fd, name, false, NULL);
        if (d < 0 || kind == BLOB_NAME_OTHER || fstatat(d, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (kind == BLOB_NAME_BLOB) {
            uint64_t mtime =
                    (uint64_t)sb.st_mtim.tv_sec * 1000u + (uint64_t)sb.st_mtim.tv_nsec / 1000000u;
            if (c->min_age_ms && (mtime > now || now - mtime < c->min_age_ms))
                continue;
            char hash[STORE_HASH_LEN + 1];
            memcpy(hash, name, STORE_HASH_LEN);
            hash[STORE_HASH_LEN] = '\0';
            (void)sqlite3_reset(sel);
            bind_text(sel, 1, hash);
            int rc = sqlite3_step(sel);
            if (rc == SQLITE_ROW)
                continue; /* referenced again (a writer stored it meanwhile) */
            if (rc != SQLITE_DONE)
                return sq_fail(q, rc, err, "gc lookup");
        }
        if (unlinkat(d, name, 0) < 0)
            continue;
        c->st_out->bytes_freed += (uint64_t)sb.st_size;
        if (kind == BLOB_NAME_BLOB && c->count)
            c->st_out->blobs_deleted++;
    }
    (void)sqlite3_reset(sel);
    return 0;
}

/*
 * Deletes the files among names that have no blobs row, inside one BEGIN
 * IMMEDIATE transaction. Deciding "no row" and unlinking must not be split
 * by a writer: a writer decides "no row, so I place the file and insert
 * the row" under the same lock, so with the lock held here a file without
 * a row is one nobody is writing, and a writer that comes after sees no
 * file. (Checking outside the lock, a writer's uncommitted row is
 * invisible and its freshly placed file gets deleted under it.)
 *
 * min_age_ms: files changed more recently are kept (0 = any age). A
 * writer's temporary ("<hash>.tmp") only exists inside the writer's own
 * transaction, so one seen under the lock was left by a crash: it goes
 * whatever its age. count: whether a deleted blob counts in blobs_deleted
 * (orphans do; blobs whose rows this GC just deleted were counted then).
 */
static int
unlink_unreferenced(struct sq *q, const struct blob_name *items, int n, uint64_t min_age_ms,
                    bool count, struct store_gc_stats *st_out, struct err *err)
{
    struct unlink_ctx c = {items, n, min_age_ms, count, st_out};
    return store_tx_run(&q->base, STORE_TX_WRITE, unlink_tx, &c, err);
}

struct batch_ctx {
    struct blob_name *items;
    int n;
};

/* Collects a batch of candidates (unreferenced, unpinned) and deletes
 * their rows, and expired pins. */
static int
batch_tx(struct store *s, void *ctx, struct err *err)
{
    struct sq *q = SQ(s);
    struct batch_ctx *c = ctx;
    uint64_t now = store_now_ms();
    int r;

    c->n = 0;
    {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = prep(
                q,
                "SELECT hash FROM blobs b"
                " WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.hash = b.hash)"
                " AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.hash = b.hash AND p.expires_ms > ?1)"
                " LIMIT ?2",
                &st, err);
        if (r < 0)
            return r;
        (void)sqlite3_bind_int64(st, 1, (sqlite3_int64)now);
        (void)sqlite3_bind_int(st, 2, GC_BATCH);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && c->n < GC_BATCH) {
            const char *h = (const char *)sqlite3_column_text(st, 0);
            if (h && strlen(h) == STORE_HASH_LEN)
                memcpy(c->items[c->n++].name, h, STORE_HASH_LEN + 1);
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            return sq_fail(q, rc, err, "gc scan");
    }
    for (int i = 0; i < c->n; i++) {
        _cleanup_stmt_ sqlite3_stmt *del = NULL;
        r = prep(q, "DELETE FROM blobs WHERE hash = ?1", &del, err);
        if (r < 0)
            return r;
        bind_text(del, 1, c->items[i].name);
        int rc = sqlite3_step(del);
        if (rc != SQLITE_DONE)
            return sq_fail(q, rc, err, "gc delete");
    }
    _cleanup_stmt_ sqlite3_stmt *del = NULL;
    r = prep(q, "DELETE FROM pins WHERE expires_ms <= ?1", &del, err);
    if (r < 0)
        return r;
    (void)sqlite3_bind_int64(del, 1, (sqlite3_int64)now);
    (void)sqlite3_step(del);
    return 0;
}

static int
gc_batch(struct sq *q, struct store_gc_stats *st_out, bool *ret_more, struct err *err)
{
    _cleanup_free_ struct blob_name *items = calloc(GC_BATCH, sizeof(*items));
    if (!items)
        return err_set(err, ENOMEM, "store: out of memory");
    struct batch_ctx c = {items, 0};
    int r = store_tx_run(&q->base, STORE_TX_WRITE, batch_tx, &c, err);
    if (r < 0)
        return r;
    st_out->blobs_deleted += (uint64_t)c.n;
    st_out->blobs_seen += (uint64_t)c.n;
    *ret_more = c.n == GC_BATCH;
    if (c.n == 0)
        return 0;
    /* Rows first, files after: a crash in between leaves files without
     * rows (orphans, which a later sweep deletes), never a row without its
     * file. The files go under the write lock again, and only if no writer
     * stored the same content meanwhile. */
    return unlink_unreferenced(q, items, c.n, 0, false, st_out, err);
}

struct orphans_ctx {
    struct sq *q;
    struct store_gc_stats *st;
};

static int
orphans_batch(void *ud, const struct blob_name *names, int n, struct err *err)
{
    struct orphans_ctx *c = ud;
    return unlink_unreferenced(c->q, names, n, STORE_ORPHAN_MS, true, c->st, err);
}

/* Blob files with no row (a crash between placing a blob and committing
 * its row, or between GC's two steps) and writers' temporaries left by a
 * crash, GC_BATCH at a time (see unlink_unreferenced()). A blob file
 * changed within STORE_ORPHAN_MS is left for a later run. */
static int
gc_orphans(struct sq *q, struct store_gc_stats *st, struct err *err)
{
    struct orphans_ctx c = {q, st};
    return blob_scan(q->blobs_fd, STORE_ORPHAN_MS, GC_BATCH, orphans_batch, &c, err);
}

static int
store_sqlite_collect(struct store *s, const char *holder, uint64_t lease_ms,
                     struct store_gc_stats *ret, struct err *err)
{
    struct sq *q = SQ(s);
    bool more = true;
    (void)holder;
    (void)lease_ms;
    while (more) {
        int r = gc_batch(q, ret, &more, err);
        if (r < 0)
            return r;
    }
    return gc_orphans(q, ret, err);
}

/* --- check --- */

static int
store_sqlite_check(struct store *s, struct store_check_report *rep, struct err *err)
{
    struct sq *q = SQ(s);
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    int r, rc;

    /* Every file row has its blob. */
    r = prep(q,
             "SELECT e.ws, e.path, e.hash, b.hash FROM entries e LEFT JOIN blobs b"
             " ON b.hash = e.hash WHERE e.type = 1",
             &st, err);
    if (r < 0)
        return r;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rep->files++;
        const char *hash = (const char *)sqlite3_column_text(st, 2);
        bool ok = sqlite3_column_type(st, 3) != SQLITE_NULL;
        if (ok && hash) {
            _cleanup_close_ int fd = blob_open(q->blobs_fd, hash, NULL);
            ok = fd >= 0;
        }
        if (!ok) {
            rep->missing_blobs++;
            if (!rep->first_problem[0])
                (void)snprintf(rep->first_problem, sizeof(rep->first_problem),
                               "workspace '%s' file '/%s' has no blob %.16s...",
                               sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
                               hash ? hash : "");
        }
    }
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "check files");
    sqlite3_finalize(st);
    st = NULL;

    /* Every blob hashes to its name and has its recorded size. */
    r = prep(q, "SELECT hash, size FROM blobs", &st, err);
    if (r < 0)
        return r;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *hash = (const char *)sqlite3_column_text(st, 0);
        uint64_t want = (uint64_t)sqlite3_column_int64(st, 1), size = 0;
        rep->blobs++;
        _cleanup_close_ int fd = hash ? blob_open(q->blobs_fd, hash, NULL) : -EBADF;
        char got[STORE_HASH_LEN + 1] = "";
        if (fd < 0)
            continue; /* counted above if a file uses it */
        if (store_hash_fd(fd, got, &size) < 0 || strcmp(got, hash) != 0 || size != want) {
            rep->corrupt_blobs++;
            if (!rep->first_problem[0])
                (void)snprintf(rep->first_problem, sizeof(rep->first_problem),
                               "blob %.16s... does not match its content (%llu bytes, recorded "
                               "%llu; it hashes to %.16s...)",
                               hash, (unsigned long long)size, (unsigned long long)want, got);
        }
    }
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "check blobs");
    sqlite3_finalize(st);
    st = NULL;

    /* Every entry's parent directory exists. */
    r = prep(q,
             "SELECT e.ws, e.path FROM entries e WHERE e.parent != '.' AND NOT EXISTS"
             " (SELECT 1 FROM entries d WHERE d.ws = e.ws AND d.path = e.parent AND d.type = 2)",
             &st, err);
    if (r < 0)
        return r;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rep->orphan_entries++;
        if (!rep->first_problem[0])
            (void)snprintf(rep->first_problem, sizeof(rep->first_problem),
                           "workspace '%s' entry '/%s' has no parent directory",
                           sqlite3_column_text(st, 0), sqlite3_column_text(st, 1));
    }
    if (rc != SQLITE_DONE)
        return sq_fail(q, rc, err, "check tree");
    return 0;
}

/* --- the store directory's lock ---
 *
 * SQLite lets several processes share a database, but two abxd on one store
 * would each take the other's blob files for orphans, and each restore and
 * mirror the same workspaces. So a store directory belongs to one process:
 * its "lock" file is flock()ed by the first handle a process opens on it
 * and unlocked when the last one closes (one abxd opens a handle per
 * worker thread). flock locks belong to the open file description, so the
 * process keeps one, shared by its handles and counted. */

struct dirlock {
    struct dirlock *next;
    dev_t dev;
    ino_t ino;
    pid_t pid; /* the process that took it: a forked child must take its own */
    int fd;
    unsigned refs;
};

static pthread_mutex_t dirlocks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dirlock *dirlocks;

static int
dirlock_take(int dirfd, const char *dir, struct dirlock **ret, struct err *err)
{
    struct stat st;
    struct dirlock *l, **pp;
    pid_t self = getpid();
    char line[24];
    int r = 0, fd, k;

    if (fstat(dirfd, &st) < 0)
        return err_setx(err, errno, "cannot stat '%s'", dir);
    pthread_mutex_lock(&dirlocks_mu);
    for (pp = &dirlocks; (l = *pp);) {
        if (l->pid != self) {
            /* Inherited over fork(): the descriptor is the parent's lock,
             * not ours. Closing our copy leaves the parent's lock alone. */
            *pp = l->next;
            safe_close(l->fd);
            free(l);
            continue;
        }
        if (l->dev == st.st_dev && l->ino == st.st_ino) {
            l->refs++;
            *ret = l;
            goto out;
        }
        pp = &l->next;
    }
    fd = openat(dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        r = err_setx(err, errno, "cannot open '%s/lock'", dir);
        goto out;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK) {
            char b[24] = "";
            uint64_t pid = 0;
            ssize_t n = pread(fd, b, sizeof(b) - 1, 0);
            b[n > 0 ? n : 0] = '\0';
            b[strcspn(b, "\n")] = '\0';
            if (parse_u64(b, &pid) == 0 && pid > 0)
                r = err_set(err, EBUSY,
                            "store directory '%s' is in use by another process (pid %llu)", dir,
                            (unsigned long long)pid);
            else
                r = err_set(err, EBUSY, "store directory '%s' is in use by another process", dir);
        } else {
            r = err_setx(err, errno, "cannot lock '%s/lock'", dir);
        }
        safe_close(fd);
        goto out;
    }
    /* For the message the next process gets; the lock is what counts, so
     * a failure here only makes that message vaguer. */
    k = snprintf(line, sizeof(line), "%ld\n", (long)self);
    if (ftruncate(fd, 0) == 0)
        (void)write_full(fd, line, (size_t)k);
    l = calloc(1, sizeof(*l));
    if (!l) {
        safe_close(fd);
        r = -ENOMEM;
        goto out;
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->pid = self;
    l->fd = fd;
    l->refs = 1;
    l->next = dirlocks;
    dirlocks = l;
    *ret = l;
out:
    pthread_mutex_unlock(&dirlocks_mu);
    return r;
}

static void
dirlock_drop(struct dirlock *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&dirlocks_mu);
    if (--l->refs == 0) {
        for (struct dirlock **pp = &dirlocks; *pp; pp = &(*pp)->next)
            if (*pp == l) {
                *pp = l->next;
                break;
            }
        safe_close(l->fd); /* unlocks */
        free(l);
    }
    pthread_mutex_unlock(&dirlocks_mu);
}

/* --- open / close --- */

static void
sq_close(struct store *s)
{
    struct sq *q = SQ(s);
    if (q->db)
        sqlite3_close_v2(q->db);
    safe_close(q->base.tmp_fd);
    safe_close(q->blobs_fd);
    safe_close(q->dirfd);
    dirlock_drop(q->lock);
    free(q);
}

static const struct store_ops sqlite_ops = {
        .kind = "sqlite",
        .close = sq_close,
        .tx_begin = sq_tx_begin,
        .tx_commit = sq_tx_commit,
        .tx_rollback = sq_tx_rollback,
        .tx_retry = sq_tx_retry,
        .ws_insert = store_sqlite_ws_insert,
        .ws_get = store_sqlite_ws_get,
        .ws_list = store_sqlite_ws_list,
        .ws_delete = store_sqlite_ws_delete,
        .ws_check = store_sqlite_ws_check,
        .usage = store_sqlite_usage,
        .get_entry = store_sqlite_get_entry,
        .insert_dir = store_sqlite_insert_dir,
        .upsert_file = store_sqlite_upsert_file,
        .delete_entry = store_sqlite_delete_entry,
        .delete_tree = store_sqlite_delete_tree,
        .move_entry = store_sqlite_move_entry,
        .move_below = store_sqlite_move_below,
        .children = store_sqlite_children,
        .below = store_sqlite_below,
        .pin = store_sqlite_pin,
        .unpin = store_sqlite_unpin,
        .blob_hold = store_sqlite_blob_hold,
        .blob_read = store_sqlite_blob_read,
        .lease = store_sqlite_lease,
        .lease_holder = store_sqlite_lease_holder,
        .lease_release = store_sqlite_lease_release,
        .collect = store_sqlite_collect,
        .check = store_sqlite_check,
};

int
store_sqlite_open(const char *dir, struct store **ret, struct err *err)
{
    char path[PATH_MAX];
    struct sq *q = calloc(1, sizeof(*q));
    int r, rc;

    if (!q)
        return -ENOMEM;
    q->base.ops = &sqlite_ops;
    q->base.tmp_fd = q->blobs_fd = q->dirfd = -EBADF;
    r = mkdir_p(dir, 0700);
    if (r < 0) {
        r = err_setx(err, -r, "cannot create store directory '%s'", dir);
        goto fail;
    }
    q->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (q->dirfd < 0) {
        r = err_setx(err, errno, "cannot open '%s'", dir);
        goto fail;
    }
    r = dirlock_take(q->dirfd, dir, &q->lock, err);
    if (r < 0)
        goto fail;
    (void)mkdirat(q->dirfd, "blobs", 0755);
    (void)mkdirat(q->dirfd, "tmp", 0700);
    q->blobs_fd = openat(q->dirfd, "blobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    q->base.tmp_fd = openat(q->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (q->blobs_fd < 0 || q->base.tmp_fd < 0) {
        r = err_setx(err, errno, "cannot open '%s/blobs' or '%s/tmp'", dir, dir);
        goto fail;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/store.db", dir) >= sizeof(path)) {
        r = err_set(err, ENAMETOOLONG, "store path too long");
        goto fail;
    }
    rc = sqlite3_open_v2(path, &q->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        r = err_set(err, EIO, "cannot open '%s': %s", path,
                    q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
        goto fail;
    }
    (void)sqlite3_busy_timeout(q->db, 30000);
    /* Switching a new database to WAL takes an exclusive lock that the busy
     * handler does not wait for: several processes opening one new store at
     * once see SQLITE_BUSY. Retry it ourselves, within the same 30 s. */
    for (int tries = 0;; tries++) {
        int rc2 = sqlite3_exec(q->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc2 == SQLITE_OK)
            break;
        if ((rc2 & 0xff) != SQLITE_BUSY || tries >= 3000) {
            r = err_set(err, -sq_errno(rc2), "store: cannot switch '%s' to WAL: %s", path,
                        sqlite3_errmsg(q->db));
            goto fail;
        }
        (void)usleep(10000);
    }
    if ((r = sq_exec(q, "PRAGMA synchronous = FULL", err)) < 0 ||
        (r = sq_exec(q, "PRAGMA foreign_keys = ON", err)) < 0 ||
        (r = sq_exec(q, schema, err)) < 0 || (r = add_disk_column(q, err)) < 0)
        goto fail;
    *ret = &q->base;
    return 0;
fail:
    sq_close(&q->base);
    return r;
}
