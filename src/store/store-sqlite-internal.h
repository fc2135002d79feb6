/*
 * store-sqlite-internal.h - what the files of the SQLite store share: the
 * handle, the statement helpers, and the primitives that store-sqlite.c
 * puts in its ops table (store-internal.h says what each must do).
 * store-sqlite-tree.c has the workspaces, entries and blobs;
 * store-sqlite-gc.c the GC lease, the collector and the check.
 */
#pragma once

#include <sqlite3.h>

#include "store/store-internal.h"

struct dirlock;

struct sq {
    struct store base;
    sqlite3 *db;
    int dirfd, blobs_fd;
    struct dirlock *lock;
};

/* --- sqlite helpers --- */

static inline int
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

static inline int
sq_fail(struct sq *q, int rc, struct err *err, const char *what)
{
    int r = sq_errno(rc);
    return err_set(err, -r, "store: %s: %s", what, sqlite3_errmsg(q->db));
}

static inline int
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

static inline void
finalizep(sqlite3_stmt **st)
{
    if (*st)
        sqlite3_finalize(*st);
}
#define _cleanup_stmt_ __attribute__((cleanup(finalizep)))

static inline int
prep(struct sq *q, const char *sql, sqlite3_stmt **ret, struct err *err)
{
    int rc = sqlite3_prepare_v2(q->db, sql, -1, ret, NULL);
    if (rc != SQLITE_OK)
        return sq_fail(q, rc, err, "prepare");
    return 0;
}

static inline void
bind_text(sqlite3_stmt *st, int i, const char *s)
{
    (void)sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

static inline struct sq *
SQ(struct store *s)
{
    return (struct sq *)s;
}

/* --- store-sqlite-tree.c --- */

int store_sqlite_ws_insert(struct store *s, const struct store_ws *w, struct err *err);
int store_sqlite_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err);
int store_sqlite_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err);
int store_sqlite_ws_delete(struct store *s, const char *id, struct err *err);
int store_sqlite_ws_check(struct store *s, const char *ws, bool lock, struct err *err);
int store_sqlite_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err);
int store_sqlite_get_entry(struct store *s, const char *ws, const char *path, struct store_entry *e,
                           struct err *err);
int store_sqlite_insert_dir(struct store *s, const char *ws, const char *path, const char *parent,
                            const char *name, uint64_t now, struct err *err);
int store_sqlite_upsert_file(struct store *s, const char *ws, const char *path, const char *parent,
                             const char *name, const char *hash, uint64_t size, uint32_t mode,
                             uint64_t now, struct err *err);
int store_sqlite_delete_entry(struct store *s, const char *ws, const char *path, struct err *err);
int store_sqlite_delete_tree(struct store *s, const char *ws, const char *path, struct err *err);
int store_sqlite_move_entry(struct store *s, const char *ws, const char *from, const char *to,
                            const char *parent, const char *name, uint64_t now, struct err *err);
int store_sqlite_move_below(struct store *s, const char *ws, const char *from, const char *to,
                            struct err *err);
int store_sqlite_children(struct store *s, const char *ws, const char *dir, store_entry_fn fn,
                          void *ud, struct err *err);
int store_sqlite_below(struct store *s, const char *ws, const char *dir, store_entry_fn fn,
                       void *ud, struct err *err);
int store_sqlite_pin(struct store *s, const char *hash, int64_t *ret_id, struct err *err);
int store_sqlite_unpin(struct store *s, int64_t id, struct err *err);
int store_sqlite_blob_hold(struct store *s, int fd, const char *hash, uint64_t size,
                           struct err *err);
int store_sqlite_blob_read(struct store *s, const struct store_entry *e, int *ret_fd,
                           struct err *err);

/* --- store-sqlite-gc.c --- */

int store_sqlite_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
                       bool *ret_held, struct err *err);
int store_sqlite_lease_holder(struct store *s, char *buf, size_t n, struct err *err);
int store_sqlite_lease_release(struct store *s, const char *holder, struct err *err);
int store_sqlite_collect(struct store *s, const char *holder, uint64_t lease_ms,
                         struct store_gc_stats *ret, struct err *err);
int store_sqlite_check(struct store *s, struct store_check_report *rep, struct err *err);
