/*
 * store.h - the FileStore: durable, per-workspace file trees with honest
 * directories and content-addressed blobs.
 *
 * A workspace is a named tree of directories and files. Paths are
 * normalized (util/path.h: "a/b/c", "." for the root). Directories are
 * honest: empty ones exist, writing a file creates its ancestors, deleting
 * a file keeps its parent, only rmdir removes a subtree. A file's content
 * is a blob named by its SHA-256; blobs are immutable and stored once
 * however many files hold them; a file's version is its content hash, so a
 * write can be made conditional on the content it replaces (If-Match).
 *
 * Two implementations behind one ops table and one test suite:
 *   - SQLite (the embedded default): metadata in <dir>/store.db (WAL,
 *     synchronous=FULL), blobs as files in <dir>/blobs/<2 hex>/<64 hex>;
 *   - PostgreSQL (shared by several abxd): metadata and blobs (in 1 MiB
 *     chunks) in the database, selected by a postgres:// URL.
 *
 * Durability: a write returns only once the blob and the row naming it are
 * on disk - what a crash right after the return must not lose. Writes are
 * all-or-nothing: a failed or interrupted one leaves the previous content.
 *
 * GC deletes blobs no file references, under a one-row lease (compare and
 * swap with expiry) so one process collects at a time, and never a blob a
 * write in flight is about to reference (writes pin their blob first). A
 * run releases the lease when it ends; a lease whose holder is a dead
 * process of this host may be taken over at once (store_holder_name()).
 *
 * Reads are verified on the way out: store_read() checks what it can
 * before handing out the content (PostgreSQL: everything; SQLite: the
 * length), and whoever passes the bytes on hashes them as they go
 * (store_verify_*) and holds back the last of them until the hash matched.
 *
 * Functions return 0 (or a count) or -errno and fill err; -ESTALE means an
 * If-Match precondition failed, -EBADMSG that stored content is damaged.
 * None log. A store handle is used by one thread at a time; one process may
 * open many handles on a store. A SQLite store belongs to one process at a
 * time (store_open() in a second process fails with -EBUSY); a PostgreSQL
 * store is shared by any number of processes and hosts.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define STORE_HASH_LEN 64 /* hex SHA-256 */

enum store_type {
    STORE_FILE = 1,
    STORE_DIR = 2,
};

struct store_entry {
    char path[4097]; /* normalized, "." for the root */
    enum store_type type;
    uint64_t size;                 /* bytes (files) */
    char hash[STORE_HASH_LEN + 1]; /* files: content hash = version; dirs: "" */
    uint32_t mode;                 /* permission bits as given by the writer */
    uint64_t mtime_ms;             /* wall clock of the last change */
};

struct store_ws {
    char id[65];
    uint64_t created_ms;
    char template_name[65];
    uint32_t cpu_millis; /* resources a sandbox of this workspace gets; 0 = default */
    uint64_t memory_bytes;
    uint32_t pids;
    uint64_t disk_bytes; /* bound of its sandbox's writable space (and of its files) */
};

struct store_usage {
    uint64_t bytes; /* sum of file sizes */
    uint64_t files;
    uint64_t dirs;
};

struct store;

/* Opens (creating when needed) the store at where: a postgres:// or
 * postgresql:// URL, or a directory for the SQLite store. tmp_dir is where
 * writes stage their data (on the blob directory's file system for SQLite,
 * which ignores tmp_dir; any local directory for PostgreSQL). -EBUSY when
 * another process has the SQLite store open (err names the directory and
 * that process). */
int store_open(const char *where, const char *tmp_dir, struct store **ret, struct err *err);
void store_close(struct store *s);
/* "sqlite" or "postgres". */
const char *store_kind(const struct store *s);

#define STORE_FLOOR_CHECK_BYTES (4u << 20) /* a writer looks at the free space this often */

/* Keeps floor_bytes free on the file system writes stage on (for SQLite
 * that of its blobs and database): a write that would take it below gets
 * -ENOSPC - when it begins, at store_writer_expect(), and every
 * STORE_FLOOR_CHECK_BYTES it writes (so it may overshoot by that much).
 * What is left is the reserve for the database's own writes (a delete
 * needs its log) and everything else on that file system. 0 = none. */
void store_set_floor(struct store *s, uint64_t floor_bytes);

/* Workspaces. */
int store_ws_create(struct store *s, const struct store_ws *ws, struct err *err); /* -EEXIST */
int store_ws_get(struct store *s, const char *id, struct store_ws *ret, struct err *err);
typedef int (*store_ws_fn)(const struct store_ws *ws, void *ud);
int store_ws_list(struct store *s, store_ws_fn fn, void *ud, struct err *err);
/* Deletes the workspace and all its entries; its blobs become garbage. */
int store_ws_delete(struct store *s, const char *id, struct err *err);
int store_usage(struct store *s, const char *ws, struct store_usage *ret, struct err *err);

/* Streaming writes: data goes to a staging file while it is hashed, and
 * commit puts it in place as path (see store_write). A writer may be
 * committed through any handle on the same store (so one thread can stage
 * while another commits); abort (or a failed commit) leaves nothing. */
struct store_writer;
int store_writer_begin(struct store *s, uint64_t max_bytes, struct store_writer **ret,
                       struct err *err);
int store_writer_write(struct store_writer *w, const void *data, size_t n, struct err *err);
/* -ENOSPC now when n more bytes would take the file system below the
 * floor (a client announced the size). */
int store_writer_expect(struct store_writer *w, uint64_t n, struct err *err);
uint64_t store_writer_size(const struct store_writer *w);
/* The staged data so far (borrowed; read it with pread, it is not sealed). */
int store_writer_fd(const struct store_writer *w);
int store_writer_commit(struct store *s, struct store_writer *w, const char *ws, const char *path,
                        uint32_t mode, const char *if_match, struct store_entry *ret,
                        struct err *err);        /* frees w */
void store_writer_abort(struct store_writer *w); /* NULL is ok */

/* Writes path from fd (read from its current offset to EOF), creating its
 * ancestors. if_match (NULL = unconditional) must equal the current hash;
 * "" requires that the file does not exist. -EISDIR when path is a
 * directory, -ENOTDIR when an ancestor is a file, -EFBIG past max_bytes
 * (0 = no limit), -ESTALE when if_match does not hold. ret may be NULL. */
int store_write(struct store *s, const char *ws, const char *path, int fd, uint32_t mode,
                uint64_t max_bytes, const char *if_match, struct store_entry *ret, struct err *err);

/* Opens path's content for reading from the start; the caller closes it.
 * -EBADMSG when the content is known to be damaged already (PostgreSQL
 * checks the hash, SQLite the length). SQLite hands out the blob file
 * itself, unverified: pass what is read from it through store_verify_*. */
int store_read(struct store *s, const char *ws, const char *path, int *ret_fd,
               struct store_entry *ret, struct err *err);

/* Checking content on its way out of the store, piece by piece in order:
 * end() says whether exactly the recorded bytes went through (0) or not
 * (-EBADMSG, counted by store_damaged_reads(), err says how). Deliver the
 * last piece only after end() returned 0, so a reader never gets a complete
 * copy of damaged content. done() frees; begin() may fail with -ENOMEM. */
struct store_verify {
    void *md; /* EVP_MD_CTX */
    char hash[STORE_HASH_LEN + 1];
    uint64_t size, seen; /* bytes: recorded, passed through */
};
int store_verify_begin(struct store_verify *v, const struct store_entry *e);
void store_verify_update(struct store_verify *v, const void *data, size_t n);
int store_verify_end(struct store_verify *v, struct err *err);
void store_verify_done(struct store_verify *v);
/* Reads that found stored content damaged, in this process (all handles and
 * backends, store_verify_end() included); store_note_damaged() adds one for
 * a check made elsewhere. Thread-safe. */
uint64_t store_damaged_reads(void);
void store_note_damaged(void);

int store_stat(struct store *s, const char *ws, const char *path, struct store_entry *ret,
               struct err *err);

typedef int (*store_entry_fn)(const struct store_entry *e, void *ud);
/* The direct children of a directory, sorted by name. */
int store_list(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
               struct err *err);
/* Everything below dir (not dir itself), sorted by path. */
int store_walk(struct store *s, const char *ws, const char *dir, store_entry_fn fn, void *ud,
               struct err *err);

/* Deletes a file (-EISDIR for a directory); its parent stays. if_match as
 * for store_write. */
int store_delete(struct store *s, const char *ws, const char *path, const char *if_match,
                 struct err *err);
/* mkdir -p; ret_created says whether it did not exist. -ENOTDIR when path
 * or an ancestor is a file. */
int store_mkdir(struct store *s, const char *ws, const char *path, bool *ret_created,
                struct err *err);
/* Removes a directory and everything below it; never the root. */
int store_rmdir(struct store *s, const char *ws, const char *path, struct err *err);
/* Moves a file or a subtree, creating to's ancestors; -EEXIST unless
 * overwrite (which replaces a file, never a directory). */
int store_rename(struct store *s, const char *ws, const char *from, const char *to, bool overwrite,
                 struct err *err);

struct store_gc_stats {
    bool held_lease; /* false: another collector holds it; nothing done */
    uint64_t blobs_seen, blobs_deleted, bytes_freed;
};

/* Deletes unreferenced blobs if this holder can take the lease for
 * lease_ms: it is free, expired, already this holder's, or its holder is a
 * dead process of this host (store_holder_dead()). The lease is released
 * when the run ends. */
int store_gc(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
             struct err *err);
/* Gives the lease up if holder has it (at shutdown). */
int store_gc_release(struct store *s, const char *holder, struct err *err);

/* The pid a SQLite store's lock names for whoever finds it in use (its
 * message): this process's unless set - abxd's network process names the
 * abxd the operator started, its parent. Before the first store opens. */
void store_name_lock_pid(pid_t pid);

/* This process's name as a lease holder:
 * "<prefix>-<host>-<pid>-<start>-<boot>", where start is the process's start
 * time in clock ticks since boot (/proc/<pid>/stat) and boot the host's
 * boot id without dashes (/proc/sys/kernel/random/boot_id). Together they
 * name one process of one boot of one host, even after its pid is reused.
 * -ENAMETOOLONG when n is too small. */
#define STORE_HOLDER_MAX 200 /* bytes of a holder name */
int store_holder_name(const char *prefix, char *buf, size_t n);
/* Whether holder, in that form, names a process of this host (same host
 * name) that is gone: another boot, no such pid, or a pid that started at
 * another time. Any other name (another host, another form) is not. */
bool store_holder_dead(const char *holder);

struct store_check_report {
    uint64_t files, blobs;
    uint64_t missing_blobs;  /* file rows whose blob is gone */
    uint64_t corrupt_blobs;  /* blobs whose content does not hash to their name */
    uint64_t orphan_entries; /* entries whose parent directory is missing */
    char first_problem[512]; /* a description of the first problem found */
};

/* Hashes fd's content (pread from offset 0 to EOF) and, when sink is not
 * NULL, hands each chunk to it on the way; a sink error stops the copy and
 * is returned as is (a read error returns -errno). */
typedef int (*store_sink_fn)(void *ud, const void *data, size_t n);
int store_hash_copy(int fd, store_sink_fn sink, void *ud, char hash[STORE_HASH_LEN + 1],
                    uint64_t *ret_size);
int store_hash_fd(int fd, char hash[STORE_HASH_LEN + 1], uint64_t *ret_size);

/* Verifies every file row has its blob and every blob hashes to its name. */
int store_check(struct store *s, struct store_check_report *ret, struct err *err);
