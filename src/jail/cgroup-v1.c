/*
 * cgroup-v1.c - the v1 backend: one directory per controller hierarchy.
 *
 * Used on hybrid hosts where memory, pids and cpu are bound to v1 mounts.
 * The freezer (for kill-all and pause) and cpuacct (for usage) are used
 * when mounted. Memory+swap is capped with memsw when the kernel has it.
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

static const char *const ctrl_names[_CG_MAX] = {"memory", "pids", "cpu", "freezer", "cpuacct"};

/* Finds the v1 mount point whose super options name controller c. */
static int
find_mount(const char *c, char *out, size_t outsz)
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
        if (dash) {
            /* fields: id parent maj:min root mountpoint ... */
            char mp[512] = "";
            if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1) {
                char fstype[32] = "", src[64] = "", opts[512] = "";
                if (sscanf(dash + 3, "%31s %63s %511s", fstype, src, opts) == 3 &&
                    !strcmp(fstype, "cgroup")) {
                    char *save = NULL;
                    for (char *tok = strtok_r(opts, ",", &save); tok;
                         tok = strtok_r(NULL, ",", &save))
                        if (!strcmp(tok, c)) {
                            if ((size_t)snprintf(out, outsz, "%s", mp) < outsz)
                                r = 0;
                            break;
                        }
                }
            }
        }
        if (r == 0)
            break;
        line = nl ? nl + 1 : NULL;
    }
    buf_done(&b);
    return r;
}

int
cgroup_v1_setup(struct cgroup_host *h, struct err *err)
{
    char mp[512];
    char missing[256] = "";

    for (int c = 0; c < _CG_MAX; c++) {
        bool required = c == CG_MEMORY || c == CG_PIDS || c == CG_CPU;
        if (find_mount(ctrl_names[c], mp, sizeof(mp)) < 0) {
            if (required) {
                size_t n = strlen(missing);
                (void)snprintf(missing + n, sizeof(missing) - n, "%scgroup %s controller",
                               n ? "; " : "", ctrl_names[c]);
            }
            continue;
        }
        int n = snprintf(h->inst_path[c], sizeof(h->inst_path[c]), "%s/%s", mp, h->instance);
        if (n < 0 || (size_t)n >= sizeof(h->inst_path[c]))
            return err_set(err, ENAMETOOLONG, "cgroup path too long");
        if (mkdir(h->inst_path[c], 0755) < 0 && errno != EEXIST) {
            if (required) {
                size_t k = strlen(missing);
                (void)snprintf(missing + k, sizeof(missing) - k,
                               "%swritable cgroup %s hierarchy (%s)", k ? "; " : "", ctrl_names[c],
                               strerror(errno));
            }
            continue;
        }
        h->inst[c] = open(h->inst_path[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h->inst[c] < 0)
            return err_setx(err, errno, "cannot open '%s'", h->inst_path[c]);
        if (c == CG_MEMORY)
            (void)write_existing_at(h->inst[c], "memory.use_hierarchy", "1");
    }
    if (missing[0]) {
        (void)snprintf(h->missing, sizeof(h->missing), "%s", missing);
        return err_set(err, ENOENT, "%s", missing);
    }
    return 0;
}

static int
v1_create(struct cgroup_host *h, const char *name, struct err *err)
{
    for (int c = 0; c < _CG_MAX; c++) {
        if (h->inst[c] < 0)
            continue;
        if (mkdirat(h->inst[c], name, 0755) < 0 && errno != EEXIST)
            return err_setx(err, errno, "cannot create cgroup '%s/%s'", h->inst_path[c], name);
    }
    return 0;
}

static int
v1_attach(struct cgroup_host *h, const char *name, pid_t pid, struct err *err)
{
    char path[128], val[32];
    (void)snprintf(val, sizeof(val), "%d", (int)pid);
    for (int c = 0; c < _CG_MAX; c++) {
        if (h->inst[c] < 0)
            continue;
        (void)snprintf(path, sizeof(path), "%s/cgroup.procs", name);
        int r = write_existing_at(h->inst[c], path, val);
        if (r < 0)
            return err_setx(err, -r, "cannot move pid %d into cgroup '%s/%s'", (int)pid,
                            h->inst_path[c], name);
    }
    return 0;
}

static int
set_at(struct cgroup_host *h, int c, const char *name, const char *file, const char *val,
       struct err *err)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/%s", name, file);
    int r = write_existing_at(h->inst[c], path, val);
    if (r < 0)
        return err_setx(err, -r, "cannot set %s to %s for cgroup '%s'", file, val, name);
    return 0;
}

static int
v1_set_limits(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
              struct err *err)
{
    char val[32], path[128];
    int r;

    if (l->memory_bytes) {
        (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)l->memory_bytes);
    } else {
        (void)snprintf(val, sizeof(val), "-1");
    }
    /* memsw must stay >= memory: raise memsw first when growing, memory
     * first when shrinking. Try one order, then the other. */
    (void)snprintf(path, sizeof(path), "%s/memory.memsw.limit_in_bytes", name);
    bool memsw = faccessat(h->inst[CG_MEMORY], path, F_OK, 0) == 0;
    if (memsw && write_existing_at(h->inst[CG_MEMORY], path, val) == 0) {
        r = set_at(h, CG_MEMORY, name, "memory.limit_in_bytes", val, err);
    } else {
        r = set_at(h, CG_MEMORY, name, "memory.limit_in_bytes", val, err);
        if (r == 0 && memsw)
            r = set_at(h, CG_MEMORY, name, "memory.memsw.limit_in_bytes", val, err);
    }
    if (r < 0)
        return r;

    if (l->pids)
        (void)snprintf(val, sizeof(val), "%u", l->pids);
    else
        (void)snprintf(val, sizeof(val), "max");
    r = set_at(h, CG_PIDS, name, "pids.max", val, err);
    if (r < 0)
        return r;

    r = set_at(h, CG_CPU, name, "cpu.cfs_period_us", "100000", err);
    if (r < 0)
        return r;
    if (l->cpu_millis)
        (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)l->cpu_millis * 100u);
    else
        (void)snprintf(val, sizeof(val), "-1");
    return set_at(h, CG_CPU, name, "cpu.cfs_quota_us", val, err);
}

static int
v1_get_stats(struct cgroup_host *h, const char *name, struct cgroup_stats *ret)
{
    _cleanup_close_ int mem = openat(h->inst[CG_MEMORY], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mem < 0)
        return -errno;
    (void)cgroup_read_u64(mem, "memory.usage_in_bytes", &ret->memory_bytes);
    (void)cgroup_read_u64(mem, "memory.max_usage_in_bytes", &ret->memory_peak);
    (void)cgroup_read_key(mem, "memory.oom_control", "oom_kill", &ret->oom_kills);
    _cleanup_close_ int pids = openat(h->inst[CG_PIDS], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pids >= 0)
        (void)cgroup_read_u64(pids, "pids.current", &ret->pids);
    if (h->inst[CG_CPUACCT] >= 0) {
        _cleanup_close_ int acct =
                openat(h->inst[CG_CPUACCT], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t ns = 0;
        if (acct >= 0 && cgroup_read_u64(acct, "cpuacct.usage", &ns) == 0)
            ret->cpu_usec = ns / 1000u;
    }
    return 0;
}

static int
v1_freeze(struct cgroup_host *h, const char *name, bool frozen, struct err *err)
{
    if (h->inst[CG_FREEZER] < 0)
        return err_set(err, EOPNOTSUPP, "the cgroup v1 freezer is not mounted");
    return set_at(h, CG_FREEZER, name, "freezer.state", frozen ? "FROZEN" : "THAWED", err);
}

static int
v1_kill_all(struct cgroup_host *h, const char *name)
{
    /* Freeze first so nothing forks between reading the list and killing;
     * frozen tasks still die on SIGKILL once thawed. */
    bool frozen = v1_freeze(h, name, true, NULL) == 0;
    int total = 0;
    for (int round = 0; round < 16; round++) {
        _cleanup_close_ int d =
                openat(h->inst[CG_PIDS] >= 0 ? h->inst[CG_PIDS] : h->inst[CG_MEMORY], name,
                       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
            break;
        int n = cgroup_kill_listed(d);
        if (n <= 0)
            break;
        total += n;
        if (frozen)
            (void)v1_freeze(h, name, false, NULL);
    }
    if (frozen)
        (void)v1_freeze(h, name, false, NULL);
    return total;
}

static int
v1_destroy(struct cgroup_host *h, const char *name)
{
    int r = 0;
    for (int c = 0; c < _CG_MAX; c++) {
        if (h->inst[c] < 0)
            continue;
        if (unlinkat(h->inst[c], name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
            r = -errno;
    }
    return r;
}

const struct cgroup_ops cgroup_v1_ops = {
        .create = v1_create,
        .attach = v1_attach,
        .set_limits = v1_set_limits,
        .get_stats = v1_get_stats,
        .freeze = v1_freeze,
        .kill_all = v1_kill_all,
        .destroy = v1_destroy,
};
