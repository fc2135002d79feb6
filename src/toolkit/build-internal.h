/*
 * build-internal.h - what the builder's files share and no one else sees:
 * build.c (the builder: stamps, staging, install) calls down into
 * build-manifest.c, build-hash.c, build-run.c and build-stage.c.
 *
 * Same conventions as build.h: 0 (or an fd) or -errno, struct err filled,
 * no logging; fds passed in are borrowed.
 */
#pragma once

#include <dirent.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "toolkit/build.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/err.h"

extern char **environ;

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

#define BUILD_TREE_DEPTH_MAX 64 /* directory levels walked in a package or bundle */

/* build-manifest.c */

/* Names every key of obj that is not in allowed, in one message. */
int build_check_keys(json_t *obj, const char *where, const char *const *allowed, struct err *err);

/* build-hash.c */

/* The value of the environment variable name, or def when unset or empty. */
const char *build_env_or(const char *name, const char *def);
/* Whether a directory entry is no part of a package (hidden, __pycache__). */
bool build_skipped_name(const char *name);

/* build-run.c */

struct build_run_spec {
    const char *what;  /* "the build", "launch" ... for messages */
    char *const *argv; /* argv[0] is an absolute path */
    char *const *envp; /* NULL = ours */
    const char *cwd;   /* NULL = ours */
    uint64_t timeout_ms;
    struct buf *out; /* stdout, bounded by its max; NULL = into log */
    struct buf *log; /* stderr (and stdout when out is NULL), tail kept */
};

/* Runs a command in its own process group with stdin from /dev/null. When
 * it exits, whatever it left running in its group is killed, so a stray
 * background process cannot hold the pipes open. Returns 0 and the exit
 * status (128 + N for signal N) or -errno: -ETIMEDOUT, -EFBIG for output
 * past out's max. */
int build_run_command(const struct build_run_spec *s, int *ret_status, struct err *err);
/* "exited with status N" or "was killed by signal N (name)" for a status
 * from build_run_command(). */
void build_describe_status(int status, char *out, size_t n);
/* Appends a line to the log, keeping its last TOOLS_BUILD_LOG_TAIL_MAX bytes. */
void build_log_printf(struct buf *log, const char *fmt, ...) _printf_(2, 3);

/* build-stage.c */

/* Opens the directory rel below root without following any symlink,
 * creating missing components (mode 0755) when create; returns the fd. */
int build_open_dir_nofollow(int root, const char *rel, bool create, const char *what,
                            struct err *err);
/* Splits rel into a heap parent ("" for none) and a pointer to its last part. */
int build_split_rel(const char *rel, char **ret_parent, const char **ret_name);
/* Copies the file or tree rel of the package into the same place of the
 * staging directory, refusing symlinks and special files. */
int build_copy_listed(int srcfd, int stagefd, const char *rel, struct err *err);
/* Makes the tree world-readable (it is mounted read-only into sandboxes that
 * run as other users, and the build ran under the caller's umask) and
 * with sync, fsyncs every file and directory in it. Symlinks the build
 * made stay as they are. */
int build_seal_tree(int dfd, const char *rel, int depth, bool sync, struct err *err);
/* Writes a JSON value to dfd/name (0644), pretty and deterministic. */
int build_write_json_at(int dfd, const char *name, const json_t *v, struct err *err);
/* Contract stage 1: the command list of the bundle whose launcher is
 * launch; returns the normalized list in ret. */
int build_contract_commands(char *launch, const struct tools_build_manifest *m, struct buf *log,
                            json_t **ret, struct err *err);
/* Contract stage 2 for every command in cmds (writing schemas/<cmd>.json
 * below stagefd), and stage 3's "unknown command" rule. */
int build_contract_schemas(int stagefd, char *launch, json_t *cmds, struct buf *log,
                           struct err *err);
