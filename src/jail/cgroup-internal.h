/*
 * cgroup-internal.h - the backend contract shared by cgroup-v1.c and cgroup-v2.c.
 */
#pragma once

#include "jail/cgroup.h"

enum cgroup_ctrl {
    CG_MEMORY,
    CG_PIDS,
    CG_CPU,
    CG_FREEZER, /* v1 only; v2 uses cgroup.freeze */
    CG_CPUACCT, /* v1 only, for usage figures */
    _CG_MAX,
};

struct cgroup_ops {
    int (*create)(struct cgroup_host *h, const char *name, struct err *err);
    int (*attach)(struct cgroup_host *h, const char *name, pid_t pid, struct err *err);
    int (*set_limits)(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
                      struct err *err);
    int (*get_stats)(struct cgroup_host *h, const char *name, struct cgroup_stats *ret);
    int (*freeze)(struct cgroup_host *h, const char *name, bool frozen, struct err *err);
    int (*kill_all)(struct cgroup_host *h, const char *name);
    int (*destroy)(struct cgroup_host *h, const char *name);
};

struct cgroup_host {
    enum cgroup_version version;
    const struct cgroup_ops *ops;
    char instance[64];
    /* v1: one instance directory per controller (-EBADF when absent).
     * v2: inst[0] is the instance directory. */
    int inst[_CG_MAX];
    char inst_path[_CG_MAX][512];
    char missing[256];
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

int cgroup_v1_setup(struct cgroup_host *h, struct err *err);
int cgroup_v2_setup(struct cgroup_host *h, struct err *err);

/* Reads "key N" from a flat keyed file such as memory.events. */
int cgroup_read_key(int dirfd, const char *file, const char *key, uint64_t *ret);
int cgroup_read_u64(int dirfd, const char *file, uint64_t *ret);
/* Kills every pid listed in dirfd/cgroup.procs; returns how many were listed. */
int cgroup_kill_listed(int dirfd);
