/*
 * cgroup.h - resource limits for one sandbox, on cgroup v2 or v1.
 *
 * A cgroup_host is the layout found at start: which version, where each
 * controller lives, and this daemon's instance directory (one per state
 * directory, so several abxd on one host never touch each other's groups).
 * A sandbox's cgroup is named after its id below that instance directory.
 * Pure v2 hosts use the unified hierarchy; hybrid hosts whose memory, pids
 * and cpu controllers are bound to v1 hierarchies use those (this machine).
 *
 * Functions return 0 (or a count) or -errno, fill err when given, and never
 * log. Not thread-safe; called from abxd's loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/err.h"

enum cgroup_version {
    CGROUP_NONE = 0,
    CGROUP_V1 = 1,
    CGROUP_V2 = 2,
};

struct cgroup_host;

struct cgroup_limits {
    uint64_t memory_bytes; /* 0 = no limit */
    uint32_t cpu_millis;   /* 1000 = one core; 0 = no limit */
    uint32_t pids;         /* 0 = no limit */
};

struct cgroup_stats {
    uint64_t memory_bytes; /* current usage */
    uint64_t memory_peak;  /* bytes, 0 when unknown */
    uint64_t pids;         /* current tasks */
    uint64_t cpu_usec;     /* cumulative CPU time, 0 when unknown */
    uint64_t oom_kills;    /* processes the OOM killer took in this group */
};

/* Detects the layout. force is "auto", "v1" or "v2". instance names our
 * directory ("abx-<hash>"), which the host holds an exclusive flock() on for
 * its life: -EBUSY when another live host (another abxd) holds it, whose
 * sandboxes a reclaim would otherwise kill. A host with no usable
 * controllers is returned anyway with version CGROUP_NONE;
 * cgroup_host_missing() says why. */
int cgroup_host_open(const char *force, const char *instance, struct cgroup_host **ret,
                     struct err *err);
struct cgroup_host *cgroup_host_free(struct cgroup_host *h);
enum cgroup_version cgroup_host_version(const struct cgroup_host *h);
const char *cgroup_version_name(enum cgroup_version v);
/* Appends a ';'-separated list of what is missing for limits (empty = ok). */
int cgroup_host_missing(const struct cgroup_host *h, struct buf *out);
/* Kills and removes every sandbox group left below our instance directory by
 * an earlier run. Returns the number of groups removed. */
int cgroup_host_reclaim(struct cgroup_host *h, struct err *err);

/* Creates the group for sandbox name (an id: [a-z0-9]+). */
int cgroup_create(struct cgroup_host *h, const char *name, struct err *err);
/* Directory fd of the group for clone3(CLONE_INTO_CGROUP) on v2; -EOPNOTSUPP on v1. */
int cgroup_open_dir(struct cgroup_host *h, const char *name);
int cgroup_attach(struct cgroup_host *h, const char *name, pid_t pid, struct err *err);
/* Writes up to max absolute paths of the group's cgroup.procs files (one per
 * v1 hierarchy) into paths[i] (each pathsz bytes); returns the count. */
int cgroup_procs_paths(struct cgroup_host *h, const char *name, char (*paths)[512], int max);
int cgroup_set_limits(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
                      struct err *err);
int cgroup_get_stats(struct cgroup_host *h, const char *name, struct cgroup_stats *ret);
int cgroup_freeze(struct cgroup_host *h, const char *name, bool frozen, struct err *err);
/* SIGKILLs every process in the group (cgroup.kill on v2, freeze-kill-thaw on v1). */
int cgroup_kill_all(struct cgroup_host *h, const char *name);
/* Removes the group; -EBUSY while tasks are still exiting (retry later). */
int cgroup_destroy(struct cgroup_host *h, const char *name);
/* Whether the group exists (for tests and leak checks). */
bool cgroup_exists(struct cgroup_host *h, const char *name);
