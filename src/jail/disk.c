/*
 * disk.c - the sandboxes' btrfs: finding or making it, and its areas.
 *
 * disk_open() runs once per start. A btrfs labelled DISK_LABEL at dir is
 * ours from an earlier run that did not unmount it (a crash): it is used
 * as it is. Another btrfs at dir is the operator's: used when its quotas
 * are on and it is not the file system of the image's directory (which
 * would put the sandboxes back on the state file system). Otherwise the
 * image: found (a btrfs with our label; re-made when its configured size
 * changed) or made (allocated with fallocate, so sandboxes' writes can
 * never fail with ENOSPC on the host nor take the state file system's
 * free space later; NOCOW when the state file system is a btrfs, or those
 * blocks would not stay reserved), attached to a free loop device with
 * LOOP_CONFIGURE (autoclear: the device goes with the last unmount) and
 * mounted with nodiscard (a discard would punch holes into the image and
 * hand its reservation back). mkfs.btrfs is the one process we start, and
 * only when an image is made.
 *
 * Per area everything is an ioctl on the root of dir: SUBVOL_CREATE,
 * QGROUP_LIMIT (on the subvolume: qgroupid 0 is "this one"), SNAP_DESTROY.
 * A destroyed subvolume's quota group stays behind on older kernels (6.1)
 * and is removed here; newer ones refuse that while the cleaner still
 * drops the tree (EBUSY) and remove it themselves afterwards.
 */
#include "jail/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

#define DISK_LOOP_TRIES   16    /* LOOP_CTL_GET_FREE raced by another attach */
#define DISK_MKFS_ERR_MAX 512   /* bytes of mkfs.btrfs's output kept for the error */
#define SUPER_OFFSET      65536 /* the primary btrfs superblock */
#define SUPER_MAGIC_OFF   64
#define SUPER_LABEL_OFF   0x12b
#define SUPER_MAGIC       "_BHRfS_M"
#define MIB               (1ull << 20)

struct disk {
    char dir[PATH_MAX];
    char image[PATH_MAX];
    int dirfd;
    bool mounted; /* we mounted it (now or in an earlier run): unmounted by disk_free() */
    bool ours;    /* labelled DISK_LABEL: every subvolume in it is an area of ours */
    bool made;
    int cleaned; /* entries removed from dir before mounting over it */
    uint64_t size;
    char fsid[40]; /* as /sys/fs/btrfs/<fsid> names it */
    char desc[PATH_MAX + 128];
};

static bool
valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > DISK_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '-'))
            return false;
    return true;
}

#define CHECK_NAME(name)                                                         \
    do {                                                                         \
        if (!valid_name(name))                                                   \
            return err_set(err, EINVAL, "invalid disk area name '%.80s'", name); \
    } while (0)

static void
format_fsid(const unsigned char u[16], char out[40])
{
    (void)snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                   u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                   u[13], u[14], u[15]);
}

static int
fs_info(int fd, char fsid[40])
{
    struct btrfs_ioctl_fs_info_args a;
    memset(&a, 0, sizeof(a));
    if (ioctl(fd, BTRFS_IOC_FS_INFO, &a) < 0)
        return -errno;
    format_fsid(a.fsid, fsid);
    return 0;
}

/* The id of the subvolume fd is in. */
static int
subvol_id(int fd, uint64_t *ret)
{
    struct btrfs_ioctl_ino_lookup_args a;
    memset(&a, 0, sizeof(a));
    a.treeid = 0;
    a.objectid = BTRFS_FIRST_FREE_OBJECTID;
    if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) < 0)
        return -errno;
    *ret = a.treeid;
    return 0;
}

static bool
has_our_label(int fd)
{
    char label[BTRFS_LABEL_SIZE + 1];
    memset(label, 0, sizeof(label));
    return ioctl(fd, FS_IOC_GETFSLABEL, label) == 0 && !strcmp(label, DISK_LABEL);
}

static bool
quotas_on(const char *fsid)
{
    char p[96];
    (void)snprintf(p, sizeof(p), "/sys/fs/btrfs/%s/qgroups", fsid);
    return access(p, F_OK) == 0;
}

/* The directory part of an absolute path, into out. */
static int
parent_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash || path[0] != '/')
        return -EINVAL;
    size_t k = slash == path ? 1 : (size_t)(slash - path);
    if (k >= n)
        return -ENAMETOOLONG;
    memcpy(out, path, k);
    out[k] = '\0';
    return 0;
}

/* --- making the image --- */

/* Runs mkfs.btrfs on path; its output goes into the error when it fails. */
static int
run_mkfs(const char *path, uint64_t size, struct err *err)
{
    static const char *const where[] = {"/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs",
                                        "/usr/bin/mkfs.btrfs", "/bin/mkfs.btrfs"};
    static const char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    const char *mkfs = NULL;
    for (size_t i = 0; i < ELEMENTSOF(where) && !mkfs; i++)
        if (access(where[i], X_OK) == 0)
            mkfs = where[i];
    if (!mkfs)
        return err_set(err, ENOENT, "mkfs.btrfs is not installed (Debian package btrfs-progs)");
    /* Mixed block groups for small file systems (as mkfs.btrfs advises):
     * separate ones strand free space in half-used metadata chunks. Single
     * copies: the image is scratch, and DUP metadata would halve it. -K: no
     * discard, the blocks stay allocated. */
    const char *argv[16];
    size_t n = 0;
    argv[n++] = mkfs;
    argv[n++] = "-q";
    argv[n++] = "-f";
    argv[n++] = "-K";
    argv[n++] = "-L";
    argv[n++] = DISK_LABEL;
    if (size < DISK_MIXED_BELOW)
        argv[n++] = "-M";
    argv[n++] = "-m";
    argv[n++] = "single";
    argv[n++] = "-d";
    argv[n++] = "single";
    argv[n++] = path;
    argv[n] = NULL;

    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_setx(err, errno, "cannot run mkfs.btrfs");
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int r = posix_spawn_file_actions_init(&fa);
    if (r == 0)
        r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    if (r == 0)
        r = posix_spawn(&pid, mkfs, &fa, NULL, (char *const *)(uintptr_t)argv,
                        (char *const *)(uintptr_t)envp);
    (void)posix_spawn_file_actions_destroy(&fa);
    safe_close(p[1]);
    if (r != 0) {
        safe_close(p[0]);
        return err_setx(err, r, "cannot run '%s'", mkfs);
    }
    char out[DISK_MKFS_ERR_MAX + 1];
    size_t len = 0;
    for (;;) {
        char sink[4096];
        char *at = len < DISK_MKFS_ERR_MAX ? out + len : sink;
        size_t room = len < DISK_MKFS_ERR_MAX ? DISK_MKFS_ERR_MAX - len : sizeof(sink);
        ssize_t k = read(p[0], at, room);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (at == out + len)
            len += (size_t)k;
    }
    out[len] = '\0';
    safe_close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return err_setx(err, errno, "cannot wait for mkfs.btrfs");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    return err_set(err, EIO, "mkfs.btrfs '%s' failed (status %d): %.160s", path,
                   WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out);
}

/* Makes the image: returns its descriptor (O_RDWR) and sets d->size. */
static int
make_image(struct disk *d, const struct disk_config *c, struct err *err)
{
    char tmp[PATH_MAX + 8], parent[PATH_MAX];
    struct statvfs sv;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new", d->image) >= sizeof(tmp) ||
        parent_of(d->image, parent, sizeof(parent)) < 0)
        return err_set(err, ENAMETOOLONG, "disk image path too long");
    if (statvfs(parent, &sv) < 0)
        return err_setx(err, errno, "cannot look at the file system of '%s'", parent);
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize, floor = c->floor_bytes;
    uint64_t size = c->image_bytes;
    if (!size) {
        size = DISK_IMAGE_DEFAULT;
        if (avail < size + floor)
            size = avail > floor ? (avail - floor) / 2 : 0;
    }
    size &= ~(MIB - 1);
    if (size < DISK_IMAGE_MIN)
        return err_set(err, ENOSPC,
                       "the state file system has %llu MiB free, %llu MiB above its floor; the "
                       "disk image needs at least %llu MiB",
                       (unsigned long long)(avail / MIB),
                       (unsigned long long)(avail > floor ? (avail - floor) / MIB : 0),
                       (unsigned long long)(DISK_IMAGE_MIN / MIB));
    if (avail < size + floor)
        return err_set(err, ENOSPC,
                       "a %llu MiB disk image would leave less than the floor of %llu MiB free "
                       "on '%s' (%llu MiB free)",
                       (unsigned long long)(size / MIB), (unsigned long long)(floor / MIB), parent,
                       (unsigned long long)(avail / MIB));

    (void)unlink(tmp);
    _cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return err_setx(err, errno, "cannot create '%s'", tmp);
    struct statfs sf;
    if (fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC) {
        /* Allocated blocks stay reserved on a btrfs only without CoW;
         * the flag takes only while the file is empty. */
        int fl = 0;
        if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
            fl |= FS_NOCOW_FL;
            (void)ioctl(fd, FS_IOC_SETFLAGS, &fl);
        }
    }
    int r = 0;
    if (fallocate(fd, 0, 0, (off_t)size) < 0)
        r = err_setx(err, errno, "cannot allocate %llu MiB for '%s'",
                     (unsigned long long)(size / MIB), tmp);
    if (r == 0)
        r = run_mkfs(tmp, size, err);
    if (r == 0 && fsync(fd) < 0)
        r = err_setx(err, errno, "cannot sync '%s'", tmp);
    if (r == 0 && rename(tmp, d->image) < 0)
        r = err_setx(err, errno, "cannot rename '%s' to '%s'", tmp, d->image);
    if (r < 0) {
        (void)unlink(tmp);
        return r;
    }
    _cleanup_close_ int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd >= 0)
        (void)fsync(pfd);
    d->size = size;
    d->made = true;
    return TAKE_FD(fd);
}

/* Whether fd holds a btrfs that abxd made (magic and label). */
static bool
is_our_image(int fd)
{
    char sb[4096];
    if (pread(fd, sb, sizeof(sb), SUPER_OFFSET) != (ssize_t)sizeof(sb))
        return false;
    return !memcmp(sb + SUPER_MAGIC_OFF, SUPER_MAGIC, 8) &&
           !strncmp(sb + SUPER_LABEL_OFF, DISK_LABEL, sizeof(DISK_LABEL));
}

/* The image to mount: the existing one when it is ours and of the size
 * asked for, else a new one. Returns its descriptor. */
static int
open_image(struct disk *d, const struct disk_config *c, struct err *err)
{
    _cleanup_close_ int fd = open(d->image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;

    if (fd < 0 && errno != ENOENT)
        return err_setx(err, errno, "cannot open '%s'", d->image);
    if (fd >= 0) {
        if (fstat(fd, &st) < 0)
            return err_setx(err, errno, "cannot stat '%s'", d->image);
        if (!S_ISREG(st.st_mode))
            return err_set(err, EINVAL, "'%s' is not a regular file", d->image);
        if (is_our_image(fd) && (!c->image_bytes || (uint64_t)st.st_size == c->image_bytes)) {
            /* Allocate what is not (a copied or restored image may be
             * sparse); a no-op for the image we made. */
            if (fallocate(fd, 0, 0, st.st_size) < 0)
                return err_setx(err, errno, "cannot allocate the blocks of '%s'", d->image);
            d->size = (uint64_t)st.st_size;
            return TAKE_FD(fd);
        }
        /* Another size, or not ours after all: it only ever held what
         * sandboxes of an earlier run left. */
        if (unlink(d->image) < 0)
            return err_setx(err, errno, "cannot replace '%s'", d->image);
    }
    return make_image(d, c, err);
}

/* Attaches imgfd to a free loop device; returns the device's descriptor,
 * which must stay open until the mount holds the device (autoclear). */
static int
attach_loop(struct disk *d, int imgfd, char *dev, size_t n, struct err *err)
{
    _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return err_setx(err, errno, "no loop devices (/dev/loop-control)");
    for (int i = 0; i < DISK_LOOP_TRIES; i++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            return err_setx(err, errno, "no free loop device");
        (void)snprintf(dev, n, "/dev/loop%d", nr);
        int lfd = open(dev, O_RDWR | O_CLOEXEC);
        if (lfd < 0)
            return err_setx(err, errno, "cannot open %s", dev);
        struct loop_config lc;
        memset(&lc, 0, sizeof(lc));
        lc.fd = (uint32_t)imgfd;
        /* Direct I/O: the image's pages are not cached twice (the kernel
         * falls back to buffered I/O where the file system cannot). */
        lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
        (void)strscpy((char *)lc.info.lo_file_name, d->image, sizeof(lc.info.lo_file_name));
        if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
            return lfd;
        int e = errno;
        safe_close(lfd);
        if (e != EBUSY)
            return err_setx(err, e, "cannot attach '%s' to %s", d->image, dev);
        /* Someone else took that device between GET_FREE and CONFIGURE. */
    }
    return err_set(err, EBUSY, "no free loop device after %d tries", DISK_LOOP_TRIES);
}

/* Removes what an earlier run left in dir before we mount over it. */
static int
clean_dir(struct disk *d, struct err *err)
{
    _cleanup_close_ int fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "cannot open '%s'", d->dir);
    int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
        return err_setx(err, errno, "cannot open '%s'", d->dir);
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        safe_close(dfd);
        return -ENOMEM;
    }
    struct dirent *de;
    int r = 0;
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        r = rm_rf_at(fd, de->d_name);
        if (r < 0) {
            r = err_setx(err, -r, "cannot remove '%s/%s'", d->dir, de->d_name);
            break;
        }
        d->cleaned++;
    }
    closedir(dir);
    return r;
}

static int
mount_image(struct disk *d, const struct disk_config *c, struct err *err)
{
    char dev[32];
    int r = clean_dir(d, err);
    if (r < 0)
        return r;
    _cleanup_close_ int imgfd = open_image(d, c, err);
    if (imgfd < 0)
        return imgfd;
    _cleanup_close_ int lfd = attach_loop(d, imgfd, dev, sizeof(dev), err);
    if (lfd < 0)
        return lfd;
    if (mount(dev, d->dir, "btrfs", MS_NOSUID | MS_NODEV | MS_NOATIME, "nodiscard") < 0) {
        r = -errno;
        return err_setx(err, -r, "cannot mount '%s' (%s) at '%s'%s", d->image, dev, d->dir,
                        r == -ENODEV ? " (no btrfs in this kernel?)" : "");
    }
    d->mounted = true;
    (void)snprintf(d->desc, sizeof(d->desc), "btrfs image %s (%llu MiB, %s)", d->image,
                   (unsigned long long)(d->size / MIB), dev);
    return 0;
}

/* --- open / free --- */

int
disk_open(const struct disk_config *c, struct disk **ret, struct err *err)
{
    _cleanup_free_ struct disk *d = calloc(1, sizeof(*d));
    struct statfs sf;
    int r;

    if (!d)
        return -ENOMEM;
    d->dirfd = -EBADF;
    if (!c->dir || c->dir[0] != '/' || !c->image || c->image[0] != '/')
        return err_set(err, EINVAL, "disk: paths must be absolute");
    if (strscpy(d->dir, c->dir, sizeof(d->dir)) < 0 ||
        strscpy(d->image, c->image, sizeof(d->image)) < 0)
        return err_set(err, ENAMETOOLONG, "disk: path too long");
    r = mkdir_p(d->dir, 0700);
    if (r < 0)
        return err_setx(err, -r, "cannot create '%s'", d->dir);
    if (statfs(d->dir, &sf) < 0)
        return err_setx(err, errno, "cannot look at '%s'", d->dir);

    if (sf.f_type == BTRFS_SUPER_MAGIC) {
        _cleanup_close_ int fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char fsid[40], parent[PATH_MAX], pfsid[40] = "";
        if (fd < 0)
            return err_setx(err, errno, "cannot open '%s'", d->dir);
        if ((r = fs_info(fd, fsid)) < 0)
            return err_setx(err, -r, "cannot query the btrfs at '%s'", d->dir);
        if (has_our_label(fd)) {
            /* Ours, still mounted: an earlier run ended without unmounting. */
            d->mounted = d->ours = true;
            (void)snprintf(d->desc, sizeof(d->desc), "btrfs image %s (mounted by an earlier run)",
                           d->image);
            goto ready;
        }
        _cleanup_close_ int pfd = -EBADF;
        if (parent_of(d->image, parent, sizeof(parent)) == 0 &&
            (pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0 &&
            fstatfs(pfd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC)
            (void)fs_info(pfd, pfsid);
        if (strcmp(fsid, pfsid) != 0) {
            if (!quotas_on(fsid))
                return err_set(err, EOPNOTSUPP,
                               "the btrfs at '%s' has quotas off (btrfs quota enable %s)", d->dir,
                               d->dir);
            (void)snprintf(d->desc, sizeof(d->desc), "btrfs %s (its own file system)", d->dir);
            goto ready;
        }
        /* The state directory's own btrfs: that would be no bound on the
         * state file system; mount the image over dir like anywhere else. */
    }
    r = mount_image(d, c, err);
    if (r < 0)
        return r;
    d->ours = true;

ready:
    d->dirfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dirfd < 0) {
        r = err_setx(err, errno, "cannot open '%s'", d->dir);
        goto fail;
    }
    if ((r = fs_info(d->dirfd, d->fsid)) < 0) {
        r = err_setx(err, -r, "cannot query the btrfs at '%s'", d->dir);
        goto fail;
    }
    if (d->ours) {
        struct btrfs_ioctl_quota_ctl_args q;
        memset(&q, 0, sizeof(q));
        q.cmd = BTRFS_QUOTA_CTL_ENABLE; /* a no-op when they are on */
        if (ioctl(d->dirfd, BTRFS_IOC_QUOTA_CTL, &q) < 0) {
            r = err_setx(err, errno, "cannot enable quotas on '%s'", d->dir);
            goto fail;
        }
    }
    struct statvfs sv;
    if (fstatvfs(d->dirfd, &sv) == 0 && !d->size)
        d->size = (uint64_t)sv.f_blocks * sv.f_frsize;
    *ret = TAKE_PTR(d);
    return 0;
fail:
    d->dirfd = safe_close(d->dirfd);
    if (d->mounted)
        (void)umount2(d->dir, MNT_DETACH);
    return r;
}

struct disk *
disk_free(struct disk *d)
{
    if (!d)
        return NULL;
    safe_close(d->dirfd);
    if (d->mounted)
        (void)umount2(d->dir, MNT_DETACH);
    free(d);
    return NULL;
}

int
disk_dir_fd(const struct disk *d)
{
    return d->dirfd;
}

const char *
disk_describe(const struct disk *d)
{
    return d->desc;
}

uint64_t
disk_size(const struct disk *d)
{
    return d->size;
}

bool
disk_made_image(const struct disk *d)
{
    return d->made;
}

/* --- areas --- */

static int
set_limit(int fd, uint64_t limit_bytes)
{
    struct btrfs_ioctl_qgroup_limit_args a;
    memset(&a, 0, sizeof(a));
    a.qgroupid = 0; /* the subvolume fd is in */
    a.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
    a.lim.max_rfer = limit_bytes ? limit_bytes : (uint64_t)-1; /* -1: no limit */
    return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
}

int
disk_area_create(struct disk *d, const char *name, uint64_t limit_bytes, struct err *err)
{
    struct btrfs_ioctl_vol_args va;
    int r;

    CHECK_NAME(name);
    memset(&va, 0, sizeof(va));
    (void)strscpy(va.name, name, sizeof(va.name));
    if (ioctl(d->dirfd, BTRFS_IOC_SUBVOL_CREATE, &va) < 0)
        return err_setx(err, errno, "cannot create subvolume '%s/%s'", d->dir, name);
    _cleanup_close_ int fd =
            openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        r = err_setx(err, errno, "cannot open subvolume '%s/%s'", d->dir, name);
    else if ((r = set_limit(fd, limit_bytes)) < 0)
        r = err_setx(err, -r, "cannot limit subvolume '%s/%s' to %llu bytes", d->dir, name,
                     (unsigned long long)limit_bytes);
    else if (fchmod(fd, 0700) < 0)
        r = err_setx(err, errno, "cannot chmod '%s/%s'", d->dir, name);
    if (r < 0) {
        fd = safe_close(fd);
        (void)disk_area_destroy(d, name, NULL);
    }
    return r;
}

int
disk_area_limit(struct disk *d, const char *name, uint64_t limit_bytes, struct err *err)
{
    CHECK_NAME(name);
    _cleanup_close_ int fd =
            openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "cannot open subvolume '%s/%s'", d->dir, name);
    int r = set_limit(fd, limit_bytes);
    if (r < 0)
        return err_setx(err, -r, "cannot limit subvolume '%s/%s' to %llu bytes", d->dir, name,
                        (unsigned long long)limit_bytes);
    return 0;
}

int
disk_area_usage(struct disk *d, const char *name, uint64_t *ret_bytes, struct err *err)
{
    uint64_t id, v;
    char p[128];
    struct buf b;
    int r;

    CHECK_NAME(name);
    _cleanup_close_ int fd =
            openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "cannot open subvolume '%s/%s'", d->dir, name);
    if ((r = subvol_id(fd, &id)) < 0)
        return err_setx(err, -r, "cannot look up subvolume '%s/%s'", d->dir, name);
    (void)snprintf(p, sizeof(p), "/sys/fs/btrfs/%s/qgroups/0_%llu/referenced", d->fsid,
                   (unsigned long long)id);
    buf_init(&b, 64);
    r = read_file_at(AT_FDCWD, p, 64, &b);
    while (r >= 0 && b.len && b.data[b.len - 1] == '\n')
        b.data[--b.len] = '\0';
    if (r >= 0 && parse_u64(b.data, &v) < 0)
        r = -EIO;
    buf_done(&b);
    if (r < 0)
        return err_setx(err, -r, "cannot read '%s'", p);
    *ret_bytes = v;
    return 0;
}

static void
remove_qgroup(int dirfd, uint64_t id)
{
    struct btrfs_ioctl_qgroup_create_args q;
    memset(&q, 0, sizeof(q));
    q.create = 0;
    q.qgroupid = id; /* level 0: the subvolume's own group */
    (void)ioctl(dirfd, BTRFS_IOC_QGROUP_CREATE, &q);
}

int
disk_area_destroy(struct disk *d, const char *name, struct err *err)
{
    struct btrfs_ioctl_vol_args va;
    struct stat st;
    uint64_t id = 0;
    int r;

    CHECK_NAME(name);
    _cleanup_close_ int fd =
            openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0 && errno != ENOTDIR && errno != ELOOP)
        return err_setx(err, errno, "cannot open '%s/%s'", d->dir, name);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_ino != BTRFS_FIRST_FREE_OBJECTID) {
        /* Not a subvolume (a file, or a directory of an unbounded run). */
        r = rm_rf_at(d->dirfd, name);
        return r < 0 ? err_setx(err, -r, "cannot remove '%s/%s'", d->dir, name) : 0;
    }
    (void)subvol_id(fd, &id);
    fd = safe_close(fd);
    memset(&va, 0, sizeof(va));
    (void)strscpy(va.name, name, sizeof(va.name));
    if (ioctl(d->dirfd, BTRFS_IOC_SNAP_DESTROY, &va) < 0) {
        r = -errno;
        /* ENOTEMPTY: it holds subvolumes (seccomp refuses making them, but
         * be thorough): rmdir deletes empty ones, so a walk does it all. */
        if (r == -ENOTEMPTY)
            r = rm_rf_at(d->dirfd, name);
        if (r < 0 && r != -ENOENT)
            return err_setx(err, -r, "cannot delete subvolume '%s/%s'", d->dir, name);
    }
    if (id)
        remove_qgroup(d->dirfd, id);
    return 0;
}

int
disk_reclaim(struct disk *d, struct err *err)
{
    int n = d->cleaned, r = 0;
    d->cleaned = 0;

    int dfd = fcntl(d->dirfd, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
        return err_setx(err, errno, "cannot read '%s'", d->dir);
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        safe_close(dfd);
        return -ENOMEM;
    }
    rewinddir(dir);
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (valid_name(de->d_name))
            r = disk_area_destroy(d, de->d_name, err);
        else
            r = rm_rf_at(d->dirfd, de->d_name) < 0
                        ? err_set(err, EIO, "cannot remove '%s/%.80s'", d->dir, de->d_name)
                        : 0;
        if (r < 0)
            break;
        n++;
    }
    closedir(dir);
    if (r < 0)
        return r;
    if (!d->ours)
        return n;
    /* Quota groups whose subvolume went while nobody removed them (a
     * crash between the two, on kernels that keep them). */
    char p[96];
    (void)snprintf(p, sizeof(p), "/sys/fs/btrfs/%s/qgroups", d->fsid);
    DIR *q = opendir(p);
    while (q && (de = readdir(q))) {
        uint64_t id;
        if (de->d_name[0] == '0' && de->d_name[1] == '_' && parse_u64(de->d_name + 2, &id) == 0 &&
            id >= BTRFS_FIRST_FREE_OBJECTID)
            remove_qgroup(d->dirfd, id);
    }
    if (q)
        closedir(q);
    return n;
}
