/*
 * rootfs.h - the generated /etc every sandbox sees (read-only, shared).
 *
 * At start abxd writes passwd, group, hosts, hostname, resolv.conf and
 * nsswitch.conf for the sandbox's two users (root, user 1000) and copies an
 * allowlist of harmless host configuration (the dynamic linker cache,
 * alternatives, profile, CA certificates, terminfo...) into a fresh
 * directory, then renames it into place - unless the directory a previous
 * start left is already exactly that, which is then kept untouched. Nothing secret (shadow, ssh
 * keys, ssl/private) is ever copied. Sandboxes bind it read-only at /etc.
 *
 * It also writes abx-sudo (embedded in abxd, see jail/sudo/sudo.c) to
 * statedir/abx-sudo, which every sandbox's init binds read-only at
 * /usr/bin/sudo.
 */
#pragma once

#include "util/err.h"

#define ROOTFS_HOSTNAME "sandbox"
#define ROOTFS_USER_UID 1000
#define ROOTFS_TTY_GID  5

#define ROOTFS_KEPT    0 /* what was there is exactly what would be written */
#define ROOTFS_WRITTEN 1

/* Builds statedir/etc atomically unless the one there already is exactly
 * what a build would make now (same entries, types, modes, link targets,
 * contents, all owned by us): then nothing is written, so abxd starts on a
 * full disk. Returns ROOTFS_KEPT, ROOTFS_WRITTEN or -errno. Call it only
 * while no sandbox runs (at start): a previous directory is deleted. */
int rootfs_prepare_etc(const char *statedir, struct err *err);

/* Writes the embedded abx-sudo to statedir/abx-sudo (ours, 0555) atomically,
 * unless the file there is already exactly that. Returns ROOTFS_KEPT,
 * ROOTFS_WRITTEN or -errno. ret_path (PATH_MAX bytes) gets its path. */
int rootfs_prepare_sudo(const char *statedir, char *ret_path, size_t size, struct err *err);
