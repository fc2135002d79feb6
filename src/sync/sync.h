/*
 * sync.h - moving a workspace between the store and a live sandbox.
 *
 * restore copies every directory and file of a workspace's snapshot into a
 * fresh sandbox, checks each file against its content hash on the way, and
 * records each path's version. A missing blob or a mismatch fails the whole
 * restore, naming the paths: a half-restored workspace is never handed out.
 *
 * mirror pulls a live sandbox into the store: it walks the sandbox, copies
 * the files whose version changed since the last mirror (or restore),
 * creates new directories, and deletes from the store what the sandbox no
 * longer has. It never pushes anything into the sandbox. Names are bytes:
 * any the kernel allows is stored as it is. An entry the store cannot hold
 * (a path past PATH_MAX_LEN bytes, directories deeper than FILES_MAX_DEPTH,
 * a key PostgreSQL cannot index) is skipped and reported, and everything
 * else is saved: one name never stops a mirror.
 *
 * Ignore rules (build and cache noise, files over a size cap) apply both
 * ways: an ignored path is never copied and never deleted from the store
 * by mirror.
 *
 * Everything here blocks (file and store I/O) and is meant for a worker
 * thread; the sandbox side is a file work handle of its user (fileops.h):
 * what that user may not read is skipped and reported, never taken for
 * gone.
 * Functions return 0 or -errno and fill err; none log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/fileops.h"
#include "store/store.h"
#include "util/err.h"

#define SYNC_IGNORE_MAX     64
#define SYNC_DEFAULT_MAX_MB 10
#define SYNC_MIRROR_MAX     500000 /* entries (not ignored) a mirror walks */
#define SYNC_SKIP_LIST_MAX  8      /* skipped entries a report names (all are counted) */
#define SYNC_SKIP_PATH_MAX  512    /* bytes of a skipped path a report keeps */

struct sync_ignore {
    /* Rules are given as "name/" (a directory) or a glob on a file or
     * directory name; kept here without the '/', flagged. */
    char *patterns[SYNC_IGNORE_MAX];
    bool dir_only[SYNC_IGNORE_MAX];
    bool glob[SYNC_IGNORE_MAX]; /* has wildcards: fnmatch, else compared whole */
    size_t n;
    uint64_t max_file_bytes; /* files larger than this are ignored; 0 = no cap */
};

/* The default rules: .venv/, node_modules/, __pycache__/, .git/, *.pyc ... */
int sync_ignore_default(struct sync_ignore *ig);
/* Parses a comma-separated list (replacing the defaults). */
int sync_ignore_parse(struct sync_ignore *ig, const char *list, struct err *err);
void sync_ignore_done(struct sync_ignore *ig);
/* path is normalized ("a/b"); size is ignored for directories. Every
 * component is checked: "node_modules/" ignores all below it too. */
bool sync_ignored(const struct sync_ignore *ig, const char *path, bool is_dir, uint64_t size);

/* What the last restore or mirror saw in the sandbox: path -> version. */
struct sync_state;
int sync_state_new(struct sync_state **ret);
/* For a sandbox whose versions nobody knows (one taken over from another
 * process): every path the store has for ws, at no version, so that the
 * next mirror copies each file the sandbox still has and deletes from the
 * store what it no longer has. */
int sync_state_seed(struct store *s, const char *ws, const struct sync_ignore *ig,
                    struct sync_state *st, struct err *err);
void sync_state_free(struct sync_state *st);
size_t sync_state_size(const struct sync_state *st);

/* The live side: file work on the workspace as the sandbox's user
 * (borrowed: the caller holds a reference while sync runs). */
struct sync_sandbox {
    struct fileops *fo;
};

/* An entry a mirror could not store. */
struct sync_skip {
    char path[SYNC_SKIP_PATH_MAX + 1]; /* "a/b", its first SYNC_SKIP_PATH_MAX bytes */
    bool cut;                          /* the path is longer than what is kept */
    bool fresh;                        /* tried in this mirror (else: unchanged since) */
    int error; /* ENAMETOOLONG (path or key too long), ELOOP (too deep), EINVAL */
};

/* Why an entry was skipped, for people: "the path is longer than ...". */
const char *sync_skip_reason(int error);

struct sync_report {
    uint64_t files, dirs; /* copied or created */
    uint64_t bytes;       /* copied */
    uint64_t deleted;     /* removed from the store (mirror) */
    uint64_t unchanged, ignored;
    uint64_t duration_us;
    char bad_paths[512]; /* restore: the paths that failed, comma-separated */
    /* mirror: entries not stored because of their name or depth; the rest
     * was saved. skipped counts them all, fresh_skips those tried in this
     * mirror (the others did not change since one that tried); skips[]
     * names the first n_skips. */
    uint64_t skipped, fresh_skips;
    size_t n_skips;
    struct sync_skip skips[SYNC_SKIP_LIST_MAX];
};

/* Fills an empty sandbox from the store and resets st to what is there. */
int sync_restore(struct store *s, const char *ws, const struct sync_sandbox *sb,
                 const struct sync_ignore *ig, struct sync_state *st, struct sync_report *rep,
                 struct err *err);

/* Copies fd (from offset 0) into the sandbox as path, atomically, hashing
 * it on the way. With expect_hash, a mismatch leaves nothing and returns
 * -EBADMSG; a read error of fd returns -EIO; other errors are the
 * sandbox's side (-ENOSPC, -EISDIR ...). */
struct files_stat;
int sync_copy_in(const struct sync_sandbox *sb, const char *path, int fd, const char *expect_hash,
                 char hash[STORE_HASH_LEN + 1], uint64_t *ret_size, struct files_stat *ret_st,
                 bool *ret_created, struct err *err);

/* Pulls changes from the sandbox into the store and updates st. */
int sync_mirror(struct store *s, const char *ws, const struct sync_sandbox *sb,
                const struct sync_ignore *ig, struct sync_state *st, struct sync_report *rep,
                struct err *err);
