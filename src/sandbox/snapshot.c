/*
 * snapshot.c - copy a sandbox's writable files out to a host tree and in.
 *
 * Both directions are copies of util/tree.h from a pinned directory to
 * another: every name is looked at with fstatat(AT_SYMLINK_NOFOLLOW),
 * opened with O_NOFOLLOW and checked again, so a name swapped between two
 * steps is skipped (out) or refused (in), never followed. What is here is
 * the policy: which entries a snapshot keeps, the ids they are stored
 * under, the budgets and the words of the messages. Regular files are
 * copied extent by extent (SEEK_DATA/SEEK_HOLE), so a sparse file stays
 * sparse in the snapshot and after a restore, and the size bound counts
 * the data a file really holds, not its length.
 */
#include "sandbox/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/vfs.h"
#include "util/cleanup.h"
#include "util/path.h"
#include "util/tree.h"

const char *const SNAPSHOT_DIRS[] = {"home/user", "root", "tmp", "var", "opt", "run", "mnt", "srv"};
const unsigned SNAPSHOT_NDIRS = sizeof(SNAPSHOT_DIRS) / sizeof(SNAPSHOT_DIRS[0]);

struct walk {
    const struct vfs_ids *ids;
    uint64_t max_bytes;
    dev_t dev; /* out: of the top directory being copied; a directory elsewhere is a mount */
    struct snapshot_stats st;
    struct err *err;
};

static uint32_t
in_id(const struct vfs_ids *ids, uint32_t host)
{
    if (host >= ids->range_first && host - ids->range_first < ids->range_len)
        return host - ids->range_first;
    return SNAPSHOT_NOBODY;
}

static uint32_t
host_id(const struct vfs_ids *ids, uint32_t in)
{
    return ids->range_first + (in < ids->range_len ? in : SNAPSHOT_NOBODY);
}

/* Counts an entry the snapshot leaves out after all. */
static int
skip(struct walk *w)
{
    w->st.skipped++;
    w->st.entries--;
    return TREE_SKIP;
}

/* --- out --- */

/* What the snapshot keeps of an entry of the live sandbox, stored under
 * in-sandbox ids with its mode and times: directories on the same file
 * system, regular files (not foreign ones only host root could read),
 * links and fifos; not sockets, devices, mount points. */
static int
out_decide(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    struct walk *w = ud;
    const struct stat *st = &e->st;

    mk->uid = in_id(w->ids, st->st_uid);
    mk->gid = in_id(w->ids, st->st_gid);
    mk->times = true;
    bool foreign =
            mk->uid == SNAPSHOT_NOBODY && st->st_uid != w->ids->range_first + SNAPSHOT_NOBODY;
    if (++w->st.entries > SNAPSHOT_MAX_ENTRIES)
        return err_set(w->err, E2BIG, "the snapshot would hold more than %u entries",
                       SNAPSHOT_MAX_ENTRIES);
    if (S_ISDIR(st->st_mode)) {
        if (st->st_dev != w->dev)
            return skip(w); /* a mount point: not ours to copy */
        if (e->depth >= SNAPSHOT_MAX_DEPTH)
            return err_set(w->err, ELOOP, "directories nest deeper than %u levels",
                           SNAPSHOT_MAX_DEPTH);
        return 0;
    }
    if (S_ISREG(st->st_mode))
        return foreign && !(st->st_mode & S_IROTH) ? skip(w) : 0;
    if (S_ISLNK(st->st_mode) || S_ISFIFO(st->st_mode))
        return 0;
    return skip(w); /* sockets, devices */
}

static int
out_failed(void *ud, const struct tree_entry *e, enum tree_step step, int error)
{
    struct walk *w = ud;
    const char *name = e->name;

    switch (step) {
    case TREE_STEP_STAT:
        return err_set(w->err, error, "cannot stat '%s'", name);
    case TREE_STEP_OPEN:
        return err_set(w->err, error, "cannot open directory '%s'", name);
    case TREE_STEP_READ:
        return err_set(w->err, error, "cannot read a directory");
    case TREE_STEP_OPEN_FILE:
        /* gone, swapped for a link, a socket or fifo, or not ours to read */
        if (error == ENOENT || error == ELOOP || error == ENXIO || error == EACCES)
            return 0;
        return err_set(w->err, error, "cannot open '%s'", name);
    case TREE_STEP_READLINK:
        return error == ENOENT || error == EINVAL
                       ? 0 /* gone, or not a link any more */
                       : err_set(w->err, error, "cannot read the link '%s'", name);
    case TREE_STEP_MKDIR:
    case TREE_STEP_CREATE:
        return err_set(w->err, error, "cannot create '%s' in the snapshot", name);
    case TREE_STEP_DATA:
        if (error == EFBIG)
            return err_set(
                    w->err, EFBIG,
                    "the snapshot would exceed %llu bytes of file data ('%s' has %llu allocated)",
                    (unsigned long long)w->max_bytes, name,
                    (unsigned long long)e->st.st_blocks * 512);
        return err_set(w->err, error, "cannot copy '%s'", name);
    case TREE_STEP_ATTRS:
        return err_set(w->err, error, "cannot set the attributes of '%s'", name);
    case TREE_STEP_LINK:
        return err_set(w->err, error, "cannot store the link '%s'", name);
    case TREE_STEP_FIFO:
        return err_set(w->err, error, "cannot store the fifo '%s'", name);
    default:
        return -error;
    }
}

static const struct tree_copy_ops out_ops = {.decide = out_decide, .failed = out_failed};

/* The attributes of a top directory, from its source st. */
static int
top_attrs(int fd, uid_t uid, gid_t gid, const struct stat *st)
{
    const struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchown(fd, uid, gid) < 0 || fchmod(fd, st->st_mode & 07777) < 0 || futimens(fd, ts) < 0)
        return -errno;
    return 0;
}

/* The directory rel (ours, trusted: SNAPSHOT_DIRS) below dst, made 0700 as
 * needed and opened for writing into. */
static int
mkdirs_at(int dst, const char *rel, int *ret_fd)
{
    const struct path_mkdir m = {.mode = 0700, .uid = (uid_t)-1, .gid = (gid_t)-1};
    _cleanup_close_ int p =
            path_mkdirat(dst, rel, PATH_BENEATH | PATH_NO_SYMLINKS | PATH_FALLBACK, &m, NULL);
    if (p < 0)
        return p;
    int fd = openat(p, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *ret_fd = fd;
    return 0;
}

/* A top directory of the view, by name below viewfd: no symlink on the
 * way (one the sandbox planted is somebody else's tree). */
static int
open_top(int viewfd, const char *rel, int *ret_fd)
{
    int fd = path_openat(viewfd, rel, O_RDONLY | O_DIRECTORY, 0, PATH_BENEATH | PATH_NO_SYMLINKS);
    if (fd < 0)
        return fd;
    *ret_fd = fd;
    return 0;
}

int
snapshot_copy_out(int viewfd, const struct vfs_ids *ids, int dstfd, uint64_t max_bytes,
                  struct snapshot_stats *ret, struct err *err)
{
    struct walk w = {.ids = ids, .max_bytes = max_bytes, .err = err};
    uint64_t budget = max_bytes;
    /* Directories nest at most SNAPSHOT_MAX_DEPTH levels, counting the
     * top's entries as level 1 (out_decide() refuses deeper ones). */
    const struct tree_copy_opts o = {
            .walk = {.max_depth = SNAPSHOT_MAX_DEPTH},
            .mode = TREE_COPY_NEW,
            .data_budget = &budget,
            .ops = &out_ops,
            .ud = &w,
    };
    int r;

    for (unsigned i = 0; i < SNAPSHOT_NDIRS; i++) {
        _cleanup_close_ int s = -EBADF, d = -EBADF;
        struct stat st;
        uint64_t bytes = 0;
        r = open_top(viewfd, SNAPSHOT_DIRS[i], &s);
        if (r == -ENOENT || r == -ELOOP || r == -ENOTDIR || r == -EXDEV)
            continue; /* missing, or a link the sandbox planted: nothing to keep */
        if (r < 0)
            return err_set(err, -r, "cannot open /%s in the sandbox", SNAPSHOT_DIRS[i]);
        if (fstat(s, &st) < 0)
            return -errno;
        if ((r = mkdirs_at(dstfd, SNAPSHOT_DIRS[i], &d)) < 0)
            return err_set(err, -r, "cannot create '%s' in the snapshot", SNAPSHOT_DIRS[i]);
        w.dev = st.st_dev;
        r = tree_copy(s, d, &o, &bytes);
        w.st.bytes += bytes;
        if (r == -E2BIG)
            return err_set(err, E2BIG, "the snapshot would look at more than %u names",
                           TREE_NAMES_MAX);
        if (r < 0)
            return r;
        if ((r = top_attrs(d, in_id(ids, st.st_uid), in_id(ids, st.st_gid), &st)) < 0)
            return err_set(err, -r, "cannot set the attributes of '%s'", SNAPSHOT_DIRS[i]);
    }
    if (ret)
        *ret = w.st;
    return 0;
}

/* --- in --- */

/* Everything the snapshot holds goes back, under the sandbox's host ids. */
static int
in_decide(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    struct walk *w = ud;
    mk->uid = host_id(w->ids, e->st.st_uid);
    mk->gid = host_id(w->ids, e->st.st_gid);
    mk->times = true;
    if (S_ISDIR(e->st.st_mode) && e->depth >= SNAPSHOT_MAX_DEPTH)
        return err_set(w->err, ELOOP, "directories nest deeper than %u levels", SNAPSHOT_MAX_DEPTH);
    if (S_ISREG(e->st.st_mode) || S_ISDIR(e->st.st_mode) || S_ISLNK(e->st.st_mode) ||
        S_ISFIFO(e->st.st_mode))
        return 0;
    return TREE_SKIP;
}

static int
in_failed(void *ud, const struct tree_entry *e, enum tree_step step, int error)
{
    struct walk *w = ud;
    const char *name = e->name;

    switch (step) {
    case TREE_STEP_STAT:
        return err_set(w->err, error, "cannot stat '%s' in the snapshot", name);
    case TREE_STEP_OPEN:
    case TREE_STEP_OPEN_DST:
        return err_set(w->err, error, "cannot open directory '%s'", name);
    case TREE_STEP_READ:
        return err_set(w->err, error, "cannot read a snapshot directory");
    case TREE_STEP_READ_DST:
        return err_set(w->err, error, "cannot read a directory");
    case TREE_STEP_REPLACE:
        return err_set(w->err, error, "cannot replace '%s'", name);
    case TREE_STEP_REMOVE:
        return err_set(w->err, error, "cannot remove '%s'", name);
    case TREE_STEP_MKDIR:
        return err_set(w->err, error, "cannot create '%s'", name);
    case TREE_STEP_OPEN_FILE:
    case TREE_STEP_CREATE:
    case TREE_STEP_DATA:
        return err_set(w->err, error, "cannot restore '%s'", name);
    case TREE_STEP_ATTRS:
        return err_set(w->err, error, "cannot set the attributes of '%s'", name);
    case TREE_STEP_READLINK:
        return err_set(w->err, error, "cannot read the link '%s'", name);
    case TREE_STEP_LINK:
        return err_set(w->err, error, "cannot restore the link '%s'", name);
    case TREE_STEP_FIFO:
        return err_set(w->err, error, "cannot restore the fifo '%s'", name);
    default:
        return -error;
    }
}

static const struct tree_copy_ops in_ops = {.decide = in_decide, .failed = in_failed};

int
snapshot_copy_in(int srcfd, int viewfd, const struct vfs_ids *ids, struct err *err)
{
    struct walk w = {.ids = ids, .err = err};
    /* The view is made equal to the snapshot: what it lacks goes, mount
     * points of the new sandbox stay (util/tree.h TREE_COPY_SYNC). */
    const struct tree_copy_opts o = {
            .walk = {.max_depth = SNAPSHOT_MAX_DEPTH},
            .mode = TREE_COPY_SYNC,
            .ops = &in_ops,
            .ud = &w,
    };
    int r;

    for (unsigned i = 0; i < SNAPSHOT_NDIRS; i++) {
        _cleanup_close_ int s = -EBADF, d = -EBADF;
        struct stat st;
        r = open_top(srcfd, SNAPSHOT_DIRS[i], &s);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return err_set(err, -r, "cannot open '%s' in the snapshot", SNAPSHOT_DIRS[i]);
        r = open_top(viewfd, SNAPSHOT_DIRS[i], &d);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return err_set(err, -r, "cannot open /%s in the sandbox", SNAPSHOT_DIRS[i]);
        if (fstat(s, &st) < 0)
            return -errno;
        r = tree_copy(s, d, &o, NULL);
        if (r == -E2BIG)
            return err_set(err, E2BIG, "the snapshot holds more than %u names", TREE_NAMES_MAX);
        if (r < 0)
            return r;
        if ((r = top_attrs(d, host_id(ids, st.st_uid), host_id(ids, st.st_gid), &st)) < 0)
            return err_set(err, -r, "cannot set the attributes of /%s", SNAPSHOT_DIRS[i]);
    }
    return 0;
}
