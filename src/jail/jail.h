/*
 * jail.h - make and destroy a sandbox, and spawn processes inside it.
 *
 * A jail is a set of namespaces held by abx-init (our pid 1), a cgroup, a
 * pooled host uid range and a state directory holding the workspace. This
 * module knows nothing of HTTP, process tables or output: it creates the
 * sandbox, hands init spawn and signal requests, reports spawns and exits,
 * and on kill removes every trace (processes, cgroup, directory, uid slot).
 *
 * Everything is asynchronous on the caller's loop: jail_create() returns at
 * once and the ready callback fires when init has finished set-up (or the
 * attempt has failed and been cleaned up). Nothing a sandbox's init sends is
 * trusted: messages are decoded strictly, unknown pids and tokens are
 * ignored, stray descriptors are closed. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/loop.h"

enum jail_mode {
    JAIL_NS,   /* user, mount, pid, net, ipc, uts, cgroup namespaces + uid + cgroup */
    JAIL_UID,  /* pooled uid + cgroup, no namespaces (weaker; must be asked for) */
    JAIL_NONE, /* no isolation at all (development only; must be asked for) */
    _JAIL_MODE_MAX,
    _JAIL_MODE_INVALID = -EINVAL,
};

const char *jail_mode_name(enum jail_mode m);
enum jail_mode jail_mode_from_name(const char *s);

#define JAIL_UID_RANGE 65536u /* host uids per sandbox: in-sandbox 0..65535 */

#define JAIL_MAX_BINDS 4 /* extra directories bound into every sandbox */

/* A host directory every sandbox sees at dst (ns mode only). */
struct jail_bind {
    const char *src; /* absolute host path, copied */
    const char *dst; /* absolute path inside the sandbox, no "..", copied */
    bool ro;
    bool if_nonempty; /* bound only into sandboxes made while src holds an entry */
};

struct jail_host_config {
    struct loop *loop; /* where teardown completions are delivered */
    enum jail_mode mode;
    const char *state_dir;         /* absolute; sandboxes live in state_dir/sandboxes */
    const char *cgroup;            /* "auto", "v1" or "v2" */
    const char *uid_lockfile;      /* host-wide lock file of the uid pool */
    uint32_t uid_base;             /* first pooled host uid */
    uint32_t uid_slots;            /* concurrent sandboxes the pool allows */
    uint64_t root_bytes;           /* size cap of the writable root tmpfs */
    uint64_t tmp_bytes;            /* size cap of /tmp */
    uint64_t shm_bytes;            /* size cap of /dev/shm */
    const struct jail_bind *binds; /* e.g. tool bundles at /.tools; may be NULL */
    size_t nbinds;                 /* at most JAIL_MAX_BINDS */
    /* A sandbox's writable space on the host (its home) is a subvolume of
     * a btrfs at state_dir/sandboxes bounded by a quota (disk.h): this
     * many bytes unless it asks for another bound. 0 = no bound and no
     * disk (weaker: sandboxes write the state file system). */
    uint64_t disk_bytes;
    uint64_t disk_pool_bytes;  /* size of state_dir/disk.img when made; 0 = the default */
    uint64_t disk_floor_bytes; /* free space the state file system keeps when it is made */
};

struct jail_host;

/* Sets up host-wide state: cgroup layout, uid pool, seccomp program, the
 * init image, /etc. Missing isolation is not an error here (readiness
 * reports it, see jail_host_missing()); bad configuration is. */
int jail_host_new(const struct jail_host_config *c, struct jail_host **ret, struct err *err);
struct jail_host *jail_host_free(struct jail_host *h);
/* Waits for background teardown work (deleting workspaces) and delivers its
 * completions; afterwards teardown is synchronous. Call before freeing the
 * owners of jails at shutdown. */
void jail_host_flush(struct jail_host *h);
/* Appends, ';'-separated, what the configured mode needs and lacks. */
int jail_host_missing(struct jail_host *h, struct buf *out);
/* Removes sandboxes an earlier run left behind; returns how many. */
int jail_host_reclaim(struct jail_host *h, struct err *err);
enum jail_mode jail_host_mode(const struct jail_host *h);
const char *jail_host_state_dir(const struct jail_host *h);
const char *jail_host_cgroup_name(const struct jail_host *h);
uint32_t jail_host_uid_slots_used(const struct jail_host *h);
/* Whether inits are shielded from the OOM killer (needs CAP_SYS_RESOURCE). */
bool jail_host_oom_protect(const struct jail_host *h);
/* What bounds sandboxes' writable space, for logs; NULL = nothing. */
const char *jail_host_disk(const struct jail_host *h);
/* A bounded directory on the sandboxes' disk that belongs to no sandbox
 * (a template build's writable layer, which outlives its sandbox):
 * state_dir/sandboxes/<name>, mode 0700, bounded by limit_bytes (0 = the
 * host's default). name is [a-z0-9-] with a '-' (sandbox ids have none).
 * Its path goes to ret_path. Without a disk it is a plain directory there,
 * unbounded (jail_host_area_usage() is -EOPNOTSUPP). Removed by
 * jail_host_area_destroy() or the next start's reclaim. */
int jail_host_area_create(struct jail_host *h, const char *name, uint64_t limit_bytes,
                          char *ret_path, size_t n, struct err *err);
int jail_host_area_usage(struct jail_host *h, const char *name, uint64_t *ret_bytes);
void jail_host_area_destroy(struct jail_host *h, const char *name);

/* --- Layers: what built templates stack (ns mode; layers.c) ---
 *
 * One directory each, state_dir/layers/<name>, with usr/, etc/ and opt/
 * whose files carry the ids a sandbox sees (jail_fs's layers). The
 * directory and every layer are host root's and nobody else's to change,
 * so a layer's name always resolves to what was installed under it. */
#define JAIL_LAYERS_DIR     "layers"
#define JAIL_LAYER_NAME_MAX 63 /* layer and area names: [a-z0-9-]{1,63} */
bool jail_layer_name_ok(const char *s);
/* NULL outside the ns mode. */
const char *jail_host_layers_dir(const struct jail_host *h);
typedef void (*jail_layer_done_fn)(int r, const struct err *err, void *userdata);
/* Makes the writable layer of area (its fs/, which a sandbox whose root
 * was host uid first wrote, and which no sandbox uses any more) into
 * layer name: overlay's work directories removed, usr/ etc/ opt/ made, the
 * owners shifted (idshift.h), then moved into place, or copied when the
 * area is on another file system; a layer appears whole or not at all.
 * On a worker thread; done comes on the loop with 0, or -errno and why
 * (-EEXIST: the name is taken). */
int jail_host_layer_install(struct jail_host *h, const char *area, const char *name, uid_t first,
                            jail_layer_done_fn done, void *userdata, struct err *err);
/* Removes every layer (and every leftover of an install) not named in
 * keep; returns how many. For the start, before any sandbox stacks one. */
int jail_host_layers_collect(struct jail_host *h, const char *const *keep, size_t nkeep);

struct jail;

struct jail_limits {
    uint64_t memory_bytes; /* 0 = none */
    uint32_t cpu_millis;   /* 1000 = one core; 0 = none */
    uint32_t pids;         /* 0 = none */
    uint64_t disk_bytes;   /* bound of the writable space; 0 = the host's (jail_host_config) */
};

struct jail_timings {
    uint64_t prepare_us; /* uid slot, directories, cgroup */
    uint64_t clone_us;   /* clone3 + cgroup attach + config sent */
    uint64_t init_us;    /* set-up inside init, as it reports */
    uint64_t total_us;   /* jail_create() to ready */
};

struct jail_callbacks {
    /* Creation finished. On error (r < 0, err says why) the jail has already
     * been cleaned up and the callee should jail_free() it. */
    void (*ready)(struct jail *j, int r, const struct err *err, void *userdata);
    /* A spawn request finished: pid > 0, or r < 0 with the failing step. */
    void (*spawned)(struct jail *j, uint64_t token, pid_t pid, int r, const char *step,
                    void *userdata);
    /* A process we spawned exited (wait status). */
    void (*exited)(struct jail *j, pid_t pid, int status, void *userdata);
    /* A ready jail is gone (killed or init died) and fully cleaned up. */
    void (*gone)(struct jail *j, void *userdata);
};

#define JAIL_MAX_LAYERS 16 /* read-only layers stacked under one sandbox */

/* The file system of one sandbox, when it is not the default (ns mode
 * only): read-only layers under /usr, /etc and /opt, each a host directory
 * with usr/, etc/, opt/ whose files carry ids 0..65535 as the sandbox sees
 * them (they are shifted into its range by an idmapped mount), and a
 * writable layer on top. */
struct jail_fs {
    const char *const *layers; /* top first; copied */
    size_t nlayers;            /* at most JAIL_MAX_LAYERS */
    const char *upper_area;    /* an area (jail_host_area_create()) whose fs/,
                                * made if missing, is the writable layer (a
                                * build keeps it); NULL = a private tmpfs */
    uint64_t disk_bytes;       /* size of the writable root and of that tmpfs; 0 = default */
};

/* Starts creating sandbox id ([a-z0-9]+). Returns 0 and the jail, whose
 * ready callback fires later, or -errno synchronously (-EAGAIN: no free uid
 * slot). fs NULL = the default file system. */
int jail_create(struct jail_host *h, struct loop *loop, const char *id,
                const struct jail_limits *limits, const struct jail_fs *fs,
                const struct jail_callbacks *cb, void *userdata, struct jail **ret,
                struct err *err);

struct jail_spawn {
    bool root;               /* run as sandbox root instead of "user" */
    const char *cwd;         /* absolute path in the sandbox's view */
    const char *const *argv; /* NULL-terminated, argv[0] non-empty */
    const char *const *env;  /* NULL-terminated "K=V" */
    int fds[3];              /* stdin, stdout, stderr: borrowed, sent to init */
};

/* Redirects the callbacks (a warm jail handed to a new owner). */
void jail_set_callbacks(struct jail *j, const struct jail_callbacks *cb, void *userdata);

/* Asks init to start a process; the spawned callback reports the outcome
 * with the same token. -EAGAIN when init is not keeping up. */
int jail_spawn(struct jail *j, uint64_t token, const struct jail_spawn *sp, struct err *err);
/* Signals a process init started (or its process group). */
int jail_signal(struct jail *j, pid_t pid, int sig, bool group);
int jail_set_limits(struct jail *j, const struct jail_limits *l, struct err *err);
int jail_stats(struct jail *j, struct cgroup_stats *ret);
/* Bytes the sandbox holds in its bounded writable space (as the quota
 * counts them: updated within seconds); -EOPNOTSUPP without a disk. */
int jail_disk_usage(struct jail *j, uint64_t *ret_bytes);
int jail_freeze(struct jail *j, bool frozen, struct err *err);

/* Kills everything and cleans up asynchronously; gone (or ready with an
 * error, if still creating) fires when done. Idempotent. */
void jail_kill(struct jail *j);
/* Frees a jail that is gone or failed. NULL is ok. */
void jail_free(struct jail *j);

const char *jail_id(const struct jail *j);
const struct jail_timings *jail_get_timings(const struct jail *j);
bool jail_is_ready(const struct jail *j);
/* O_PATH descriptor of the workspace on the host, valid until jail_free(). */
int jail_workspace_fd(const struct jail *j);
/* Host path of the workspace (state_dir/sandboxes/<id>/home). */
const char *jail_workspace_path(const struct jail *j);
/* Host ids that files written through the API should belong to ("user"). */
uid_t jail_user_uid(const struct jail *j);
gid_t jail_user_gid(const struct jail *j);
/* The home directory as processes see it, and how to run as root/user. */
const char *jail_home(const struct jail *j, bool root);
/* Host pid of init (for tests and leak checks). */
pid_t jail_init_pid(const struct jail *j);
/* Host uid that sandbox root maps to (first of its range). */
uid_t jail_root_uid(const struct jail *j);

/* --- helper processes --- */

/* A sealed, executable memfd holding the static image [image, image + n). */
int jail_image_fd(const char *name, const void *image, size_t n, struct err *err);

/* Starts the static helper image exec_fd as a child of abxd, in abxd's own
 * namespaces and cgroup, with fds[i] at descriptor 3 + i (a negative entry
 * leaves that number closed; at most 4), /dev/null at 0..2 and nothing
 * else open. It sends no signal when it ends: the caller reaps it through
 * ret_pidfd (waitid(P_PIDFD, ..., WEXITED | __WALL); -ECHILD if the
 * spawning thread has ended and init reaped it). Safe from any thread. */
int jail_spawn_helper(int exec_fd, const int *fds, unsigned nfds, int *ret_pidfd, pid_t *ret_pid,
                      struct err *err);

/* Opens the user namespace of a ready ns-mode jail (O_CLOEXEC); -ESRCH
 * otherwise. */
int jail_open_userns(const struct jail *j);

/* The seccomp program every sandbox process runs under (borrowed). */
void jail_host_bpf(const struct jail_host *h, const void **ret, size_t *ret_len);

/* The capabilities sandbox root keeps in its user namespace, as a mask
 * (bit n = capability n). */
uint64_t jail_root_caps(void);

/* The directory dirfd as a detached, idmapped, nosuid/nodev/noexec mount
 * in which ids 0..65535 on disk appear as the ids the user namespace
 * userns_fd maps them to: the way a sandbox's helper sees abxd's own
 * storage (snapshots) as files of that sandbox; ro: read-only too.
 * Returns an O_RDONLY directory fd; the mount goes when the last fd
 * through it closes. */
int jail_idmap_tree(int userns_fd, int dirfd, bool ro, struct err *err);
