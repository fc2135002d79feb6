/*
 * sudo-server.h - the part of abx-init that runs commands as sandbox root
 * for abx-sudo (the sandbox's /usr/bin/sudo; wire format in
 * ../sudo/sudo-proto.h).
 *
 * Only in ns mode, where sandbox root is an unprivileged host uid range:
 * the command is init's child, so it inherits no_new_privs, the seccomp
 * filter, the bounding set and the cgroup; nothing host-side is relaxed.
 * Callers are authorized by SO_PEERCRED: uid 0 or SUDO_USER_UID inside.
 *
 * Single-threaded, non-blocking, driven by init's poll loop. Its children
 * are not abxd's: init must not report their exits to abxd, and hands them
 * to sudo_server_reaped() instead.
 */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SUDO_MAX_SESSIONS     64 /* concurrent sudo commands per sandbox */
#define SUDO_SERVER_MAX_POLLS (1 + SUDO_MAX_SESSIONS)

/* Listens on the abstract socket in the current network namespace.
 * Returns 0 or -errno. */
int sudo_server_start(void);

/* Fills up to max pollfds (the listener, then the sessions); returns how
 * many. Nothing when the server was not started. */
size_t sudo_server_pollfds(struct pollfd *pfd, size_t max);

/* Handles what poll() reported for the entries sudo_server_pollfds() gave:
 * accepts, starts commands, forwards signals, ends sessions whose client
 * left (killing the command's process group). Never blocks. */
void sudo_server_dispatch(const struct pollfd *pfd, size_t n);

/* Called for every reaped child init did not start for abxd; returns true
 * when pid was a sudo command (its status went to its client). */
bool sudo_server_reaped(pid_t pid, int status);
