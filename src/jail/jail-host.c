/*
 * jail-host.c - what all jails of one abxd share, probed and opened once:
 * the state directories, the embedded abx-init image, the cgroup host, the
 * uid pool, the seccomp filter, the bounded disk, and the list of what this
 * host lacks for full isolation (jail_host_missing). Also reclaiming what a
 * previous run left behind.
 *
 * A missing kernel feature or privilege is recorded, not fatal: abxd starts
 * and reports itself not ready, naming what is missing. One jail's life is
 * jail.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/disk.h"
#include "jail/jail-internal.h"
#include "jail/jail.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "jail/uidpool.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/hashmap.h"
#include "util/parse.h"
#include "util/workq.h"

/* The static abx-init binary, embedded by init-blob.S. */
extern const char abx_init_blob[];
extern const char abx_init_blob_end[];

const char *
jail_mode_name(enum jail_mode m)
{
    switch (m) {
    case JAIL_NS:
        return "ns";
    case JAIL_UID:
        return "uid";
    case JAIL_NONE:
        return "none";
    default:
        return "invalid";
    }
}

enum jail_mode
jail_mode_from_name(const char *s)
{
    for (int m = 0; m < _JAIL_MODE_MAX; m++)
        if (!strcmp(s, jail_mode_name((enum jail_mode)m)))
            return (enum jail_mode)m;
    return _JAIL_MODE_INVALID;
}

/* --- host --- */

int
jail_image_fd(const char *name, const void *image, size_t n, struct err *err)
{
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
#ifdef MFD_EXEC
    int fd = memfd_create(name, flags | MFD_EXEC);
    if (fd < 0 && errno == EINVAL)
#else
    int fd = -1;
#endif
        fd = memfd_create(name, flags);
    if (fd < 0)
        return err_setx(err, errno, "cannot create the %s image", name);
    int r = write_full(fd, image, n);
    if (r < 0) {
        safe_close(fd);
        return err_setx(err, -r, "cannot write the %s image", name);
    }
    /* Sealed: nobody, including a sandbox reading /proc/1/exe, can alter it. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        fchmod(fd, 0555) < 0) {
        r = -errno;
        safe_close(fd);
        return err_setx(err, -r, "cannot seal the %s image", name);
    }
    return fd;
}

static int
make_init_fd(struct err *err)
{
    return jail_image_fd("abx-init", abx_init_blob, (size_t)(abx_init_blob_end - abx_init_blob),
                         err);
}

static void
add_missing(struct jail_host *h, const char *what)
{
    size_t n = strlen(h->missing);
    (void)snprintf(h->missing + n, sizeof(h->missing) - n, "%s%s", n ? "; " : "", what);
}

static void
check_userns(struct jail_host *h)
{
    struct buf b;
    buf_init(&b, 64);
    uint64_t v = 1;
    if (read_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", 64, &b) >= 0) {
        while (b.len && b.data[b.len - 1] == '\n')
            b.data[--b.len] = '\0';
        if (parse_u64(b.data, &v) < 0)
            v = 1;
    }
    buf_done(&b);
    if (v == 0)
        add_missing(h, "user namespaces (user.max_user_namespaces is 0)");
}

/* Mounts the bounded disk over sandboxes/ (a failure is a missing part,
 * for readiness, not an error). */
static int
open_disk(struct jail_host *h, const struct jail_host_config *c, struct err *err)
{
    char image[PATH_MAX + 16];
    struct err derr = {0};

    h->disk_bytes = c->disk_bytes;
    (void)snprintf(image, sizeof(image), "%s/disk.img", h->state_dir);
    struct disk_config dc = {h->sandboxes_dir, image, c->disk_pool_bytes, c->disk_floor_bytes};
    if (disk_open(&dc, &h->disk, &derr) < 0) {
        char what[400];
        (void)snprintf(what, sizeof(what),
                       "a disk bound for sandboxes (%s; --disk-mb 0 runs without one)", derr.msg);
        add_missing(h, what);
        return 0;
    }
    /* The directory is a mount point now: use what is mounted there. */
    safe_close(h->sandboxes_fd);
    h->sandboxes_fd = fcntl(disk_dir_fd(h->disk), F_DUPFD_CLOEXEC, 3);
    if (h->sandboxes_fd < 0)
        return err_setx(err, errno, "cannot open '%s'", h->sandboxes_dir);
    if (h->mode == JAIL_UID && fchmod(h->sandboxes_fd, 0711) < 0)
        return err_setx(err, errno, "cannot make '%s' searchable for uid mode", h->sandboxes_dir);
    return 0;
}

int
jail_host_new(const struct jail_host_config *c, struct jail_host **ret, struct err *err)
{
    struct jail_host *h = calloc(1, sizeof(*h));
    char instance[32];
    struct buf miss;
    struct err serr = {0};
    int r;

    buf_init(&miss, 512);
    if (!h)
        return -ENOMEM;
    h->sandboxes_fd = -EBADF;
    h->layers_fd = -EBADF;
    h->loop = c->loop;
    h->init_fd = -EBADF;
    h->null_fd = -EBADF;
    buf_init(&h->bpf, 1024 * 1024);
    h->mode = c->mode;
    h->root_bytes = c->root_bytes;
    h->tmp_bytes = c->tmp_bytes;
    h->shm_bytes = c->shm_bytes;
    if (c->nbinds > JAIL_MAX_BINDS) {
        jail_host_free(h);
        return err_setx(err, EINVAL, "too many bind mounts (%zu, at most %d)", c->nbinds,
                        JAIL_MAX_BINDS);
    }
    for (size_t i = 0; i < c->nbinds; i++) {
        const char *src = c->binds[i].src, *dst = c->binds[i].dst;
        if (!src || src[0] != '/' || !dst || dst[0] != '/' || strstr(dst, "..") ||
            strscpy(h->binds[i].src, src, sizeof(h->binds[i].src)) < 0 ||
            strscpy(h->binds[i].dst, dst, sizeof(h->binds[i].dst)) < 0) {
            jail_host_free(h);
            return err_setx(err, EINVAL, "bad bind mount '%.200s' -> '%.64s'", src ? src : "",
                            dst ? dst : "");
        }
        h->binds[i].ro = c->binds[i].ro;
        h->binds[i].if_nonempty = c->binds[i].if_nonempty;
    }
    h->nbinds = c->nbinds;
    if ((size_t)snprintf(h->state_dir, sizeof(h->state_dir), "%s", c->state_dir) >=
                sizeof(h->state_dir) ||
        (size_t)snprintf(h->sandboxes_dir, sizeof(h->sandboxes_dir), "%s/sandboxes",
                         c->state_dir) >= sizeof(h->sandboxes_dir) ||
        (size_t)snprintf(h->rootmnt, sizeof(h->rootmnt), "%s/rootmnt", c->state_dir) >=
                sizeof(h->rootmnt) ||
        (size_t)snprintf(h->etc, sizeof(h->etc), "%s/etc", c->state_dir) >= sizeof(h->etc)) {
        r = err_set(err, ENAMETOOLONG, "state directory path too long");
        goto fail;
    }
    r = mkdir_p(h->sandboxes_dir, 0700);
    if (r < 0) {
        r = err_setx(err, -r, "cannot create '%s'", h->sandboxes_dir);
        goto fail;
    }
    h->sandboxes_fd = open(h->sandboxes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h->sandboxes_fd < 0) {
        r = err_setx(err, errno, "cannot open '%s'", h->sandboxes_dir);
        goto fail;
    }
    if (h->mode == JAIL_UID &&
        (chmod(h->state_dir, 0711) < 0 || fchmod(h->sandboxes_fd, 0711) < 0)) {
        r = err_setx(err, errno, "cannot make '%s' searchable for uid mode", h->sandboxes_dir);
        goto fail;
    }
    h->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (h->null_fd < 0) {
        r = err_setx(err, errno, "cannot open /dev/null");
        goto fail;
    }
    r = make_init_fd(err);
    if (r < 0)
        goto fail;
    h->init_fd = r;
    r = workq_new(c->loop, 1, &h->wq);
    if (r < 0) {
        r = err_setx(err, -r, "cannot start the teardown worker");
        goto fail;
    }

    if (h->mode == JAIL_NONE)
        goto done;

    /* Lowering oom_score_adj needs CAP_SYS_RESOURCE, which some container
     * runtimes withhold even from root: find out once, here. */
    {
        struct buf cur;
        int64_t v = 0;
        buf_init(&cur, 32);
        if (read_file_at(AT_FDCWD, "/proc/self/oom_score_adj", 32, &cur) == 0) {
            int32_t x;
            while (cur.len && cur.data[cur.len - 1] == '\n')
                cur.data[--cur.len] = '\0';
            if (parse_i32(cur.data, &x) == 0)
                v = x;
        }
        buf_done(&cur);
        char lower[24], back[24];
        (void)snprintf(lower, sizeof(lower), "%lld", (long long)(v > -1000 ? v - 1 : v));
        (void)snprintf(back, sizeof(back), "%lld", (long long)v);
        h->oom_protect = write_existing_at(AT_FDCWD, "/proc/self/oom_score_adj", lower) == 0;
        (void)write_existing_at(AT_FDCWD, "/proc/self/oom_score_adj", back);
    }

    if (geteuid() != 0) {
        char what[96];
        (void)snprintf(what, sizeof(what), "root privileges (abxd runs as uid %u)",
                       (unsigned)geteuid());
        add_missing(h, what);
        goto done;
    }
    (void)snprintf(instance, sizeof(instance), "abx-%012llx",
                   (unsigned long long)(hashmap_fnv1a(c->state_dir) & 0xffffffffffffULL));
    r = cgroup_host_open(c->cgroup, instance, &h->cg, err);
    if (r < 0)
        goto fail;
    (void)cgroup_host_missing(h->cg, &miss);
    if (miss.len)
        add_missing(h, miss.data);
    buf_done(&miss);

    r = uidpool_open(c->uid_lockfile, c->uid_base, JAIL_UID_RANGE, c->uid_slots, &h->pool, err);
    if (r < 0)
        goto fail;

    if (seccomp_build_bpf(&h->bpf, &serr) < 0) {
        char what[300];
        (void)snprintf(what, sizeof(what), "seccomp (%s)", serr.msg);
        add_missing(h, what);
    }
    if (c->disk_bytes && (r = open_disk(h, c, err)) < 0)
        goto fail;

    if (h->mode == JAIL_NS) {
        check_userns(h);
        r = mkdir_p(h->rootmnt, 0755);
        if (r < 0) {
            r = err_setx(err, -r, "cannot create '%s'", h->rootmnt);
            goto fail;
        }
        r = rootfs_prepare_etc(h->state_dir, err);
        if (r < 0)
            goto fail;
        r = rootfs_prepare_sudo(h->state_dir, h->sudo, sizeof(h->sudo), err);
        if (r < 0)
            goto fail;
        /* Built layers: host root's, searchable, so that nobody but this
         * process changes what a layer name resolves to. */
        if ((size_t)snprintf(h->layers_dir, sizeof(h->layers_dir), "%s/" JAIL_LAYERS_DIR,
                             h->state_dir) >= sizeof(h->layers_dir)) {
            r = err_setx(err, ENAMETOOLONG, "state directory path too long");
            goto fail;
        }
        if (mkdir(h->layers_dir, 0755) < 0 && errno != EEXIST) {
            r = err_setx(err, errno, "cannot create '%s'", h->layers_dir);
            goto fail;
        }
        h->layers_fd = open(h->layers_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat lst;
        if (h->layers_fd < 0 || fstat(h->layers_fd, &lst) < 0 || lst.st_uid != 0 ||
            fchmod(h->layers_fd, 0755) < 0) {
            r = err_setx(err, h->layers_fd < 0 ? errno : EPERM,
                         "'%s' must be a directory of host root's", h->layers_dir);
            goto fail;
        }
    }
done:
    buf_done(&miss);
    *ret = h;
    return 0;
fail:
    buf_done(&miss);
    jail_host_free(h);
    return r;
}

void
jail_host_flush(struct jail_host *h)
{
    workq_free(h->layer_wq);
    h->layer_wq = NULL;
    workq_free(h->wq);
    h->wq = NULL;
}

struct jail_host *
jail_host_free(struct jail_host *h)
{
    if (!h)
        return NULL;
    jail_host_flush(h);
    safe_close(h->sandboxes_fd);
    safe_close(h->layers_fd);
    disk_free(h->disk);
    safe_close(h->init_fd);
    safe_close(h->null_fd);
    cgroup_host_free(h->cg);
    uidpool_free(h->pool);
    buf_done(&h->bpf);
    free(h);
    return NULL;
}

int
jail_host_missing(struct jail_host *h, struct buf *out)
{
    return buf_puts(out, h->missing);
}

enum jail_mode
jail_host_mode(const struct jail_host *h)
{
    return h->mode;
}

const char *
jail_host_state_dir(const struct jail_host *h)
{
    return h->state_dir;
}

const char *
jail_host_cgroup_name(const struct jail_host *h)
{
    return h->cg ? cgroup_version_name(cgroup_host_version(h->cg)) : "none";
}

bool
jail_host_oom_protect(const struct jail_host *h)
{
    return h->oom_protect;
}

const char *
jail_host_disk(const struct jail_host *h)
{
    return h->disk ? disk_describe(h->disk) : NULL;
}

int
jail_host_area_create(struct jail_host *h, const char *name, uint64_t limit_bytes, char *ret_path,
                      size_t n, struct err *err)
{
    if (!strchr(name, '-') || !jail_layer_name_ok(name))
        return err_set(err, EINVAL, "'%.64s' could be a sandbox's name", name);
    if ((size_t)snprintf(ret_path, n, "%s/%s", h->sandboxes_dir, name) >= n)
        return err_set(err, ENAMETOOLONG, "path of '%.64s' too long", name);
    if (!h->disk) /* unbounded: a plain directory (reclaim removes it) */
        return mkdirat(h->sandboxes_fd, name, 0700) < 0
                       ? err_set(err, errno, "cannot create area '%s'", name)
                       : 0;
    return disk_area_create(h->disk, name, limit_bytes ? limit_bytes : h->disk_bytes, err);
}

int
jail_host_area_usage(struct jail_host *h, const char *name, uint64_t *ret_bytes)
{
    return h->disk ? disk_area_usage(h->disk, name, ret_bytes, NULL) : -EOPNOTSUPP;
}

void
jail_host_area_destroy(struct jail_host *h, const char *name)
{
    if (!jail_layer_name_ok(name) || !strchr(name, '-'))
        return;
    if (h->disk)
        (void)disk_area_destroy(h->disk, name, NULL);
    else
        (void)rm_rf_at(h->sandboxes_fd, name);
}

uint32_t
jail_host_uid_slots_used(const struct jail_host *h)
{
    return h->pool ? uidpool_in_use(h->pool) : 0;
}

int
jail_host_reclaim(struct jail_host *h, struct err *err)
{
    int n = 0;

    if (h->cg && cgroup_host_version(h->cg) != CGROUP_NONE) {
        int r = cgroup_host_reclaim(h->cg, err);
        if (r < 0)
            return r;
        n = r;
    }
    if (h->disk) {
        int r = disk_reclaim(h->disk, err);
        return r < 0 ? r : MAX(n, r);
    }
    /* Whatever is left in sandboxes/ belonged to a run that is over. */
    int dfd = fcntl(h->sandboxes_fd, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        safe_close(dfd);
        return -ENOMEM;
    }
    struct dirent *de;
    int dirs = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = rm_rf_at(h->sandboxes_fd, de->d_name);
        if (r < 0) {
            closedir(d);
            return err_setx(err, -r, "cannot remove '%s/%s'", h->sandboxes_dir, de->d_name);
        }
        dirs++;
    }
    closedir(d);
    return MAX(n, dirs);
}

void
jail_host_bpf(const struct jail_host *h, const void **ret, size_t *ret_len)
{
    *ret = h->bpf.data;
    *ret_len = h->bpf.len;
}
