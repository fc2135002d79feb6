/*
 * tree.h - the one walker and copier of trees someone else controls.
 *
 * tree_walk() visits what is below a pinned directory, depth first, the
 * names of each directory in strcmp order. Every entry is looked at once
 * with fstatat(AT_SYMLINK_NOFOLLOW) in the descriptor of the directory it
 * is in; a directory is entered only when the callback asks, opened with
 * O_NOFOLLOW in that same descriptor and checked (device and inode) to be
 * the one looked at. A symlink is never followed, ".." never used, a name
 * is never resolved from the top: a directory swapped for a symlink (or
 * moved) between two steps is skipped, never entered, so a concurrent
 * sandbox cannot lead the walk out of the tree. An entry that vanishes
 * between being read and being looked at is skipped too.
 *
 * Bounds: directories are entered at most max_depth levels down, so a
 * walk holds at most 2 * (max_depth + 1) descriptors (each level's
 * directory and the callback's aux descriptor for it, see TREE_DIR) plus
 * one while reading; it reads at most max_names names in all, and holds the
 * names of the directories on the way down (read whole, then the stream is
 * closed), never more. Each directory's names are read before any of them
 * is visited, so the order is stable and a name added meanwhile is not
 * seen.
 *
 * tree_copy() is a walk that makes what it visits below a destination
 * directory: regular files (data extents only, util/fd.h fd_copy_sparse(),
 * so holes stay holes), directories, symlinks (as links, never followed)
 * and fifos; the caller decides per entry what to copy and the owner, mode
 * and times it gets, and hears about every failed step. Destination names
 * are only ever made, opened (O_NOFOLLOW), replaced or removed as names in
 * a pinned destination directory, so a destination the sandbox controls
 * cannot redirect the copy either.
 *
 * Not here: resolving a path to the top (util/path.h), removing a tree
 * (util/fd.h rm_tree_at()). Functions return 0 or -errno (or what a
 * callback returned), block (plain file system calls), never log and keep
 * no state; descriptors passed in are borrowed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define TREE_DEPTH_MAX 256     /* levels a walk may enter at most: max_depth's ceiling */
#define TREE_NAMES_MAX 1000000 /* names a walk reads at most unless told fewer */

/* Budgets of a walk. Zero fields take the defaults. */
struct tree_opts {
    unsigned max_depth; /* enter directories at most this deep (the top's entries are depth 1):
                         * -ELOOP for the next; 0 or past TREE_DEPTH_MAX = TREE_DEPTH_MAX */
    uint64_t max_names; /* names read from directories in all: -E2BIG past; 0 = TREE_NAMES_MAX */
    const char *prefix; /* entry paths: prefix, "/" (unless it ends in one), the names joined by
                         * "/"; NULL = the names alone ("a", "a/b") */
    size_t path_max;    /* bytes of an entry's path: -ENAMETOOLONG past; 0 = 4095 */
};

enum tree_event {
    TREE_ENTRY, /* an entry, e->st its lstat: fn returns TREE_ENTER to go into a directory,
                 * 0 to go on, < 0 to stop the walk */
    TREE_DIR,   /* a directory fn entered, opened and checked, its names not read yet:
                 * e->fd; fn may set e->own_aux; returns 0, TREE_SKIP (do not read it: no
                 * TREE_LEAVE) or < 0 */
    TREE_LEAVE, /* after a directory's entries: e->fd, e->own_aux; returns 0 or < 0 */
    TREE_ERROR, /* e->step failed on the entry with e->error: fn returns 0 to leave it out
                 * and go on (a directory that cannot be read counts as empty), < 0 to stop */
};

#define TREE_ENTER 1
#define TREE_SKIP  1

/* The step that failed (TREE_ERROR, tree_copy_ops.failed). */
enum tree_step {
    TREE_STEP_STAT,      /* lstat of the entry (e->st is not set) */
    TREE_STEP_OPEN,      /* opening a directory to enter it (not: it vanished or was swapped) */
    TREE_STEP_READ,      /* reading the names of a directory entered */
    TREE_STEP_OPEN_FILE, /* copy: opening a regular file to read it */
    TREE_STEP_READLINK,  /* copy: reading a symlink */
    TREE_STEP_REPLACE,   /* copy: removing what is at the destination name (EISDIR: a directory
                          * where a file or link goes) */
    TREE_STEP_MKDIR,     /* copy: making a directory */
    TREE_STEP_OPEN_DST,  /* copy: opening the directory made or merged into (ENOTDIR, ELOOP:
                          * something else is at its name) */
    TREE_STEP_READ_DST,  /* copy, TREE_COPY_SYNC: reading the destination directory's names */
    TREE_STEP_REMOVE,    /* copy, TREE_COPY_SYNC: removing a destination entry the source lacks
                          * (e names it, in the destination) */
    TREE_STEP_CREATE,    /* copy: creating a regular file */
    TREE_STEP_DATA,      /* copy: copying its data (EFBIG: past the data budget) */
    TREE_STEP_ATTRS,     /* copy: owner, mode, times of a file or directory */
    TREE_STEP_LINK,      /* copy: making a symlink, its owner and times */
    TREE_STEP_FIFO,      /* copy: making a fifo, its owner, mode and times */
};

struct tree_entry {
    int dirfd;        /* the directory the entry is in (pinned; O_RDONLY, or the caller's) */
    int aux;          /* that directory's aux descriptor (TREE_DIR), or the walk's */
    const char *name; /* its name in dirfd */
    const char *path; /* prefix and the names down to it (path_len bytes) */
    size_t path_len;
    unsigned depth;      /* 1 for the top's entries (tree_walk_at(): 0 for the one named) */
    struct stat st;      /* lstat, taken once (not for TREE_STEP_STAT) */
    int fd;              /* TREE_DIR, TREE_LEAVE: the directory, O_RDONLY|O_DIRECTORY, borrowed */
    int own_aux;         /* TREE_DIR: fn may put a descriptor here (taken): its entries get it
                          * as aux, TREE_LEAVE gets it back, then the walk closes it */
    enum tree_step step; /* TREE_ERROR */
    int error;           /* TREE_ERROR: a positive errno */
};

typedef int (*tree_fn)(void *ud, enum tree_event ev, struct tree_entry *e);

/* Walks what is below the directory dirfd (any descriptor of it, O_PATH
 * too; it is not moved), calling fn. aux is what the top's entries get as
 * e->aux (borrowed). Returns 0, the first fn result < 0, or -errno: -ELOOP
 * past max_depth, -E2BIG past max_names, -ENAMETOOLONG past path_max,
 * -ENOMEM. */
int tree_walk(int dirfd, int aux, const struct tree_opts *o, tree_fn fn, void *ud);

/* The same, starting with the entry name in dirfd itself (depth 0; a
 * failure to look at it, even ENOENT, is a TREE_ERROR), and below it when
 * fn enters it. */
int tree_walk_at(int dirfd, const char *name, int aux, const struct tree_opts *o, tree_fn fn,
                 void *ud);

/* --- copying --- */

/* What happens at the destination. */
enum tree_copy_mode {
    TREE_COPY_NEW,     /* every name is made anew (O_EXCL): one that exists fails its step
                        * with EEXIST */
    TREE_COPY_REPLACE, /* a file or link at a name is replaced, a directory merged into (its
                        * owner and mode kept) */
    TREE_COPY_SYNC,    /* make the destination equal: entries the source lacks are removed, an
                        * entry of another type replaced (rm -rf, util/fd.h rm_tree_at()),
                        * directories merged and given the source's attributes; a directory
                        * on another device than the destination's top (a mount point) is
                        * left alone, neither removed nor entered */
    TREE_COPY_DRY,     /* make nothing (no destination): decide, failed and made are called as
                        * for a copy, a regular file is opened to see that it can be read */
};

/* What one entry becomes. decide gets it filled with the source's mode
 * bits, no owner change and no times. */
struct tree_make {
    uid_t uid; /* owner; (uid_t)-1 = whoever made it (gid then too) */
    gid_t gid;
    mode_t mode; /* permission bits (07777), set after the owner (which clears set-id bits);
                  * a symlink has none */
    bool times;  /* give it the source's atime and mtime */
};

struct tree_copy_ops {
    /* Every source entry, before anything is made for it: fill mk and
     * return 0 to copy it, TREE_SKIP to leave it out (a directory with all
     * below it), < 0 to stop. Only regular files, directories, symlinks and
     * fifos can be made: anything else decide lets through is -EOPNOTSUPP. */
    int (*decide)(void *ud, const struct tree_entry *e, struct tree_make *mk);
    /* A step failed on e with errno error: return 0 to leave e out and go
     * on, < 0 to stop the copy. NULL: stop with -error. */
    int (*failed)(void *ud, const struct tree_entry *e, enum tree_step step, int error);
    /* e was made (TREE_COPY_DRY: would be): a directory once it exists, before what is in
     * it; target is a symlink's. NULL = nobody asks. */
    int (*made)(void *ud, const struct tree_entry *e, const struct tree_make *mk,
                const char *target);
};

struct tree_copy_opts {
    struct tree_opts walk; /* budgets of the walk of the source (prefix names e->path) */
    enum tree_copy_mode mode;
    uint64_t *data_budget; /* file data bytes it may still write, decremented; NULL = no
                            * bound; past it TREE_STEP_DATA fails with EFBIG */
    const struct tree_copy_ops *ops;
    void *ud;
};

/* Copies what is below the directory src into the directory dst (the two
 * tops themselves are the caller's: their attributes are not touched).
 * ret_bytes (may be NULL): file data bytes written. Returns 0 or what the
 * walk or a callback returned. */
int tree_copy(int src, int dst, const struct tree_copy_opts *o, uint64_t *ret_bytes);

/* Copies the entry sname in sdir, and what is below it, to dname in ddir
 * (ddir -EBADF for TREE_COPY_DRY). */
int tree_copy_at(int sdir, const char *sname, int ddir, const char *dname,
                 const struct tree_copy_opts *o, uint64_t *ret_bytes);
