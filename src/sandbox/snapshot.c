/*
 * snapshot.c - copy a sandbox's writable files out to a host tree and in.
 *
 * Regular files are copied extent by extent (SEEK_DATA/SEEK_HOLE), so a
 * sparse file stays sparse in the snapshot and after a restore, and the
 * size bound counts the data a file really holds, not its length.
 *
 * Both directions walk one directory at a time from a pinned directory
 * fd: fstatat(AT_SYMLINK_NOFOLLOW) names the type, then the entry is
 * opened with O_NOFOLLOW and checked again with fstat, so a name swapped
 * between the two calls is skipped (out) or refused (in), never followed.
 */
#include "sandbox/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/vfs.h"
#include "util/cleanup.h"
#include "util/fd.h"

const char *const SNAPSHOT_DIRS[] = {"home/user", "root", "tmp", "var", "opt", "run", "mnt", "srv"};
const unsigned SNAPSHOT_NDIRS = sizeof(SNAPSHOT_DIRS) / sizeof(SNAPSHOT_DIRS[0]);

#define COPY_CHUNK (128 * 1024)

struct walk {
    const struct vfs_ids *ids;
    uint64_t max_bytes;
    struct snapshot_stats st;
    char *buf; /* COPY_CHUNK bytes */
    struct err *err;
};

static void
closedirp(DIR **d)
{
    if (*d)
        (void)closedir(*d);
}

/* A DIR over a dup of fd (the caller keeps fd). */
static int
open_dir_stream(int fd, DIR **ret)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (d < 0)
        return -errno;
    /* fdopendir shares the offset: start from the beginning. */
    (void)lseek(d, 0, SEEK_SET);
    DIR *dir = fdopendir(d);
    if (!dir) {
        int r = -errno;
        (void)close(d);
        return r;
    }
    *ret = dir;
    return 0;
}

static bool
dots(const char *n)
{
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

static void
times_of(const struct stat *st, struct timespec ts[2])
{
    ts[0] = st->st_atim;
    ts[1] = st->st_mtim;
}

/* --- out --- */

static uint32_t
in_id(const struct vfs_ids *ids, uint32_t host)
{
    if (host >= ids->range_first && host - ids->range_first < ids->range_len)
        return host - ids->range_first;
    return SNAPSHOT_NOBODY;
}

/* Gives fd (a file or directory just written) owner, mode and times. */
static int
set_attrs(struct walk *w, int fd, uid_t uid, gid_t gid, mode_t mode, const struct timespec ts[2],
          const char *name)
{
    if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode & 07777) < 0 || futimens(fd, ts) < 0)
        return err_set(w->err, errno, "cannot set the attributes of '%s'", name);
    return 0;
}

/* Recreates the symlink or fifo name of src in dst with owner, mode and
 * times; what is "store" or "restore" for messages. A link gone meanwhile
 * is skipped when vanish_ok (the source is a live sandbox). */
static int
put_special(struct walk *w, int src, int dst, const char *name, const struct stat *st, uid_t uid,
            gid_t gid, const struct timespec ts[2], const char *what, bool vanish_ok)
{
    if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
        if (n < 0)
            return vanish_ok && (errno == ENOENT || errno == EINVAL)
                           ? 0
                           : err_set(w->err, errno, "cannot read the link '%s'", name);
        target[n] = '\0';
        if (symlinkat(target, dst, name) < 0 ||
            fchownat(dst, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            utimensat(dst, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
            return err_set(w->err, errno, "cannot %s the link '%s'", what, name);
        return 0;
    }
    if (mkfifoat(dst, name, 0600) < 0 || fchownat(dst, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchmodat(dst, name, st->st_mode & 07777, 0) < 0 ||
        utimensat(dst, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return err_set(w->err, errno, "cannot %s the fifo '%s'", what, name);
    return 0;
}

static int
too_big(struct walk *w, const char *name, uint64_t allocated)
{
    return err_set(w->err, EFBIG,
                   "the snapshot would exceed %llu bytes of file data ('%s' has %llu allocated)",
                   (unsigned long long)w->max_bytes, name, (unsigned long long)allocated);
}

static int out_dir(struct walk *w, int src, int dst, dev_t dev, unsigned depth);

static int
out_entry(struct walk *w, int src, int dst, const char *name, dev_t dev, unsigned depth)
{
    struct stat st, st2;
    struct timespec ts[2];
    int r;

    if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : err_set(w->err, errno, "cannot stat '%s'", name);
    uid_t uid = in_id(w->ids, st.st_uid);
    gid_t gid = in_id(w->ids, st.st_gid);
    bool foreign = uid == SNAPSHOT_NOBODY && st.st_uid != w->ids->range_first + SNAPSHOT_NOBODY;
    times_of(&st, ts);
    if (++w->st.entries > SNAPSHOT_MAX_ENTRIES)
        return err_set(w->err, E2BIG, "the snapshot would hold more than %u entries",
                       SNAPSHOT_MAX_ENTRIES);

    if (S_ISDIR(st.st_mode)) {
        if (st.st_dev != dev) {
            w->st.skipped++; /* a mount point: not ours to copy */
            w->st.entries--;
            return 0;
        }
        if (depth >= SNAPSHOT_MAX_DEPTH)
            return err_set(w->err, ELOOP, "directories nest deeper than %u levels",
                           SNAPSHOT_MAX_DEPTH);
        _cleanup_close_ int s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0)
            return errno == ENOENT || errno == ELOOP || errno == ENOTDIR
                           ? 0
                           : err_set(w->err, errno, "cannot open directory '%s'", name);
        if (fstat(s, &st2) < 0)
            return -errno;
        if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
            return 0; /* swapped meanwhile */
        if (mkdirat(dst, name, 0700) < 0)
            return err_set(w->err, errno, "cannot create '%s' in the snapshot", name);
        _cleanup_close_ int d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
            return -errno;
        if ((r = out_dir(w, s, d, dev, depth + 1)) < 0)
            return r;
        return set_attrs(w, d, uid, gid, st.st_mode, ts, name);
    }
    if (S_ISREG(st.st_mode)) {
        if (foreign && !(st.st_mode & S_IROTH)) {
            w->st.skipped++;
            w->st.entries--;
            return 0;
        }
        _cleanup_close_ int s =
                openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
            return errno == ENOENT || errno == ELOOP || errno == ENXIO || errno == EACCES
                           ? 0
                           : err_set(w->err, errno, "cannot open '%s'", name);
        if (fstat(s, &st2) < 0)
            return -errno;
        if (!S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev)
            return 0;
        _cleanup_close_ int d =
                openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (d < 0)
            return err_set(w->err, errno, "cannot create '%s' in the snapshot", name);
        /* The budget counts the data written, extent by extent: a file
         * past it stops the copy there. */
        uint64_t n = 0, budget = w->max_bytes - w->st.bytes;
        r = fd_copy_sparse(s, d, (uint64_t)st.st_size, w->buf, COPY_CHUNK, &budget, &n);
        if (r == -EFBIG)
            return too_big(w, name, (uint64_t)st.st_blocks * 512);
        if (r < 0)
            return err_set(w->err, -r, "cannot copy '%s'", name);
        w->st.bytes += n;
        return set_attrs(w, d, uid, gid, st.st_mode, ts, name);
    }
    if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode))
        return put_special(w, src, dst, name, &st, uid, gid, ts, "store", true);
    w->st.skipped++; /* sockets, devices */
    w->st.entries--;
    return 0;
}

static int
out_dir(struct walk *w, int src, int dst, dev_t dev, unsigned depth)
{
    _cleanup_(closedirp) DIR *dir = NULL;
    int r = open_dir_stream(src, &dir);
    if (r < 0)
        return err_set(w->err, -r, "cannot read a directory");
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            if (errno)
                return err_set(w->err, errno, "cannot read a directory");
            return 0;
        }
        if (dots(de->d_name))
            continue;
        if ((r = out_entry(w, src, dst, de->d_name, dev, depth)) < 0)
            return r;
    }
}

/* mkdir -p of rel (ours, trusted) below dst; the last level's fd. */
static int
mkdirs_at(int dst, const char *rel, int *ret_fd)
{
    char buf[256];
    if (strlen(rel) >= sizeof(buf))
        return -ENAMETOOLONG;
    strcpy(buf, rel);
    _cleanup_close_ int cur = fcntl(dst, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (mkdirat(cur, c, 0700) < 0 && errno != EEXIST)
            return -errno;
        int next = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            return -errno;
        (void)close(cur);
        cur = next;
    }
    *ret_fd = TAKE_FD(cur);
    return 0;
}

int
snapshot_copy_out(int viewfd, const struct vfs_ids *ids, int dstfd, uint64_t max_bytes,
                  struct snapshot_stats *ret, struct err *err)
{
    _cleanup_free_ char *buf = malloc(COPY_CHUNK);
    struct walk w = {.ids = ids, .max_bytes = max_bytes, .buf = buf, .err = err};
    int r;

    if (!buf)
        return -ENOMEM;
    for (unsigned i = 0; i < SNAPSHOT_NDIRS; i++) {
        _cleanup_close_ int s = -EBADF, d = -EBADF;
        struct stat st;
        struct timespec ts[2];
        r = vfs_open_below(viewfd, SNAPSHOT_DIRS[i], &s, NULL);
        if (r == -ENOENT || r == -ELOOP || r == -ENOTDIR || r == -EXDEV)
            continue; /* missing, or a link the sandbox planted: nothing to keep */
        if (r < 0)
            return err_set(err, -r, "cannot open /%s in the sandbox", SNAPSHOT_DIRS[i]);
        if (fstat(s, &st) < 0)
            return -errno;
        if ((r = mkdirs_at(dstfd, SNAPSHOT_DIRS[i], &d)) < 0)
            return err_set(err, -r, "cannot create '%s' in the snapshot", SNAPSHOT_DIRS[i]);
        if ((r = out_dir(&w, s, d, st.st_dev, 1)) < 0)
            return r;
        times_of(&st, ts);
        if (fchown(d, in_id(ids, st.st_uid), in_id(ids, st.st_gid)) < 0 ||
            fchmod(d, st.st_mode & 07777) < 0 || futimens(d, ts) < 0)
            return err_set(err, errno, "cannot set the attributes of '%s'", SNAPSHOT_DIRS[i]);
    }
    if (ret)
        *ret = w.st;
    return 0;
}

/* --- in --- */

static uint32_t
host_id(const struct vfs_ids *ids, uint32_t in)
{
    return ids->range_first + (in < ids->range_len ? in : SNAPSHOT_NOBODY);
}

static int in_dir(struct walk *w, int src, int dst, dev_t dev, unsigned depth);

static int
in_entry(struct walk *w, int src, int dst, const char *name, dev_t dev, unsigned depth)
{
    struct stat st, cur;
    struct timespec ts[2];
    int r;

    if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0
                               : err_set(w->err, errno, "cannot stat '%s' in the snapshot", name);
    uid_t uid = host_id(w->ids, st.st_uid);
    gid_t gid = host_id(w->ids, st.st_gid);
    times_of(&st, ts);
    bool exists = fstatat(dst, name, &cur, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && cur.st_dev != dev && S_ISDIR(cur.st_mode))
        return 0; /* a mount point in the new sandbox: leave it */
    if (exists && !(S_ISDIR(st.st_mode) && S_ISDIR(cur.st_mode))) {
        if ((r = rm_rf_at(dst, name)) < 0)
            return err_set(w->err, -r, "cannot replace '%s'", name);
        exists = false;
    }
    if (S_ISDIR(st.st_mode)) {
        if (depth >= SNAPSHOT_MAX_DEPTH)
            return err_set(w->err, ELOOP, "directories nest deeper than %u levels",
                           SNAPSHOT_MAX_DEPTH);
        if (!exists && mkdirat(dst, name, 0700) < 0)
            return err_set(w->err, errno, "cannot create '%s'", name);
        _cleanup_close_ int s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0 || d < 0)
            return err_set(w->err, errno, "cannot open directory '%s'", name);
        if ((r = in_dir(w, s, d, dev, depth + 1)) < 0)
            return r;
        return set_attrs(w, d, uid, gid, st.st_mode, ts, name);
    }
    if (S_ISREG(st.st_mode)) {
        _cleanup_close_ int s = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int d =
                openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (s < 0 || d < 0)
            return err_set(w->err, errno, "cannot restore '%s'", name);
        r = fd_copy_sparse(s, d, (uint64_t)st.st_size, w->buf, COPY_CHUNK, NULL, NULL);
        if (r < 0)
            return err_set(w->err, -r, "cannot restore '%s'", name);
        return set_attrs(w, d, uid, gid, st.st_mode, ts, name);
    }
    if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode))
        return put_special(w, src, dst, name, &st, uid, gid, ts, "restore", false);
    return 0;
}

static int
in_dir(struct walk *w, int src, int dst, dev_t dev, unsigned depth)
{
    _cleanup_(closedirp) DIR *dd = NULL;
    _cleanup_(closedirp) DIR *sd = NULL;
    struct stat st;
    int r;

    /* What the snapshot does not have goes first. */
    if ((r = open_dir_stream(dst, &dd)) < 0)
        return err_set(w->err, -r, "cannot read a directory");
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dd);
        if (!de) {
            if (errno)
                return err_set(w->err, errno, "cannot read a directory");
            break;
        }
        if (dots(de->d_name) || fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        struct stat cur;
        if (fstatat(dst, de->d_name, &cur, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cur.st_mode) &&
            cur.st_dev != dev)
            continue; /* a mount point */
        if ((r = rm_rf_at(dst, de->d_name)) < 0)
            return err_set(w->err, -r, "cannot remove '%s'", de->d_name);
    }
    if ((r = open_dir_stream(src, &sd)) < 0)
        return err_set(w->err, -r, "cannot read a snapshot directory");
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(sd);
        if (!de) {
            if (errno)
                return err_set(w->err, errno, "cannot read a snapshot directory");
            return 0;
        }
        if (dots(de->d_name))
            continue;
        if ((r = in_entry(w, src, dst, de->d_name, dev, depth)) < 0)
            return r;
    }
}

int
snapshot_copy_in(int srcfd, int viewfd, const struct vfs_ids *ids, struct err *err)
{
    _cleanup_free_ char *buf = malloc(COPY_CHUNK);
    struct walk w = {.ids = ids, .buf = buf, .err = err};
    int r;

    if (!buf)
        return -ENOMEM;
    for (unsigned i = 0; i < SNAPSHOT_NDIRS; i++) {
        _cleanup_close_ int s = -EBADF, d = -EBADF;
        struct stat st, dst;
        struct timespec ts[2];
        r = vfs_open_below(srcfd, SNAPSHOT_DIRS[i], &s, NULL);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return err_set(err, -r, "cannot open '%s' in the snapshot", SNAPSHOT_DIRS[i]);
        r = vfs_open_below(viewfd, SNAPSHOT_DIRS[i], &d, NULL);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return err_set(err, -r, "cannot open /%s in the sandbox", SNAPSHOT_DIRS[i]);
        if (fstat(s, &st) < 0 || fstat(d, &dst) < 0)
            return -errno;
        if ((r = in_dir(&w, s, d, dst.st_dev, 1)) < 0)
            return r;
        times_of(&st, ts);
        if (fchown(d, host_id(ids, st.st_uid), host_id(ids, st.st_gid)) < 0 ||
            fchmod(d, st.st_mode & 07777) < 0 || futimens(d, ts) < 0)
            return err_set(err, errno, "cannot set the attributes of /%s", SNAPSHOT_DIRS[i]);
    }
    return 0;
}
