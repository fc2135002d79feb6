/*
 * client.h - the unprivileged side's handle on the privileged parent
 * (parent.h): jail.h's calls, spoken over proto.h.
 *
 * Shaped like jail.h so that sandbox-local.c can switch from jail_* to
 * priv_* with little change: a create answers at once and its ready
 * callback fires later, a spawn's outcome and its exit come as callbacks,
 * a kill ends with gone. A spawn does not wait for the parent at all, as
 * jail_spawn() does not wait for init: priv_jail_spawn() returns once
 * SPAWN is sent, and whatever the parent says of it - init's pid or
 * failure, or the parent's own refusal (no such sandbox, dying, bad
 * stdio, a bad memfd, init behind) - comes as the spawned callback, from
 * the loop, never from inside priv_jail_spawn(). The other calls are
 * synchronous: the parent answers every other request at once (it makes
 * no blocking call for one), so they wait at most PRIV_CALL_TIMEOUT_MS;
 * events that arrive meanwhile are delivered afterwards, from the loop,
 * in order. Nothing names a host path: layers and areas are names, files
 * come back as descriptors.
 *
 * What the parent sends is decoded strictly; anything malformed, a reply
 * out of order or a timeout ends the connection: every jail not yet gone
 * then reports ready (with -ECONNRESET, if still creating) or gone, and
 * every later call fails with -ENOTCONN. Functions return 0 or -errno.
 *
 * Threads. The jail calls (priv_jail_*, priv_client_orphans(), areas)
 * and every callback are the loop thread's: they keep the jails' state,
 * which has no lock. The calls under "from any thread" name a sandbox by
 * id, keep no state and may be made from workers (fileops handles start
 * helpers from util/workq threads) as from the loop. Design: one mutex,
 * the wire, held by whichever thread does a whole exchange - send the
 * request, read until its reply - and by the loop thread for each packet
 * it reads between calls. Why a reply can never reach the wrong caller:
 * the parent handles requests one at a time, in order, and answers each
 * but SPAWN with exactly one reply (proto.h); a SPAWN's answer, refusal
 * or not, is an EV_SPAWNED with seq 0, which every reader takes as an
 * event and none as a reply. A caller sends only while it holds the wire
 * and, unless it sent a SPAWN or SET_RECORD (which it releases the wire
 * after), holds
 * it to its reply, so every request sent before it has either been
 * answered and read by its own caller or gets no reply, and the first
 * reply after its request is its own, however many EV_SPAWNED of earlier
 * spawns come before or after it; the loop thread reads only while
 * holding the wire, so it never takes a reply either (one outside a
 * call, an R_OK for a SPAWN say, ends the connection, as before).
 * Events read by a caller are copied into the queue (PRIV_EVQ_MAX, under
 * the wire) and the loop is woken through an eventfd; the loop delivers
 * a packet it read itself only when that queue is empty, so events keep
 * the parent's order. Callbacks run with the wire released, so they may
 * call again. Why it cannot deadlock: the wire is held only around I/O
 * with the parent, which answers at once and waits on nothing of ours,
 * and never while running a callback or taking another lock; a waiting
 * caller gives up at its PRIV_CALL_TIMEOUT_MS deadline, lock wait
 * included. (Handing worker requests to the loop thread instead would
 * deadlock whenever the loop thread itself waits for that worker: a
 * fileops call on the loop waiting for a helper slot a worker is
 * starting.) A failure a worker sees marks the connection broken; the
 * loop ends it (above) when woken, before any later call is made.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/cgroup.h"
#include "jail/jail.h"
#include "priv/proto.h"
#include "util/err.h"
#include "util/loop.h"

#define PRIV_CALL_TIMEOUT_MS 10000
#define PRIV_EVQ_MAX         1024 /* events held while a call waits (all threads' calls) */

struct priv_client;
struct priv_jail;

/* What HELLO told of the host (see struct priv_hello). */
struct priv_host_facts {
    enum jail_mode mode;
    uint32_t uid_slots;
    bool has_disk, oom_protect;
    uint64_t root_caps;
    char missing[PRIV_MISS_MAX + 1];
};

struct priv_jail_callbacks {
    void (*ready)(struct priv_jail *j, int r, const struct err *err, void *userdata);
    void (*spawned)(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step,
                    void *userdata);
    void (*exited)(struct priv_jail *j, pid_t pid, int status, void *userdata);
    void (*gone)(struct priv_jail *j, void *userdata);
};

/* A sandbox's file system by name (jail_fs with names instead of paths). */
struct priv_fs {
    const char *const *layers; /* layer names, top first */
    size_t nlayers;            /* at most JAIL_MAX_LAYERS */
    const char *upper;         /* an area's name, NULL = a private tmpfs */
    uint64_t disk_bytes;
};

/* Takes the connected socket sock (also on error) and says HELLO. */
int priv_client_new(struct loop *loop, int sock, struct priv_client **ret, struct err *err);
/* Jails must be freed first, and no other thread may be in a call or
 * make one. NULL is ok. */
struct priv_client *priv_client_free(struct priv_client *c);
const struct priv_host_facts *priv_client_host(const struct priv_client *c);
bool priv_client_connected(const struct priv_client *c);

int priv_jail_create(struct priv_client *c, const char *id, const struct jail_limits *limits,
                     const struct priv_fs *fs, const struct priv_jail_callbacks *cb, void *userdata,
                     struct priv_jail **ret, struct err *err);
void priv_jail_set_callbacks(struct priv_jail *j, const struct priv_jail_callbacks *cb,
                             void *userdata);
/* Sends SPAWN and returns: 0 once sent, the outcome comes to the spawned
 * callback with token (exactly once, unless gone comes first: the
 * sandbox died with the spawn in flight); -errno when it could not be
 * sent (-ESRCH not ready or gone, -E2BIG, -ENOTCONN; a send failure ends
 * the connection). sp->fds are borrowed (sent, then still the caller's).
 * argv and env that do not fit a body go as SPAWN_LARGE, in a sealed
 * memfd. Blocks only while the parent's socket is full, at most
 * PRIV_CALL_TIMEOUT_MS. */
int priv_jail_spawn(struct priv_jail *j, uint64_t token, const struct jail_spawn *sp,
                    struct err *err);
int priv_jail_signal(struct priv_jail *j, pid_t pid, int sig, bool group);
int priv_jail_set_limits(struct priv_jail *j, const struct jail_limits *l, struct err *err);
int priv_jail_freeze(struct priv_jail *j, bool frozen, struct err *err);
int priv_jail_stats(struct priv_jail *j, struct cgroup_stats *ret);
int priv_jail_disk_usage(struct priv_jail *j, uint64_t *ret_bytes);
/* gone (or a failed ready) fires when done. Idempotent. */
void priv_jail_kill(struct priv_jail *j);
/* Frees a jail; one not yet gone is killed and forgotten. NULL is ok. */
void priv_jail_free(struct priv_jail *j);

const char *priv_jail_id(const struct priv_jail *j);
bool priv_jail_is_ready(const struct priv_jail *j);
const struct jail_timings *priv_jail_timings(const struct priv_jail *j);
uid_t priv_jail_user_uid(const struct priv_jail *j);
gid_t priv_jail_user_gid(const struct priv_jail *j);
uid_t priv_jail_root_uid(const struct priv_jail *j);
pid_t priv_jail_init_pid(const struct priv_jail *j);
const char *priv_jail_home(const struct priv_jail *j, bool root);

/* Descriptors from the parent, O_CLOEXEC, the caller's. */
int priv_jail_open_helper(struct priv_jail *j, bool as_root, int *ret_sock, int *ret_pidfd,
                          struct err *err);
int priv_jail_open_pty(struct priv_jail *j, bool as_root, unsigned rows, unsigned cols,
                       int *ret_master, int *ret_tty, struct err *err);
int priv_jail_netns_socket(struct priv_jail *j, int family, int type, int *ret_fd, struct err *err);
/* dirfd (borrowed): a directory of the caller's own storage. */
int priv_jail_idmap(struct priv_jail *j, int dirfd, int *ret_fd, struct err *err);
/* Stores record[0..len) (at most PRIV_RECORD_MAX bytes, 0 clears) with the
 * parent for whoever adopts the sandbox after this process. Returns once
 * sent: the parent does not answer (proto.h). */
int priv_jail_set_record(struct priv_jail *j, const void *record, size_t len, struct err *err);

/* --- re-adoption (the loop thread) --- */

/* Calls fn for every sandbox no live connection owns (parent.h), page by
 * page; e and what it points to live during the call only, and fn may
 * call into the client (adopt). fn's negative return stops and is
 * returned. */
typedef int (*priv_orphan_fn)(const struct priv_entry *e, void *userdata);
int priv_client_orphans(struct priv_client *c, priv_orphan_fn fn, void *userdata, struct err *err);
/* Takes over the orphan id: a jail like priv_jail_create()'s, ready if
 * the sandbox is (its facts as LIST gave them), else its ready callback
 * fires later; its processes' exits and its gone come to cb. -EEXIST if
 * this client has it, else the parent's refusal (parent.h). */
int priv_jail_adopt(struct priv_client *c, const char *id, const struct priv_jail_callbacks *cb,
                    void *userdata, struct priv_jail **ret, struct err *err);

/* --- from any thread (see "Threads" above) --- */

/* OPEN_HELPER for sandbox id: its socket and pidfd (O_CLOEXEC, the
 * caller's) and its number for priv_client_kill_helper(). */
int priv_client_open_helper(struct priv_client *c, const char *id, bool as_root, int *ret_sock,
                            int *ret_pidfd, uint32_t *ret_helper, struct err *err);
/* Kills and reaps helper (the parent's, by number); -ESRCH if it has ended. */
int priv_client_kill_helper(struct priv_client *c, const char *id, uint32_t helper,
                            struct err *err);
int priv_client_idmap(struct priv_client *c, const char *id, int dirfd, int *ret_fd,
                      struct err *err);
/* TREE_EMPTY: the parent removes what is inside dirfd (borrowed; strictly
 * below the parent's idmap root: a tree the sandboxes' ids own, which this
 * uid cannot remove), in the background; returns once it has begun. */
int priv_client_tree_empty(struct priv_client *c, int dirfd, struct err *err);

/* Ready-made start/idmap/stop hooks for sandbox/fileops.h's struct
 * fileops_remote (start, idmap, stop, start_ud = a struct priv_fileops):
 * the types are fileops_start_fn's, fileops_idmap_fn's and
 * fileops_stop_fn's (priv/ may not include sandbox/; test-helper.c checks
 * they match). start's token is the parent's helper number, which stop
 * hands to priv_client_kill_helper(). The struct is the
 * caller's and must outlive every handle using it; its client must
 * outlive it. */
struct priv_fileops {
    struct priv_client *c;
    char id[PRIV_ID_MAX + 1];
};
void priv_fileops_init(struct priv_fileops *t, struct priv_client *c, const char *id);
int priv_fileops_start(void *ud, bool as_root, int *ret_sock, int *ret_pidfd, uint64_t *ret_token,
                       struct err *err);
void priv_fileops_stop(void *ud, uint64_t token);
int priv_fileops_idmap(void *ud, int dirfd, int *ret_fd, struct err *err);

int priv_area_create(struct priv_client *c, const char *name, uint64_t limit_bytes,
                     struct err *err);
int priv_area_usage(struct priv_client *c, const char *name, uint64_t *ret_bytes);
int priv_area_destroy(struct priv_client *c, const char *name, struct err *err);
/* LAYER_INSTALL: area's writable layer becomes layer (parent.h "Layers").
 * fn comes once, on the loop and never from inside this call: the
 * outcome, or -ECONNRESET when the connection is lost first. At most
 * PRIV_LAYER_OPS_MAX under way (-EAGAIN). On the loop's thread. */
#define PRIV_LAYER_OPS_MAX 4
typedef void (*priv_layer_fn)(int r, const struct err *err, void *userdata);
int priv_layer_install(struct priv_client *c, const char *area, const char *layer, priv_layer_fn fn,
                       void *userdata, struct err *err);
