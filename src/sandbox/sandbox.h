/*
 * sandbox.h - the Sandbox: create, kill, exec into a process table, and the
 * file operations on its workspace.
 *
 * The local implementation runs on jail: each sandbox is one jail plus a
 * process table of struct proc (see proc.h). A warm pool of ready jails,
 * refilled in the background, lets sandbox_create() answer without waiting
 * for namespaces and mounts. Exec decodes nothing: callers pass argv, env,
 * cwd and deadlines as C values; output and exit status are read from the
 * proc. A non-zero exit is a result, never an error: only an unknown or dead
 * sandbox, or a request the sandbox cannot start (bad cwd, too many
 * processes), fails.
 *
 * Descriptors are budgeted: each process holds two or three in abxd (its
 * stdout and stderr pipes, stdin's while open; a terminal's master twice),
 * each jail SANDBOX_JAIL_FDS. A sandbox's processes may hold at most
 * sandbox_fd_limit() (-EAGAIN past it, like SANDBOX_MAX_RUNNING), and all
 * jails and processes together at most the host's budget (-EMFILE past
 * it, for exec and create alike), so that what is left of RLIMIT_NOFILE
 * stays for connections, the store and files. Output nobody reads is read
 * at most SANDBOX_UNREAD_RATE for all of a sandbox's processes together
 * (see proc.h).
 *
 * Every file operation on the sandbox's content runs through fileops.h,
 * with the rights of the sandbox user it acts as and never more: the
 * sandbox_file_* calls below act as "user" on the workspace; other callers
 * take a handle with sandbox_fileops(). All callbacks run on the loop. Not
 * thread-safe (fileops handles are).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/jail.h"
#include "sandbox/fileops.h"
#include "sandbox/files.h"
#include "sandbox/proc.h"
#include "util/err.h"
#include "util/list.h"
#include "util/loop.h"

#define SANDBOX_MAX_RUNNING 1024 /* running processes per sandbox, starting ones included */
#define SANDBOX_MAX_FDS     3072 /* descriptors a sandbox's processes hold in abxd */
#define SANDBOX_FD_SHARE    4    /* ... and never more than 1/4 of the host's budget */
#define SANDBOX_JAIL_FDS    4    /* a jail's own: control socket, pidfd, workspace, view */
/* a file work handle's (fileops.h), made on first use, at most two per
 * sandbox: its copies of the helper image, workspace, view and namespace,
 * and each helper's socket and pidfd */
#define SANDBOX_FILEOPS_FDS  (4 + 2 * FILEOPS_HELPERS)
#define SANDBOX_UNREAD_RATE  (1024 * 1024) /* bytes/s of output nobody reads, all processes */
#define SANDBOX_UNREAD_BURST (256 * 1024)
#define SANDBOX_KEEP_EXITED  64   /* finished processes kept for status and output */
#define SANDBOX_ENV_MAX      1024 /* environment entries per exec */
#define SANDBOX_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct sandbox_host;
struct sandbox;

struct sandbox_host_config {
    uint32_t pool_size;             /* ready jails kept warm; 0 = none */
    struct jail_limits pool_limits; /* limits pool jails carry until claimed */
    uint64_t max_file_bytes;        /* largest file an upload may write */
    const char *path_prefix; /* put before the default PATH (tool shims), NULL = none; copied */
};

int sandbox_host_new(struct loop *loop, struct jail_host *jh, const struct sandbox_host_config *c,
                     struct sandbox_host **ret);
/* Stops refilling the pool and kills what is in it. */
void sandbox_host_drain_pool(struct sandbox_host *h);
struct sandbox_host *sandbox_host_free(struct sandbox_host *h);
uint32_t sandbox_host_pool_ready(const struct sandbox_host *h);
/* Bounds the descriptors all jails and processes may hold together (0, the
 * default, = no bound); what they hold already stays. */
void sandbox_host_set_fd_budget(struct sandbox_host *h, uint32_t budget);
/* Descriptors jails and processes hold now (charged when made, released
 * when they end). */
uint32_t sandbox_host_fds(const struct sandbox_host *h);
/* The most one sandbox's processes may hold: SANDBOX_MAX_FDS, or less on a
 * host whose budget is small. */
uint32_t sandbox_fd_limit(const struct sandbox_host *h);
struct jail_host *sandbox_host_jail(const struct sandbox_host *h);

struct sandbox_spec {
    struct jail_limits limits;
    const struct jail_fs *fs; /* NULL = the default file system; else never from the pool */
    const char *const *env;   /* "K=V" defaults for every exec, NULL-terminated, copied */
};

struct sandbox_timings {
    uint64_t total_us;
    bool from_pool;
    struct jail_timings jail; /* zero when from the pool */
};

typedef void (*sandbox_ready_fn)(struct sandbox *sb, int r, const struct err *err, void *ud);
typedef void (*sandbox_gone_fn)(struct sandbox *sb, void *ud);

/* Creates sandbox id. ready fires (never synchronously) with r = 0, or with
 * r < 0 after which the caller frees sb. */
int sandbox_create(struct sandbox_host *h, const char *id, const struct sandbox_spec *spec,
                   sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err);
/* Called once when a ready sandbox is gone (killed or died) and cleaned up. */
void sandbox_set_gone_handler(struct sandbox *sb, sandbox_gone_fn fn, void *ud);
/* Kills asynchronously: every process, the jail, its traces. Idempotent. */
void sandbox_kill(struct sandbox *sb);
void sandbox_free(struct sandbox *sb);

const char *sandbox_id(const struct sandbox *sb);
bool sandbox_is_ready(const struct sandbox *sb);
const struct sandbox_timings *sandbox_get_timings(const struct sandbox *sb);
const struct jail_limits *sandbox_limits(const struct sandbox *sb);
int sandbox_set_limits(struct sandbox *sb, const struct jail_limits *l, struct err *err);
int sandbox_stats(struct sandbox *sb, struct cgroup_stats *ret);
/* Freezes (or thaws) every process of the sandbox (its cgroup's freezer):
 * pause without losing memory. -EOPNOTSUPP without a cgroup. A kill thaws. */
int sandbox_freeze(struct sandbox *sb, bool frozen, struct err *err);
/* The host ids files in the sandbox's view belong to (for vfs.h). */
struct vfs_ids;
void sandbox_vfs_ids(const struct sandbox *sb, struct vfs_ids *ret);
/* Opens the sandbox's network namespace (/proc/<init>/ns/net, O_CLOEXEC,
 * never fd 0..2) while it is ready: -ESRCH otherwise. In the uid and none
 * modes that is the host's own. */
int sandbox_open_netns(struct sandbox *sb);
/* For tests and leak checks: the jail underneath. */
struct jail *sandbox_jail(const struct sandbox *sb);

struct sandbox_exec {
    const char *const *argv; /* NULL-terminated, argv[0] non-empty */
    const char *const *env;  /* "K=V" over the defaults, NULL-terminated, may be NULL */
    const char *cwd;         /* NULL = home; relative = below home */
    bool root;
    const void *stdin_data;
    size_t stdin_len;
    bool stdin_open;
    uint64_t timeout_ms;      /* 0 = none */
    uint64_t idle_timeout_ms; /* 0 = none */
    bool background;
    bool pty; /* a terminal instead of pipes: output in one stream, input typed */
    uint16_t pty_cols, pty_rows; /* its size (0 = 80x24) */
};

/* Started: p is in the table (p == NULL and r < 0 when it could not start). */
typedef void (*sandbox_exec_fn)(struct sandbox *sb, struct proc *p, int r, const struct err *err,
                                void *ud);
int sandbox_exec(struct sandbox *sb, const struct sandbox_exec *x, sandbox_exec_fn cb, void *ud,
                 struct err *err);

/* Process table. Iteration is in start order. */
struct proc *sandbox_proc_find(struct sandbox *sb, pid_t pid);
size_t sandbox_proc_count(const struct sandbox *sb, bool running_only);
struct proc *sandbox_proc_next(struct sandbox *sb, struct proc *prev); /* prev NULL = first */

/* O_PATH descriptor of the root of the sandbox's whole view, as its
 * processes see it (for vfs.h), pinned when it became ready and closed by
 * sandbox_free(); borrowed. -ESRCH unless ready, -EOPNOTSUPP unless the
 * jail mode is ns (no view of its own), other -errno if pinning failed. */
int sandbox_view_fd(const struct sandbox *sb);

/* A reference to the handle through which all file work on the sandbox's
 * content runs as its root (as_root) or as "user" (fileops.h); made on
 * first use, shut down with the sandbox. The caller unrefs it. -ESRCH
 * unless ready. */
int sandbox_fileops(struct sandbox *sb, bool as_root, struct fileops **ret, struct err *err);

/* Workspace file operations as "user" (fileops.h; paths normalized by the
 * caller). */
int sandbox_root_fd(const struct sandbox *sb);
int sandbox_file_stat(struct sandbox *sb, const char *rel, struct files_stat *ret, struct err *err);
int sandbox_file_open_read(struct sandbox *sb, const char *rel, int *ret_fd, struct files_stat *ret,
                           struct err *err);
int sandbox_upload_begin(struct sandbox *sb, const char *rel, struct fileops_upload **ret,
                         struct err *err);
int sandbox_file_delete(struct sandbox *sb, const char *rel, struct err *err);
int sandbox_mkdir(struct sandbox *sb, const char *rel, bool *ret_created, struct err *err);
int sandbox_rmdir(struct sandbox *sb, const char *rel, struct err *err);
int sandbox_rename(struct sandbox *sb, const char *from, const char *to, bool overwrite,
                   struct err *err);
int sandbox_walk(struct sandbox *sb, const char *rel, files_walk_fn fn, void *ud, struct err *err);
