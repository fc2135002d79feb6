/*
 * split.h - abxd's two processes under privilege separation (ABX_PRIVSEP=1,
 * docs/security.md), internal to abxd.
 *
 * The privileged parent is abxd as started: it keeps the state lock, the
 * jail host (host root, the jail operations, reclaim) and serves
 * priv/parent.h to one network process, which it starts by fork and
 * re-exec of its own binary in the network role ("--role=net") with the
 * protocol's socket on descriptor 3 and the HTTP listening socket, which
 * the parent made (every network process serves the same port), on 4.
 * It parses no request: SIGTERM and SIGINT go to the network process,
 * which drains; when that exits the parent does too, with its status;
 * when it dies any other way the parent starts another one after a
 * backoff (its sandboxes wait as orphans, priv/parent.h). The network
 * process runs everything else - HTTP, every surface and parser, the
 * store - as its own uid with no capability, no new privileges, Landlock
 * and a seccomp filter (priv/confine.h), set before it starts a thread.
 */
#pragma once

#include "abxd/daemon.h"

#define SPLIT_ROLE_ARG  "--role=net" /* argv[1] of the network process */
#define SPLIT_PRIV_FD   3            /* its end of the parent's socket */
#define SPLIT_LISTEN_FD 4            /* the HTTP socket the parent listens on */
#define SPLIT_LOCK_FD   5            /* the state lock, held, never used */

/* Whether the network process's uid can reach the state directory and
 * every file and directory c names (their ancestors searchable by
 * others): 0, or -EACCES with why. For --privsep auto. */
int split_reachable(const struct config *c, char *why, size_t n);

/* The parent: everything after daemon_setup_jail_host(); argv: abxd's
 * own, for the network process. Returns main()'s exit status. */
int split_parent_run(struct daemon *d, int argc, char **argv);

/* The network process's own steps, in place of daemon_setup_state() and
 * daemon_setup_jail_host(). */
int split_net_confine(struct daemon *d);
int split_net_connect(struct daemon *d);

/* The uid (and gid) the network process runs as. */
uid_t split_net_uid(const struct config *c);

/* The directories of the state directory the network process owns (its
 * storage, besides store/ when the store is SQLite there): tree = the
 * parent hands the whole tree over at start (a run without privilege
 * separation left it root's); not for snapshots/, whose trees hold the
 * sandboxes' ids. templates/ holds the built templates' descriptions,
 * each linking to its layer, which is the jail host's and stays so:
 * walked at every start (small), a layer made in place skipped. */
#define SPLIT_NET_DIRS 4
struct split_dir {
    const char *name;
    bool tree;
    bool templates;
};
extern const struct split_dir split_net_dirs[SPLIT_NET_DIRS];

/* <dir>/<name> into out; -ENAMETOOLONG (out empty) when it does not fit. */
int split_path(char *out, size_t n, const char *dir, const char *name);
