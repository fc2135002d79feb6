/*
 * store-sqlite-gc.c - the SQLite store's GC lease, its collector and its
 * check. Every decision "this file has no row, so it goes" is made under
 * the write lock, in the transaction that unlinks it (see
 * unlink_unreferenced() and docs/store.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store-sqlite-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"

/* --- GC --- */

int
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

int
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

int
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

int
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

int
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
