/*
 * fileops-helper.h - starting one abx-fileops helper: spawn it with a
 * sandbox's descriptors, tell it who it is (fileops-proto.h's HELLO), wait
 * until it is that identity.
 *
 * A fileops handle (fileops.h) starts its helpers through this, and so can
 * whoever holds the descriptors and the privilege to hand them over (the
 * privileged parent, priv/parent.h) for a handle that does not. It does no
 * file work and keeps no state: the caller owns the helper it gets back.
 * Functions return 0 or -errno and fill err; nothing here logs. Safe from
 * any thread.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/jail.h"
#include "sandbox/vfs.h"
#include "util/err.h"

#define FILEOPS_HELLO_TIMEOUT_MS 10000 /* for a new helper's answer to HELLO */
#define FILEOPS_CANCEL_TICK_MS   100   /* how often a waiting receive looks at cancel */
/* The privileged parent waits less: its loop is held meanwhile, and its
 * peer gives up on it after PRIV_CALL_TIMEOUT_MS (10 s, priv/client.h). */
#define FILEOPS_PARENT_HELLO_TIMEOUT_MS 3000

/* Who to start and with what; every descriptor is borrowed (duplicated
 * into the helper). */
struct fileops_helper_spec {
    int image_fd;       /* the abx-fileops image */
    int ws_fd;          /* the workspace root (O_PATH directory) */
    int view_fd;        /* the sandbox's "/" (O_PATH), or -1 (uid mode) */
    int userns_fd;      /* ns mode: the sandbox's user namespace; else -1 */
    bool ns;            /* ns mode: uid/gid below are the sandbox's own ids */
    bool as_root;       /* the sandbox's root, else "user" */
    uint32_t uid, gid;  /* who the helper becomes */
    struct vfs_ids ids; /* how the helper names ids (in its own terms) */
    uint64_t caps;      /* kept in ns mode (bit n = capability n) */
    const void *bpf;    /* the sandboxes' seccomp program (at most FOP_BPF_MAX bytes) */
    size_t bpf_len;
    const char *label;         /* for messages ("sandbox 'x'") */
    const atomic_bool *cancel; /* NULL, or: stop waiting once it is true (-> -EIO) */
    int timeout_ms;            /* for the answer to HELLO; 0 = FILEOPS_HELLO_TIMEOUT_MS */
};

/* A jail's host ids as vfs.h names them: one range of JAIL_UID_RANGE ids
 * from its root's uid, gids mapped like uids (jail.h). */
static inline struct vfs_ids
fileops_jail_ids(uid_t root_uid, uid_t user_uid, gid_t user_gid)
{
    return (struct vfs_ids){
            .root_uid = root_uid,
            .root_gid = (gid_t)root_uid,
            .user_uid = user_uid,
            .user_gid = user_gid,
            .range_first = root_uid,
            .range_len = JAIL_UID_RANGE,
    };
}

/* The identity of jail j's helper acting as its root (as_root) or
 * "user", as abxd gives it: in ns mode the sandbox's own uid 0 (with
 * jail_root_caps()) or ROOTFS_USER_UID, in uid mode the sandbox's pooled
 * host uid for both; the ids the helper names and h's seccomp program
 * (borrowed from h). Fills spec's ns, as_root, uid, gid, ids, caps, bpf
 * and bpf_len; the descriptors, label and cancel stay the caller's.
 * -EOPNOTSUPP without isolation (JAIL_NONE starts no helper). */
int fileops_jail_identity(const struct jail_host *h, const struct jail *j, bool as_root,
                          struct fileops_helper_spec *spec);

/* Starts the helper and makes it spec's identity. On success ret_sock is
 * connected to it (SOCK_SEQPACKET, O_CLOEXEC) and it answers requests;
 * it is a child of this process: ret_pidfd (O_CLOEXEC) is the caller's to
 * kill it and reap it (waitid(P_PIDFD)). On failure nothing is left
 * running: -EIO when it did not answer within the timeout or
 * could not become the identity, else what failed. Blocks until then. */
int fileops_helper_start(const struct fileops_helper_spec *spec, int *ret_sock, int *ret_pidfd,
                         pid_t *ret_pid, struct err *err);

/* Receives one packet from a helper into buf (cap bytes) within
 * timeout_ms: its length, the first descriptor in ret_fd (others closed),
 * how many came in ret_nfds. -ETIMEDOUT, -ESRCH once *cancel (if not
 * NULL) is true, -ECONNRESET when the helper has ended, -EBADMSG for a
 * packet over cap, else -errno. */
ssize_t fileops_helper_recv(int sock, void *buf, size_t cap, int timeout_ms,
                            const atomic_bool *cancel, int *ret_fd, unsigned *ret_nfds);

/* The abx-fileops binary abxd embeds, as a sealed memfd (O_CLOEXEC, the
 * caller's) for fileops_helper_spec's image_fd. */
int fileops_helper_image(void);

/* What fileops_parent_helper() needs beside the jail; borrowed, kept
 * open by the caller while the parent runs. */
struct fileops_parent {
    int image_fd;                 /* the abx-fileops image */
    const struct jail_host *host; /* the jails' host: its mode, its seccomp program */
};

/* priv/parent.h's priv_helper_fn, for the composition root to hand the
 * parent (ud: a struct fileops_parent): starts jail j's helper for
 * as_root with the jail's workspace, view_fd (its view, or -1) and, in
 * ns mode, its user namespace, and sends it fileops_jail_identity()'s
 * HELLO, never one a peer chose. The helper is this process's child
 * (ret_pidfd: kill and reap it); ret_sock is the peer's end. Waits at
 * most FILEOPS_PARENT_HELLO_TIMEOUT_MS for the helper. -EOPNOTSUPP
 * without isolation. */
int fileops_parent_helper(void *ud, struct jail *j, int view_fd, bool as_root, int *ret_sock,
                          int *ret_pidfd, struct err *err);
