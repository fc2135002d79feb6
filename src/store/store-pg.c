/*
 * store-pg.c - the shared FileStore: PostgreSQL holds the metadata and the
 * blobs, so several abxd (on one machine or many) serve the same workspaces.
 * Same contract and test suite as the SQLite store; the database is the only
 * state (the staging directory holds unnamed files only). Not a cache, not a
 * replica, not thread-safe per handle: one connection per struct store.
 *
 * Tables (created at open under a transaction-level advisory lock, so
 * concurrent opens do not trip over each other; docs/store.md has them all):
 *   workspaces   one row per workspace
 *   entries      (ws, path) -> directory or file. path, parent and name are
 *                bytea: any byte string is kept as given (a file name that is
 *                not UTF-8 included) and compares in byte order, as "C"
 *                collation would order text, so "dir/" < x < "dir0" is
 *                exactly the subtree and walks come out sorted like SQLite's.
 *                entries.hash references blobs(hash).
 *   blobs        (hash, size, created_ms): one row per content
 *   blob_chunks  (hash, seq, data): the content in STORE_CHUNK pieces,
 *                inserted in the transaction that inserts the blob row and
 *                deleted with it (ON DELETE CASCADE)
 *   pins         blobs a write in flight will reference soon (not durable)
 *   gc_lease     the one row collectors compare-and-swap
 *
 * A write pins its hash, uploads the blob if the database lacks it (its own
 * transaction, chunk by chunk from the staged file, outside any workspace
 * lock), then in one transaction locks the workspace row (writers of one
 * workspace take turns, as they do under SQLite's write lock), checks the
 * precondition, creates the ancestors, locks the blob row, upserts the entry
 * and drops the pin (that order, and every check on the way, is tree.c's;
 * this file supplies the statements, the primitives of store-internal.h).
 * synchronous_commit is on for the session: the COMMIT that acknowledges a
 * write is durable. Pins and GC deletes commit asynchronously: losing one in
 * a crash costs nothing. Reads copy the chunks one by one, inside one
 * snapshot, into an unnamed file in the staging dir.
 *
 * Why GC never deletes a blob that a file references or is about to:
 *  1. Every file row names its blob through a foreign key, and PostgreSQL
 *     enforces foreign keys with row locks and fresh snapshots at any
 *     isolation level: writing entries.hash takes FOR KEY SHARE on the blob
 *     row (failing if the row is gone), and deleting a blob row re-checks,
 *     once it holds the row, that no committed entry references it (else
 *     23503). No committed state has a file without its blob row, and the
 *     chunks go only with the row.
 *  2. The writer's metadata transaction locks its blob row FOR KEY SHARE
 *     itself before writing the entry; if the row is missing it inserts the
 *     row and all chunks in that same transaction. If the writer's lock came
 *     first, a GC DELETE of the row waits for the writer's COMMIT, then its
 *     foreign-key check sees the new entry and the DELETE fails: GC takes
 *     that as "in use" and moves on. If GC's DELETE came first, the writer's
 *     lock waits for GC's COMMIT, finds no row, and the writer re-creates the
 *     blob. Either way the entry and a complete blob commit together.
 *  3. GC deletes one candidate per statement (its own short transaction),
 *     with "not referenced, not pinned" in the DELETE itself, so a blob is
 *     held by GC for one statement and a failure concerns one candidate.
 *  Pins only save work: they keep GC off a blob uploaded in its own
 *  transaction until the metadata transaction references it. A GC statement
 *  whose snapshot predates the pin may still delete it; point 2 makes the
 *  writer re-create it. The lease only keeps collectors from duplicating
 *  work; two collectors at once would still be safe.
 *
 * Errors: unique violation -> -EEXIST; serialization failure and deadlock
 * retry the transaction a few times, then -EBUSY; disk full -> -ENOSPC; a
 * lost connection -> -EIO, a connection that cannot be (re)opened ->
 * -ECONNREFUSED, both with libpq's message. A connection found dead before a
 * transaction is reopened and the statement run again: outside transactions
 * this file runs only reads and statements that are harmless to repeat
 * (pins, the lease, GC deletes); everything else runs in transactions.
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

#define SCHEMA_VERSION  1
#define SCHEMA_LOCK_KEY INT64_C(0x6162782d73746f72) /* "abx-stor": advisory lock id */

static const char schema[] =
        "CREATE TABLE IF NOT EXISTS abx_schema (version integer NOT NULL);"
        "CREATE TABLE IF NOT EXISTS workspaces ("
        "  id text COLLATE \"C\" PRIMARY KEY, created_ms bigint NOT NULL, template text NOT NULL,"
        "  cpu_millis bigint NOT NULL, memory_bytes bigint NOT NULL, pids bigint NOT NULL,"
        "  disk_bytes bigint NOT NULL DEFAULT 0);"
        "CREATE INDEX IF NOT EXISTS workspaces_created ON workspaces (created_ms, id);"
        "CREATE TABLE IF NOT EXISTS blobs ("
        "  hash text COLLATE \"C\" PRIMARY KEY, size bigint NOT NULL, created_ms bigint NOT NULL);"
        "CREATE TABLE IF NOT EXISTS blob_chunks ("
        "  hash text COLLATE \"C\" NOT NULL REFERENCES blobs (hash) ON DELETE CASCADE,"
        "  seq integer NOT NULL, data bytea NOT NULL, PRIMARY KEY (hash, seq));"
        "CREATE TABLE IF NOT EXISTS entries ("
        "  ws text COLLATE \"C\" NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,"
        "  path bytea NOT NULL, parent bytea NOT NULL, name bytea NOT NULL,"
        "  type smallint NOT NULL CHECK (type IN (1, 2)),"
        "  hash text COLLATE \"C\" REFERENCES blobs (hash),"
        "  size bigint NOT NULL, mode integer NOT NULL, mtime_ms bigint NOT NULL,"
        "  PRIMARY KEY (ws, path), CHECK ((type = 1) = (hash IS NOT NULL)));"
        "CREATE INDEX IF NOT EXISTS entries_parent ON entries (ws, parent, name);"
        "CREATE INDEX IF NOT EXISTS entries_hash ON entries (hash);"
        "CREATE TABLE IF NOT EXISTS pins ("
        "  id bigserial PRIMARY KEY, hash text COLLATE \"C\" NOT NULL,"
        "  expires_ms bigint NOT NULL);"
        "CREATE INDEX IF NOT EXISTS pins_hash ON pins (hash);"
        "CREATE TABLE IF NOT EXISTS gc_lease ("
        "  id integer PRIMARY KEY CHECK (id = 1), holder text NOT NULL,"
        "  expires_ms bigint NOT NULL);"
        "INSERT INTO gc_lease (id, holder, expires_ms) VALUES (1, '', 0) ON CONFLICT DO NOTHING;";

/* --- transactions (store_tx_run() drives them) --- */

#define TX_WRITE "BEGIN"
#define TX_READ  "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"

static int
pg_tx_begin(struct store *s, enum store_tx kind, struct err *err)
{
    struct pg *q = PG(s);
    q->sqlstate[0] = '\0';
    int r = store_pg_run(q, "begin", kind == STORE_TX_READ ? TX_READ : TX_WRITE, NULL, NULL, err);
    if (r >= 0)
        q->in_tx = true;
    return r;
}

static int
pg_tx_commit(struct store *s, struct err *err)
{
    struct pg *q = PG(s);
    _cleanup_res_ PGresult *res = NULL;
    int r = store_pg_run(q, "commit", "COMMIT", NULL, &res, err);
    q->in_tx = false;
    if (r >= 0 && strcmp(PQcmdStatus(res), "COMMIT") != 0)
        return err_set(err, EIO, "store: commit: the transaction was rolled back");
    return r;
}

static void
pg_tx_rollback(struct store *s)
{
    struct pg *q = PG(s);
    if (!q->in_tx)
        return;
    q->in_tx = false;
    if (PQstatus(q->conn) == CONNECTION_OK)
        PQclear(PQexec(q->conn, "ROLLBACK"));
}

/* A deadlock or a serialization failure: the other party goes on, we try
 * again. */
static bool
pg_tx_retry(struct store *s)
{
    return store_pg_retryable(PG(s));
}

/* --- open / close --- */

/* Version-1 stores made before workspaces had disk_bytes get the column
 * (0: the host's default). Compatible both ways, so no new version (which
 * older abxd sharing the database would refuse); looked up first so a
 * store that has it takes no DDL lock. */
static int
add_disk_column(struct pg *q, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    int r = store_pg_run(
            q, "schema",
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = 'workspaces' AND column_name = 'disk_bytes'",
            NULL, &res, err);
    if (r < 0 || r_int(res, 0, 0) > 0)
        return r;
    return store_pg_run(
            q, "schema",
            "ALTER TABLE workspaces ADD COLUMN IF NOT EXISTS disk_bytes bigint NOT NULL "
            "DEFAULT 0",
            NULL, NULL, err);
}

/* Creates the tables unless this schema version is there already. Under a
 * transaction-level advisory lock: CREATE ... IF NOT EXISTS alone races
 * with itself (two creators collide in the catalogs), and the version check
 * keeps a running database from taking DDL locks on every open. */
static int
schema_tx(struct store *s, void *ctx, struct err *err)
{
    struct pg *q = PG(s);
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    int r;

    (void)ctx;
    p_int(&p, SCHEMA_LOCK_KEY);
    if ((r = store_pg_run(q, "schema lock", "SELECT pg_advisory_xact_lock($1)", &p, NULL, err)) <
                0 ||
        (r = store_pg_run(q, "schema", "SELECT to_regclass('abx_schema') IS NOT NULL", NULL, &res,
                          err)) < 0)
        return r;
    if (r_int(res, 0, 0)) {
        PQclear(res);
        res = NULL;
        r = store_pg_run(q, "schema", "SELECT COALESCE(max(version), 0) FROM abx_schema", NULL,
                         &res, err);
        if (r < 0)
            return r;
        int64_t v = r_int(res, 0, 0);
        if (v == SCHEMA_VERSION)
            return add_disk_column(q, err);
        if (v > SCHEMA_VERSION)
            return err_set(err, EPROTO,
                           "the PostgreSQL store has schema version %lld; this abxd knows %d",
                           (long long)v, SCHEMA_VERSION);
    }
    PQclear(res);
    res = PQexec(q->conn, schema);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return store_pg_fail(q, res, "create schema", err);
    struct pgp v = {0};
    p_int(&v, SCHEMA_VERSION);
    return store_pg_run(q, "schema", "INSERT INTO abx_schema (version) VALUES ($1::integer)", &v,
                        NULL, err);
}

static void
pg_close(struct store *s)
{
    struct pg *q = PG(s);
    if (q->conn)
        PQfinish(q->conn);
    safe_close(q->base.tmp_fd);
    free(q);
}

static const struct store_ops pg_ops = {
        .kind = "postgres",
        .close = pg_close,
        .tx_begin = pg_tx_begin,
        .tx_commit = pg_tx_commit,
        .tx_rollback = pg_tx_rollback,
        .tx_retry = pg_tx_retry,
        .ws_insert = store_pg_ws_insert,
        .ws_get = store_pg_ws_get,
        .ws_list = store_pg_ws_list,
        .ws_delete = store_pg_ws_delete,
        .ws_check = store_pg_ws_check,
        .usage = store_pg_usage,
        .get_entry = store_pg_get_entry,
        .insert_dir = store_pg_insert_dir,
        .upsert_file = store_pg_upsert_file,
        .delete_entry = store_pg_delete_entry,
        .delete_tree = store_pg_delete_tree,
        .move_entry = store_pg_move_entry,
        .move_below = store_pg_move_below,
        .children = store_pg_children,
        .below = store_pg_below,
        .pin = store_pg_pin,
        .unpin = store_pg_unpin,
        .blob_hold = store_pg_blob_hold,
        .blob_read = store_pg_blob_read,
        .blob_known = store_pg_blob_known,
        .blob_upload = store_pg_blob_upload,
        .lease = store_pg_lease,
        .lease_holder = store_pg_lease_holder,
        .lease_release = store_pg_lease_release,
        .collect = store_pg_collect,
        .check = store_pg_check,
};

int
store_pg_open(const char *url, const char *tmp_dir, struct store **ret, struct err *err)
{
    struct pg *q;
    int r;

    if (!tmp_dir || !*tmp_dir)
        return err_set(err, EINVAL, "the PostgreSQL store needs a staging directory");
    q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->base.ops = &pg_ops;
    q->base.tmp_fd = -EBADF;
    r = mkdir_p(tmp_dir, 0700);
    if (r < 0) {
        r = err_setx(err, -r, "cannot create staging directory '%s'", tmp_dir);
        goto fail;
    }
    q->base.tmp_fd = open(tmp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (q->base.tmp_fd < 0) {
        r = err_setx(err, errno, "cannot open staging directory '%s'", tmp_dir);
        goto fail;
    }
    {
        /* Fail now, not on the first write, where O_TMPFILE is missing. */
        int probe = openat(q->base.tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (probe < 0) {
            r = err_setx(err, errno, "cannot create unnamed files in '%s'", tmp_dir);
            goto fail;
        }
        safe_close(probe);
    }
    if ((r = store_pg_connect(q, url, err)) < 0 ||
        (r = store_tx_run(&q->base, STORE_TX_WRITE, schema_tx, NULL, err)) < 0)
        goto fail;
    *ret = &q->base;
    return 0;
fail:
    pg_close(&q->base);
    return r;
}
