/*
 * e2b-watch.c - envd's filesystem.Filesystem/WatchDir: inotify from the host.
 *
 * The watched directory lives in the sandbox's mount namespace, so it is
 * opened through vfs inside the sandbox's pinned root and watched through
 * its descriptor (inotify_add_watch("/proc/self/fd/N") follows that magic
 * link to the very inode); subdirectories of a recursive watch are opened
 * below it without following any symlink. One inotify descriptor per
 * stream, on the loop. Events map as envd's fsnotify maps them: IN_CREATE
 * and IN_MOVED_TO are CREATE, IN_MODIFY WRITE, IN_DELETE REMOVE,
 * IN_MOVED_FROM RENAME, IN_ATTRIB CHMOD; the watched directory itself
 * reports as ".". A directory that appears in a recursive watch is watched
 * at once and scanned: what is already inside reports as CREATE (fsnotify
 * does the same, for "mkdir -p a/b/c"). Names are relative to the watched
 * directory. The wire: {"start":{}} first, then {"filesystem":{"name":...,
 * "type":"EVENT_TYPE_..."[,"entry":EntryInfo]}} and {"keepalive":{}}, and
 * the end-stream frame; errors before the start go in an end-stream frame
 * too (HTTP 200). Events wait in a bounded queue behind a slow client; past
 * it, or when the kernel's queue overflows, the stream ends with
 * resource_exhausted rather than losing events silently. Keepalives go
 * at the client's interval, but at least every WATCH_PROBE_MS: a suspended
 * stream learns that its client left (handle.stop()) only when it writes.
 *
 * The same watching core also feeds envd's polled watchers (CreateWatcher,
 * GetWatcherEvents, RemoveWatcher; unused by the JS SDK): there events wait
 * as FilesystemEvent JSON until GetWatcherEvents takes them all. A watcher
 * is "w" and 20 characters of [a-z0-9], as envd's ids; it belongs to its
 * sandbox (found only in that sandbox's list, freed when the sandbox is
 * killed or paused), at most WATCHERS_MAX per sandbox. Past
 * WATCHER_EVENTS_MAX events or WATCH_QUEUE_MAX bytes not taken, or when the
 * kernel's queue overflows, the watcher stops watching and every
 * GetWatcherEvents answers resource_exhausted until RemoveWatcher (envd
 * keeps a failed watcher so too). A watcher nobody asked for events for
 * WATCHER_IDLE_MS (10 minutes) is removed (envd keeps them forever).
 *
 * Every stream and watcher holds an inotify instance, and the kernel
 * counts those per user (fs.inotify.max_user_instances, 128 by default)
 * for abxd and every other root process of the host alike. So a sandbox
 * may hold WATCHES_MAX of them, and all sandboxes together half of
 * the kernel's limit: past either a watch answers resource_exhausted, and
 * the host's own services keep theirs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "api/e2b/e2b-internal.h"
#include "http/connect.h"
#include "sandbox/vfs.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/rand.h"
#include "util/timeutil.h"

#define WATCH_DIRS_MAX     8192                  /* inotify watches (directories) of one stream */
#define WATCH_QUEUE_MAX    (1024 * 1024)         /* bytes of envelopes queued for a slow client */
#define WATCH_QUEUE_LOW    (WATCH_QUEUE_MAX / 4) /* inotify is not read while more are queued */
#define WATCH_READ_BUF     (16 * 1024)           /* bytes of inotify events per read() */
#define WATCH_READS        16                    /* read()s per wakeup; the loop serves others */
#define WATCH_PROBE_MS     2000   /* longest keepalive interval: finds clients gone (stop()) */
#define WATCHERS_MAX       64     /* polled watchers of one sandbox (WATCHES_MAX binds first) */
#define WATCHER_EVENTS_MAX 10000  /* events a polled watcher keeps for GetWatcherEvents */
#define WATCHER_IDLE_MS    600000 /* a polled watcher without GetWatcherEvents so long goes */
#define WATCHER_ID_LEN     21     /* "w" and 20 characters of [a-z0-9] */
#define WATCHES_MAX        16     /* inotify instances (streams and watchers) of one sandbox */
#define WATCH_MASK                                                                      \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVED_TO | \
     IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR)

/* Network file systems envd refuses without allowNetworkMounts. */
#define NFS_MAGIC  0x6969UL
#define CIFS_MAGIC 0xFF534D42UL
#define SMB_MAGIC  0x517BUL
#define SMB2_MAGIC 0xFE534D42UL
#define FUSE_MAGIC 0x65735546UL

enum ev_type { EV_CREATE = 1, EV_WRITE, EV_REMOVE, EV_RENAME, EV_CHMOD };

static const char *const ev_names[] = {
        [EV_CREATE] = "EVENT_TYPE_CREATE", [EV_WRITE] = "EVENT_TYPE_WRITE",
        [EV_REMOVE] = "EVENT_TYPE_REMOVE", [EV_RENAME] = "EVENT_TYPE_RENAME",
        [EV_CHMOD] = "EVENT_TYPE_CHMOD",
};

/* One watched directory. */
struct wnode {
    int wd;
    char *rel; /* relative to the watched directory; "" for itself */
};

struct watch {
    struct e2b_stream es; /* first: the cut callback gets &w->es */
    /* A polled watcher (CreateWatcher) has no req and stream: */
    bool poll;
    bool failed;                     /* stopped watching: err_code says why */
    char id[WATCHER_ID_LEN + 1];     /* watcherId */
    json_t *events;                  /* FilesystemEvent messages not taken yet */
    size_t ev_bytes;                 /* their JSON size */
    struct loop_timer *idle;         /* WATCHER_IDLE_MS after the last poll */
    char err_code[32], err_msg[512]; /* what GetWatcherEvents answers once failed */
    struct api *api;
    struct http_req *req;
    struct http_stream *stream;
    struct out_owner owner;
    bool counted;   /* api_stream_attached() said so */
    bool recursive; /* watch every subdirectory, as they come */
    bool include_entry;
    bool closing;       /* the end-stream frame is queued: nothing comes after */
    bool ended;         /* http_stream_end() or _abort() was called */
    bool paused;        /* inotify is not read until the queue drains */
    struct fileops *fo; /* file work as the watch's user, until the cut */
    int dirfd;          /* the watched directory */
    int ifd;            /* inotify */
    struct loop_io *io;
    struct wnode *nodes; /* sorted by wd */
    size_t n, cap;
    uint64_t keepalive_ms;
    struct loop_timer *keepalive;
    struct loop_timer *deadline; /* Connect-Timeout-Ms */
    struct buf q;                /* envelopes not handed to the stream yet */
    struct vfs_entry *ent;       /* scratch for includeEntry */
    char rel[PATH_MAX_LEN + 1];  /* scratch: a name being reported or walked */
    char abs[PATH_MAX_LEN + 1];  /* scratch: an entry's absolute path */
    char path[PATH_MAX_LEN + 1]; /* the watched directory, absolute */
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

/* --- the queue --- */

/* Hands what the stream can take to it; ends it after the end frame. */
static void
flush(struct watch *w)
{
    if (w->ended || w->poll)
        return;
    size_t n = MIN(w->q.len, http_stream_room(w->stream));
    if (n && http_stream_write(w->stream, w->q.data, n) == 0)
        buf_consume(&w->q, n);
    if (w->closing) {
        if (w->q.len == 0) {
            w->ended = true;
            http_stream_end(w->stream);
        }
        return;
    }
    if (w->paused && w->q.len < WATCH_QUEUE_LOW / 2 && loop_io_set_events(w->io, EPOLLIN) == 0)
        w->paused = false;
}

/* Queues one message (stolen) as an envelope. -EFBIG past WATCH_QUEUE_MAX. */
static int
enqueue(struct watch *w, json_t *msg)
{
    size_t start = w->q.len;
    uint8_t h[CONNECT_ENV_HEADER];
    int r = buf_put(&w->q, "\0\0\0\0\0", CONNECT_ENV_HEADER);
    if (r == 0)
        r = json_dump_buf(msg, &w->q);
    json_decref(msg);
    if (r == 0 && w->q.len > WATCH_QUEUE_MAX)
        r = -EFBIG;
    if (r < 0) {
        w->q.len = start;
        w->q.data[start] = '\0';
        return r;
    }
    connect_env_header(h, CONNECT_FLAG_DATA, (uint32_t)(w->q.len - start - CONNECT_ENV_HEADER));
    memcpy(w->q.data + start, h, sizeof(h));
    return 0;
}

static void
stop_watching(struct watch *w)
{
    loop_io_free(w->io);
    w->io = NULL;
    if (w->ifd >= 0)
        w->api->inotify_open--;
    w->ifd = safe_close(w->ifd);
    w->dirfd = safe_close(w->dirfd);
    w->fo = fileops_unref(w->fo);
    for (size_t i = 0; i < w->n; i++)
        free(w->nodes[i].rel);
    free(w->nodes);
    w->nodes = NULL;
    w->n = w->cap = 0;
    loop_timer_free(w->keepalive);
    w->keepalive = NULL;
    loop_timer_free(w->deadline);
    w->deadline = NULL;
}

/* Ends the stream after what is queued, with code (NULL = success). */
static void finish(struct watch *w, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
finish(struct watch *w, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (w->closing || w->ended || w->failed)
        return;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    stop_watching(w);
    if (w->poll) {
        /* Kept for GetWatcherEvents; what was queued is unreachable now,
         * as in envd. */
        w->failed = true;
        (void)snprintf(w->err_code, sizeof(w->err_code), "%s", code ? code : "internal");
        (void)snprintf(w->err_msg, sizeof(w->err_msg), "%s", msg);
        json_array_clear(w->events);
        w->ev_bytes = 0;
        return;
    }
    w->closing = true;
    if (connect_end_stream_json(&w->q, code, msg) < 0) {
        /* Cannot say why: cut, as a failing envd would. */
        w->ended = true;
        http_stream_abort(w->stream);
        return;
    }
    flush(w);
}

static void
fail_errno(struct watch *w, int r)
{
    if (r == -EFBIG && w->poll)
        finish(w, "resource_exhausted",
               "more than %d events or %d bytes of them wait for GetWatcherEvents; the watcher "
               "stopped",
               WATCHER_EVENTS_MAX, WATCH_QUEUE_MAX);
    else if (r == -EFBIG)
        finish(w, "resource_exhausted",
               "more than %d bytes of events wait for the client; watch fewer files",
               WATCH_QUEUE_MAX);
    else if (r == -E2BIG)
        finish(w, "resource_exhausted", "more than %d directories to watch below '%s'",
               WATCH_DIRS_MAX, w->path);
    else if (r == -ENOSPC)
        finish(w, "resource_exhausted", "the kernel's limit of inotify watches is reached");
    else if (r == -ELOOP)
        finish(w, "resource_exhausted", "directories nested deeper than %d levels below '%s'",
               VFS_MAX_DEPTH, w->path);
    else if (r == -ENAMETOOLONG)
        finish(w, "resource_exhausted", "a path below '%s' is longer than %d bytes", w->path,
               PATH_MAX_LEN);
    else
        finish(w, "internal", "cannot watch below '%s': %s", w->path, strerror(-r));
}

static void
arm_keepalive(struct watch *w)
{
    if (w->keepalive)
        (void)loop_timer_arm(w->keepalive, now_msec() + w->keepalive_ms);
}

/* Keeps one FilesystemEvent (stolen) for GetWatcherEvents. -EFBIG past
 * the bounds. */
static int
poll_push(struct watch *w, json_t *fe)
{
    size_t sz = json_dumpb(fe, NULL, 0, JSON_COMPACT) + 1;
    if (json_array_size(w->events) >= WATCHER_EVENTS_MAX || w->ev_bytes + sz > WATCH_QUEUE_MAX) {
        json_decref(fe);
        return -EFBIG;
    }
    if (json_array_append_new(w->events, fe) < 0)
        return -ENOMEM;
    w->ev_bytes += sz;
    return 0;
}

/* Queues one filesystem event about rel ("" = the watched directory). */
static int
emit(struct watch *w, enum ev_type t, const char *rel)
{
    json_t *fe = json_object(), *o = json_object();
    /* JSON strings must be valid, file names need not be: U+FFFD for each
     * byte that is not UTF-8, as on the other E2B entries. */
    (void)json_set(fe, "name", *rel ? json_string_lossy(rel) : json_string("."));
    (void)json_set(fe, "type", json_string(ev_names[t]));
    /* envd's rule: only what still names the entry carries it, and only
     * when it can be had (it may be gone again). */
    if (w->include_entry && (t == EV_CREATE || t == EV_WRITE || t == EV_CHMOD)) {
        int k = !*rel ? snprintf(w->abs, sizeof(w->abs), "%s", w->path)
                      : snprintf(w->abs, sizeof(w->abs), "%s/%s",
                                 strcmp(w->path, "/") ? w->path : "", rel);
        if (k > 0 && (size_t)k < sizeof(w->abs) && w->fo &&
            fileops_vstat(w->fo, w->abs, w->ent, NULL) == 0)
            (void)json_set(fe, "entry", e2b_entry_json(w->ent));
    }
    if (w->poll) {
        json_decref(o);
        return poll_push(w, fe);
    }
    (void)json_set(o, "filesystem", fe);
    int r = enqueue(w, o);
    if (r == 0)
        arm_keepalive(w);
    return r;
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
    char proc[64];
    int r = 0;

    w->rel[len] = '\0';
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
    if (wd < 0)
        return -errno;
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

    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0)
        return -errno;
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
        if (len + sep + nl > PATH_MAX_LEN - strlen(w->path) - 1) {
            r = -ENAMETOOLONG;
            break;
        }
        if (sep)
            w->rel[len] = '/';
        memcpy(w->rel + len + sep, nm, nl + 1);
        if (report && (r = emit(w, EV_CREATE, w->rel)) < 0)
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
            r = emit(w, EV_CHMOD, "");
        if (r == 0 && (m & IN_DELETE_SELF))
            r = emit(w, EV_REMOVE, "");
        if (r == 0 && (m & IN_MOVE_SELF)) {
            /* Its name is gone; what is below would report under names
             * nobody can use (envd's fsnotify drops the watch too). */
            r = emit(w, EV_RENAME, "");
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
        r = emit(w, EV_CREATE, rel);
    if (r == 0 && (m & IN_MOVED_FROM))
        r = emit(w, EV_RENAME, rel);
    if (r == 0 && (m & IN_ATTRIB))
        r = emit(w, EV_CHMOD, rel);
    if (r == 0 && (m & IN_MODIFY))
        r = emit(w, EV_WRITE, rel);
    if (r == 0 && (m & IN_DELETE))
        r = emit(w, EV_REMOVE, rel);
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
            fail_errno(w, -errno);
            return;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            int r = handle(w, ev);
            if (r == -EOVERFLOW) {
                log_notice("sandbox=%s watch of '%s': the kernel's inotify queue overflowed",
                           w->owner.id, w->path);
                finish(w, "resource_exhausted",
                       "too many file system events at once: the kernel's queue overflowed");
                return;
            }
            if (r < 0) {
                fail_errno(w, r);
                return;
            }
            p += sizeof(*ev) + ev->len;
        }
        if (w->q.len >= WATCH_QUEUE_LOW && loop_io_set_events(w->io, 0) == 0)
            w->paused = true; /* the kernel queues meanwhile */
    }
    flush(w);
}

/* --- the stream --- */

static void
ws_free(struct watch *w)
{
    e2b_stream_detach(&w->es);
    stop_watching(w);
    if (w->counted)
        api_stream_attached(w->api, &w->owner, false);
    http_stream_release(w->stream);
    buf_done(&w->q);
    free(w->ent);
    http_req_unref(w->req);
    free(w);
}

static void
ws_fill(struct http_stream *s, void *ud)
{
    (void)s;
    flush(ud);
}

static void
ws_closed(struct http_stream *s, void *ud)
{
    (void)s;
    ws_free(ud); /* ended, cut, or handle.stop() */
}

static const struct http_stream_ops ws_ops = {
        .fill = ws_fill,
        .closed = ws_closed,
};

/* The sandbox is killed or paused: cut without an end frame. */
static void
ws_cut(struct e2b_stream *es)
{
    struct watch *w = (struct watch *)es;
    stop_watching(w);
    if (!w->ended) {
        w->ended = true;
        http_stream_abort(w->stream);
    }
}

static void
on_keepalive(struct loop_timer *t, void *ud)
{
    struct watch *w = ud;
    (void)t;
    if (w->q.len == 0) {
        json_t *o = json_object();
        (void)json_set(o, "keepalive", json_object());
        if (enqueue(w, o) == 0)
            flush(w);
    }
    arm_keepalive(w);
}

static void
on_deadline(struct loop_timer *t, void *ud)
{
    (void)t;
    /* envd's context runs out: connect-go ends the stream so. */
    finish(ud, "deadline_exceeded", "the watch's Connect-Timeout-Ms ran out");
}

/* A proto3 bool: lowerCamelCase, or the proto name (both are accepted). */
static int
get_flag(json_t *msg, const char *camel, const char *snake, bool *ret, struct err *err)
{
    return json_get_bool(msg, json_object_get(msg, camel) ? camel : snake, false, ret, err);
}

static bool
network_fs(unsigned long magic)
{
    return magic == NFS_MAGIC || magic == CIFS_MAGIC || magic == SMB_MAGIC || magic == SMB2_MAGIC ||
           magic == FUSE_MAGIC;
}

/* An error answer: unary (a polled watcher's calls) or as a stream's. */
static void say(struct http_req *req, bool unary, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void
say(struct http_req *req, bool unary, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (unary)
        e2b_rpc_error(req, code, "%s", msg);
    else
        e2b_stream_error(req, code, "%s", msg);
}

/* The inotify instances all sandboxes may hold: half of what the kernel
 * allows abxd's user (the other half stays the host's). */
static uint32_t
host_inotify_max(void)
{
    static uint32_t max;
    if (!max) {
        struct buf b;
        uint32_t v = 0;
        buf_init(&b, 64);
        if (read_file_at(AT_FDCWD, "/proc/sys/fs/inotify/max_user_instances", 64, &b) == 0) {
            while (b.len && (b.data[b.len - 1] == '\n'))
                b.data[--b.len] = '\0';
            if (parse_u32(b.data, &v) < 0)
                v = 0;
        }
        buf_done(&b);
        max = MAX(v / 2, 8u);
    }
    return max;
}

static void pw_cut(struct e2b_stream *es);

/* Watch streams and polled watchers sandbox e holds. */
static size_t
count_watches(struct entry *e)
{
    size_t n = 0;
    list_foreach (l, &e2b_of(e)->streams) {
        struct e2b_stream *s = list_entry(l, struct e2b_stream, link);
        if (s->cut == ws_cut || s->cut == pw_cut)
            n++;
    }
    return n;
}

/* Opens the directory and sets up every watch; answers req on error. */
static int
watch_open(struct http_req *req, struct watch *w, bool allow_network)
{
    struct err err = {0};
    struct statfs sf;
    int r;

    r = fileops_vopen_dir(w->fo, w->path, &w->dirfd, &err);
    if (r == -ENOENT) {
        say(req, w->poll, "not_found", "path '%s' does not exist", w->path);
        return r;
    }
    if (r == -ENOTDIR) {
        say(req, w->poll, "invalid_argument", "path '%s' is not a directory", w->path);
        return r;
    }
    if (r < 0) {
        say(req, w->poll, e2b_code_for_errno(r), "%s", err.msg);
        return r;
    }
    if (!allow_network && fstatfs(w->dirfd, &sf) == 0 && network_fs((unsigned long)sf.f_type)) {
        say(req, w->poll, "invalid_argument", "cannot watch path on network filesystem: %s",
            w->path);
        return -EINVAL;
    }
    if (w->api->inotify_open >= host_inotify_max()) {
        say(req, w->poll, "resource_exhausted",
            "abxd holds %u inotify instances, half of the kernel's limit; try again later",
            w->api->inotify_open);
        return -EMFILE;
    }
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd >= 0)
        w->api->inotify_open++;
    if (w->ifd < 0) {
        r = -errno;
        if (r == -EMFILE || r == -ENFILE || r == -ENOMEM)
            say(req, w->poll, "resource_exhausted", "no inotify instance left for the watch: %s",
                strerror(-r));
        else
            say(req, w->poll, "internal", "cannot create an inotify instance: %s", strerror(-r));
        return r;
    }
    r = add_tree(w, w->dirfd, 0, 0, false);
    if (r == -E2BIG)
        say(req, w->poll, "resource_exhausted", "more than %d directories to watch below '%s'",
            WATCH_DIRS_MAX, w->path);
    else if (r == -ENOSPC)
        say(req, w->poll, "resource_exhausted", "the kernel's limit of inotify watches is reached");
    else if (r == -ELOOP)
        say(req, w->poll, "resource_exhausted",
            "directories nested deeper than %d levels below '%s'", VFS_MAX_DEPTH, w->path);
    else if (r == -ENAMETOOLONG)
        say(req, w->poll, "resource_exhausted", "a path below '%s' is longer than %d bytes",
            w->path, PATH_MAX_LEN);
    else if (r < 0)
        say(req, w->poll, e2b_code_for_errno(r), "cannot watch '%s': %s", w->path, strerror(-r));
    return r;
}

/* A watch that never started. */
static void
discard(struct watch *w)
{
    stop_watching(w);
    buf_done(&w->q);
    json_decref(w->events);
    free(w->ent);
    free(w);
}

/* The shared start of WatchDir and CreateWatcher: reads msg, opens the
 * directory of sandbox e and watches it; answers req and returns NULL on
 * error (as a stream's error, or unary for a polled watcher). */
static struct watch *
watch_new(struct http_req *req, struct e2b_call *c, struct entry *e, json_t *msg, bool poll)
{
    struct err err = {0};
    const char *path = "";
    bool allow_network = false;
    struct watch *w;

    if (!api_need_cap(req, e, TEMPLATE_CAP_FILES))
        return NULL;
    if (count_watches(e) >= WATCHES_MAX) {
        say(req, poll, "resource_exhausted",
            "the sandbox has %d watches open (streams and watchers); end some first", WATCHES_MAX);
        return NULL;
    }
    if (sandbox_view_fd(e->sb) < 0) {
        say(req, poll, "unimplemented",
            "this sandbox has no file system view of its own (isolation mode)");
        return NULL;
    }
    if (!(w = calloc(1, sizeof(*w))) || !(w->ent = malloc(sizeof(*w->ent))) ||
        (poll && !(w->events = json_array()))) {
        if (w)
            free(w->ent);
        free(w);
        say(req, poll, "internal", "out of memory");
        return NULL;
    }
    w->poll = poll;
    w->api = c->api;
    w->dirfd = w->ifd = -EBADF;
    list_init(&w->es.link);
    buf_init(&w->q, WATCH_QUEUE_MAX + 4096); /* events, then room for the end frame */
    w->owner.kind = OWNER_SANDBOX;
    (void)snprintf(w->owner.id, sizeof(w->owner.id), "%s", e->id);
    if (sandbox_fileops(e->sb, c->user.root, &w->fo, &err) < 0) {
        say(req, poll, "internal", "%s", err.msg);
        discard(w);
        return NULL;
    }
    if (json_get_str(msg, "path", false, &path, &err) < 0 ||
        get_flag(msg, "recursive", "recursive", &w->recursive, &err) < 0 ||
        get_flag(msg, "includeEntry", "include_entry", &w->include_entry, &err) < 0 ||
        get_flag(msg, "allowNetworkMounts", "allow_network_mounts", &allow_network, &err) < 0 ||
        vfs_resolve(path, c->user.home, w->path, sizeof(w->path), &err) < 0) {
        say(req, poll, "invalid_argument", "%s", err.msg);
        discard(w);
        return NULL;
    }
    if (watch_open(req, w, allow_network) < 0) {
        discard(w);
        return NULL;
    }
    int r = loop_io_add(c->api->loop, w->ifd, EPOLLIN, on_inotify, w, &w->io);
    if (r < 0) {
        say(req, poll, "internal", "cannot start the watch: %s", strerror(-r));
        discard(w);
        return NULL;
    }
    return w;
}

void
e2b_watch(struct http_req *req, struct e2b_call *c, json_t *msg)
{
    struct entry *e = e2b_call_entry(c);
    struct watch *w;
    int r;

    if (!e) {
        e2b_stream_error(req, "unavailable", "the sandbox is gone");
        return;
    }
    if (!(w = watch_new(req, c, e, msg, false)))
        return;
    w->es.cut = ws_cut;
    if ((c->keepalive_ms &&
         (r = loop_timer_new(c->api->loop, on_keepalive, w, &w->keepalive)) < 0) ||
        (c->timeout_ms && (r = loop_timer_new(c->api->loop, on_deadline, w, &w->deadline)) < 0) ||
        (r = http_stream_start(req, 200, "application/connect+json", &ws_ops, w, &w->stream)) < 0) {
        e2b_stream_error(req, "internal", "cannot start the watch: %s", strerror(-r));
        discard(w);
        return;
    }
    /* From here the stream owns w: ws_closed() frees it. */
    w->req = req;
    http_req_ref(req);
    api_stream_attached(c->api, &w->owner, true);
    w->counted = true;
    e2b_stream_attach(e, &w->es);
    /* Also how soon a client that went away is noticed: a suspended
     * stream learns of a closed socket only when it next writes. */
    w->keepalive_ms = MIN(c->keepalive_ms, WATCH_PROBE_MS);
    arm_keepalive(w);
    if (w->deadline)
        (void)loop_timer_arm(w->deadline, now_msec() + c->timeout_ms);
    json_t *start = json_object();
    (void)json_set(start, "start", json_object());
    if (enqueue(w, start) < 0)
        finish(w, "internal", "out of memory");
    else
        flush(w);
}

/* --- polled watchers (CreateWatcher / GetWatcherEvents / RemoveWatcher) --- */

static void
pw_free(struct watch *w)
{
    e2b_stream_detach(&w->es);
    loop_timer_free(w->idle);
    discard(w);
}

/* The sandbox is killed or paused: its watchers go. */
static void
pw_cut(struct e2b_stream *es)
{
    pw_free((struct watch *)es);
}

static void
on_idle(struct loop_timer *t, void *ud)
{
    struct watch *w = ud;
    (void)t;
    log_info("sandbox=%s watcher %s: no GetWatcherEvents for %d s, removed", w->owner.id, w->id,
             WATCHER_IDLE_MS / 1000);
    pw_free(w);
}

/* The polled watcher id of sandbox e (its list only); *count = how many
 * it has. */
static struct watch *
pw_find(struct entry *e, const char *id, size_t *count)
{
    struct watch *found = NULL;
    size_t n = 0;
    list_foreach (pos, &e2b_of(e)->streams) {
        struct e2b_stream *s = list_entry(pos, struct e2b_stream, link);
        if (s->cut != pw_cut)
            continue;
        n++;
        struct watch *w = (struct watch *)s;
        if (id && !found && !strcmp(w->id, id))
            found = w;
    }
    if (count)
        *count = n;
    return found;
}

static void
pw_create(struct http_req *req, struct e2b_call *c, struct entry *e, json_t *msg)
{
    size_t n = 0;
    struct watch *w;
    int r;

    (void)pw_find(e, NULL, &n);
    if (n >= WATCHERS_MAX) {
        e2b_rpc_error(req, "resource_exhausted",
                      "the sandbox has %d watchers already; remove some (RemoveWatcher)",
                      WATCHERS_MAX);
        return;
    }
    if (!(w = watch_new(req, c, e, msg, true)))
        return;
    w->es.cut = pw_cut;
    w->id[0] = 'w';
    if ((r = rand_id(w->id + 1, WATCHER_ID_LEN - 1)) < 0 ||
        (r = loop_timer_new(c->api->loop, on_idle, w, &w->idle)) < 0) {
        e2b_rpc_error(req, "internal", "cannot create the watcher: %s", strerror(-r));
        pw_free(w);
        return;
    }
    (void)loop_timer_arm(w->idle, now_msec() + WATCHER_IDLE_MS);
    e2b_stream_attach(e, &w->es);
    json_t *o = json_object();
    (void)json_set(o, "watcherId", json_string(w->id));
    e2b_rpc_ok(req, o);
}

void
e2b_watcher(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg)
{
    struct err err = {0};
    const char *id = "";
    struct entry *e = e2b_call_entry(c);

    if (!e) {
        e2b_rpc_error(req, "unavailable", "the sandbox is gone");
        return;
    }
    if (!strcmp(method, "CreateWatcher")) {
        pw_create(req, c, e, msg);
        return;
    }
    if (json_get_str(msg, json_object_get(msg, "watcherId") ? "watcherId" : "watcher_id", false,
                     &id, &err) < 0) {
        e2b_rpc_error(req, "invalid_argument", "%s", err.msg);
        return;
    }
    struct watch *w = pw_find(e, id, NULL);
    if (!w) {
        e2b_rpc_error(req, "not_found", "watcher with id %.64s not found", id);
        return;
    }
    if (!strcmp(method, "RemoveWatcher")) {
        pw_free(w);
        e2b_rpc_ok(req, NULL);
        return;
    }
    /* GetWatcherEvents: everything since the last call. */
    (void)loop_timer_arm(w->idle, now_msec() + WATCHER_IDLE_MS);
    if (w->failed) {
        e2b_rpc_error(req, w->err_code, "%s", w->err_msg);
        return;
    }
    json_t *o = json_object();
    if (json_array_size(w->events)) {
        json_t *fresh = json_array();
        if (!fresh) {
            json_decref(o);
            e2b_rpc_error(req, "internal", "out of memory");
            return;
        }
        (void)json_set(o, "events", w->events); /* proto3: an empty list is omitted */
        w->events = fresh;
        w->ev_bytes = 0;
    }
    e2b_rpc_ok(req, o);
}
