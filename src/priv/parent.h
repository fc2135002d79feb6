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
 * addressable only by the connection whose CREATE the parent accepted,
 * from that CREATE to its EV_GONE. When a connection ends its sandboxes
 * and areas stay as they are, unreachable (re-adoption by a new
 * connection is a later step), until priv_parent_free() kills them.
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

#define PRIV_CONNS_MAX   4   /* connections served at once */
#define PRIV_SENDQ_MAX   256 /* answers queued for a peer that does not read */
#define PRIV_HELPERS_MAX 4   /* file helpers per sandbox (2 identities x FILEOPS_HELPERS) */
#define PRIV_AREAS_MAX   64
#define PRIV_IDMAP_DEPTH 64 /* levels an IDMAP directory may lie below idmap_root */

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
    /* Layer names resolve to layers_dir/<name> (a directory, no symlink);
     * NULL: CREATE with layers is refused. */
    const char *layers_dir;
    /* IDMAP is done only for a directory at or below this one (borrowed,
     * kept open by the caller; the unprivileged side's own storage); -1:
     * refused. */
    int idmap_root_fd;
    priv_helper_fn start_helper; /* NULL: OPEN_HELPER is refused */
    void *helper_ud;
};

struct priv_parent;

int priv_parent_new(const struct priv_parent_config *c, struct priv_parent **ret, struct err *err);
/* Kills every sandbox (synchronously, jail_free()), its helpers, destroys
 * the areas, ends the connections. Call jail_host_flush() afterwards. */
struct priv_parent *priv_parent_free(struct priv_parent *p);

/* Serves the connected SOCK_SEQPACKET socket sock (taken, also on error).
 * -EPERM when its peer is not peer_uid, -EBUSY past PRIV_CONNS_MAX. */
int priv_parent_serve(struct priv_parent *p, int sock, struct err *err);

/* For tests: connections being served, live sandboxes. */
unsigned priv_parent_conns(const struct priv_parent *p);
unsigned priv_parent_sandboxes(const struct priv_parent *p);
