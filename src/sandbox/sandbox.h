/*
 * sandbox.h - the Sandbox: create, kill, exec into a process table, and the
 * file operations on its workspace.
 *
 * This is an interface: every call below dispatches through an ops table
 * (sandbox-internal.h) to one implementation, chosen when the host is made.
 * The local implementation (sandbox-local.h) runs each sandbox as one jail
 * plus a process table of struct proc (see proc.h), with a warm pool of
 * ready jails, refilled in the background, so that sandbox_create() answers
 * without waiting for namespaces and mounts. The memory implementation
 * (sandbox-memory.h, linked into unit tests only) runs scripted processes
 * and keeps files in a directory the test gives. Nothing here names a jail:
 * limits, file systems, timings and usage are this header's own types.
 *
 * Exec decodes nothing: callers pass argv, env, cwd and deadlines as C
 * values; output and exit status are read from the proc. A non-zero exit is
 * a result, never an error: only an unknown or dead sandbox, or a request
 * the sandbox cannot start (bad cwd, too many processes), fails. A call an
 * implementation does not offer fails with -EOPNOTSUPP.
 *
 * Descriptors are budgeted (local implementation): each process holds two
 * or three in abxd (its stdout and stderr pipes, stdin's while open; a
 * terminal's master twice), each jail SANDBOX_JAIL_FDS. A sandbox's
 * processes may hold at most sandbox_fd_limit() (-EAGAIN past it, like
 * SANDBOX_MAX_RUNNING), and all jails and processes together at most the
 * host's budget (-EMFILE past it, for exec and create alike), so that what
 * is left of RLIMIT_NOFILE stays for connections, the store and files.
 * Output nobody reads is read at most SANDBOX_UNREAD_RATE for all of a
 * sandbox's processes together (see proc.h).
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
#define SANDBOX_MAX_LAYERS   16 /* read-only layers stacked under one sandbox (sandbox_fs) */

struct sandbox_host;
struct sandbox;

/* What one sandbox may use. */
struct sandbox_limits {
    uint64_t memory_bytes; /* 0 = none */
    uint32_t cpu_millis;   /* 1000 = one core; 0 = none */
    uint32_t pids;         /* 0 = none */
    uint64_t disk_bytes;   /* bound of the writable space; 0 = the host's */
};

/* The file system of one sandbox, when it is not the default (only where
 * sandbox_host_has_layers()): read-only layers under /usr, /etc and /opt,
 * each a host directory with usr/, etc/, opt/ whose files carry ids
 * 0..65535 as the sandbox sees them, and a writable layer on top. */
struct sandbox_fs {
    const char *const *layers; /* top first; copied */
    size_t nlayers;            /* at most SANDBOX_MAX_LAYERS */
    const char *upper_area;    /* an area (sandbox_host_area_create()) whose
                                * fs/ is the writable layer (a build keeps
                                * it); NULL = private */
    uint64_t disk_bytes;       /* size of the writable root; 0 = default */
};

/* What a sandbox uses now (sandbox_stats()). */
struct sandbox_stats {
    uint64_t memory_bytes; /* current usage */
    uint64_t memory_peak;  /* bytes, 0 when unknown */
    uint64_t pids;         /* current tasks */
    uint64_t cpu_usec;     /* cumulative CPU time, 0 when unknown */
    uint64_t oom_kills;    /* processes the OOM killer took */
};

struct sandbox_host_config {
    uint32_t pool_size;                /* ready sandboxes kept warm; 0 = none */
    struct sandbox_limits pool_limits; /* limits pool sandboxes carry until claimed */
    uint64_t max_file_bytes;           /* largest file an upload may write */
    const char *path_prefix; /* put before the default PATH (tool shims), NULL = none; copied */
};

/* Hosts are made by an implementation: sandbox_host_new() in
 * sandbox-local.h, sandbox_memory_host_new() in sandbox-memory.h. */

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
/* Whether sandboxes may have a file system of their own (sandbox_spec.fs,
 * as template builds need). */
bool sandbox_host_has_layers(const struct sandbox_host *h);
/* The directory the host keeps its state in (absolute), NULL if none. */
const char *sandbox_host_state_dir(const struct sandbox_host *h);
/* A scratch area named name ([a-z0-9-] with a '-'), bounded by
 * limit_bytes (0 = the host's default) where the host bounds disk: for
 * work beside the sandboxes, such as a template build's writable layer
 * (sandbox_fs.upper_area). Known by its name only. -EOPNOTSUPP where the
 * host has none. Removed by sandbox_host_area_destroy() or when the host
 * next starts. Its usage is -EOPNOTSUPP where nothing bounds it. */
int sandbox_host_area_create(struct sandbox_host *h, const char *name, uint64_t limit_bytes,
                             struct err *err);
int sandbox_host_area_usage(struct sandbox_host *h, const char *name, uint64_t *ret_bytes);
void sandbox_host_area_destroy(struct sandbox_host *h, const char *name);
/* Where the layers sandbox_fs.layers may name live, one directory each
 * (absolute; NULL: this host has none). A layer there is made from an
 * area: sandbox_host_layer_install() turns the area's writable layer,
 * written by a sandbox now gone whose root was host uid first, into
 * layer name ([a-z0-9-]{1,63}), ids shifted to what every sandbox sees
 * (jail.h's jail_host_layer_install()). done comes once, on the loop,
 * never from inside the call. The area stays (destroy it). */
const char *sandbox_host_layers_dir(const struct sandbox_host *h);
typedef void (*sandbox_layer_fn)(int r, const struct err *err, void *userdata);
int sandbox_host_layer_install(struct sandbox_host *h, const char *area, const char *name,
                               uid_t first, sandbox_layer_fn done, void *userdata, struct err *err);

struct sandbox_spec {
    struct sandbox_limits limits;
    const struct sandbox_fs *fs; /* NULL = the default file system; else never from the pool */
    const char *const *env;      /* "K=V" defaults for every exec, NULL-terminated, copied */
};

struct sandbox_timings {
    uint64_t total_us; /* sandbox_create() to ready */
    bool from_pool;
    /* The phases of making it, where the implementation has them (zero
     * when from the pool): set-up before the first process (ids,
     * directories, limits), starting that process, and set-up inside. */
    uint64_t prepare_us, clone_us, init_us;
};

typedef void (*sandbox_ready_fn)(struct sandbox *sb, int r, const struct err *err, void *ud);
typedef void (*sandbox_gone_fn)(struct sandbox *sb, void *ud);

/* Creates sandbox id. ready fires (never synchronously) with r = 0, or with
 * r < 0 after which the caller frees sb. */
int sandbox_create(struct sandbox_host *h, const char *id, const struct sandbox_spec *spec,
                   sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err);
/* Sandboxes that outlive the process that made them (abxd's network
 * process under privilege separation, restarted by the parent): a record
 * of at most SANDBOX_RECORD_MAX bytes kept beside each, for the next
 * process; 0 clears. -EOPNOTSUPP where no sandbox outlives its maker. */
#define SANDBOX_RECORD_MAX 8192
int sandbox_set_record(struct sandbox *sb, const void *record, size_t len, struct err *err);
/* Calls fn for each sandbox left by an earlier process, by the host's name
 * for it (orphan: not always its sandbox id, a warm one has the pool's),
 * with its record (NULL, 0 when none); fn may adopt it. fn's negative
 * return stops and is returned; -EOPNOTSUPP where there are none. */
typedef int (*sandbox_orphan_fn)(const char *id, const void *record, size_t len, void *ud);
int sandbox_host_orphans(struct sandbox_host *h, sandbox_orphan_fn fn, void *ud, struct err *err);
/* Takes over orphan (sandbox_host_orphans()'s name) as sandbox id, as
 * sandbox_create() would have made it with spec (its limits as the
 * sandbox has them, its env; spec->fs is ignored). ready fires as for a
 * create. The processes it runs are not this process's: they run on, and
 * are not listed. */
int sandbox_adopt(struct sandbox_host *h, const char *orphan, const char *id,
                  const struct sandbox_spec *spec, sandbox_ready_fn ready, void *ud,
                  struct sandbox **ret, struct err *err);
/* Empties dirfd (borrowed), a directory of our own storage whose tree the
 * sandboxes' ids own (a snapshot's) and which this process may not
 * remove, in the background: -EOPNOTSUPP where it may (then remove it
 * itself). From any thread. */
int sandbox_host_tree_empty(struct sandbox_host *h, int dirfd, struct err *err);
/* Takes over orphan id only to kill it (one with no record, or one whose
 * record names what is gone). */
int sandbox_host_kill_orphan(struct sandbox_host *h, const char *id, struct err *err);
/* Called once when a ready sandbox is gone (killed or died) and cleaned up. */
void sandbox_set_gone_handler(struct sandbox *sb, sandbox_gone_fn fn, void *ud);
/* Kills asynchronously: every process, the jail, its traces. Idempotent. */
void sandbox_kill(struct sandbox *sb);
void sandbox_free(struct sandbox *sb);

const char *sandbox_id(const struct sandbox *sb);
bool sandbox_is_ready(const struct sandbox *sb);
const struct sandbox_timings *sandbox_get_timings(const struct sandbox *sb);
const struct sandbox_limits *sandbox_limits(const struct sandbox *sb);
int sandbox_set_limits(struct sandbox *sb, const struct sandbox_limits *l, struct err *err);
/* Usage now; -ESRCH (and ret zeroed) unless ready. */
int sandbox_stats(struct sandbox *sb, struct sandbox_stats *ret);
/* Bytes the sandbox holds in its bounded writable space (updated within
 * seconds); -EOPNOTSUPP where it has no bound. */
int sandbox_disk_usage(struct sandbox *sb, uint64_t *ret_bytes);
/* Freezes (or thaws) every process of the sandbox: pause without losing
 * memory. -EOPNOTSUPP where it cannot (no cgroup). A kill thaws. */
int sandbox_freeze(struct sandbox *sb, bool frozen, struct err *err);
/* The host ids files in the sandbox's view belong to (for vfs.h). */
struct vfs_ids;
void sandbox_vfs_ids(const struct sandbox *sb, struct vfs_ids *ret);
/* A socket (socket(2)'s family and type; type may carry SOCK_NONBLOCK)
 * made inside the sandbox's own network namespace, O_CLOEXEC, the
 * caller's: what the port proxy dials the sandbox's loopback with. The
 * surfaces never hold or enter the namespace itself; in the privilege
 * split this is the parent's NETNS_SOCKET verb (priv/proto.h). -ESRCH
 * unless ready, -EOPNOTSUPP when the sandbox shares the host's network
 * (the local uid and none modes) or has none (memory), other -errno if
 * entering it or making the socket failed; err says which. Blocks for the
 * start and end of a short-lived thread (local), which alone enters the
 * namespace. */
int sandbox_netns_socket(struct sandbox *sb, int family, int type, struct err *err);

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

/* Whether the sandbox is ready and has a view of its own (the local ns
 * mode), pinned when it became ready: what the surfaces ask before file
 * work beyond the workspace, which runs through sandbox_fileops(). In the
 * privilege split the parent answers it, the view staying there. */
bool sandbox_has_view(const struct sandbox *sb);

/* O_PATH descriptor of the root of the sandbox's whole view, as its
 * processes see it (for vfs.h), pinned when it became ready and closed by
 * sandbox_free(); borrowed. -ESRCH unless ready, -EOPNOTSUPP unless it
 * has a view of its own (the local ns mode), other -errno if pinning
 * failed. For the implementation's own file work and for tests: the
 * surfaces (api/) must not use it, since the network process of the
 * privilege split holds no descriptor of a view (they ask
 * sandbox_has_view()). */
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
