/*
 * store-internal.h - the backend contract behind store.h, and helpers the
 * backends share. Only the store's own files include it (and its tests).
 */
#pragma once

#include "store/store.h"
#include "util/path.h"

#define STORE_CHUNK       (1024 * 1024)    /* PostgreSQL blob chunk */
#define STORE_PIN_MS      (10 * 60 * 1000) /* how long a write's pin protects its blob */
#define STORE_ORPHAN_MS   (60 * 60 * 1000) /* blob files without a row older than this go */
#define STORE_TX_ATTEMPTS 5 /* tries of a transaction whose failure the backend calls transient */

enum store_tx {
    STORE_TX_WRITE, /* reads the latest state and changes it */
    STORE_TX_READ,  /* reads one snapshot, changes nothing */
};

/*
 * What a backend implements: primitives that each speak its SQL, and
 * nothing about what they mean together. The shared layer (tree.c,
 * lease.c) decides what each operation checks, in what order, with which
 * error, and runs the primitives inside the transactions it opens with
 * store_tx_run(). Unless it says otherwise a primitive returns 0 or
 * -errno with err filled, is called with validated arguments (store_ws_ok,
 * store_path_ok; paths normalized, never the root where a name is meant),
 * and may run inside a transaction or outside one.
 */
struct store_ops {
    const char *kind;
    void (*close)(struct store *s);

    /* Transactions. begin opens one of that kind; commit ends it (a failed
     * commit leaves nothing changed); rollback ends it if one is open and
     * is harmless otherwise; retry says whether the failure just seen is
     * worth another attempt from the start (a deadlock, a serialization
     * failure). */
    int (*tx_begin)(struct store *s, enum store_tx kind, struct err *err);
    int (*tx_commit)(struct store *s, struct err *err);
    void (*tx_rollback)(struct store *s);
    bool (*tx_retry)(struct store *s);

    /* Workspace rows. insert: -EEXIST when the id is taken (err need not
     * say so: the caller does). get: 1 and the row, 0 when there is none.
     * delete: the row and its entries; 1, or 0 when there was none. check:
     * 1 when the workspace exists, 0 when not; with lock (only inside a
     * write transaction) this transaction is also the only writer of the
     * workspace's tree until it ends. usage: the sums over its entries. */
    int (*ws_insert)(struct store *s, const struct store_ws *ws, struct err *err);
    int (*ws_get)(struct store *s, const char *id, struct store_ws *ret, struct err *err);
    int (*ws_list)(struct store *s, store_ws_fn fn, void *ud, struct err *err);
    int (*ws_delete)(struct store *s, const char *id, struct err *err);
    int (*ws_check)(struct store *s, const char *id, bool lock, struct err *err);
    int (*usage)(struct store *s, const char *ws, struct store_usage *ret, struct err *err);

    /* Entries, keyed (ws, path); parent and name are path's halves
     * (path_split()). get: 1 and the entry, 0 when there is none. insert_dir
     * and upsert_file write one row (a file's replaces a file's). delete_tree
     * deletes path and everything below it; move_entry gives the entry at
     * from the name to, move_below moves everything below from to below
     * to. children (sorted by name) and below (sorted by path; dir "." is
     * the whole tree) hand each entry to fn and stop at its first error,
     * returned as is; fn may use the store meanwhile. */
    int (*get_entry)(struct store *s, const char *ws, const char *path, struct store_entry *ret,
                     struct err *err);
    int (*insert_dir)(struct store *s, const char *ws, const char *path, const char *parent,
                      const char *name, uint64_t now_ms, struct err *err);
    int (*upsert_file)(struct store *s, const char *ws, const char *path, const char *parent,
                       const char *name, const char *hash, uint64_t size, uint32_t mode,
                       uint64_t now_ms, struct err *err);
    int (*delete_entry)(struct store *s, const char *ws, const char *path, struct err *err);
    int (*delete_tree)(struct store *s, const char *ws, const char *path, struct err *err);
    int (*move_entry)(struct store *s, const char *ws, const char *from, const char *to,
                      const char *parent, const char *name, uint64_t now_ms, struct err *err);
    int (*move_below)(struct store *s, const char *ws, const char *from, const char *to,
                      struct err *err);
    int (*children)(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                    struct err *err);
    int (*below)(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
                 struct err *err);

    /* Blobs. pin: hash stays out of GC's reach for STORE_PIN_MS (not
     * durable; outside a transaction). unpin: drops that pin, inside the
     * write transaction that references the blob or, best effort, after a
     * failure. blob_hold: inside the write transaction, the blob of the
     * staged data in fd (size bytes, hashed to hash; fd is borrowed, an
     * O_TMPFILE in the staging directory) is there, whole, and stays until
     * the transaction ends. blob_read: e's content, opened for reading from
     * the start (*ret_fd: the caller's), inside a read transaction;
     * -EBADMSG when it is known to be damaged. */
    int (*pin)(struct store *s, const char *hash, int64_t *ret_id, struct err *err);
    int (*unpin)(struct store *s, int64_t id, struct err *err);
    int (*blob_hold)(struct store *s, int fd, const char *hash, uint64_t size, struct err *err);
    int (*blob_read)(struct store *s, const struct store_entry *e, int *ret_fd, struct err *err);
    /* Optional, both or neither: a backend that stores new content in a
     * transaction of its own, before the tree's (PostgreSQL: outside the
     * workspace lock, so a large upload holds up no other writer). known: 1
     * when the blob is there, 0 when not (outside a transaction). upload:
     * stores it unless it is there, inside a write transaction. */
    int (*blob_known)(struct store *s, const char *hash, struct err *err);
    int (*blob_upload)(struct store *s, int fd, const char *hash, uint64_t size, struct err *err);

    /* GC. lease takes (or renews) the lease until now + lease_ms if it is
     * free, expired or holder's already; with from, only if from holds it
     * (compare and swap). lease_holder: its holder ("" when none), expired
     * or not. lease_release frees it if holder has it. collect deletes
     * unreferenced blobs, the lease taken. check: store_check(). */
    int (*lease)(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
                 bool *ret_held, struct err *err);
    int (*lease_holder)(struct store *s, char *buf, size_t n, struct err *err);
    int (*lease_release)(struct store *s, const char *holder, struct err *err);
    int (*collect)(struct store *s, const char *holder, uint64_t lease_ms,
                   struct store_gc_stats *ret, struct err *err);
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

/* The columns, in this order, that every backend's entries and workspaces
 * tables have and its queries select; and the structs made of one row's
 * values (a NULL string is ""; too long a string is cut). */
#define STORE_ENTRY_COLS "path, type, hash, size, mode, mtime_ms"
#define STORE_WS_COLS    "id, created_ms, template, cpu_millis, memory_bytes, pids, disk_bytes"
void store_entry_row(struct store_entry *e, const char *path, int64_t type, const char *hash,
                     int64_t size, int64_t mode, int64_t mtime_ms);
void store_ws_row(struct store_ws *w, const char *id, int64_t created_ms, const char *template_name,
                  int64_t cpu_millis, int64_t memory_bytes, int64_t pids, int64_t disk_bytes);

/* The paths strictly below dir, in byte order: lo < path < hi with lo
 * "dir/" and hi "dir0" ('0' follows '/'). Buffers of STORE_RANGE_MAX. */
#define STORE_RANGE_MAX (PATH_MAX_LEN + 3)
void store_range_below(const char *dir, char *lo, char *hi);

/* Wall-clock milliseconds (mtimes, created_ms). */
uint64_t store_now_ms(void);

/* The n bytes of d as lowercase hex, NUL-terminated, into out (2n + 1). */
void store_to_hex(const unsigned char *d, unsigned n, char *out);

/* The staged data in fd (size bytes, hashed to hash; borrowed, an
 * O_TMPFILE in the staging directory) becomes the file path (tree.c). */
int store_commit(struct store *s, const char *ws, const char *path, uint32_t mode,
                 const char *if_match, int fd, const char *hash, uint64_t size,
                 struct store_entry *ret, struct err *err);

/* Whether a write or delete of path may go ahead given its current entry
 * cur (exists says whether there is one) and if_match (store_write()):
 * 0, or -ESTALE saying why not. */
int store_check_if_match(const char *path, const struct store_entry *cur, bool exists,
                         const char *if_match, struct err *err);

/* The process a holder name of host's names (store_holder_name()):
 * "<prefix>-<host>-<pid>-<start>-<boot>". 1 and *ret when holder has that
 * form with this host, 0 for any other name (another host, another form,
 * a pid of 0 or past INT32_MAX, a boot id not 32 long). */
struct store_holder_id {
    uint64_t pid, start; /* start: clock ticks since boot */
    char boot[33];
};
int store_holder_parse(const char *holder, const char *host, struct store_holder_id *ret);

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
