/*
 * watch.c - the inotify tree watch (see watch.h): the wd table, the tree
 * walk that adds watches, and the events read and mapped on the loop.
 * Not the framing or queueing of events, which is the surface's.
 */
#include "sandbox/watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandbox/fileops.h"
#include "sandbox/vfs.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/loop.h"
#include "util/path.h"

#define WATCH_READ_BUF (16 * 1024) /* bytes of inotify events per read() */
#define WATCH_READS    16          /* read()s per wakeup; the loop serves others */
#define WATCH_MASK                                                                      \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVED_TO | \
     IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR)

/* One watched directory. */
struct wnode {
    int wd;
    char *rel; /* relative to the watched directory; "" for itself */
};

struct watch {
    struct loop *loop;
    const struct watch_ops *ops;
    void *ud;
    struct fileops *fo; /* opens subdirectories as the watch's user */
    bool recursive;
    bool paused; /* full() said so: inotify is not read */
    size_t name_max;
    int dirfd; /* the watched directory */
    int ifd;   /* inotify */
    struct loop_io *io;
    struct wnode *nodes; /* sorted by wd */
    size_t n, cap;
    char rel[PATH_MAX_LEN + 1]; /* scratch: a name being walked */
};

/* --- the wd table --- */

static size_t
node_pos(const struct watch *w, int wd)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->nodes[mid].wd < wd)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct wnode *
node_find(struct watch *w, int wd)
{
    size_t i = node_pos(w, wd);
    return i < w->n && w->nodes[i].wd == wd ? &w->nodes[i] : NULL;
}

static int
node_add(struct watch *w, int wd, const char *rel)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct wnode *v = realloc(w->nodes, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        w->nodes = v;
        w->cap = cap;
    }
    char *s = strdup(rel);
    if (!s)
        return -ENOMEM;
    size_t i = node_pos(w, wd);
    memmove(&w->nodes[i + 1], &w->nodes[i], (w->n - i) * sizeof(*w->nodes));
    w->nodes[i] = (struct wnode){wd, s};
    w->n++;
    return 0;
}

static void
node_drop(struct watch *w, struct wnode *nd)
{
    size_t i = (size_t)(nd - w->nodes);
    free(nd->rel);
    memmove(&w->nodes[i], &w->nodes[i + 1], (w->n - i - 1) * sizeof(*w->nodes));
    w->n--;
}

/* Stops watching rel and everything below it (a directory moved away:
 * its watches would go on reporting under a name it no longer has). */
static void
drop_subtree(struct watch *w, const char *rel)
{
    size_t len = strlen(rel);
    for (size_t i = 0; i < w->n;) {
        const char *r = w->nodes[i].rel;
        if (!strncmp(r, rel, len) && (r[len] == '\0' || r[len] == '/')) {
            (void)inotify_rm_watch(w->ifd, w->nodes[i].wd);
            node_drop(w, &w->nodes[i]);
        } else {
            i++;
        }
    }
}

static int
emit(struct watch *w, enum watch_event ev, const char *rel)
{
    return w->ops->event(w->ud, ev, rel);
}

/* Whether fd is on a file system inotify says nothing useful about. */
static bool
pseudo_fs(int fd)
{
    struct statfs s;
    if (fstatfs(fd, &s) < 0)
        return true;
    return s.f_type == PROC_SUPER_MAGIC || s.f_type == SYSFS_MAGIC ||
           s.f_type == CGROUP_SUPER_MAGIC || s.f_type == CGROUP2_SUPER_MAGIC ||
           s.f_type == DEBUGFS_MAGIC || s.f_type == SECURITYFS_MAGIC;
}

/* Watches the directory fd known as w->rel (its first len bytes) and, for
 * a recursive watch, every directory below it; with report, what it finds
 * below is queued as CREATE. A directory already watched (a bind mount
 * seen twice) is not entered again. */
static int
add_tree(struct watch *w, int fd, size_t len, unsigned level, bool report)
{
    int r = 0, wd = 0;

    w->rel[len] = '\0';
    /* Added by the file helper, with the acting user's rights: the kernel
     * checks that user may read the directory, not that we may. */
    r = fileops_vwatch_add(w->fo, w->ifd, fd, WATCH_MASK, &wd, NULL);
    if (r < 0)
        return r;
    if (node_find(w, wd))
        return 0;
    if (w->n >= WATCH_DIRS_MAX) {
        (void)inotify_rm_watch(w->ifd, wd);
        return -E2BIG;
    }
    if ((r = node_add(w, wd, w->rel)) < 0) {
        (void)inotify_rm_watch(w->ifd, wd);
        return r;
    }
    if (!w->recursive)
        return 0;
    if (level >= VFS_MAX_DEPTH)
        return -ELOOP;

    /* Listed through a descriptor opened after the watch was added: what
     * was made before the watch shows here, what comes after as events.
     * (btrfs lists only the entries a directory had when it was opened:
     * fd is from before.) */
    int dup = -EBADF;
    r = fileops_vopen_below(w->fo, fd, ".", &dup, NULL);
    if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EACCES)
        return 0; /* gone or swapped meanwhile: its parent reports that */
    if (r < 0)
        return r;
    DIR *d = fdopendir(dup);
    if (!d) {
        safe_close(dup);
        return -ENOMEM;
    }
    for (struct dirent *de; r >= 0 && (de = readdir(d));) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, ".."))
            continue;
        size_t nl = strlen(nm), sep = len ? 1 : 0;
        if (len + sep + nl > w->name_max) {
            r = -ENAMETOOLONG;
            break;
        }
        if (sep)
            w->rel[len] = '/';
        memcpy(w->rel + len + sep, nm, nl + 1);
        if (report && (r = emit(w, WATCH_CREATE, w->rel)) < 0)
            break;
        /* what the name is, the helper finds out when it opens it */
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        _cleanup_close_ int sub = -EBADF;
        r = fileops_vopen_below(w->fo, fd, nm, &sub, NULL);
        if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EACCES) {
            r = 0; /* gone or swapped meanwhile: its parent reports that */
            continue;
        }
        if (r == 0 && !pseudo_fs(sub))
            r = add_tree(w, sub, len + sep + nl, level + 1, report);
        w->rel[len] = '\0';
    }
    closedir(d);
    w->rel[len] = '\0';
    return r;
}

/* A directory appeared as rel below the watched one: watch it and what is
 * in it already. */
static int
add_new_dir(struct watch *w, const char *rel)
{
    _cleanup_close_ int fd = -EBADF;
    int r = fileops_vopen_below(w->fo, w->dirfd, rel, &fd, NULL);
    if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EACCES)
        return 0; /* gone again, or no directory now: events tell */
    if (r < 0)
        return r;
    if (pseudo_fs(fd))
        return 0;
    size_t len = strlen(rel);
    memmove(w->rel, rel, len + 1);
    unsigned level = 1;
    for (const char *p = rel; *p; p++)
        level += *p == '/';
    r = add_tree(w, fd, len, level, true);
    /* Gone while we looked: the events say so; the kernel's limits do not
     * go away by themselves. */
    return r == -ENOENT || r == -ENOTDIR ? 0 : r;
}

/* One inotify event; < 0 ends the stream. */
static int
handle(struct watch *w, const struct inotify_event *ev)
{
    char rel[PATH_MAX_LEN + 1];
    uint32_t m = ev->mask;
    int r = 0;

    if (m & IN_Q_OVERFLOW)
        return -EOVERFLOW;
    struct wnode *nd = node_find(w, ev->wd);
    if (!nd)
        return 0; /* a watch we dropped; its last events may still come */
    if (m & IN_IGNORED) {
        node_drop(w, nd); /* deleted, unmounted or removed by us */
        return 0;
    }
    if (m & IN_UNMOUNT)
        return 0; /* IN_IGNORED follows */
    bool top = nd->rel[0] == '\0';
    if (ev->len == 0 || !ev->name[0]) {
        /* About a watched directory itself: a subdirectory's parent
         * reports it already, the watched one reports as ".". */
        if (!top)
            return 0;
        if (m & IN_ATTRIB)
            r = emit(w, WATCH_CHMOD, "");
        if (r == 0 && (m & IN_DELETE_SELF))
            r = emit(w, WATCH_REMOVE, "");
        if (r == 0 && (m & IN_MOVE_SELF)) {
            /* Its name is gone; what is below would report under names
             * nobody can use (envd's fsnotify drops the watch too). */
            r = emit(w, WATCH_RENAME, "");
            drop_subtree(w, "");
        }
        return r;
    }
    int k = top ? snprintf(rel, sizeof(rel), "%s", ev->name)
                : snprintf(rel, sizeof(rel), "%s/%s", nd->rel, ev->name);
    if (k < 0 || (size_t)k >= sizeof(rel))
        return -ENAMETOOLONG;
    /* envd's order when one event has several meanings. */
    if (m & (IN_CREATE | IN_MOVED_TO))
        r = emit(w, WATCH_CREATE, rel);
    if (r == 0 && (m & IN_MOVED_FROM))
        r = emit(w, WATCH_RENAME, rel);
    if (r == 0 && (m & IN_ATTRIB))
        r = emit(w, WATCH_CHMOD, rel);
    if (r == 0 && (m & IN_MODIFY))
        r = emit(w, WATCH_WRITE, rel);
    if (r == 0 && (m & IN_DELETE))
        r = emit(w, WATCH_REMOVE, rel);
    if (r < 0 || !w->recursive || !(m & IN_ISDIR))
        return r;
    if (m & IN_MOVED_FROM)
        drop_subtree(w, rel);
    if (m & (IN_CREATE | IN_MOVED_TO))
        r = add_new_dir(w, rel);
    return r;
}

static void
on_inotify(struct loop_io *io, uint32_t revents, void *ud)
{
    struct watch *w = ud;
    _Alignas(struct inotify_event) char buf[WATCH_READ_BUF];
    (void)io;
    (void)revents;

    for (int i = 0; i < WATCH_READS && w->io && !w->paused; i++) {
        ssize_t n = read(w->ifd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            w->ops->failed(w->ud, -errno);
            return;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            int r = handle(w, ev);
            if (r < 0) {
                w->ops->failed(w->ud, r); /* -EOVERFLOW included */
                return;
            }
            p += sizeof(*ev) + ev->len;
        }
        if (w->ops->full(w->ud) && loop_io_set_events(w->io, 0) == 0)
            w->paused = true; /* the kernel queues meanwhile */
    }
    w->ops->flush(w->ud);
}

/* --- the watch --- */

int
watch_new(struct loop *loop, struct fileops *fo, int dirfd, bool recursive, size_t name_max,
          const struct watch_ops *ops, void *ud, struct watch **ret)
{
    struct watch *w = calloc(1, sizeof(*w));
    if (!w) {
        safe_close(dirfd);
        return -ENOMEM;
    }
    w->loop = loop;
    w->ops = ops;
    w->ud = ud;
    w->dirfd = dirfd;
    w->recursive = recursive;
    w->name_max = name_max;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0) {
        int r = -errno;
        safe_close(w->dirfd);
        free(w);
        return r;
    }
    w->fo = fileops_ref(fo);
    *ret = w;
    return 0;
}

int
watch_start(struct watch *w)
{
    return add_tree(w, w->dirfd, 0, 0, false);
}

int
watch_listen(struct watch *w)
{
    return loop_io_add(w->loop, w->ifd, EPOLLIN, on_inotify, w, &w->io);
}

void
watch_resume(struct watch *w)
{
    if (w->paused && w->io && loop_io_set_events(w->io, EPOLLIN) == 0)
        w->paused = false;
}

bool
watch_paused(const struct watch *w)
{
    return w->paused;
}

size_t
watch_dirs(const struct watch *w)
{
    return w->n;
}

struct watch *
watch_free(struct watch *w)
{
    if (!w)
        return NULL;
    loop_io_free(w->io);
    safe_close(w->ifd);
    safe_close(w->dirfd);
    fileops_unref(w->fo);
    for (size_t i = 0; i < w->n; i++)
        free(w->nodes[i].rel);
    free(w->nodes);
    free(w);
    return NULL;
}
