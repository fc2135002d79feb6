/*
 * path.h - the one resolver for names inside a hostile tree.
 *
 * Every open of a name inside a tree that someone else controls (a
 * sandbox's workspace or whole view, an archive being extracted) goes
 * through here, never through a string concatenation or realpath(). A
 * client path is POSIX and '/'-rooted at a directory we hold open.
 * path_normalize() turns it into a relative path with no ".", "..",
 * empty or over-long components; every other byte but NUL belongs to a
 * name, as it does for the kernel (newlines, escapes and bytes that are
 * not UTF-8 included: surfaces encode them, util/json.h, and logs escape
 * them, util/log.h).
 *
 * path_openat() resolves a path against a pinned directory with openat2()
 * in one of two modes: PATH_BENEATH (the path must stay below the
 * directory: ".." above it, absolute paths and symlinks that lead out fail
 * with -EXDEV) or PATH_IN_ROOT (the directory is "/": ".." and absolute
 * symlinks stop at it, as they would for a process chrooted there).
 * Magic links (/proc/self/fd/N, /proc/N/root) are never followed. Both
 * hold even while code in the sandbox swaps directories and symlinks
 * concurrently: the kernel checks every step. Without openat2, only
 * PATH_BENEATH with PATH_FALLBACK works, as a walk component by component
 * with O_NOFOLLOW that refuses every symlink (-ELOOP) and ".." (-EXDEV);
 * everything else is -ENOSYS. A final component that must not be followed
 * is reached as a name in its parent: path_open_parent(), then the *at()
 * calls with AT_SYMLINK_NOFOLLOW / O_NOFOLLOW. path_mkdirat() is mkdir -p
 * in either mode; path_fail() is the one errno -> message mapping of the
 * file operations (files.h speaks of "the workspace", vfs.h of paths as
 * the sandbox sees them).
 *
 * Functions return an fd or 0 on success, -errno on failure; they block
 * (plain file system calls), never log and keep no state but the cached
 * openat2 probe. Descriptors passed in are borrowed; those returned are
 * O_CLOEXEC and the caller's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PATH_MAX_LEN  4095 /* bytes of a normalized path */
#define PATH_NAME_MAX 255  /* bytes of one component */
#define PATH_RETRIES  32   /* openat2 -EAGAIN (a rename raced "..") and mkdir swap retries */

struct err;

/* How path_openat() and friends resolve: exactly one of PATH_BENEATH and
 * PATH_IN_ROOT, plus any of the others. */
#define PATH_BENEATH     (1u << 0) /* RESOLVE_BENEATH: stay below dirfd, else -EXDEV */
#define PATH_IN_ROOT     (1u << 1) /* RESOLVE_IN_ROOT: dirfd is "/" */
#define PATH_NO_XDEV     (1u << 2) /* never cross a mount point: -EXDEV */
#define PATH_NO_SYMLINKS (1u << 3) /* no symlink at all, not even one inside: -ELOOP */
#define PATH_FALLBACK    (1u << 4) /* PATH_BENEATH: without openat2, the O_NOFOLLOW walk */

/* A workspace (files.h): below its root, on its own file system. */
#define PATH_WORKSPACE (PATH_BENEATH | PATH_NO_XDEV | PATH_FALLBACK)
/* A sandbox's whole view (vfs.h): its "/" is the root; no fallback. */
#define PATH_VIEW PATH_IN_ROOT

/* Normalizes a client path into out (outsz >= strlen(in) + 2). The result is
 * "." for the root, else "a/b/c". -EINVAL for empty input, ".." or NUL
 * bytes (len != strlen); -ENAMETOOLONG past the limits. */
int path_normalize(const char *in, size_t len, char *out, size_t outsz);

/* True when rel (normalized) is the root ("."). */
bool path_is_root(const char *rel);

/* Splits a normalized non-root path into its parent ("." when none) and its
 * last component; both point into caller buffers of outsz bytes. */
int path_split(const char *rel, char *parent, char *name, size_t outsz);

/* Splits path - relative ("a/b") or absolute ("/a/b") - at its last '/'
 * into the parent ("a", "/a"; "." or "/" at the top) and the last name.
 * -EINVAL for "", ".", "/" or a path ending in '/' (no name), -ENAMETOOLONG
 * when the parent needs more than size bytes or the name is past
 * PATH_NAME_MAX. */
int path_parent(const char *path, char *parent, size_t size, char name[PATH_NAME_MAX + 1]);

/* openat2(dirfd, path, flags, mode) resolved as how says (see above), with
 * RESOLVE_NO_MAGICLINKS always; O_CLOEXEC is added, mode is used only with
 * O_CREAT or O_TMPFILE. A rename racing the lookup (-EAGAIN) is retried up
 * to PATH_RETRIES times. Returns the fd or -errno: -EXDEV for a way out
 * (PATH_BENEATH, PATH_NO_XDEV), -ELOOP for a refused symlink, -ENOSYS
 * without openat2 unless PATH_FALLBACK, -EINVAL for a bad how. */
int path_openat(int dirfd, const char *path, int flags, mode_t mode, unsigned how);

/* path_openat(rootfd, rel, flags, mode, PATH_WORKSPACE). */
int path_open(int rootfd, const char *rel, int flags, mode_t mode);

/* Opens the parent directory of path (O_PATH|O_DIRECTORY) as how says and
 * puts the last component in name: the final component itself is never
 * followed, the caller acts on it with the *at() calls. Errors as for
 * path_parent() and path_openat(). */
int path_open_parent(int dirfd, const char *path, unsigned how, char name[PATH_NAME_MAX + 1]);

/* How path_mkdirat() makes what is missing. */
struct path_mkdir {
    mode_t mode; /* of each level made: less the umask, unless exact */
    uid_t uid;   /* owner of each level made; (uid_t)-1 = whoever made it */
    gid_t gid;
    bool exact;  /* each level made gets exactly mode, whatever the umask */
    bool follow; /* an existing level may be a symlink to a directory,
                  * followed as how allows (Go's os.MkdirAll); else any
                  * symlink on the way is refused (-ELOOP or -ENOTDIR)
                  * once something needs making */
};

/* mkdir -p: opens the directory path (O_PATH|O_DIRECTORY) as how says,
 * making the levels that are missing, each one in the directory descriptor
 * of the level above (never by name from the top). A level made is owned
 * and chmod'ed through a descriptor opened with O_NOFOLLOW: one swapped
 * meanwhile is not ours and is left alone. A level that exists and is no
 * directory: -ENOTDIR (also a dangling symlink when following: its target
 * is not made). ret_created (may be NULL): whether the last level was made
 * by this call. */
int path_mkdirat(int dirfd, const char *path, unsigned how, const struct path_mkdir *m,
                 bool *ret_created);

/* path_mkdirat(rootfd, rel, PATH_WORKSPACE, {mode, uid, gid}, NULL). */
int path_mkdir_p(int rootfd, const char *rel, mode_t mode, uid_t uid, gid_t gid);

/* Whether this kernel has openat2 (cached after the first call). */
bool path_have_openat2(void);

/* Who is speaking to the client about a path. */
enum path_voice {
    PATH_VOICE_WORKSPACE, /* files.h: path is normalized relative ("." = "/"), shown "/a/b" */
    PATH_VOICE_VIEW,      /* vfs.h: path is absolute as the sandbox sees it, shown as is */
};

/* Fills err with the message for the errno of a failed operation on path
 * (r < 0) - "leads outside the workspace", "does not exist", "is a
 * directory", the disk bound, ... - or, for an errno without a message of
 * its own, "cannot <what> '<path>': <strerror>". Returns r. */
int path_fail(struct err *err, int r, enum path_voice voice, const char *path, const char *what);
