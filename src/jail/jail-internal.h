/*
 * jail-internal.h - what jail.c (one jail) and jail-host.c (the host all
 * jails share) both see: the host's record. Nothing outside src/jail/
 * includes it; the contract is jail.h.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/jail.h"
#include "util/buf.h"

struct jail_host {
    enum jail_mode mode;
    char state_dir[PATH_MAX];
    char sandboxes_dir[PATH_MAX];
    char rootmnt[PATH_MAX];
    char etc[PATH_MAX];
    char sudo[PATH_MAX]; /* abx-sudo for sandboxes' /usr/bin/sudo; "" = none */
    int sandboxes_fd;
    struct cgroup_host *cg;
    struct uidpool *pool;
    struct buf bpf;
    int init_fd;
    int null_fd;
    struct workq *wq; /* deletes workspaces off the loop thread */
    struct loop *loop;
    char layers_dir[PATH_MAX]; /* state_dir/layers (ns mode) */
    int layers_fd;             /* -EBADF outside the ns mode */
    struct workq *layer_wq;    /* installs layers (layers.c); made on first use */
    struct disk *disk;         /* where sandboxes' directories are bounded; NULL = none */
    uint64_t disk_bytes;       /* their default bound */
    bool oom_protect;          /* we may set oom_score_adj to -1000 */
    uint64_t root_bytes, tmp_bytes, shm_bytes;
    size_t nbinds;
    struct {
        char src[PATH_MAX];
        char dst[256];
        bool ro;
        bool if_nonempty;
    } binds[JAIL_MAX_BINDS];
    char missing[1024];
};
