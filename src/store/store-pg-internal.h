/*
 * store-pg-internal.h - what the files of the PostgreSQL store share: the
 * handle, typed parameters and binary results, the statement runner, and
 * the primitives that store-pg.c puts in its ops table (store-internal.h
 * says what each must do). store-pg-tree.c has the workspaces, entries and
 * blobs; store-pg-admin.c the GC lease, the collector and the check.
 */
#pragma once

#include <assert.h>
#include <endian.h>
#include <string.h>

#include <libpq-fe.h>

#include "store/store-internal.h"

#define PAGE_ROWS 256 /* rows per query when listing, walking, collecting, checking */

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

static inline struct pg *
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

static inline void
p_text(struct pgp *p, const char *s)
{
    assert(p->n < PGP_MAX);
    p->types[p->n] = OID_TEXT;
    p->values[p->n] = s;
    p->lengths[p->n] = 0;
    p->formats[p->n] = 0;
    p->n++;
}

static inline void
p_bytes(struct pgp *p, const void *data, size_t n)
{
    assert(p->n < PGP_MAX && n <= INT32_MAX && data);
    p->types[p->n] = OID_BYTEA;
    p->values[p->n] = data;
    p->lengths[p->n] = (int)n;
    p->formats[p->n] = 1;
    p->n++;
}

static inline void
p_path(struct pgp *p, const char *path)
{
    p_bytes(p, path, strlen(path));
}

static inline void
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
static inline int64_t
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
static inline size_t
r_str(const PGresult *res, int row, int col, char *out, size_t outsz)
{
    size_t n = PQgetisnull(res, row, col) ? 0 : (size_t)PQgetlength(res, row, col);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, PQgetvalue(res, row, col), n);
    out[n] = '\0';
    return n;
}

static inline void
pqclearp(PGresult **res)
{
    if (*res)
        PQclear(*res);
}
#define _cleanup_res_ _cleanup_(pqclearp)

/* --- store-pg-run.c --- */

/* Whether the last failure was a deadlock or serialization failure. */
bool store_pg_retryable(const struct pg *q);
/* Opens q->conn to url and sets the session up (store-pg-run.c). */
int store_pg_connect(struct pg *q, const char *url, struct err *err);
/* Runs one statement (again on a fresh connection if it found the
 * connection dead outside a transaction). *ret (when ret is not NULL) gets
 * the result, which the caller clears. */
int store_pg_run(struct pg *q, const char *what, const char *sql, const struct pgp *p,
                 PGresult **ret, struct err *err);
/* Rows affected by the statement that produced res. */
uint64_t store_pg_affected(PGresult *res);
/* Records why a statement failed (res may be NULL) and returns -errno. */
int store_pg_fail(struct pg *q, const PGresult *res, const char *what, struct err *err);

/* --- store-pg-tree.c --- */

int store_pg_ws_insert(struct store *s, const struct store_ws *w, struct err *err);
int store_pg_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err);
int store_pg_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err);
int store_pg_ws_delete(struct store *s, const char *id, struct err *err);
int store_pg_ws_check(struct store *s, const char *ws, bool lock, struct err *err);
int store_pg_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err);
int store_pg_get_entry(struct store *s, const char *ws, const char *path, struct store_entry *e,
                       struct err *err);
int store_pg_insert_dir(struct store *s, const char *ws, const char *path, const char *parent,
                        const char *name, uint64_t now, struct err *err);
int store_pg_upsert_file(struct store *s, const char *ws, const char *path, const char *parent,
                         const char *name, const char *hash, uint64_t size, uint32_t mode,
                         uint64_t now, struct err *err);
int store_pg_delete_entry(struct store *s, const char *ws, const char *path, struct err *err);
int store_pg_delete_tree(struct store *s, const char *ws, const char *path, struct err *err);
int store_pg_move_entry(struct store *s, const char *ws, const char *from, const char *to,
                        const char *parent, const char *name, uint64_t now, struct err *err);
int store_pg_move_below(struct store *s, const char *ws, const char *from, const char *to,
                        struct err *err);
int store_pg_children(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                      struct err *err);
int store_pg_below(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                   struct err *err);
int store_pg_blob_hold(struct store *s, int fd, const char *hash, uint64_t size, struct err *err);
int store_pg_blob_known(struct store *s, const char *hash, struct err *err);
int store_pg_blob_upload(struct store *s, int fd, const char *hash, uint64_t size, struct err *err);
int store_pg_pin(struct store *s, const char *hash, int64_t *ret_id, struct err *err);
int store_pg_unpin(struct store *s, int64_t id, struct err *err);
int store_pg_blob_read(struct store *s, const struct store_entry *e, int *ret_fd, struct err *err);

/* --- store-pg-admin.c --- */

int store_pg_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
                   bool *ret_held, struct err *err);
int store_pg_lease_holder(struct store *s, char *buf, size_t n, struct err *err);
int store_pg_lease_release(struct store *s, const char *holder, struct err *err);
int store_pg_collect(struct store *s, const char *holder, uint64_t lease_ms,
                     struct store_gc_stats *ret, struct err *err);
int store_pg_check(struct store *s, struct store_check_report *rep, struct err *err);
