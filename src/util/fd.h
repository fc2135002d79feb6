/*
 * fd.h - descriptor and small-file helpers for host-side paths we own.
 *
 * These operate on trusted directories (the state directory, cgroupfs,
 * /proc). Paths inside a sandbox go through path.h instead; rm_tree_at()
 * and fd_copy_sparse() are the exceptions, made to work on what a sandbox
 * controls (given a directory or file already reached safely). All
 * descriptors are opened O_CLOEXEC. Functions return 0 (or a count) or
 * -errno.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"

int fd_set_nonblock(int fd, bool on);
int fd_set_cloexec(int fd, bool on);

/* Reads/writes exactly n bytes unless EOF (read returns the count read). */
ssize_t read_full(int fd, void *buf, size_t n);
int write_full(int fd, const void *buf, size_t n);

/* Writes s (no newline added) to dirfd/name, truncating; mode for creation. */
int write_file_at(int dirfd, const char *name, const char *s, mode_t mode);
/* Like write_file_at() but the file must exist (cgroupfs, /proc). */
int write_existing_at(int dirfd, const char *name, const char *s);
/* Reads at most max bytes of dirfd/name into b (replacing its contents). */
int read_file_at(int dirfd, const char *name, size_t max, struct buf *b);

/* mkdir -p of an absolute or relative path; existing directories are fine. */
int mkdir_p(const char *path, mode_t mode);

#define RM_TREE_FDS      16 /* directory streams rm_tree_at() keeps open at most */
#define RM_TREE_RESTARTS 16 /* times it starts over on a tree changed under it */

/* What rm_tree_at() may do, and where it stopped. */
struct rm_tree {
    uint64_t max;              /* entries it may look at; 0 = no limit */
    uint64_t seen;             /* entries looked at (out) */
    unsigned depth;            /* on failure: levels below name of the entry that failed */
    char failed[NAME_MAX + 1]; /* on failure: that entry's name, "" for name itself */
};

/* Removes dirfd/name and, if it is a directory, everything below it, never
 * following symlinks, at any depth, with at most RM_TREE_FDS + 2
 * descriptors (fewer when the process runs out) and 16 bytes of memory
 * per level. Safe on a tree that someone (a sandbox) changes meanwhile: it
 * descends only into directories it opened with O_NOFOLLOW and climbs back
 * with "..", checked to be the directory it came from (device and inode),
 * so a directory moved meanwhile can make it start over, never lead it
 * elsewhere. A missing name is 0. -E2BIG past t->max entries; -ESTALE when
 * the tree kept changing (RM_TREE_RESTARTS); else the errno of the entry
 * t->failed names (-EBUSY for a mount point, -EPERM for an immutable
 * file). t may be NULL (no limit, no report). Blocks; no state. */
int rm_tree_at(int dirfd, const char *name, struct rm_tree *t);

/* rm_tree_at() without a limit: for trees we own (a dead sandbox's). */
int rm_rf_at(int dirfd, const char *name);

/* What the file type of mode is called in messages: "regular file",
 * "directory", "symlink", "fifo", "unix socket", "character device",
 * "block device", "file of unknown type". */
const char *fd_type_name(mode_t mode);

/* Copies the first size bytes of the regular file in into the empty regular
 * file out, keeping holes: only the extents lseek(SEEK_DATA/SEEK_HOLE)
 * reports as data are read and written, the rest stays a hole, and out is
 * truncated to its length at the end (size, or less if in shrank). buf is
 * bufsz bytes of scratch. budget, when not NULL, holds the data bytes it may
 * still write and is decremented: -EFBIG past it. A file system without
 * SEEK_DATA counts as all data. ret_data: data bytes written. Moves both
 * file offsets. */
int fd_copy_sparse(int in, int out, uint64_t size, char *buf, size_t bufsz, uint64_t *budget,
                   uint64_t *ret_data);

/* The names in the directory dirfd (without "." and ".."), sorted bytewise
 * (strcmp); at most max of them, -E2BIG past that. Reads through a fresh
 * descriptor of "." so dirfd's offset is untouched (O_PATH is fine). Free
 * the list with fd_names_free(). */
int fd_dir_names(int dirfd, size_t max, char ***ret, size_t *ret_n);
void fd_names_free(char **v, size_t n);

/* Copies the regular file src to dirfd/name with mode (via a temp + rename). */
int copy_file_at(int srcdirfd, const char *src, int dirfd, const char *name, mode_t mode);
