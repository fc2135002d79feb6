/*
 * parent.h - the privileged parent's side of proto.h: it owns the jails
 * and answers the unprivileged process's requests for them.
 *
 * Host root runs this and no parser of client bytes: it decodes only
 * proto.h's fixed messages, checks each against the state of the sandbox
 * it names, calls jail.h and hands back facts and descriptors. A peer is
 * accepted only with the expected uid (SO_PEERCRED). A malformed or
 * unknown message, a request before HELLO, a peer that lets
 * PRIV_SENDQ_MAX answers pile up: the connection ends. A sandbox is
 * addressable only by the connection that owns it: the one whose CREATE
 * the parent accepted, from that CREATE to its EV_GONE, or the one that
 * adopted it.
 *
 * Re-adoption. When a connection ends (the network process crashed, was
 * killed, is being restarted) its sandboxes live on as orphans: their
 * processes run, the parent still reaps them, their records
 * (SET_RECORD, at most PRIV_RECORD_MAX bytes each, never interpreted)
 * are kept. What the dead process held is gone with it: the stdio pipes
 * and terminals of those processes (they get EOF or SIGPIPE, whatever
 * they do about it), its file helpers' sockets (the parent kills and
 * reaps those helpers at once). A new connection LISTs the orphans (pages
 * of at most PRIV_LIST_MAX, each under PRIV_BODY_MAX; a sandbox orphaned
 * while it pages may be missed: list again) and ADOPTs them one by one:
 * only an orphan (-EBUSY for one another live connection owns, -EALREADY
 * for its own, -ENOENT for none, -ESRCH for one being killed), and one
 * connection only, since the loop handles one request at a time. From
 * then on every event of that sandbox goes to the adopter: EV_READY of
 * one still being created, EV_SPAWNED and EV_EXITED of processes the old
 * connection spawned, EV_GONE; it owns the sandbox's writable area too.
 * An orphan nobody adopts within orphan_grace_ms is killed (its EV_GONE
 * goes to nobody); 0 keeps orphans until priv_parent_free(). Areas
 * that are no sandbox's stay, unreachable, until then.
 *
 * Helpers. OPEN_HELPER answers with the helper's number (R_HELPER);
 * KILL_HELPER {id, number} kills and reaps it, for the peer cannot
 * signal a helper (another uid); only the connection's own sandboxes'
 * helpers, never by pid. When a sandbox's PRIV_HELPERS_MAX slots are
 * full, ended helpers whose exit event has not come yet are reaped
 * first (waitid WNOHANG on their pidfds), so a replacement is not
 * refused.
 *
 * Spawns. SPAWN and SPAWN_LARGE are answered by one EV_SPAWNED with their
 * token and no reply (proto.h); a refusal carries the errno and the step
 * refused: "sandbox" (-ENOENT, -ESRCH dying, -EBUSY not ready), "stdio"
 * (-EINVAL: a descriptor is no pipe, socket or terminal), "args", "cwd"
 * (-ENAMETOOLONG), "init" (jail_spawn()'s, -EAGAIN when init is behind).
 * SPAWN_LARGE's memfd must be a regular file sealed with F_SEAL_WRITE,
 * _GROW, _SHRINK and _SEAL, of at most PRIV_ARGS_BYTES_MAX bytes: else
 * "args" with -EINVAL (not a memfd), -EPERM (not sealed), -E2BIG; it is
 * read with pread and decoded as SPAWN's body (-EINVAL if it does not).
 *
 * Layers. CREATE's layer names are entries of the jail host's layers
 * directory (jail_host_layers_dir()), which is host root's: a name
 * resolves to what this process installed under it, never through a
 * path the peer could change. An area's writable layer becomes a layer
 * with LAYER_INSTALL {area, layer}: the area must be the connection's,
 * written by a sandbox that is gone (-EBUSY while one uses it or before
 * any did), the ids shifted from that sandbox's range as this process
 * recorded it; at most PRIV_LAYER_JOBS_MAX at once (-EAGAIN). R_OK says
 * it started; EV_LAYER {layer, errnum, text} says how it ended, to the
 * connection if it is still there. The area stays (AREA_DESTROY it).
 *
 * On the caller's loop, not thread-safe. Functions return 0 or -errno.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/jail.h"
#include "util/err.h"
#include "util/loop.h"

#define PRIV_CONNS_MAX        4   /* connections served at once */
#define PRIV_SENDQ_MAX        256 /* answers queued for a peer that does not read */
#define PRIV_HELPERS_MAX      4   /* file helpers per sandbox (2 identities x FILEOPS_HELPERS) */
#define PRIV_AREAS_MAX        64
#define PRIV_LAYER_JOBS_MAX   4          /* LAYER_INSTALLs under way at once */
#define PRIV_IDMAP_DEPTH      64         /* levels an IDMAP directory may lie below idmap_root */
#define PRIV_TREE_ENTRIES_MAX (1u << 20) /* entries TREE_EMPTY removes at the top of a tree */
/* What the composition root gives orphan_grace_ms: long enough for the
 * network process to be restarted with backoff and re-adopt, short
 * enough that sandboxes do not outlive it by much if it never comes. */
#define PRIV_ORPHAN_GRACE_MS (60 * 1000)

/* Starts the file helper of jail j for one identity (its root or "user")
 * with the jail's workspace and its view (view_fd, -1 without one), and
 * makes it that identity (fileops-proto.h's HELLO is the parent's, never
 * the peer's). ret_sock: the helper's end is connected to it; ret_pidfd:
 * the helper is a child of this process, which reaps it and kills it when
 * the sandbox goes. Called on the loop, which it holds until the helper
 * has answered. The composition root passes sandbox/fileops-helper.h's
 * fileops_parent_helper() (priv/ may not call sandbox/); tests a fake. */
typedef int (*priv_helper_fn)(void *ud, struct jail *j, int view_fd, bool as_root, int *ret_sock,
                              int *ret_pidfd, struct err *err);

struct priv_parent_config {
    struct jail_host *host;
    struct loop *loop;
    uid_t peer_uid;         /* the uid a connection's peer must have */
    uint32_t max_sandboxes; /* the uid pool's slots */
    /* IDMAP is done only for a directory at or below this one (borrowed,
     * kept open by the caller; the unprivileged side's own storage); -1:
     * refused. A directory of the peer's own that it maps is given to
     * uid 0 first, which the mapping shows as the sandbox's root.
     * TREE_EMPTY removes what is inside a directory strictly below it (a
     * tree the sandboxes' ids own), on a thread of its own. */
    int idmap_root_fd;
    /* IDMAP also maps a directory strictly below this one (borrowed; -1:
     * none), read-only and as it is: nothing is given to uid 0, so the
     * sandbox's root reads its files as others may (the peer's template
     * directories, for a build's copy steps). */
    int idmap_ro_root_fd;
    priv_helper_fn start_helper; /* NULL: OPEN_HELPER is refused */
    void *helper_ud;
    uint64_t orphan_grace_ms; /* an orphan nobody adopts is killed after it; 0 = never */
};

struct priv_parent;

int priv_parent_new(const struct priv_parent_config *c, struct priv_parent **ret, struct err *err);
/* Kills every sandbox (synchronously, jail_free()), its helpers, destroys
 * the areas, ends the connections. Call jail_host_flush() afterwards. */
struct priv_parent *priv_parent_free(struct priv_parent *p);

/* Serves the connected SOCK_SEQPACKET socket sock (taken, also on error).
 * -EPERM when its peer is not peer_uid, -EBUSY past PRIV_CONNS_MAX. */
int priv_parent_serve(struct priv_parent *p, int sock, struct err *err);
/* The same for one end of a socketpair whose other end went only to a
 * child this process started (abxd's network process, which becomes
 * peer_uid itself before it reads anything but its arguments): the
 * kernel's SO_PEERCRED there names this process, so it is not asked. */
int priv_parent_serve_child(struct priv_parent *p, int sock, struct err *err);

/* For tests: connections being served, live sandboxes (orphans too). */
unsigned priv_parent_conns(const struct priv_parent *p);
unsigned priv_parent_sandboxes(const struct priv_parent *p);
