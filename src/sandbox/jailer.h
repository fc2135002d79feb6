/*
 * jailer.h - the jail operations the local sandbox (sandbox-local.c)
 * needs, done either in this process or by the privileged parent.
 *
 * Two implementations: jailer-here.c calls jail.h in this process, which
 * then must be host root (abxd without privilege separation, tests);
 * jailer-priv.c asks the privileged parent over priv/client.h (abxd's
 * network process: no capability, so everything that needs one - the
 * sandbox's view, its terminals, its network namespace, its file
 * helpers - comes back from the parent as descriptors). sandbox-local.c
 * keeps the pool, the process table and the descriptor budget on top and
 * names neither.
 *
 * A jailer_jail is one sandbox's jail, shaped like jail.h's struct jail:
 * create answers at once and ready comes later, a spawn's outcome and the
 * exits of its processes come as callbacks, kill ends with gone. On the
 * loop's thread; functions return 0 or -errno (filling err where given).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/jail.h"
#include "sandbox/sandbox.h"
#include "sandbox/vfs.h"
#include "util/err.h"

struct fileops;
struct jailer;
struct jailer_jail;
struct priv_client;

struct jailer_callbacks {
    void (*ready)(struct jailer_jail *j, int r, const struct err *err, void *userdata);
    void (*spawned)(struct jailer_jail *j, uint64_t token, pid_t pid, int r, const char *step,
                    void *userdata);
    void (*exited)(struct jailer_jail *j, pid_t pid, int status, void *userdata);
    void (*gone)(struct jailer_jail *j, void *userdata);
};

/* In this process, on the jail host jh (borrowed, must outlive it). */
int jailer_here_new(struct loop *loop, struct jail_host *jh, struct jailer **ret);
/* Through the privileged parent's client c (borrowed, must outlive it);
 * state_dir: what sandbox_host_state_dir() answers. Only the ns mode. */
int jailer_priv_new(struct loop *loop, struct priv_client *c, const char *state_dir,
                    struct jailer **ret);
struct jailer *jailer_free(struct jailer *jr); /* its jails first; NULL is ok */

enum jail_mode jailer_mode(const struct jailer *jr);
const char *jailer_state_dir(const struct jailer *jr);
int jailer_area_create(struct jailer *jr, const char *name, uint64_t limit_bytes, struct err *err);
/* sandbox_host_layers_dir() and sandbox_host_layer_install(). */
const char *jailer_layers_dir(const struct jailer *jr);
int jailer_layer_install(struct jailer *jr, const char *area, const char *name, uid_t first,
                         sandbox_layer_fn done, void *userdata, struct err *err);
int jailer_area_usage(struct jailer *jr, const char *name, uint64_t *ret_bytes);
void jailer_area_destroy(struct jailer *jr, const char *name);

/* fs: NULL for the default file system; its layers are host paths that
 * resolve to directories of jailer_layers_dir(), its upper an area's
 * name. */
int jailer_create(struct jailer *jr, const char *id, const struct jail_limits *limits,
                  const struct sandbox_fs *fs, const struct jailer_callbacks *cb, void *userdata,
                  struct jailer_jail **ret, struct err *err);
void jailer_set_callbacks(struct jailer_jail *j, const struct jailer_callbacks *cb, void *userdata);
/* sp->fds are borrowed. */
int jailer_spawn(struct jailer_jail *j, uint64_t token, const struct jail_spawn *sp,
                 struct err *err);
int jailer_signal(struct jailer_jail *j, pid_t pid, int sig, bool group);
int jailer_set_limits(struct jailer_jail *j, const struct jail_limits *l, struct err *err);
int jailer_freeze(struct jailer_jail *j, bool frozen, struct err *err);
int jailer_stats(struct jailer_jail *j, struct cgroup_stats *ret);
int jailer_disk_usage(struct jailer_jail *j, uint64_t *ret_bytes);
void jailer_kill(struct jailer_jail *j);      /* idempotent; gone (or a failed ready) follows */
void jailer_free_jail(struct jailer_jail *j); /* one not yet gone is killed; NULL is ok */

bool jailer_is_ready(const struct jailer_jail *j);
const struct jail_timings *jailer_timings(const struct jailer_jail *j);
const char *jailer_home(const struct jailer_jail *j, bool root);
/* The workspace's host path (uid and none modes: cwd under /home/user). */
const char *jailer_workspace_path(const struct jailer_jail *j);
/* The workspace root (O_PATH), borrowed; -EOPNOTSUPP through the parent. */
int jailer_workspace_fd(const struct jailer_jail *j);
void jailer_vfs_ids(const struct jailer_jail *j, struct vfs_ids *ret);

/* The sandbox's "/" once ready: borrowed, or -errno (-EOPNOTSUPP outside
 * the ns mode and through the parent, which keeps it). */
int jailer_view_fd(const struct jailer_jail *j);
bool jailer_has_view(const struct jailer_jail *j);
/* A terminal of the sandbox's devpts: the master and the other side,
 * owned by the process's user (root: the sandbox's root). */
int jailer_open_pty(struct jailer_jail *j, bool root, unsigned rows, unsigned cols, int *ret_master,
                    int *ret_tty, struct err *err);
/* A socket born in the sandbox's network namespace; -EOPNOTSUPP when the
 * sandbox shares the host's. label: for messages. */
int jailer_netns_socket(struct jailer_jail *j, int family, int type, const char *label,
                        struct err *err);
/* --- sandboxes that outlive this process (through the parent only;
 * -EOPNOTSUPP here) --- */

/* What a jail keeps for whoever takes it over after this process: at most
 * JAILER_RECORD_MAX bytes, never read by the parent; 0 clears. */
#define JAILER_RECORD_MAX 8192
int jailer_set_record(struct jailer_jail *j, const void *record, size_t len, struct err *err);
/* Calls fn for each jail no live process owns (a network process before
 * this one left it), with its record (NULL, 0 when none); fn may adopt it
 * (jailer_adopt()). fn's negative return stops and is returned. */
typedef int (*jailer_orphan_fn)(const char *id, const void *record, size_t len, void *userdata);
int jailer_orphans(struct jailer *jr, jailer_orphan_fn fn, void *userdata, struct err *err);
/* Takes over orphan id: a jail like jailer_create()'s, ready at once if
 * the sandbox is (jailer_is_ready()), else its ready callback comes. Its
 * old processes' exits come to exited with pids nobody spawned here. */
int jailer_adopt(struct jailer *jr, const char *id, const struct jailer_callbacks *cb,
                 void *userdata, struct jailer_jail **ret, struct err *err);

/* Empties dirfd (borrowed), a directory of this process's storage whose
 * tree the sandboxes' ids own, which this process may not remove: through
 * the parent, in the background. -EOPNOTSUPP here (remove it yourself).
 * From any thread. */
int jailer_tree_empty(struct jailer *jr, int dirfd, struct err *err);

/* A file-work handle acting as the sandbox's root or "user". */
int jailer_fileops(struct jailer_jail *j, bool as_root, const char *label, struct fileops **ret,
                   struct err *err);
