/*
 * layer.h - built template layers on disk: where they live, what they were
 * built from, and the file-tree work around a build.
 *
 * A built template lives in <state>/templates/<name>/ (layout in
 * docs/templates.md "Layers on disk"):
 *
 *   current -> layer-<ms>          the layer new sandboxes use (a symlink,
 *                                  replaced atomically by rename)
 *   layer-<ms>/fs/{usr,etc,opt}/   the files the build changed, overlay
 *                                  upper-dir format (whiteouts included),
 *                                  ids 0..65535 as the sandbox sees them
 *   layer-<ms>/template/           the template directory it was built from
 *   layer-<ms>/lowers              the layers it was built on, one per line
 *   layer-<ms>/digest              SHA-256 of template/ (layer_digest())
 *
 * This module does no logging and knows nothing of HTTP or sandboxes.
 * Functions return 0 or -errno and fill the optional err. Blocking file I/O.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

#define LAYER_DIGEST_LEN 64     /* hex characters of a SHA-256 */
#define LAYER_FILES_MAX  100000 /* entries hashed in one template directory */

/* SHA-256 over the tree below dirfd (borrowed): every entry's relative path,
 * type, execute bit and content or link target, in sorted order. Two
 * directories with the same files get the same digest whatever their
 * owners, times and other mode bits. */
int layer_digest(int dirfd, char ret[LAYER_DIGEST_LEN + 1], struct err *err);

/* The layers a stored template stacks (its own fs/ first, then the lowers
 * file's lines) as malloc'ed paths into *ret (NULL-terminated, at most max);
 * returns the count. layer_dir is <state>/templates/<name>/layer-<ms>. */
int layer_read_stack(const char *layer_dir, size_t max, char ***ret, struct err *err);
