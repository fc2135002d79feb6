/*
 * vfs.h - envd's file operations on a sandbox's whole view, from the host.
 *
 * The E2B surface addresses files as a process inside the sandbox sees them
 * (/home/user/a.txt, /tmp/x, /root/y), not relative to the workspace as
 * files.h does. Every function takes rootfd, a descriptor of the sandbox's
 * root directory (sandbox_view_fd(), or any directory in tests), and an
 * absolute path normalized by vfs_resolve(). Paths are resolved with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): ".." and absolute
 * symlinks stay inside rootfd, so nothing the sandbox plants, even while we
 * work, leads out of it. A final component that must not be followed
 * (stat, remove, rename, metadata) is reached as a name in its resolved
 * parent with the *at() calls and O_NOFOLLOW. Without openat2 every
 * operation fails with -ENOSYS; there is no weaker fallback.
 *
 * Semantics follow envd 0.6.x (specs/e2b-surface.md section 3.5, 4.2):
 * lstat for entries, symlinks reporting their target's type, Go's
 * FileMode.String() for perms, user.e2b.* xattrs as metadata. Files and
 * directories created here belong to the acting sandbox user (as_root:
 * sandbox root) and get mode 0644 / 0755 whatever the umask. Files on a
 * pseudo file system (procfs) are opened for reading under the acting
 * user's host ids without capabilities, and never for writing.
 *
 * Functions return 0 or -errno, fill err and never log; fds passed in are
 * borrowed, ret_ values are written only on success. They block (plain
 * file system calls) and keep no state; opening a procfs file switches the
 * calling thread's credentials for that one open(), other threads never.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"
#include "util/path.h"

#define VFS_LIST_MAX     100000  /* entries one vfs_list() may report */
#define VFS_REMOVE_MAX   1000000 /* entries one vfs_remove() may delete */
#define VFS_MAX_DEPTH    256     /* directory levels vfs_list() descends */
#define VFS_META_PREFIX  "user.e2b."
#define VFS_META_MAX     32   /* metadata pairs per entry */
#define VFS_META_KEY_MAX 246  /* bytes of one key, prefix excluded (envd) */
#define VFS_META_BYTES   4096 /* bytes of all keys and values together (envd) */
#define VFS_PERMS_LEN    16   /* vfs_go_perms() output, NUL included */

/* Host ids of one sandbox, for ownership and names. */
struct vfs_ids {
    uid_t root_uid; /* sandbox root */
    gid_t root_gid;
    uid_t user_uid; /* sandbox "user" */
    gid_t user_gid;
    uid_t range_first;  /* host id of in-sandbox id 0 */
    uint32_t range_len; /* ids mapped; others show as nobody/nogroup */
};

enum vfs_type {
    VFS_UNSPECIFIED, /* special file, broken symlink */
    VFS_FILE,
    VFS_DIR,
    VFS_SYMLINK, /* never reported: a symlink reports its target's type */
};

/* user.e2b.<key> = value pairs, prefix stripped. Strings live in data. */
struct vfs_meta {
    uint32_t n;
    struct {
        uint16_t key, value; /* offsets into data of NUL-terminated strings */
    } at[VFS_META_MAX];
    uint16_t used; /* bytes of data in use */
    char data[VFS_META_BYTES + 2 * VFS_META_MAX];
};

static inline const char *
vfs_meta_key(const struct vfs_meta *m, uint32_t i)
{
    return m->data + m->at[i].key;
}

static inline const char *
vfs_meta_value(const struct vfs_meta *m, uint32_t i)
{
    return m->data + m->at[i].value;
}

/* Appends a pair. -EINVAL for an empty key, a key past VFS_META_KEY_MAX,
 * more than VFS_META_MAX pairs or VFS_META_BYTES in all. */
int vfs_meta_add(struct vfs_meta *m, const char *key, const char *value);

/* One envd EntryInfo. About 13 KiB: keep it off deep stacks. */
struct vfs_entry {
    char name[PATH_NAME_MAX + 1]; /* basename; "/" for the root */
    char path[PATH_MAX_LEN + 1];  /* absolute, as the sandbox sees it */
    enum vfs_type type;
    uint64_t size; /* bytes, from lstat */
    uint32_t mode; /* permission bits (& 0777); a symlink's target's */
    char perms[VFS_PERMS_LEN];
    char owner[32], group[32]; /* "root", "user", "1234", "nobody", ... */
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    bool has_target;               /* a symlink: target is set */
    char target[PATH_MAX_LEN + 1]; /* fully resolved, or path if unresolvable */
    struct vfs_meta meta;          /* never a symlink's */
};

/* Turns a client path into an absolute normalized one in out: "" → home,
 * "~" and "~/x" → below home, relative → below home; "." and ".." are
 * resolved lexically and never climb above "/". -EINVAL for "~name" or a
 * home that is not absolute, -ENAMETOOLONG past PATH_MAX_LEN bytes or a
 * component past PATH_NAME_MAX. */
int vfs_resolve(const char *path, const char *home, char *out, size_t outlen, struct err *err);

/* Go's os.FileMode(x).String() for the stat mode m: "-rw-r--r--",
 * "drwxr-xr-x", "Lrwxrwxrwx", "dtrwxrwxrwx", "urwxr-xr-x", "Dcrw-rw-rw-". */
void vfs_go_perms(mode_t m, char out[VFS_PERMS_LEN]);

/* lstat semantics on path; -ENOENT when missing. */
int vfs_stat(int rootfd, const struct vfs_ids *ids, const char *path, struct vfs_entry *ret,
             struct err *err);
/* The entry of an open regular file or directory fd known as path. */
int vfs_stat_fd(int fd, const struct vfs_ids *ids, const char *path, struct vfs_entry *ret,
                struct err *err);

/* Lists the directory path (a symlink to a directory is followed) down to
 * depth levels (0 counts as 1), depth-first pre-order, names in strcmp order
 * at each level, descending into real directories only. Entry paths are
 * path joined with the relative name. Entries that vanish are skipped. fn
 * returning < 0 stops the walk with that value; e is valid during the call.
 * -ENOENT, -ENOTDIR; -E2BIG past VFS_LIST_MAX entries (names read count,
 * so the walk never holds more), -ELOOP past VFS_MAX_DEPTH levels. */
typedef int (*vfs_list_fn)(void *ud, const struct vfs_entry *e);
int vfs_list(int rootfd, const struct vfs_ids *ids, const char *path, unsigned depth,
             vfs_list_fn fn, void *ud, struct err *err);

/* Opens the directory path (a symlink to one is followed inside the root,
 * as envd's os.Stat does before a watch); ret_fd is
 * O_RDONLY|O_DIRECTORY|O_CLOEXEC. -ENOENT, -ENOTDIR. */
int vfs_open_dir(int rootfd, const char *path, int *ret_fd, struct err *err);

/* Opens the directory rel (relative) below dirfd, any directory fd, without
 * following a single symlink and without leaving dirfd's tree: -ELOOP when
 * a component is a symlink, -EXDEV when ".." would climb out, -ENOENT,
 * -ENOTDIR. ret_fd as for vfs_open_dir(). */
int vfs_open_below(int dirfd, const char *rel, int *ret_fd, struct err *err);

/* mkdir -p, every created level 0755 and owned by the acting user.
 * ret_created is false when path already was a directory (or a symlink to
 * one). -ENOTDIR when path or a level above it exists and is not one. */
int vfs_mkdir(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root,
              bool *ret_created, struct err *err);

/* Renames src to dst (neither followed), creating dst's missing parents as
 * vfs_mkdir() does. -ENOENT for a missing src; -EEXIST when dst is an
 * existing directory (Go's os.Rename); -EBUSY for "/". */
int vfs_rename(int rootfd, const struct vfs_ids *ids, const char *src, const char *dst,
               bool as_root, struct err *err);

/* rm -rf without following symlinks, at any depth (iterative, a bounded
 * number of descriptors: util/fd.h rm_tree_at()). A missing path is 0; "/"
 * is -EBUSY, and so is a tree that keeps changing while it is removed;
 * -E2BIG past VFS_REMOVE_MAX entries; else the errno of the entry that
 * could not go, which the message names (a mount point: -EBUSY). */
int vfs_remove(int rootfd, const char *path, struct err *err);

/* Opens the regular file path (symlinks followed inside the root) for
 * reading; ret_fd is O_RDONLY|O_CLOEXEC, ret_size its size now (0 for procfs
 * files: read to EOF). -EISDIR for a directory, -EINVAL for another
 * non-regular file (fifo, socket, device: named in the message, never
 * opened). */
int vfs_open_read(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root,
                  int *ret_fd, uint64_t *ret_size, struct err *err);

/* A write of a whole file, staged: nothing at the target changes until
 * vfs_upload_commit() puts the complete new content in place at once, so
 * a failed, refused or abandoned upload leaves the old file whole (or no
 * file) and no temporary name behind. Where the write lands follows envd's
 * os.OpenFile(O_WRONLY|O_CREATE|O_TRUNC): a final symlink is followed
 * inside the root (also a dangling one), missing parents of path are made
 * as vfs_mkdir() does. The data goes to an unnamed O_TMPFILE in the
 * target's directory (a hidden ".abx-upload-<hex>" where the file system
 * has no O_TMPFILE) owned by the acting user, mode 0644 for a new file and
 * the old permission bits (set-id bits dropped) for a replaced one; commit
 * links it in or renames it over the target. A replaced file is a new
 * inode: its other hard links keep the old content; its user.* xattrs
 * other than user.e2b.* are carried over, user.e2b.* is the upload's (set
 * it on vfs_upload_fd() before commit), other namespaces go. One upload is used by one
 * thread; nothing is shared between uploads. */
struct vfs_upload;

/* -EISDIR for a directory (or "/"), -EINVAL for another non-regular file
 * (the message names its type; it is never opened), -EACCES on a pseudo
 * file system, -ELOOP for too many links. Writes past max_bytes fail. */
int vfs_upload_begin(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root,
                     uint64_t max_bytes, struct vfs_upload **ret, struct err *err);
/* The staged file (O_WRONLY|O_CLOEXEC), borrowed: for vfs_set_meta(). */
int vfs_upload_fd(const struct vfs_upload *up);
/* Appends n bytes; -EFBIG past max_bytes (nothing written then). */
int vfs_upload_write(struct vfs_upload *up, const void *data, size_t n, struct err *err);
/* Bytes written so far. */
uint64_t vfs_upload_size(const struct vfs_upload *up);
/* Puts the file in place (replacing a file or a link, never a directory:
 * -EISDIR) and frees up, also on failure, after which the target is as it
 * was. ret_created (may be NULL): there was nothing at the target. */
int vfs_upload_commit(struct vfs_upload *up, bool *ret_created, struct err *err);
/* Discards the staged data and frees up. NULL is fine. */
void vfs_upload_abort(struct vfs_upload *up);

/* Replaces the user.e2b.* xattrs of the open file fd with m (NULL or empty
 * = remove them all). -EINVAL when m breaks the vfs_meta_add() limits,
 * -EOPNOTSUPP when the file system has no user xattrs. */
int vfs_set_meta(int fd, const struct vfs_meta *m, struct err *err);

#define VFS_COPY_MAX_ENTRIES 200000 /* entries one vfs_copy_in() may make */
#define VFS_COPY_MAX_DEPTH   64     /* directory levels it descends */

/* Copies src - a relative path below the directory srcdir, no symlink
 * followed on the way or at the end - to the absolute path dst in the
 * view: a regular file (mode 0755 if its owner may run it, else 0644), a
 * symlink (as a link) or a directory with everything below it. dst's
 * missing parents are made as vfs_mkdir() does; an existing file or link
 * at a destination name is replaced, an existing directory merged into.
 * Everything made belongs to the acting user. -EPERM when the source
 * holds a device, fifo or socket; -E2BIG, -ELOOP past the limits. */
int vfs_copy_in(int rootfd, const struct vfs_ids *ids, int srcdir, const char *src, const char *dst,
                bool as_root, struct err *err);
