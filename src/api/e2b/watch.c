/*
 * watch.c - envd's filesystem.Filesystem/WatchDir: inotify from the host.
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
 * The tree watch itself (the wd table, the walk, directories made or moved
 * in, the mapping of inotify events) is sandbox/watch.c's; this file frames
 * its events for envd, queues them and answers.
 *
 * Every stream and watcher holds an inotify instance, and the kernel
 * counts those per user (fs.inotify.max_user_instances, 128 by default)
 * for abxd and every other root process of the host alike. So a sandbox
 * may hold WATCHES_MAX of them, and all sandboxes together half of
 * the kernel's limit: past either a watch answers resource_exhausted, and
 * the host's own services keep theirs.
 */
#include "sandbox/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define WATCH_QUEUE_MAX    (1024 * 1024)         /* bytes of envelopes queued for a slow client */
#define WATCH_QUEUE_LOW    (WATCH_QUEUE_MAX / 4) /* inotify is not read while more are queued */
#define WATCH_PROBE_MS     2000   /* longest keepalive interval: finds clients gone (stop()) */
#define WATCHERS_MAX       64     /* polled watchers of one sandbox (WATCHES_MAX binds first) */
#define WATCHER_EVENTS_MAX 10000  /* events a polled watcher keeps for GetWatcherEvents */
#define WATCHER_IDLE_MS    600000 /* a polled watcher without GetWatcherEvents so long goes */
#define WATCHER_ID_LEN     21     /* "w" and 20 characters of [a-z0-9] */
#define WATCHES_MAX        16     /* inotify instances (streams and watchers) of one sandbox */

/* Network file systems envd refuses without allowNetworkMounts. */
#define NFS_MAGIC  0x6969UL
#define CIFS_MAGIC 0xFF534D42UL
#define SMB_MAGIC  0x517BUL
#define SMB2_MAGIC 0xFE534D42UL
#define FUSE_MAGIC 0x65735546UL

static const char *const ev_names[] = {
        [WATCH_CREATE] = "EVENT_TYPE_CREATE", [WATCH_WRITE] = "EVENT_TYPE_WRITE",
        [WATCH_REMOVE] = "EVENT_TYPE_REMOVE", [WATCH_RENAME] = "EVENT_TYPE_RENAME",
        [WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
};

struct ewatch {
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
    struct fileops *fo; /* file work as the watch's user, until the cut */
    int dirfd;          /* the watched directory, until the core has it */
    struct watch *core; /* the tree watch (sandbox/watch.h) */
    uint64_t keepalive_ms;
    struct loop_timer *keepalive;
    struct loop_timer *deadline; /* Connect-Timeout-Ms */
    struct buf q;                /* envelopes not handed to the stream yet */
    struct vfs_entry *ent;       /* scratch for includeEntry */
    char abs[PATH_MAX_LEN + 1];  /* scratch: an entry's absolute path */
    char path[PATH_MAX_LEN + 1]; /* the watched directory, absolute */
};

/* --- the queue --- */

/* Hands what the stream can take to it; ends it after the end frame. */
static void
flush(struct ewatch *w)
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
    if (w->core && watch_paused(w->core) && w->q.len < WATCH_QUEUE_LOW / 2)
        watch_resume(w->core);
}

/* Queues one message (stolen) as an envelope. -EFBIG past WATCH_QUEUE_MAX. */
static int
enqueue(struct ewatch *w, json_t *msg)
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
stop_watching(struct ewatch *w)
{
    if (w->core)
        w->api->inotify_open--;
    w->core = watch_free(w->core);
    w->dirfd = safe_close(w->dirfd);
    w->fo = fileops_unref(w->fo);
    loop_timer_free(w->keepalive);
    w->keepalive = NULL;
    loop_timer_free(w->deadline);
    w->deadline = NULL;
}

/* Ends the stream after what is queued, with code (NULL = success). */
static void finish(struct ewatch *w, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void
finish(struct ewatch *w, const char *code, const char *fmt, ...)
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
fail_errno(struct ewatch *w, int r)
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
arm_keepalive(struct ewatch *w)
{
    if (w->keepalive)
        (void)loop_timer_arm(w->keepalive, now_msec() + w->keepalive_ms);
}

/* Keeps one FilesystemEvent (stolen) for GetWatcherEvents. -EFBIG past
 * the bounds. */
static int
poll_push(struct ewatch *w, json_t *fe)
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
emit(struct ewatch *w, enum watch_event t, const char *rel)
{
    json_t *fe = json_object(), *o = json_object();
    /* JSON strings must be valid, file names need not be: U+FFFD for each
     * byte that is not UTF-8, as on the other E2B entries. */
    (void)json_set(fe, "name", *rel ? json_string_lossy(rel) : json_string("."));
    (void)json_set(fe, "type", json_string(ev_names[t]));
    /* envd's rule: only what still names the entry carries it, and only
     * when it can be had (it may be gone again). */
    if (w->include_entry && (t == WATCH_CREATE || t == WATCH_WRITE || t == WATCH_CHMOD)) {
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

/* --- the core's callbacks --- */

static int
core_event(void *ud, enum watch_event ev, const char *rel)
{
    return emit(ud, ev, rel);
}

static bool
core_full(void *ud)
{
    struct ewatch *w = ud;
    return w->q.len >= WATCH_QUEUE_LOW;
}

static void
core_flush(void *ud)
{
    flush(ud);
}

static void
core_failed(void *ud, int r)
{
    struct ewatch *w = ud;
    if (r == -EOVERFLOW) {
        log_notice("sandbox=%s watch of '%s': the kernel's inotify queue overflowed", w->owner.id,
                   w->path);
        finish(w, "resource_exhausted",
               "too many file system events at once: the kernel's queue overflowed");
        return;
    }
    fail_errno(w, r);
}

static const struct watch_ops core_ops = {
        .event = core_event,
        .full = core_full,
        .flush = core_flush,
        .failed = core_failed,
};

/* --- the stream --- */

static void
ws_free(struct ewatch *w)
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
    struct ewatch *w = (struct ewatch *)es;
    stop_watching(w);
    if (!w->ended) {
        w->ended = true;
        http_stream_abort(w->stream);
    }
}

static void
on_keepalive(struct loop_timer *t, void *ud)
{
    struct ewatch *w = ud;
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
watch_open(struct http_req *req, struct ewatch *w, bool allow_network)
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
    r = watch_new(w->api->loop, w->fo, TAKE_FD(w->dirfd), w->recursive,
                  PATH_MAX_LEN - strlen(w->path) - 1, &core_ops, w, &w->core);
    if (r == 0)
        w->api->inotify_open++;
    if (r < 0) {
        if (r == -EMFILE || r == -ENFILE || r == -ENOMEM)
            say(req, w->poll, "resource_exhausted", "no inotify instance left for the watch: %s",
                strerror(-r));
        else
            say(req, w->poll, "internal", "cannot create an inotify instance: %s", strerror(-r));
        return r;
    }
    r = watch_start(w->core);
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
discard(struct ewatch *w)
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
static struct ewatch *
ewatch_new(struct http_req *req, struct e2b_call *c, struct entry *e, json_t *msg, bool poll)
{
    struct err err = {0};
    const char *path = "";
    bool allow_network = false;
    struct ewatch *w;

    if (!api_need_cap(req, e, TEMPLATE_CAP_FILES))
        return NULL;
    if (count_watches(e) >= WATCHES_MAX) {
        say(req, poll, "resource_exhausted",
            "the sandbox has %d watches open (streams and watchers); end some first", WATCHES_MAX);
        return NULL;
    }
    if (!sandbox_has_view(e->sb)) {
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
    w->dirfd = -EBADF;
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
    int r = watch_listen(w->core);
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
    struct ewatch *w;
    int r;

    if (!e) {
        e2b_stream_error(req, "unavailable", "the sandbox is gone");
        return;
    }
    if (!(w = ewatch_new(req, c, e, msg, false)))
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
pw_free(struct ewatch *w)
{
    e2b_stream_detach(&w->es);
    loop_timer_free(w->idle);
    discard(w);
}

/* The sandbox is killed or paused: its watchers go. */
static void
pw_cut(struct e2b_stream *es)
{
    pw_free((struct ewatch *)es);
}

static void
on_idle(struct loop_timer *t, void *ud)
{
    struct ewatch *w = ud;
    (void)t;
    log_info("sandbox=%s watcher %s: no GetWatcherEvents for %d s, removed", w->owner.id, w->id,
             WATCHER_IDLE_MS / 1000);
    pw_free(w);
}

/* The polled watcher id of sandbox e (its list only); *count = how many
 * it has. */
static struct ewatch *
pw_find(struct entry *e, const char *id, size_t *count)
{
    struct ewatch *found = NULL;
    size_t n = 0;
    list_foreach (pos, &e2b_of(e)->streams) {
        struct e2b_stream *s = list_entry(pos, struct e2b_stream, link);
        if (s->cut != pw_cut)
            continue;
        n++;
        struct ewatch *w = (struct ewatch *)s;
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
    struct ewatch *w;
    int r;

    (void)pw_find(e, NULL, &n);
    if (n >= WATCHERS_MAX) {
        e2b_rpc_error(req, "resource_exhausted",
                      "the sandbox has %d watchers already; remove some (RemoveWatcher)",
                      WATCHERS_MAX);
        return;
    }
    if (!(w = ewatch_new(req, c, e, msg, true)))
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
    struct ewatch *w = pw_find(e, id, NULL);
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
