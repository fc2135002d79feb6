/*
 * cgroup-v2.c - the unified-hierarchy backend.
 *
 * Our instance directory sits below the cgroup abxd itself runs in, so a
 * systemd unit with Delegate=yes works: when that cgroup holds processes
 * (abxd), controllers cannot be enabled for children ("no internal
 * processes"), so abxd first moves itself into a leaf named abxd-daemon.
 * At the root cgroup that rule does not apply.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/cgroup-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

#define V2_CONTROLLERS "+memory +pids +cpu"

/* Finds the cgroup2 mount point (/sys/fs/cgroup on pure v2 hosts,
 * /sys/fs/cgroup/unified on hybrid ones). */
static int
find_v2_mount(char *out, size_t outsz)
{
    struct buf b;
    buf_init(&b, 1024 * 1024);
    int r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", b.max, &b);
    if (r < 0) {
        buf_done(&b);
        return r;
    }
    r = -ENOENT;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *dash = strstr(line, " - ");
        char mp[512], fstype[32];
        if (dash && sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 &&
            sscanf(dash + 3, "%31s", fstype) == 1 && !strcmp(fstype, "cgroup2")) {
            r = (size_t)snprintf(out, outsz, "%s", mp) < outsz ? 0 : -ENAMETOOLONG;
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    buf_done(&b);
    return r;
}

static int
own_cgroup(char *out, size_t outsz)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    int r = read_file_at(AT_FDCWD, "/proc/self/cgroup", b.max, &b);
    if (r < 0) {
        buf_done(&b);
        return r;
    }
    r = -ENOENT;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (!strncmp(line, "0::", 3)) {
            r = (size_t)snprintf(out, outsz, "%s", line + 3) < outsz ? 0 : -ENAMETOOLONG;
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    buf_done(&b);
    return r;
}

static int
enable_controllers(const char *dir)
{
    char path[600];
    (void)snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
    return write_existing_at(AT_FDCWD, path, V2_CONTROLLERS);
}

int
cgroup_v2_setup(struct cgroup_host *h, struct err *err)
{
    char own[256], base[512], path[600], mnt[256];
    int r;
    struct buf ctl;

    r = find_v2_mount(mnt, sizeof(mnt));
    if (r < 0) {
        (void)snprintf(h->missing, sizeof(h->missing), "a cgroup v2 mount");
        return err_setx(err, -r, "no cgroup2 file system is mounted");
    }
    buf_init(&ctl, 4096);
    (void)snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
    r = read_file_at(AT_FDCWD, path, 4096, &ctl);
    bool have = r >= 0 && strstr(ctl.data, "memory") && strstr(ctl.data, "pids") &&
                strstr(ctl.data, "cpu");
    buf_done(&ctl);
    if (!have) {
        (void)snprintf(h->missing, sizeof(h->missing),
                       "cgroup v2 memory, pids and cpu controllers (not enabled at '%.160s')", mnt);
        return err_set(err, ENOENT, "%s", h->missing);
    }
    r = own_cgroup(own, sizeof(own));
    if (r < 0)
        return err_setx(err, -r, "cannot find our own cgroup in /proc/self/cgroup");
    if (!strcmp(own, "/"))
        own[0] = '\0';
    (void)snprintf(base, sizeof(base), "%s%s", mnt, own);

    if (own[0]) {
        r = enable_controllers(base);
        if (r == -EBUSY) {
            (void)snprintf(path, sizeof(path), "%s/abxd-daemon", base);
            if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return err_setx(err, errno, "cannot create '%s'", path);
            (void)snprintf(path, sizeof(path), "%s/abxd-daemon/cgroup.procs", base);
            r = write_existing_at(AT_FDCWD, path, "0");
            if (r < 0)
                return err_setx(err, -r, "cannot move abxd into '%s'", path);
            r = enable_controllers(base);
        }
    } else {
        r = enable_controllers(base);
    }
    if (r < 0) {
        (void)snprintf(h->missing, sizeof(h->missing),
                       "delegated cgroup v2 subtree at '%.160s' (%.40s)", base, strerror(-r));
        return err_setx(err, -r, "cannot enable %s in '%s'", V2_CONTROLLERS, base);
    }
    int n = snprintf(h->inst_path[0], sizeof(h->inst_path[0]), "%s/%s", base, h->instance);
    if (n < 0 || (size_t)n >= sizeof(h->inst_path[0]))
        return err_set(err, ENAMETOOLONG, "cgroup path too long");
    if (mkdir(h->inst_path[0], 0755) < 0 && errno != EEXIST)
        return err_setx(err, errno, "cannot create '%s'", h->inst_path[0]);
    r = enable_controllers(h->inst_path[0]);
    if (r < 0)
        return err_setx(err, -r, "cannot enable %s in '%s'", V2_CONTROLLERS, h->inst_path[0]);
    h->inst[0] = open(h->inst_path[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h->inst[0] < 0)
        return err_setx(err, errno, "cannot open '%s'", h->inst_path[0]);
    return 0;
}

static int
v2_create(struct cgroup_host *h, const char *name, struct err *err)
{
    if (mkdirat(h->inst[0], name, 0755) < 0 && errno != EEXIST)
        return err_setx(err, errno, "cannot create cgroup '%s/%s'", h->inst_path[0], name);
    return 0;
}

static int
set_at(struct cgroup_host *h, const char *name, const char *file, const char *val, struct err *err)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/%s", name, file);
    int r = write_existing_at(h->inst[0], path, val);
    if (r < 0)
        return err_setx(err, -r, "cannot set %s to %s for cgroup '%s'", file, val, name);
    return 0;
}

static int
v2_attach(struct cgroup_host *h, const char *name, pid_t pid, struct err *err)
{
    char val[32];
    (void)snprintf(val, sizeof(val), "%d", (int)pid);
    return set_at(h, name, "cgroup.procs", val, err);
}

static int
v2_set_limits(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
              struct err *err)
{
    char val[64];
    int r;

    if (l->memory_bytes)
        (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)l->memory_bytes);
    else
        (void)snprintf(val, sizeof(val), "max");
    r = set_at(h, name, "memory.max", val, err);
    if (r < 0)
        return r;
    /* No swapping around the limit; absent when the kernel has no swap support. */
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/memory.swap.max", name);
    (void)write_existing_at(h->inst[0], path, "0");

    if (l->pids)
        (void)snprintf(val, sizeof(val), "%u", l->pids);
    else
        (void)snprintf(val, sizeof(val), "max");
    r = set_at(h, name, "pids.max", val, err);
    if (r < 0)
        return r;
    if (l->cpu_millis)
        (void)snprintf(val, sizeof(val), "%llu 100000", (unsigned long long)l->cpu_millis * 100u);
    else
        (void)snprintf(val, sizeof(val), "max 100000");
    return set_at(h, name, "cpu.max", val, err);
}

static int
v2_get_stats(struct cgroup_host *h, const char *name, struct cgroup_stats *ret)
{
    _cleanup_close_ int d = openat(h->inst[0], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return -errno;
    (void)cgroup_read_u64(d, "memory.current", &ret->memory_bytes);
    (void)cgroup_read_u64(d, "memory.peak", &ret->memory_peak);
    (void)cgroup_read_key(d, "memory.events", "oom_kill", &ret->oom_kills);
    (void)cgroup_read_u64(d, "pids.current", &ret->pids);
    (void)cgroup_read_key(d, "cpu.stat", "usage_usec", &ret->cpu_usec);
    return 0;
}

static int
v2_freeze(struct cgroup_host *h, const char *name, bool frozen, struct err *err)
{
    return set_at(h, name, "cgroup.freeze", frozen ? "1" : "0", err);
}

static int
v2_kill_all(struct cgroup_host *h, const char *name)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/cgroup.kill", name);
    if (write_existing_at(h->inst[0], path, "1") == 0)
        return 1;
    /* Before 5.14: freeze, kill what is listed, thaw. */
    (void)v2_freeze(h, name, true, NULL);
    _cleanup_close_ int d = openat(h->inst[0], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int n = d >= 0 ? cgroup_kill_listed(d) : 0;
    (void)v2_freeze(h, name, false, NULL);
    return n;
}

static int
v2_destroy(struct cgroup_host *h, const char *name)
{
    if (unlinkat(h->inst[0], name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

const struct cgroup_ops cgroup_v2_ops = {
        .create = v2_create,
        .attach = v2_attach,
        .set_limits = v2_set_limits,
        .get_stats = v2_get_stats,
        .freeze = v2_freeze,
        .kill_all = v2_kill_all,
        .destroy = v2_destroy,
};
