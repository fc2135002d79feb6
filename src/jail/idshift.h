/*
 * idshift.h - a tree's owners moved from a sandbox's host id range to the
 * ids every sandbox sees (a built template layer, layer.h's fs/).
 *
 * Host-root work on a tree a sandbox wrote: nothing is followed, nothing is
 * read but directory entries and their stat. No logging. Blocking I/O.
 */
#pragma once

#include <sys/types.h>

#include "util/err.h"

/* Shifts the owners of the tree below dirfd from the host range
 * first..first+65535 to 0..65535; ids outside the range become 0 when they
 * are 0 (files abxd wrote, overlay whiteouts) and 65534 otherwise. Set-id
 * bits are removed. Symlinks are never followed. */
int idshift_tree(int dirfd, uid_t first, struct err *err);
