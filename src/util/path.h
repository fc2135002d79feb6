/*
 * path.h - resolving client-supplied paths inside a pinned directory.
 *
 * A client path is POSIX and '/'-rooted at a root directory we hold open
 * (a sandbox's workspace). path_normalize() turns it into a relative path
 * with no ".", "..", empty or over-long components; every other byte but
 * NUL belongs to a name, as it does for the kernel (newlines, escapes and
 * bytes that are not UTF-8 included: surfaces encode them, util/json.h, and
 * logs escape them, util/log.h); path_open() and friends
 * resolve it against the root descriptor with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), so a symlink that leads out of the
 * root - even one planted concurrently by code in the sandbox - fails with
 * -EXDEV instead of being followed. Without openat2 the fallback walks
 * component by component with O_NOFOLLOW and refuses every symlink (-ELOOP).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PATH_MAX_LEN  4095 /* bytes of a normalized path */
#define PATH_NAME_MAX 255  /* bytes of one component */
#define PATH_RETRIES  32   /* openat2 -EAGAIN (a rename raced "..") and swap retries */

struct err;

/* Normalizes a client path into out (outsz >= strlen(in) + 2). The result is
 * "." for the root, else "a/b/c". -EINVAL for empty input, ".." or NUL
 * bytes (len != strlen); -ENAMETOOLONG past the limits. */
int path_normalize(const char *in, size_t len, char *out, size_t outsz);

/* True when rel (normalized) is the root ("."). */
bool path_is_root(const char *rel);

/* Splits a normalized non-root path into its parent ("." when none) and its
 * last component; both point into caller buffers of outsz bytes. */
int path_split(const char *rel, char *parent, char *name, size_t outsz);

/* openat2(rootfd, rel, flags, mode) confined beneath rootfd. O_CLOEXEC is
 * added. Returns the fd or -errno (-EXDEV when rel leads outside). */
int path_open(int rootfd, const char *rel, int flags, mode_t mode);

/* Opens the directory rel (O_PATH|O_DIRECTORY), creating missing components
 * with mode and then chowning each one it created to uid:gid (uid -1 keeps).
 * A component that turns out to be a symlink or non-directory is refused. */
int path_mkdir_p(int rootfd, const char *rel, mode_t mode, uid_t uid, gid_t gid);

/* Whether this kernel has openat2 (cached after the first call). */
bool path_have_openat2(void);

/* --- moved from sandbox/vfs.c and sandbox/files.c --- */

/* openat2(dirfd, path, flags, mode) with resolve, retried on -EAGAIN up to
 * PATH_RETRIES times. O_CLOEXEC is added. No fallback: -ENOSYS. */
int path_openat_how(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve);
/* "/a/b" → parent "/a", name "b"; "/b" → "/", "b". path is not "/". */
void path_split_abs(const char *path, char *parent, char *name);
/* mkdir -p of the absolute path inside rootfd (RESOLVE_IN_ROOT) like
 * os.MkdirAll, levels made 0755 and owned by uid:gid. */
int path_mkdir_in_root(int rootfd, const char *path, uid_t uid, gid_t gid, bool *ret_created);
/* The errno of a lookup as a message naming the path (files.c's, vfs.c's). */
int path_fail_workspace(struct err *err, int r, const char *rel, const char *what);
int path_fail_view(struct err *err, int r, const char *path, const char *what);
