/*
 * fileops.h - all file work on a sandbox's content, done with the rights
 * of one sandbox user and never more.
 *
 * abxd runs as host root. If it opened, listed, wrote or renamed a
 * sandbox's files itself, path resolution that stays inside the sandbox's
 * tree would not be enough: host root may read a 0600 host file bound into
 * the sandbox, list a 0700 host directory, or write where the sandbox's own
 * users cannot. So every such operation goes through a struct fileops: one
 * sandbox, one acting identity (its root or "user"). In the remote form
 * (every isolated sandbox) the work is done by abx-fileops, a small static
 * helper that lives in the sandbox's user namespace as exactly that
 * identity (fileops/main.c), started on first use and spoken to over a
 * socket (fileops-proto.h); the kernel then refuses the helper what it
 * refuses the sandbox's processes. The direct form calls files.h / vfs.h
 * in this process, with abxd's rights: for unit tests and for the
 * no-isolation development mode only.
 *
 * The calls mirror files.h (workspace-relative, normalized paths) and
 * vfs.h (the whole view, absolute normalized paths); see there for each
 * one's meaning, limits and errors. The remote form adds its own: -ESRCH
 * once the sandbox is gone (fileops_shutdown()), -EIO when the helper
 * fails or answers anything malformed (it is then killed; the next call
 * starts a new one), -ETIMEDOUT when it takes longer than
 * FILEOPS_TIMEOUT_MS (FILEOPS_LONG_TIMEOUT_MS for listings, removals and
 * snapshots) between answers. Descriptors it hands out are checked to be
 * what the call promises (a regular file, a directory, writable) before
 * they are returned. Error messages from the helper are passed on with
 * anything unprintable replaced.
 *
 * Thread-safe: a helper does one thing at a time, and a handle runs up to
 * FILEOPS_HELPERS of them, so a long listing on a worker does not hold up
 * a short call from the loop. Callbacks (walk, list) run on the calling
 * thread during the call and must not call into the same handle
 * (-EDEADLK). Handles are reference-counted; a worker may keep one while
 * the sandbox dies.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/files.h"
#include "sandbox/snapshot.h"
#include "sandbox/vfs.h"
#include "util/err.h"

#define FILEOPS_HELPERS         2 /* helper processes one handle may run at once */
#define FILEOPS_TIMEOUT_MS      (60 * 1000)
#define FILEOPS_LONG_TIMEOUT_MS (15 * 60 * 1000)

struct fileops;

/* Where a remote handle's helpers come from when it does not start them
 * itself: a process without the sandbox's descriptors or the privilege to
 * pass them (the network process, which asks the privileged parent,
 * priv/client.h). Returns a socket connected to a helper that already is
 * the identity as_root names (its HELLO answered, fileops-helper.h) and a
 * pidfd of it, both O_CLOEXEC and the handle's. The handle is not that
 * helper's parent: it ends one by closing its socket (the helper exits)
 * and signalling the pidfd (which the kernel may refuse), and never reaps
 * it; whoever started it does. Called from the thread making the call,
 * with no lock of the handle held, so it must be safe on every thread
 * that calls into the handle. */
typedef int (*fileops_start_fn)(void *ud, bool as_root, int *ret_sock, int *ret_pidfd,
                                uint64_t *ret_token, struct err *err);
/* Kills a helper that start gave (token: what start returned with it),
 * which the handle itself may not be allowed to signal (another uid).
 * Called when a helper failed a call (a deadline, a malformed answer): a
 * healthy one ends when its socket closes. From the thread of that call,
 * with no lock of the handle held. */
typedef void (*fileops_stop_fn)(void *ud, uint64_t token);
/* The directory dirfd (the caller's own storage) as an idmapped tree for
 * this sandbox's helper (jail_idmap_tree()), for snapshots and copies in
 * ns mode when the handle holds no user namespace. */
typedef int (*fileops_idmap_fn)(void *ud, int dirfd, int *ret_fd, struct err *err);

/* What a remote handle needs to start its helper; every descriptor is
 * duplicated (the caller keeps its own). */
struct fileops_remote {
    int image_fd;       /* the abx-fileops image (sandbox_host's); -1 with start */
    int userns_fd;      /* ns mode: the sandbox's user namespace; else -1 (-1 with start) */
    int ws_fd;          /* the workspace root (O_PATH directory); -1 with start */
    int view_fd;        /* the sandbox's "/" (O_PATH), or -1 (uid mode, or with start) */
    bool ns;            /* ns mode: uid/gid below are the sandbox's own ids */
    bool as_root;       /* the sandbox's root, else "user" */
    uint32_t uid, gid;  /* who the helper becomes */
    struct vfs_ids ids; /* how the helper names ids (in its own terms) */
    uint64_t caps;      /* kept when as_root in ns mode (jail_root_caps()) */
    const void *bpf;    /* the sandboxes' seccomp program; copied */
    size_t bpf_len;
    const char *label; /* for messages ("sandbox 'x'"); copied */
    /* Helpers from elsewhere (NULL: the handle starts its own from the
     * fields above with fileops_helper_start()). With start, only ns,
     * as_root, label and has_view count: the identity is the starter's
     * to send. start_ud is passed to start, idmap and stop. */
    fileops_start_fn start;
    fileops_idmap_fn idmap; /* with start, ns mode: for snapshots and copies; NULL: refused */
    fileops_stop_fn stop;   /* with start: kills a helper it gave; NULL: the socket's close only */
    void *start_ud;         /* for the hooks; borrowed, must outlive the handle */
    bool has_view;          /* with start: the helper has the sandbox's view (ns mode) */
};

int fileops_new_remote(const struct fileops_remote *c, struct fileops **ret, struct err *err);
/* In-process, with this process's rights (tests, no-isolation mode). fds
 * are duplicated; view_fd may be -1. uid:gid own what is created. */
int fileops_new_direct(int ws_fd, int view_fd, const struct vfs_ids *ids, uid_t uid, gid_t gid,
                       bool as_root, struct fileops **ret);
struct fileops *fileops_ref(struct fileops *f);
struct fileops *fileops_unref(struct fileops *f); /* NULL is ok; returns NULL */
/* The sandbox is gone: ends the helper (a call in flight fails) and makes
 * every later call fail with -ESRCH. Idempotent. */
void fileops_shutdown(struct fileops *f);
/* Other deadlines than FILEOPS_TIMEOUT_MS / FILEOPS_LONG_TIMEOUT_MS (tests). */
void fileops_set_timeouts(struct fileops *f, int ms, int long_ms);
/* The pid of a running helper (for tests), 0 when none runs. */
pid_t fileops_helper_pid(struct fileops *f);
static inline void
fileops_unrefp(struct fileops **f)
{
    (void)fileops_unref(*f);
}

/* --- the workspace (files.h) --- */

int fileops_stat(struct fileops *f, const char *rel, struct files_stat *ret, struct err *err);
int fileops_open_read(struct fileops *f, const char *rel, int *ret_fd, struct files_stat *ret,
                      struct err *err);

struct fileops_upload;
/* Data is written by the caller (fileops_upload_write(), or to
 * fileops_upload_fd() directly); past max_bytes -EFBIG. */
int fileops_upload_begin(struct fileops *f, const char *rel, uint64_t max_bytes,
                         struct fileops_upload **ret, struct err *err);
int fileops_upload_write(struct fileops_upload *up, const void *data, size_t n, struct err *err);
int fileops_upload_fd(const struct fileops_upload *up);
uint64_t fileops_upload_size(const struct fileops_upload *up);
/* Links the data into place and frees up (a workspace upload). */
int fileops_upload_commit(struct fileops_upload *up, struct files_stat *ret, bool *ret_created,
                          struct err *err);
void fileops_upload_abort(struct fileops_upload *up); /* NULL is ok */

int fileops_delete(struct fileops *f, const char *rel, struct err *err);
int fileops_mkdir(struct fileops *f, const char *rel, bool *ret_created, struct err *err);
int fileops_rmdir(struct fileops *f, const char *rel, struct err *err);
int fileops_rename(struct fileops *f, const char *from, const char *to, bool overwrite,
                   struct err *err);
int fileops_walk(struct fileops *f, const char *rel, files_walk_fn fn, void *ud, struct err *err);
int fileops_tree_list(struct fileops *f, const char *rel, const struct files_walk_opts *opts,
                      struct files_tree *ret, struct err *err);

/* --- the whole view (vfs.h) --- */

int fileops_vstat(struct fileops *f, const char *path, struct vfs_entry *ret, struct err *err);
/* fd: a file this handle opened (a view upload's staging file). */
int fileops_vstat_fd(struct fileops *f, int fd, const char *path, struct vfs_entry *ret,
                     struct err *err);
int fileops_vlist(struct fileops *f, const char *path, unsigned depth, vfs_list_fn fn, void *ud,
                  struct err *err);
int fileops_vopen_dir(struct fileops *f, const char *path, int *ret_fd, struct err *err);
/* dirfd: a directory this handle opened. */
int fileops_vopen_below(struct fileops *f, int dirfd, const char *rel, int *ret_fd,
                        struct err *err);
/* inotify_add_watch() on ifd (borrowed, this process's) for the directory
 * dirfd (one fileops_vopen_*() gave), with the helper's rights: a watch is
 * made only where the acting user may read. *ret_wd: the watch, or -errno
 * (-EACCES and the like as inotify_add_watch() gives them). mask: events
 * and IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK only. */
int fileops_vwatch_add(struct fileops *f, int ifd, int dirfd, uint32_t mask, int *ret_wd,
                       struct err *err);
int fileops_vmkdir(struct fileops *f, const char *path, bool *ret_created, struct err *err);
int fileops_vrename(struct fileops *f, const char *src, const char *dst, struct err *err);
int fileops_vremove(struct fileops *f, const char *path, struct err *err);
int fileops_vopen_read(struct fileops *f, const char *path, int *ret_fd, uint64_t *ret_size,
                       struct err *err);
/* A staged write of path (vfs_upload_begin()): data through
 * fileops_upload_write() / _fd(), metadata with fileops_vset_meta() on
 * fileops_upload_fd(), then fileops_vupload_commit() or
 * fileops_upload_abort(). */
int fileops_vupload_begin(struct fileops *f, const char *path, uint64_t max_bytes,
                          struct fileops_upload **ret, struct err *err);
int fileops_vupload_commit(struct fileops_upload *up, bool *ret_created, struct err *err);
int fileops_vset_meta(struct fileops *f, int fd, const struct vfs_meta *m, struct err *err);
/* srcdir: a directory of abxd's own (a template's files), which the
 * helper sees through an idmapped mount as the sandbox's root's (see the
 * snapshots below); src relative to it, dst absolute in the view. */
int fileops_vcopy_in(struct fileops *f, int srcdir, const char *src, const char *dst,
                     struct err *err);

/* --- snapshots (snapshot.h) --- */

/* dstfd / srcfd: an (empty / snapshot) directory of abxd's own storage,
 * whose files carry the sandbox's own ids (snapshot.h); the helper sees it
 * through an idmapped mount (jail_idmap_tree()), so it writes and reads
 * them as the sandbox's root would. Use a root handle. */
int fileops_snapshot_out(struct fileops *f, int dstfd, uint64_t max_bytes,
                         struct snapshot_stats *ret, struct err *err);
int fileops_snapshot_in(struct fileops *f, int srcfd, struct err *err);
