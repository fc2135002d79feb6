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

#include "store/store-sqlite-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

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
static pid_t lock_named_pid; /* store_name_lock_pid(); 0 = ours */

void
store_name_lock_pid(pid_t pid)
{
    pthread_mutex_lock(&dirlocks_mu);
    lock_named_pid = pid;
    pthread_mutex_unlock(&dirlocks_mu);
}

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
    k = snprintf(line, sizeof(line), "%ld\n", (long)(lock_named_pid ? lock_named_pid : self));
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
