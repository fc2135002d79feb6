/*
 * seccomp.h - the sandbox system-call filter, compiled once at start.
 *
 * Modelled on Docker's default profile for a container without
 * CAP_SYS_ADMIN: an allowlist, EPERM for everything else, clone only
 * without namespace flags, clone3 answering ENOSYS so libc falls back to
 * clone, personality only for the harmless values. On top of Docker's:
 * io_uring (as Docker since 2023), AF_VSOCK sockets (a VM host's control
 * channel is not namespaced), the TIOCSTI ioctl and the btrfs ioctls that
 * make subvolumes and snapshots (they would escape a sandbox's disk bound)
 * are refused.
 * The result is a classic BPF program handed to abx-init, which installs
 * it on itself so every process in the sandbox inherits it.
 */
#pragma once

#include "util/buf.h"
#include "util/err.h"

/* Appends the filter (struct sock_filter[]) to out. */
int seccomp_build_bpf(struct buf *out, struct err *err);

/* The allowlist, NULL-terminated; exported for tests and docs. */
extern const char *const seccomp_allowed[];
