/*
 * files.h - file operations on a live workspace, from the host side.
 *
 * Every function takes the workspace's pinned root descriptor and a path
 * already normalized by path_normalize() ("." for the root). Resolution is
 * confined by path_open(): a path or symlink that leads out of the
 * workspace fails with -EXDEV, even if code in the sandbox swaps a
 * directory for a symlink while we work. Directories are honest: writing a
 * file creates its ancestors, deleting a file keeps its parent, only
 * files_rmdir() removes a subtree. Uploads stream into an unnamed
 * O_TMPFILE that is linked into place on commit, so a failed or aborted
 * upload leaves nothing and readers never see half a file. Files and
 * directories created here belong to the uid/gid the caller passes.
 *
 * Versions are opaque 16-hex-digit stamps of inode, size, mtime and ctime:
 * ctime cannot be set from user space, so resetting mtime does not hide a
 * change. Functions return 0 or -errno and fill err; none log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define FILES_VERSION_LEN    16
#define FILES_WALK_MAX       100000  /* entries one walk may return */
#define FILES_MAX_DEPTH      256     /* directory levels walk descends */
#define FILES_REMOVE_MAX     1000000 /* entries one files_rmdir() may look at */
#define FILES_WALK_NAMES_MAX 1000000 /* names one walk may read, kept or pruned */

enum files_type {
    FILES_FILE,
    FILES_DIR,
    FILES_SYMLINK,
    FILES_OTHER,
};

const char *files_type_name(enum files_type t);

struct files_stat {
    enum files_type type;
    uint64_t size;
    uint32_t mode; /* permission bits */
    uint64_t mtime_ms;
    char version[FILES_VERSION_LEN + 1];
};

/* Stats path (symlinks inside the workspace are followed). */
int files_stat(int root, const char *rel, struct files_stat *ret, struct err *err);

/* Opens a regular file for reading; ret_fd is O_RDONLY|O_CLOEXEC. A
 * directory is -EISDIR; another type (fifo, socket, device) is -EINVAL
 * with a message naming it, and is never opened. */
int files_open_read(int root, const char *rel, int *ret_fd, struct files_stat *ret,
                    struct err *err);

struct files_upload;

/* Starts writing rel (creating its parent directories as uid:gid). Data
 * beyond max_bytes fails with -EFBIG. */
int files_upload_begin(int root, const char *rel, uid_t uid, gid_t gid, uint64_t max_bytes,
                       struct files_upload **ret, struct err *err);
int files_upload_write(struct files_upload *up, const void *data, size_t n, struct err *err);
/* The staging file (open for writing; borrowed): data written to it through
 * any copy of the descriptor is what commit links into place. */
int files_upload_fd(const struct files_upload *up);
/* Links the data into place (replacing a file, never a directory) and frees
 * up. ret_created says whether rel did not exist before. */
int files_upload_commit(struct files_upload *up, struct files_stat *ret, bool *ret_created,
                        struct err *err);
/* Discards the data and frees up. NULL is ok. */
void files_upload_abort(struct files_upload *up);

/* Deletes a file or symlink; -EISDIR for a directory. */
int files_delete(int root, const char *rel, struct err *err);
/* mkdir -p; ret_created is false when it already existed as a directory. */
int files_mkdir(int root, const char *rel, uid_t uid, gid_t gid, bool *ret_created,
                struct err *err);
/* Removes a directory and everything below it, at any depth; never the
 * root. -ENOTDIR for a file, -E2BIG past FILES_REMOVE_MAX entries, -EBUSY
 * when the tree keeps changing; else the errno of the entry that could not
 * go, which the message names. */
int files_rmdir(int root, const char *rel, struct err *err);
/* Renames from to (creating to's parents). -EEXIST unless overwrite. */
int files_rename(int root, const char *from, const char *to, bool overwrite, uid_t uid, gid_t gid,
                 struct err *err);

struct files_entry {
    char *path; /* "/a/b", relative to the workspace root */
    struct files_stat st;
    char *target; /* symlinks: where they point, else NULL */
    bool unread;  /* a directory whose contents the acting user may not read:
                   * what is below it is unknown, not gone */
    int beyond;   /* with limits_as_entries: ENAMETOOLONG or ELOOP (see there) */
};

/* Lists everything below rel (not rel itself), sorted by path, calling
 * fn for each entry; symlinks are reported, never followed; a directory
 * that cannot be read (EACCES) is reported with unread set and not
 * entered. -E2BIG past
 * FILES_WALK_MAX entries (or FILES_WALK_NAMES_MAX names read, pruned ones
 * included), -ELOOP past FILES_MAX_DEPTH levels. The walk is util/tree.h's:
 * nothing is ever followed, a directory swapped meanwhile is skipped. */
typedef int (*files_walk_fn)(const struct files_entry *e, void *ud);
int files_walk(int root, const char *rel, files_walk_fn fn, void *ud, struct err *err);

/* Which entries a listing leaves out - and never descends into: a regular
 * file or directory whose base name equals a pattern (or matches it with
 * fnmatch(FNM_PERIOD) when glob), directories only when dir_only; regular
 * files larger than max_file_bytes (0 = no cap). Plain data, so that a
 * listing can run in another process (fileops.h). */
#define FILES_PRUNE_MAX 64
struct files_prune {
    size_t n;
    const char *patterns[FILES_PRUNE_MAX];
    bool dir_only[FILES_PRUNE_MAX];
    bool glob[FILES_PRUNE_MAX];
    uint64_t max_file_bytes;
};
bool files_prune_match(const struct files_prune *p, const char *name, const struct files_stat *st);

/* The same listing, kept: v[0..n) sorted by path (strcmp order). */
struct files_tree {
    struct files_entry *v;
    size_t n, cap;
    uint64_t skipped; /* entries the prune rules left out */
};
struct files_walk_opts {
    const struct files_prune *prune; /* NULL = keep everything */
    size_t max;                      /* entries kept; 0 = FILES_WALK_MAX */
    /* Instead of failing the walk at its limits, list an entry whose path
     * passes PATH_MAX_LEN, or a directory FILES_MAX_DEPTH levels down, with
     * beyond set, and do not enter it. */
    bool limits_as_entries;
};
int files_tree_list(int root, const char *rel, const struct files_walk_opts *opts,
                    struct files_tree *ret, struct err *err);
void files_tree_free(struct files_tree *t);
