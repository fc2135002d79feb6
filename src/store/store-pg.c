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
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "store/store-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"

#define SCHEMA_VERSION  1
#define SCHEMA_LOCK_KEY INT64_C(0x6162782d73746f72) /* "abx-stor": advisory lock id */
#define PAGE_ROWS       256    /* rows per query when listing, walking, collecting, checking */
#define MIN_SERVER      110000 /* PostgreSQL 11 */

/* Type oids of parameters (pg_type.h is a server header). */
#define OID_BYTEA 17
#define OID_INT8  20
#define OID_TEXT  25

/* Milliseconds since the epoch by the database server's clock: pins and the
 * lease are compared across machines, so they use one clock. */
#define NOW_MS "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
/* A FROM item that makes the statement's own transaction commit without
 * waiting for the WAL flush (SET LOCAL synchronous_commit = off, for one
 * autocommitted statement). */
#define ASYNC_COMMIT "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"

struct pg {
    struct store base;
    PGconn *conn;
    bool in_tx;
    char sqlstate[6]; /* of the last failed statement, "" after a success */
};

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

/* Settings every connection (and every reconnection) gets. */
static const char session_sql[] = "SET synchronous_commit = on;"
                                  "SET default_transaction_isolation = 'read committed';"
                                  "SET client_min_messages = warning;"
                                  "SET client_encoding = 'UTF8'";

static struct pg *
PG(struct store *s)
{
    return (struct pg *)s;
}

/* --- parameters and results ---
 *
 * Parameters are typed explicitly; integers and bytea travel in binary, text
 * as text. Results always come back in binary: integers big-endian, text and
 * bytea as their bytes. */

#define PGP_MAX 8

struct pgp {
    int n;
    Oid types[PGP_MAX];
    const char *values[PGP_MAX];
    int lengths[PGP_MAX];
    int formats[PGP_MAX];
    uint64_t ints[PGP_MAX]; /* storage for binary integers */
};

static void
p_text(struct pgp *p, const char *s)
{
    assert(p->n < PGP_MAX);
    p->types[p->n] = OID_TEXT;
    p->values[p->n] = s;
    p->lengths[p->n] = 0;
    p->formats[p->n] = 0;
    p->n++;
}

static void
p_bytes(struct pgp *p, const void *data, size_t n)
{
    assert(p->n < PGP_MAX && n <= INT32_MAX && data);
    p->types[p->n] = OID_BYTEA;
    p->values[p->n] = data;
    p->lengths[p->n] = (int)n;
    p->formats[p->n] = 1;
    p->n++;
}

static void
p_path(struct pgp *p, const char *path)
{
    p_bytes(p, path, strlen(path));
}

static void
p_int(struct pgp *p, int64_t v)
{
    assert(p->n < PGP_MAX);
    p->ints[p->n] = htobe64((uint64_t)v);
    p->types[p->n] = OID_INT8;
    p->values[p->n] = (const char *)&p->ints[p->n];
    p->lengths[p->n] = 8;
    p->formats[p->n] = 1;
    p->n++;
}

/* An integer column of any width (bool, int2, int4, int8); 0 for NULL. */
static int64_t
r_int(const PGresult *res, int row, int col)
{
    const unsigned char *v = (const unsigned char *)PQgetvalue(res, row, col);
    int n = PQgetlength(res, row, col);
    uint64_t u = 0;

    if (PQgetisnull(res, row, col) || n < 1 || n > 8)
        return 0;
    for (int i = 0; i < n; i++)
        u = (u << 8) | v[i];
    if (n < 8 && (v[0] & 0x80))
        u |= ~UINT64_C(0) << (8 * n); /* sign extension */
    return (int64_t)u;
}

/* A text or bytea column as a C string (truncated to outsz - 1 bytes). */
static size_t
r_str(const PGresult *res, int row, int col, char *out, size_t outsz)
{
    size_t n = PQgetisnull(res, row, col) ? 0 : (size_t)PQgetlength(res, row, col);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, PQgetvalue(res, row, col), n);
    out[n] = '\0';
    return n;
}

static void
pqclearp(PGresult **res)
{
    if (*res)
        PQclear(*res);
}
#define _cleanup_res_ _cleanup_(pqclearp)

/* --- errors and statements --- */

/* libpq's messages span lines; err wants one. */
static void
one_line(const char *in, char *out, size_t outsz)
{
    size_t n = 0;
    bool space = false;
    for (; in && *in && n + 1 < outsz; in++) {
        bool blank = *in == '\n' || *in == '\r' || *in == '\t' || *in == ' ';
        if (blank) {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < outsz)
            out[n++] = ' ';
        space = false;
        out[n++] = *in;
    }
    out[n] = '\0';
}

static int
pg_errno(const char *state)
{
    static const struct {
        const char *state;
        int err;
    } map[] = {
            {"23505", EEXIST},       /* unique_violation */
            {"23503", EBUSY},        /* foreign_key_violation: a row vanished under us */
            {"40001", EBUSY},        /* serialization_failure */
            {"40P01", EBUSY},        /* deadlock_detected */
            {"55P03", EBUSY},        /* lock_not_available */
            {"53100", ENOSPC},       /* disk_full */
            {"53200", ENOMEM},       /* out_of_memory */
            {"53300", EBUSY},        /* too_many_connections */
            {"54000", ENAMETOOLONG}, /* program_limit_exceeded: a key too big for an index */
            {"25006", EROFS},        /* read_only_sql_transaction (a standby) */
            {"42501", EACCES},       /* insufficient_privilege */
            {"57014", ETIMEDOUT},    /* query_canceled (statement_timeout) */
    };
    if (!state || !*state)
        return -EIO;
    for (size_t i = 0; i < ELEMENTSOF(map); i++)
        if (!strcmp(state, map[i].state))
            return -map[i].err;
    if (!strncmp(state, "22", 2))
        return -EINVAL; /* data exception */
    return -EIO;
}

static bool
store_pg_retryable(const struct pg *q)
{
    return !strcmp(q->sqlstate, "40001") || !strcmp(q->sqlstate, "40P01");
}

/* Records why a statement failed. */
static int
pg_fail(struct pg *q, const PGresult *res, const char *what, struct err *err)
{
    char msg[200];
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    if (PQstatus(q->conn) != CONNECTION_OK) {
        one_line(PQerrorMessage(q->conn), msg, sizeof(msg));
        (void)snprintf(q->sqlstate, sizeof(q->sqlstate), "08006");
        return err_set(err, EIO, "store: %s: connection to the database lost: %s", what, msg);
    }
    if (!res)
        return err_set(err, ENOMEM, "store: %s: out of memory", what);
    (void)snprintf(q->sqlstate, sizeof(q->sqlstate), "%s", state ? state : "");
    one_line(primary ? primary : PQresultErrorMessage(res), msg, sizeof(msg));
    if (state && !strcmp(state, "54000"))
        return err_set(err, ENAMETOOLONG,
                       "store: %s: the path is too long for the PostgreSQL store to index (%s)",
                       what, msg);
    return err_set(err, -pg_errno(state), "store: %s: %s", what, msg);
}

static int
conn_fail(struct pg *q, struct err *err)
{
    char msg[220];
    one_line(q->conn ? PQerrorMessage(q->conn) : "out of memory", msg, sizeof(msg));
    return err_set(err, ECONNREFUSED, "cannot connect to the PostgreSQL store: %s", msg);
}

static void
ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* the store does not log */
}

static int
session_setup(struct pg *q, struct err *err)
{
    _cleanup_res_ PGresult *res = PQexec(q->conn, session_sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return pg_fail(q, res, "session setup", err);
    return 0;
}

static int
reconnect(struct pg *q, struct err *err)
{
    q->in_tx = false;
    PQreset(q->conn);
    if (PQstatus(q->conn) != CONNECTION_OK)
        return conn_fail(q, err);
    return session_setup(q, err);
}

/* Runs one statement. *ret (when ret is not NULL) gets the result, which the
 * caller clears. */
static int
store_pg_run(struct pg *q, const char *what, const char *sql, const struct pgp *p, PGresult **ret,
             struct err *err)
{
    for (int attempt = 0;; attempt++) {
        PGresult *res =
                PQexecParams(q->conn, sql, p ? p->n : 0, p ? p->types : NULL, p ? p->values : NULL,
                             p ? p->lengths : NULL, p ? p->formats : NULL, 1);
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
            q->sqlstate[0] = '\0';
            if (ret)
                *ret = res;
            else
                PQclear(res);
            return 0;
        }
        if (attempt == 0 && !q->in_tx && PQstatus(q->conn) != CONNECTION_OK) {
            /* Dead since the last use (a server restart, a dropped
             * connection): reopen it and run the statement again. */
            PQclear(res);
            int r = reconnect(q, err);
            if (r < 0)
                return r;
            continue;
        }
        int r = pg_fail(q, res, what, err);
        PQclear(res);
        return r;
    }
}

/* Rows affected by the statement that produced res. */
static uint64_t
store_pg_affected(PGresult *res)
{
    const char *s = PQcmdTuples(res);
    uint64_t n = 0;
    for (; s && *s >= '0' && *s <= '9'; s++)
        n = n * 10 + (uint64_t)(*s - '0');
    return n;
}

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

static int
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

static int
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

static int
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

static int
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
static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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

static int
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
static int
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

static int
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
static int
store_pg_blob_upload(struct store *s, int fd, const char *hash, uint64_t size, struct err *err)
{
    int r = blob_insert(PG(s), fd, hash, size, err);
    return r < 0 ? r : 0;
}

/* --- pins --- */

/* Pins hash for STORE_PIN_MS; the pin's commit does not wait for the disk. */
static int
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
static int
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
static int
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

/* --- GC --- */

/* Takes or renews the lease: compare and swap, creating the row if needed;
 * with from, only while from holds it (taking over from a dead holder). */
static int
store_pg_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
               bool *ret_held, struct err *err)
{
    struct pg *q = PG(s);
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, holder);
    p_int(&p, (int64_t)MIN(lease_ms, (uint64_t)INT32_MAX * 1000));
    if (from)
        p_text(&p, from);
    int r = store_pg_run(q, "lease",
                         from ? "UPDATE gc_lease SET holder = $1, expires_ms = " NOW_MS " + $2"
                                " WHERE id = 1 AND holder = $3"
                              : "INSERT INTO gc_lease AS l (id, holder, expires_ms)"
                                " VALUES (1, $1, " NOW_MS " + $2)"
                                " ON CONFLICT (id) DO UPDATE SET holder = excluded.holder,"
                                " expires_ms = excluded.expires_ms"
                                " WHERE l.expires_ms < " NOW_MS " OR l.holder = excluded.holder",
                         &p, &res, err);
    if (r < 0)
        return r;
    *ret_held = store_pg_affected(res) == 1;
    return 0;
}

static int
store_pg_lease_holder(struct store *s, char *buf, size_t n, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    int r = store_pg_run(PG(s), "lease", "SELECT holder FROM gc_lease WHERE id = 1", NULL, &res,
                         err);
    if (r < 0)
        return r;
    buf[0] = '\0';
    if (PQntuples(res) == 1)
        (void)r_str(res, 0, 0, buf, n);
    return 0;
}

static int
store_pg_lease_release(struct store *s, const char *holder, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, holder);
    return store_pg_run(
            PG(s), "release the lease",
            "UPDATE gc_lease SET holder = '', expires_ms = 0 WHERE id = 1 AND holder = $1", &p,
            NULL, err);
}

/* Deletes one candidate if it is still garbage: 1 deleted (and its size),
 * 0 kept (in use again, pinned, locked by a writer, or already gone). */
static int
gc_one(struct pg *q, const char *hash, uint64_t *ret_size, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct err e1 = {0};
    struct pgp p = {0};
    p_text(&p, hash);
    int r = store_pg_run(
            q, "gc delete",
            "DELETE FROM blobs b USING " ASYNC_COMMIT " WHERE b.hash = $1"
            " AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.hash = $1)"
            " AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.hash = $1 AND p.expires_ms > " NOW_MS
            ") RETURNING b.size",
            &p, &res, &e1);
    if (r < 0) {
        /* 23503: a writer referenced it after our snapshot (its lock made
         * us wait, its entry failed our foreign-key check). */
        if (!strcmp(q->sqlstate, "23503") || store_pg_retryable(q) || !strcmp(q->sqlstate, "55P03"))
            return 0;
        if (err && !err_isset(err))
            *err = e1;
        return r;
    }
    if (PQntuples(res) != 1)
        return 0;
    *ret_size = (uint64_t)r_int(res, 0, 0);
    return 1;
}

static int
store_pg_collect(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
                 struct err *err)
{
    struct pg *q = PG(s);
    char after[STORE_HASH_LEN + 1] = "";
    bool held = true;
    int r;
    for (bool first = true;; first = false) {
        /* Still ours? A collection that outlives its lease stops. */
        if (!first && ((r = store_pg_lease(s, holder, lease_ms, NULL, &held, err)) < 0 || !held))
            return r < 0 ? r : 0;
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, after);
        p_int(&p, PAGE_ROWS);
        r = store_pg_run(q, "gc scan",
                         "SELECT hash FROM blobs b WHERE hash > $1"
                         " AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.hash = b.hash)"
                         " AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.hash = b.hash"
                         " AND p.expires_ms > " NOW_MS ") ORDER BY hash LIMIT $2",
                         &p, &res, err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            char hash[STORE_HASH_LEN + 1];
            uint64_t size = 0;
            (void)r_str(res, i, 0, hash, sizeof(hash));
            r = gc_one(q, hash, &size, err);
            if (r < 0)
                return r;
            if (r > 0) {
                ret->blobs_deleted++;
                ret->bytes_freed += size;
            }
            memcpy(after, hash, sizeof(after));
        }
        ret->blobs_seen += (uint64_t)n;
        if (n < PAGE_ROWS)
            break;
    }
    return store_pg_run(q, "gc pins",
                        "DELETE FROM pins USING " ASYNC_COMMIT " WHERE expires_ms <= " NOW_MS, NULL,
                        NULL, err);
}

/* --- check --- */

struct blob_check {
    const char *hash;
    int verdict; /* 0 sound, 1 damaged, 2 gone (collected meanwhile) */
    char problem[200];
};

static int
check_blob_tx(struct store *s, void *ctx, struct err *err)
{
    struct pg *q = PG(s);
    struct blob_check *c = ctx;
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char got[STORE_HASH_LEN + 1];
    uint64_t size, total = 0, nchunks;
    int r;

    c->verdict = 0;
    c->problem[0] = '\0';
    {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, c->hash);
        r = store_pg_run(q, "check blob",
                         "SELECT b.size, (SELECT count(*) FROM blob_chunks c WHERE c.hash = b.hash)"
                         " FROM blobs b WHERE b.hash = $1",
                         &p, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 0) {
            c->verdict = 2;
            return 0;
        }
        size = (uint64_t)r_int(res, 0, 0);
        nchunks = (uint64_t)r_int(res, 0, 1);
    }
    if (nchunks != (size + STORE_CHUNK - 1) / STORE_CHUNK) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem),
                       "blob %.16s... has %llu chunks for %llu bytes", c->hash,
                       (unsigned long long)nchunks, (unsigned long long)size);
        return 0;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return err_set(err, ENOMEM, "store: out of memory");
    }
    for (uint64_t seq = 0; seq < nchunks && c->verdict == 0; seq++) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, c->hash);
        p_int(&p, (int64_t)seq);
        r = store_pg_run(q, "check blob chunk",
                         "SELECT data FROM blob_chunks WHERE hash = $1 AND seq = $2::integer", &p,
                         &res, err);
        if (r < 0) {
            EVP_MD_CTX_free(md);
            return r;
        }
        if (PQntuples(res) != 1) {
            c->verdict = 1;
            (void)snprintf(c->problem, sizeof(c->problem), "blob %.16s... lacks chunk %llu",
                           c->hash, (unsigned long long)seq);
            break;
        }
        size_t n = (size_t)PQgetlength(res, 0, 0);
        total += n;
        if (EVP_DigestUpdate(md, PQgetvalue(res, 0, 0), n) != 1) {
            EVP_MD_CTX_free(md);
            return err_set(err, EIO, "store: hashing failed");
        }
    }
    if (c->verdict == 0 && EVP_DigestFinal_ex(md, dg, &dl) != 1) {
        EVP_MD_CTX_free(md);
        return err_set(err, EIO, "store: hashing failed");
    }
    EVP_MD_CTX_free(md);
    if (c->verdict != 0)
        return 0;
    for (unsigned i = 0; i < dl && 2 * i + 2 < sizeof(got); i++)
        (void)snprintf(got + 2 * i, 3, "%02x", dg[i]);
    if (total != size) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem), "blob %.16s... holds %llu bytes, not %llu",
                       c->hash, (unsigned long long)total, (unsigned long long)size);
    } else if (strcmp(got, c->hash) != 0) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem),
                       "blob %.16s... does not match its content (it hashes to %.16s...)", c->hash,
                       got);
    }
    return 0;
}

_printf_(2, 3) static void note_problem(struct store_check_report *rep, const char *fmt, ...)
{
    va_list ap;
    if (rep->first_problem[0])
        return;
    va_start(ap, fmt);
    (void)vsnprintf(rep->first_problem, sizeof(rep->first_problem), fmt, ap);
    va_end(ap);
}

static int
store_pg_check(struct store *s, struct store_check_report *rep, struct err *err)
{
    struct pg *q = PG(s);
    char after[STORE_HASH_LEN + 1] = "";
    int r;

    /* Every file row has its blob (the foreign key says so; trust, but
     * verify). A file row without a hash counts as missing its blob. */
    {
        _cleanup_res_ PGresult *res = NULL;
        r = store_pg_run(
                q, "check files",
                "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS"
                " (SELECT 1 FROM blobs b WHERE b.hash = e.hash)) FROM entries e WHERE e.type = 1",
                NULL, &res, err);
        if (r < 0)
            return r;
        rep->files = (uint64_t)r_int(res, 0, 0);
        rep->missing_blobs = (uint64_t)r_int(res, 0, 1);
    }
    if (rep->missing_blobs) {
        _cleanup_res_ PGresult *res = NULL;
        r = store_pg_run(q, "check files",
                         "SELECT e.ws, e.path, COALESCE(e.hash, '') FROM entries e WHERE e.type = 1"
                         " AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.hash = e.hash) LIMIT 1",
                         NULL, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 1) {
            char ws[65], path[4100], hash[STORE_HASH_LEN + 1];
            (void)r_str(res, 0, 0, ws, sizeof(ws));
            (void)r_str(res, 0, 1, path, sizeof(path));
            (void)r_str(res, 0, 2, hash, sizeof(hash));
            note_problem(rep, "workspace '%s' file '/%s' has no blob %.16s...", ws, path, hash);
        }
    }

    /* Every blob's chunks hash to its name and add up to its size; each
     * blob in its own snapshot, so GC may run meanwhile. */
    for (;;) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, after);
        p_int(&p, PAGE_ROWS);
        r = store_pg_run(q, "check blobs",
                         "SELECT hash FROM blobs WHERE hash > $1 ORDER BY hash LIMIT $2", &p, &res,
                         err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            (void)r_str(res, i, 0, after, sizeof(after));
            struct blob_check c = {after, 0, ""};
            r = store_tx_run(&q->base, STORE_TX_READ, check_blob_tx, &c, err);
            if (r < 0)
                return r;
            if (c.verdict == 2)
                continue;
            rep->blobs++;
            if (c.verdict == 1) {
                rep->corrupt_blobs++;
                note_problem(rep, "%s", c.problem);
            }
        }
        if (n < PAGE_ROWS)
            break;
    }

    /* Every entry's parent directory exists. */
    {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_path(&p, ".");
        r = store_pg_run(
                q, "check tree",
                "SELECT count(*) FROM entries e WHERE e.parent <> $1 AND NOT EXISTS"
                " (SELECT 1 FROM entries d WHERE d.ws = e.ws AND d.path = e.parent AND d.type = 2)",
                &p, &res, err);
        if (r < 0)
            return r;
        rep->orphan_entries = (uint64_t)r_int(res, 0, 0);
    }
    if (rep->orphan_entries) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_path(&p, ".");
        r = store_pg_run(
                q, "check tree",
                "SELECT e.ws, e.path FROM entries e WHERE e.parent <> $1 AND NOT EXISTS"
                " (SELECT 1 FROM entries d WHERE d.ws = e.ws AND d.path = e.parent AND d.type = 2)"
                " LIMIT 1",
                &p, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 1) {
            char ws[65], path[4100];
            (void)r_str(res, 0, 0, ws, sizeof(ws));
            (void)r_str(res, 0, 1, path, sizeof(path));
            note_problem(rep, "workspace '%s' entry '/%s' has no parent directory", ws, path);
        }
    }
    return 0;
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
        return pg_fail(q, res, "create schema", err);
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
    /* connect_timeout is a default the URL may override (later wins). */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname",
                                       NULL};
    const char *values[] = {"10", "abxd", url, NULL};
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
    q->conn = PQconnectdbParams(keys, values, 1);
    if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) {
        r = conn_fail(q, err);
        goto fail;
    }
    PQsetNoticeProcessor(q->conn, ignore_notice, NULL);
    if (PQserverVersion(q->conn) < MIN_SERVER) {
        r = err_set(err, ENOTSUP, "PostgreSQL %d is too old for the store (11 or newer)",
                    PQserverVersion(q->conn) / 10000);
        goto fail;
    }
    if ((r = session_setup(q, err)) < 0 ||
        (r = store_tx_run(&q->base, STORE_TX_WRITE, schema_tx, NULL, err)) < 0)
        goto fail;
    *ret = &q->base;
    return 0;
fail:
    pg_close(&q->base);
    return r;
}
