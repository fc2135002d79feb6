/*
 * store-internal.h - the backend contract behind store.h, and helpers the
 * backends share. Only store*.c include it.
 */
#pragma once

#include "store/store.h"

#define STORE_CHUNK       (1024 * 1024)    /* PostgreSQL blob chunk */
#define STORE_PIN_MS      (10 * 60 * 1000) /* how long a write's pin protects its blob */
#define STORE_ORPHAN_MS   (60 * 60 * 1000) /* blob files without a row older than this go */
#define STORE_TX_ATTEMPTS 5 /* tries of a transaction whose failure the backend calls transient */

enum store_tx {
    STORE_TX_WRITE, /* reads the latest state and changes it */
    STORE_TX_READ,  /* reads one snapshot, changes nothing */
};

struct store_ops {
    const char *kind;
    void (*close)(struct store *s);
    /* Transactions, driven by store_tx_run(). begin opens one of that
     * kind; commit ends it (a failed commit leaves nothing changed);
     * rollback ends it if one is open and is harmless otherwise; retry
     * says whether the failure just seen is worth another attempt from
     * the start (a deadlock, a serialization failure). */
    int (*tx_begin)(struct store *s, enum store_tx kind, struct err *err);
    int (*tx_commit)(struct store *s, struct err *err);
    void (*tx_rollback)(struct store *s);
    bool (*tx_retry)(struct store *s);
    int (*ws_create)(struct store *s, const struct store_ws *ws, struct err *err);
    int (*ws_get)(struct store *s, const char *id, struct store_ws *ret, struct err *err);
    int (*ws_list)(struct store *s, store_ws_fn fn, void *ud, struct err *err);
    int (*ws_delete)(struct store *s, const char *id, struct err *err);
    int (*usage)(struct store *s, const char *ws, struct store_usage *ret, struct err *err);
    /* The staged data in fd (positioned anywhere; size bytes, hash known)
     * becomes path. fd is borrowed; it is an O_TMPFILE in the staging dir. */
    int (*commit)(struct store *s, const char *ws, const char *path, uint32_t mode,
                  const char *if_match, int fd, const char *hash, uint64_t size,
                  struct store_entry *ret, struct err *err);
    int (*read)(struct store *s, const char *ws, const char *path, int *ret_fd,
                struct store_entry *ret, struct err *err);
    int (*stat)(struct store *s, const char *ws, const char *path, struct store_entry *ret,
                struct err *err);
    int (*list)(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                struct err *err);
    int (*walk)(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                struct err *err);
    int (*remove)(struct store *s, const char *ws, const char *path, const char *if_match,
                  struct err *err);
    int (*mkdir)(struct store *s, const char *ws, const char *path, bool *ret_created,
                 struct err *err);
    int (*rmdir)(struct store *s, const char *ws, const char *path, struct err *err);
    int (*rename)(struct store *s, const char *ws, const char *from, const char *to, bool overwrite,
                  struct err *err);
    /* Takes (or renews) the GC lease until now + lease_ms if it is free,
     * expired or holder's already; with from, only if from holds it. */
    int (*lease)(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
                 bool *ret_held, struct err *err);
    /* The lease's current holder ("" when none), whether expired or not. */
    int (*lease_holder)(struct store *s, char *buf, size_t n, struct err *err);
    /* Frees the lease if holder has it. */
    int (*lease_release)(struct store *s, const char *holder, struct err *err);
    /* Collects, having taken the lease with store_lease_take(). */
    int (*gc)(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
              struct err *err);
    int (*check)(struct store *s, struct store_check_report *ret, struct err *err);
};

/* Every backend's handle starts with this. */
struct store {
    const struct store_ops *ops;
    int tmp_fd;           /* staging directory */
    uint64_t floor_bytes; /* store_set_floor() */
};

int store_sqlite_open(const char *dir, struct store **ret, struct err *err);
int store_pg_open(const char *url, const char *tmp_dir, struct store **ret, struct err *err);

/* "a/b/c" -> parent "a/b" (or "."), name "c". path must be normalized and
 * not the root. Buffers hold at least strlen(path) + 2 bytes. */
void store_split(const char *path, char *parent, char *name);
/* Whether path is a valid normalized path (root allowed when root_ok). */
bool store_path_ok(const char *path, bool root_ok);
/* Whether ws is a valid workspace id: 1-64 of [a-z0-9_-]. */
bool store_ws_ok(const char *ws);

/* Runs fn inside a transaction of that kind and commits it; rolls back when
 * fn or the commit fails, and tries again from the start (up to
 * STORE_TX_ATTEMPTS, a few milliseconds apart) while the backend says the
 * failure is transient. fn must be safe to run again from the start. Only
 * the failure that is returned reaches err. */
typedef int (*store_tx_fn)(struct store *s, void *ctx, struct err *err);
int store_tx_run(struct store *s, enum store_tx kind, store_tx_fn fn, void *ctx, struct err *err);

/* Wall-clock milliseconds (mtimes, created_ms). */
uint64_t store_now_ms(void);

/* Takes or renews the GC lease for holder (ops->lease), taking it over from
 * a holder that store_holder_dead() says is gone. */
int store_lease_take(struct store *s, const char *holder, uint64_t lease_ms, bool *ret_held,
                     struct err *err);

/* --- blob files on disk (blob.c) ---
 * For a backend whose blobs are files: <blobs>/<2 hex>/<64 hex>. */

/* A name in blobs/ab/: a blob ("<hash>"), or a writer's temporary
 * ("<hash>.tmp", see blob_place()). 0 for anything else. */
enum { BLOB_NAME_OTHER, BLOB_NAME_BLOB, BLOB_NAME_TMP };

struct blob_name {
    char name[STORE_HASH_LEN + 5];
};

typedef int (*blob_scan_fn)(void *ud, const struct blob_name *names, int n, struct err *err);

/* The directory of hash's blob file, opened (O_DIRECTORY); with create,
 * made (and its entry synced) when missing. */
int blob_dir(int blobs_fd, const char *hash, bool create, struct err *err);
/* hash's blob file, opened for reading; -EIO when it is missing. */
int blob_open(int blobs_fd, const char *hash, struct err *err);
/* Links the staged data in fd in as hash's blob file, replacing a file of
 * that name (which has no row: see blob.c), durable on return. */
int blob_place(int blobs_fd, int fd, const char *hash, struct err *err);
/* BLOB_NAME_BLOB, BLOB_NAME_TMP or BLOB_NAME_OTHER. */
int blob_name_kind(const char *name);
/* Hands fn the names that a crash may have left, batch at a time: blob
 * files not changed within min_age_ms, and temporaries of any age. */
int blob_scan(int blobs_fd, uint64_t min_age_ms, int batch, blob_scan_fn fn, void *ud,
              struct err *err);
