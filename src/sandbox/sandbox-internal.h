/*
 * sandbox-internal.h - the ops tables behind sandbox.h, for its
 * implementations only (sandbox-local.c, sandbox-memory.c; a remote one
 * would be a third).
 *
 * An implementation embeds struct sandbox_host and struct sandbox as the
 * first member of its own host and sandbox, points their ops at its table
 * and converts back with container_of(). sandbox.c holds the public
 * functions, each a dispatcher: an op left NULL gives the documented
 * default (-EOPNOTSUPP, zero, false or NULL), so an implementation fills
 * in what it has. The contract of each op is that of the sandbox.h call of
 * the same name.
 */
#pragma once

#include <stddef.h>

#include "sandbox/sandbox.h"

/* container_of() (util/list.h) for const pointers. */
#define const_container_of(p, type, member) \
    ((const type *)(const void *)((const char *)(p)-offsetof(type, member)))

struct sandbox_host_ops {
    const char *name; /* "local", "memory": for messages */
    int (*create)(struct sandbox_host *h, const char *id, const struct sandbox_spec *spec,
                  sandbox_ready_fn ready, void *ud, struct sandbox **ret, struct err *err);
    void (*drain_pool)(struct sandbox_host *h);
    void (*free)(struct sandbox_host *h); /* required */
    uint32_t (*pool_ready)(const struct sandbox_host *h);
    void (*set_fd_budget)(struct sandbox_host *h, uint32_t budget);
    uint32_t (*fds)(const struct sandbox_host *h);
    uint32_t (*fd_limit)(const struct sandbox_host *h); /* NULL = SANDBOX_MAX_FDS */
    bool (*has_layers)(const struct sandbox_host *h);
    const char *(*state_dir)(const struct sandbox_host *h);
    int (*area_create)(struct sandbox_host *h, const char *name, uint64_t limit_bytes,
                       struct err *err);
    const char *(*layers_dir)(const struct sandbox_host *h);
    int (*layer_install)(struct sandbox_host *h, const char *area, const char *name, uid_t first,
                         sandbox_layer_fn done, void *ud, struct err *err);
    int (*area_usage)(struct sandbox_host *h, const char *name, uint64_t *ret_bytes);
    void (*area_destroy)(struct sandbox_host *h, const char *name);
    int (*orphans)(struct sandbox_host *h, sandbox_orphan_fn fn, void *ud, struct err *err);
    int (*adopt)(struct sandbox_host *h, const char *orphan, const char *id,
                 const struct sandbox_spec *spec, sandbox_ready_fn ready, void *ud,
                 struct sandbox **ret, struct err *err);
    int (*kill_orphan)(struct sandbox_host *h, const char *id, struct err *err);
    int (*tree_empty)(struct sandbox_host *h, int dirfd, struct err *err); /* any thread */
};

struct sandbox_ops {
    /* required */
    void (*free)(struct sandbox *sb);
    void (*kill)(struct sandbox *sb);
    bool (*is_ready)(const struct sandbox *sb);
    int (*exec)(struct sandbox *sb, const struct sandbox_exec *x, sandbox_exec_fn cb, void *ud,
                struct err *err);
    struct proc *(*proc_find)(struct sandbox *sb, pid_t pid);
    size_t (*proc_count)(const struct sandbox *sb, bool running_only);
    struct proc *(*proc_next)(struct sandbox *sb, struct proc *prev);
    /* optional; set_limits applies, sandbox.c records */
    int (*set_limits)(struct sandbox *sb, const struct sandbox_limits *l, struct err *err);
    int (*stats)(struct sandbox *sb, struct sandbox_stats *ret);
    int (*disk_usage)(struct sandbox *sb, uint64_t *ret_bytes);
    int (*freeze)(struct sandbox *sb, bool frozen, struct err *err);
    void (*vfs_ids)(const struct sandbox *sb, struct vfs_ids *ret);
    int (*netns_socket)(struct sandbox *sb, int family, int type, struct err *err);
    int (*view_fd)(const struct sandbox *sb);
    bool (*has_view)(const struct sandbox *sb);
    int (*root_fd)(const struct sandbox *sb);
    /* All file work: the sandbox_file_* calls run on fileops(sb, false). */
    int (*fileops)(struct sandbox *sb, bool as_root, struct fileops **ret, struct err *err);
    uint64_t (*max_file_bytes)(const struct sandbox *sb); /* uploads; NULL = no bound */
    int (*set_record)(struct sandbox *sb, const void *record, size_t len, struct err *err);
};

struct sandbox_host {
    const struct sandbox_host_ops *ops;
};

/* What every sandbox has, kept here so that sandbox.c answers for it:
 * sandbox_init() fills it in at create, sandbox_set_limits() records
 * limits an implementation accepted, and the implementation fills in the
 * timings and calls gone once. */
struct sandbox {
    const struct sandbox_ops *ops;
    char id[64];
    struct sandbox_limits limits;
    struct sandbox_timings timings;
    sandbox_gone_fn gone; /* NULL until set */
    void *gone_ud;
};

/* -EINVAL unless id is 1..63 bytes, has no '/' and is not "." or "..". */
int sandbox_init(struct sandbox *sb, const struct sandbox_ops *ops, const char *id,
                 const struct sandbox_limits *limits, struct err *err);
