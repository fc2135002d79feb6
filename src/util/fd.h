/*
 * fd.h - descriptor and small-file helpers for host-side paths we own.
 *
 * These operate on trusted directories (the state directory, cgroupfs,
 * /proc). Paths inside a sandbox go through path.h instead. All descriptors
 * are opened O_CLOEXEC. Functions return 0 (or a count) or -errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

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

/* Removes dirfd/name and, if it is a directory, everything below it, never
 * following symlinks and using O(1) descriptors whatever the depth. For
 * trees nobody is writing to any more (a dead sandbox's). -ENOENT is 0. */
int rm_rf_at(int dirfd, const char *name);

/* The names in the directory dirfd (without "." and ".."), sorted bytewise
 * (strcmp); at most max of them, -E2BIG past that. Reads through a fresh
 * descriptor of "." so dirfd's offset is untouched (O_PATH is fine). Free
 * the list with fd_names_free(). */
int fd_dir_names(int dirfd, size_t max, char ***ret, size_t *ret_n);
void fd_names_free(char **v, size_t n);

/* Copies the regular file src to dirfd/name with mode (via a temp + rename). */
int copy_file_at(int srcdirfd, const char *src, int dirfd, const char *name, mode_t mode);
