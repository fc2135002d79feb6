/*
 * snapshot.h - copy a sandbox's writable files to a host directory and back.
 *
 * A snapshot is files only (no memory, no processes). It holds the
 * writable top-level directories of the sandbox's view, SNAPSHOT_DIRS (see
 * jail/init/init.c build_root(): /home/user is the host workspace bind,
 * /tmp its own tmpfs, /root /run /var /mnt /srv on the root tmpfs, /opt on
 * the root tmpfs or a template's writable layer). Never /proc, /dev, /sys,
 * /etc, /usr, /bin, /lib*: those are host or template read-only mounts.
 *
 * The stored tree lives below a directory of the caller's (the daemon's
 * state dir, mode 0700): <dst>/home/user, <dst>/tmp, ... Modes, mtimes,
 * symlinks (as links) and fifos are kept; ownership is stored as the
 * in-sandbox ids (host id = in-sandbox id: 0 for root, 1000 for user),
 * ids outside the sandbox's range as nobody (65534). Holes of sparse
 * files are kept both ways (only data extents are copied). Hardlinks become
 * separate files; xattrs, sockets and device nodes are not kept; nested
 * mount points (a different st_dev than their top directory) are skipped.
 *
 * The sandbox is hostile and may swap paths while we copy: both directions
 * are copies of util/tree.h, so every name is opened relative to a pinned
 * directory fd with O_NOFOLLOW (re-checked by fstat after open), regular
 * files with O_NONBLOCK so a fifo swapped in cannot hang us; no symlink is
 * ever followed. A regular file owned outside the sandbox's range that is
 * not world-readable is skipped (it could only be a host file linked in).
 *
 * Functions block (plain file system calls; run them on a worker thread),
 * keep no state, return 0 or -errno and fill err; fds are borrowed.
 */
#pragma once

#include <stdint.h>

#include "util/err.h"

struct vfs_ids;

#define SNAPSHOT_MAX_BYTES   (4ull << 30) /* bytes of file data (not holes) in one snapshot */
#define SNAPSHOT_MAX_ENTRIES 200000       /* entries in one snapshot */
#define SNAPSHOT_MAX_DEPTH   256          /* directory levels */
#define SNAPSHOT_NOBODY      65534u

extern const char *const SNAPSHOT_DIRS[];
extern const unsigned SNAPSHOT_NDIRS;

struct snapshot_stats {
    uint64_t bytes;   /* of file data copied (holes not counted) */
    uint64_t entries; /* files, directories, links, fifos copied */
    uint64_t skipped; /* sockets, devices, mount points, foreign files */
};

/* Copies the writable directories of the view viewfd (a sandbox's root,
 * ids its ids) into the empty directory dstfd. -EFBIG past max_bytes of
 * file data (what the files' data extents hold: a hole costs nothing, so
 * a 10 GiB sparse file with 1 MiB of data counts 1 MiB), -E2BIG past
 * SNAPSHOT_MAX_ENTRIES, -ELOOP past SNAPSHOT_MAX_DEPTH. On failure dstfd
 * holds a partial tree the caller removes. */
int snapshot_copy_out(int viewfd, const struct vfs_ids *ids, int dstfd, uint64_t max_bytes,
                      struct snapshot_stats *ret, struct err *err);

/* Makes the writable directories of the view viewfd equal to the tree
 * srcfd holds (as snapshot_copy_out() stored it): entries missing from the
 * snapshot are removed, the others replaced, ownership mapped into ids'
 * range. Meant for a fresh sandbox nothing runs in yet. */
int snapshot_copy_in(int srcfd, int viewfd, const struct vfs_ids *ids, struct err *err);
