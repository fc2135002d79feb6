/*
 * jailer-internal.h - what a jailer implementation fills in (jailer.h;
 * jailer-here.c, jailer-priv.c). jailer.c dispatches through the table;
 * callbacks are the implementation's to call, through cb/userdata below.
 */
#pragma once

#include "sandbox/jailer.h"
#include "sandbox/sandbox-internal.h"
#include "util/list.h"

struct jailer_ops {
    void (*free)(struct jailer *jr);
    enum jail_mode (*mode)(const struct jailer *jr);
    const char *(*state_dir)(const struct jailer *jr);
    int (*area_create)(struct jailer *jr, const char *name, uint64_t limit_bytes, struct err *err);
    const char *(*layers_dir)(const struct jailer *jr);
    int (*layer_install)(struct jailer *jr, const char *area, const char *name, uid_t first,
                         sandbox_layer_fn done, void *ud, struct err *err);
    int (*area_usage)(struct jailer *jr, const char *name, uint64_t *ret_bytes);
    void (*area_destroy)(struct jailer *jr, const char *name);
    int (*create)(struct jailer *jr, const char *id, const struct jail_limits *limits,
                  const struct sandbox_fs *fs, struct jailer_jail **ret, struct err *err);

    int (*spawn)(struct jailer_jail *j, uint64_t token, const struct jail_spawn *sp,
                 struct err *err);
    int (*signal)(struct jailer_jail *j, pid_t pid, int sig, bool group);
    int (*set_limits)(struct jailer_jail *j, const struct jail_limits *l, struct err *err);
    int (*freeze)(struct jailer_jail *j, bool frozen, struct err *err);
    int (*stats)(struct jailer_jail *j, struct cgroup_stats *ret);
    int (*disk_usage)(struct jailer_jail *j, uint64_t *ret_bytes);
    void (*kill)(struct jailer_jail *j);
    void (*free_jail)(struct jailer_jail *j);
    bool (*is_ready)(const struct jailer_jail *j);
    const struct jail_timings *(*timings)(const struct jailer_jail *j);
    const char *(*home)(const struct jailer_jail *j, bool root);
    const char *(*workspace_path)(const struct jailer_jail *j);
    int (*workspace_fd)(const struct jailer_jail *j);
    void (*vfs_ids)(const struct jailer_jail *j, struct vfs_ids *ret);
    int (*view_fd)(const struct jailer_jail *j);
    bool (*has_view)(const struct jailer_jail *j);
    int (*open_pty)(struct jailer_jail *j, bool root, unsigned rows, unsigned cols, int *ret_master,
                    int *ret_tty, struct err *err);
    int (*netns_socket)(struct jailer_jail *j, int family, int type, const char *label,
                        struct err *err);
    int (*fileops)(struct jailer_jail *j, bool as_root, const char *label, struct fileops **ret,
                   struct err *err);
    /* NULL: -EOPNOTSUPP */
    int (*set_record)(struct jailer_jail *j, const void *record, size_t len, struct err *err);
    int (*orphans)(struct jailer *jr, jailer_orphan_fn fn, void *userdata, struct err *err);
    int (*adopt)(struct jailer *jr, const char *id, struct jailer_jail **ret, struct err *err);
    int (*tree_empty)(struct jailer *jr, int dirfd, struct err *err);
};

struct jailer {
    const struct jailer_ops *ops;
    struct loop *loop;
};

/* The first member of an implementation's jail. */
struct jailer_jail {
    struct jailer *jr;
    const struct jailer_callbacks *cb;
    void *ud;
};
