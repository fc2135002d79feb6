/*
 * cgroup.c - layout detection and the dispatch to the v1 or v2 backend.
 */
#include "jail/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "jail/cgroup-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

static bool
valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '-'))
            return false;
    return true;
}

static bool
have_unified_controllers(void)
{
    struct buf b;
    buf_init(&b, 4096);
    int r = read_file_at(AT_FDCWD, "/sys/fs/cgroup/cgroup.controllers", 4096, &b);
    bool ok = r >= 0 && strstr(b.data, "memory") && strstr(b.data, "pids") && strstr(b.data, "cpu");
    buf_done(&b);
    return ok;
}

int
cgroup_host_open(const char *force, const char *instance, struct cgroup_host **ret, struct err *err)
{
    struct cgroup_host *h = calloc(1, sizeof(*h));
    int r;

    if (!h)
        return -ENOMEM;
    for (int i = 0; i < _CG_MAX; i++)
        h->inst[i] = -EBADF;
    if (!valid_name(instance)) {
        free(h);
        return err_set(err, EINVAL, "invalid cgroup instance name '%s'", instance);
    }
    (void)strscpy(h->instance, instance, sizeof(h->instance));

    bool want_v2 = !strcmp(force, "v2") || (!strcmp(force, "auto") && have_unified_controllers());
    if (want_v2) {
        h->version = CGROUP_V2;
        h->ops = &cgroup_v2_ops;
        r = cgroup_v2_setup(h, err);
    } else if (!strcmp(force, "v1") || !strcmp(force, "auto")) {
        h->version = CGROUP_V1;
        h->ops = &cgroup_v1_ops;
        r = cgroup_v1_setup(h, err);
    } else {
        free(h);
        return err_set(err, EINVAL, "ABX_CGROUP must be auto, v1 or v2, not '%s'", force);
    }
    if (r == 0 && flock(h->inst[0], LOCK_EX | LOCK_NB) < 0) {
        /* The instance is named after the state directory's path, which
         * abxd.lock keeps to one daemon; but the same path in another
         * mount namespace (or a hash collision) names the same cgroup. Its
         * owner is alive: reclaiming would kill its sandboxes, and freeing
         * this host must not remove its directory. */
        r = -errno;
        char path[sizeof(h->inst_path[0])];
        memcpy(path, h->inst_path[0], sizeof(path));
        for (int i = 0; i < _CG_MAX; i++)
            h->inst_path[i][0] = '\0';
        cgroup_host_free(h);
        if (r == -EWOULDBLOCK)
            return err_set(err, EBUSY,
                           "cgroup '%s' is in use by another abxd (one with the same state "
                           "directory path in another mount namespace?)",
                           path);
        return err_setx(err, -r, "cannot lock cgroup '%s'", path);
    }
    if (r < 0) {
        /* Keep the host so readiness can name what is missing. */
        h->version = CGROUP_NONE;
        h->ops = NULL;
        if (!h->missing[0])
            (void)snprintf(h->missing, sizeof(h->missing), "cgroup (%.200s)",
                           err_isset(err) ? err->msg : "unavailable");
        err_clear(err);
    }
    *ret = h;
    return 0;
}

struct cgroup_host *
cgroup_host_free(struct cgroup_host *h)
{
    if (!h)
        return NULL;
    for (int i = 0; i < _CG_MAX; i++) {
        safe_close(h->inst[i]);
        /* Our instance directory goes when it is empty (it is when every
         * sandbox is gone); a non-empty one stays for the next reclaim. */
        if (h->inst_path[i][0])
            (void)rmdir(h->inst_path[i]);
    }
    free(h);
    return NULL;
}

enum cgroup_version
cgroup_host_version(const struct cgroup_host *h)
{
    return h->version;
}

const char *
cgroup_version_name(enum cgroup_version v)
{
    switch (v) {
    case CGROUP_V1:
        return "v1";
    case CGROUP_V2:
        return "v2";
    default:
        return "none";
    }
}

int
cgroup_host_missing(const struct cgroup_host *h, struct buf *out)
{
    return buf_puts(out, h->missing);
}

#define NEED_OPS(h)             \
    do {                        \
        if (!(h)->ops)          \
            return -EOPNOTSUPP; \
    } while (0)

int
cgroup_create(struct cgroup_host *h, const char *name, struct err *err)
{
    if (!h->ops)
        return err_set(err, EOPNOTSUPP, "no usable cgroup controllers: %s", h->missing);
    if (!valid_name(name))
        return err_set(err, EINVAL, "invalid cgroup name '%s'", name);
    return h->ops->create(h, name, err);
}

int
cgroup_open_dir(struct cgroup_host *h, const char *name)
{
    if (h->version != CGROUP_V2 || !valid_name(name))
        return -EOPNOTSUPP;
    int fd = openat(h->inst[0], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int
cgroup_attach(struct cgroup_host *h, const char *name, pid_t pid, struct err *err)
{
    NEED_OPS(h);
    return h->ops->attach(h, name, pid, err);
}

int
cgroup_procs_paths(struct cgroup_host *h, const char *name, char (*paths)[512], int max)
{
    int n = 0;
    if (!h->ops || !valid_name(name))
        return -EINVAL;
    for (int c = 0; c < _CG_MAX && n < max; c++) {
        if (h->inst[c] < 0)
            continue;
        bool dup = false;
        for (int k = 0; k < c; k++)
            if (h->inst[k] >= 0 && !strcmp(h->inst_path[k], h->inst_path[c]))
                dup = true;
        if (dup)
            continue;
        int w = snprintf(paths[n], 512, "%s/%s/cgroup.procs", h->inst_path[c], name);
        if (w < 0 || w >= 512)
            return -ENAMETOOLONG;
        n++;
    }
    return n;
}

int
cgroup_set_limits(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
                  struct err *err)
{
    NEED_OPS(h);
    return h->ops->set_limits(h, name, l, err);
}

int
cgroup_get_stats(struct cgroup_host *h, const char *name, struct cgroup_stats *ret)
{
    NEED_OPS(h);
    memset(ret, 0, sizeof(*ret));
    return h->ops->get_stats(h, name, ret);
}

int
cgroup_freeze(struct cgroup_host *h, const char *name, bool frozen, struct err *err)
{
    NEED_OPS(h);
    return h->ops->freeze(h, name, frozen, err);
}

int
cgroup_kill_all(struct cgroup_host *h, const char *name)
{
    NEED_OPS(h);
    if (!valid_name(name))
        return -EINVAL;
    return h->ops->kill_all(h, name);
}

int
cgroup_destroy(struct cgroup_host *h, const char *name)
{
    NEED_OPS(h);
    if (!valid_name(name))
        return -EINVAL;
    return h->ops->destroy(h, name);
}

bool
cgroup_exists(struct cgroup_host *h, const char *name)
{
    for (int i = 0; i < _CG_MAX; i++) {
        if (h->inst[i] < 0 || !valid_name(name))
            continue;
        if (faccessat(h->inst[i], name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            return true;
    }
    return false;
}

int
cgroup_host_reclaim(struct cgroup_host *h, struct err *err)
{
    int removed = 0;

    NEED_OPS(h);
    /* The memory (or unified) hierarchy lists every group we made. */
    for (int c = 0; c < _CG_MAX; c++) {
        if (h->inst[c] < 0)
            continue;
        int dfd = openat(h->inst[c], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return err_setx(err, errno, "cannot scan cgroup '%s'", h->inst_path[c]);
        DIR *d = fdopendir(dfd);
        if (!d) {
            safe_close(dfd);
            return -ENOMEM;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_type != DT_DIR || !valid_name(de->d_name))
                continue;
            (void)h->ops->kill_all(h, de->d_name);
            int r = -EBUSY;
            for (int tries = 0; tries < 100 && r == -EBUSY; tries++) {
                r = h->ops->destroy(h, de->d_name);
                if (r == -EBUSY)
                    (void)usleep(10000);
            }
            if (r == 0)
                removed++;
        }
        closedir(d);
    }
    return removed;
}
