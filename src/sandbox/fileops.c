/*
 * fileops.c - the file work of one sandbox identity: in this process
 * (direct) or in its abx-fileops helper (remote), behind one set of calls.
 *
 * A remote call is one request packet and its answers on the helper's
 * socket, under the handle's mutex. The helper is started lazily and again
 * after it failed; a helper that dies while idle is noticed when the next
 * request cannot be sent, and that request is simply sent to a new one.
 * One that dies, hangs or misbehaves during a request fails that request:
 * we never resend something it may have half done.
 */
#include "sandbox/fileops.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"
#include "sandbox/fileops-helper.h"
#include "sandbox/fileops-proto.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/fdpass.h"
#include "util/parse.h"

/* One helper process. A call owns it (busy) from request to final answer. */
struct helper {
    int sock, pidfd;
    pid_t pid;
    uint64_t gen; /* bumped at every start: uploads belong to one life */
    bool busy;
    bool child;     /* we forked it (we reap it), else it came from f->start */
    uint64_t token; /* f->start's name for it, for f->stop */
};

struct fileops {
    atomic_int refs;
    pthread_mutex_t lock; /* the helper table; never held across I/O */
    pthread_cond_t idle;  /* a helper became free */
    bool remote;
    atomic_bool shut; /* read without the lock: a call in flight polls it */
    /* both */
    int ws_fd, view_fd;
    struct vfs_ids ids;
    uint32_t uid, gid;
    bool as_root;
    /* remote */
    int image_fd, userns_fd;
    bool ns;
    uint64_t caps;
    void *bpf;
    size_t bpf_len;
    char label[96];
    fileops_start_fn start; /* NULL: we start our helpers ourselves */
    fileops_idmap_fn idmap;
    fileops_stop_fn stop;
    void *start_ud;
    bool has_view; /* with start: whether the helper has a view */
    struct helper h[FILEOPS_HELPERS];
    uint64_t gens;
    int timeout_ms, long_timeout_ms;
};

struct fileops_upload {
    struct fileops *f;
    bool view;                   /* a view file (vfs.h), else the workspace's (files.h) */
    struct files_upload *direct; /* direct handles: the upload itself */
    struct vfs_upload *vdirect;
    unsigned helper; /* the helper holding the staging file, and its life */
    uint64_t gen;
    uint32_t id;
    int fd; /* ours (remote) or borrowed from direct */
    uint64_t written, max;
    char rel[PATH_MAX_LEN + 1];
};

/* Packets are built and received in per-thread buffers: a handle per
 * sandbox identity cannot afford its own, a thread can. They go when the
 * thread does. */
struct bufs {
    char tx[FOP_MSG_MAX];
    char rx[FOP_MSG_MAX];
};
static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static __thread char *tls_tx, *tls_rx;
/* The handle this thread is in a call of (callbacks must not re-enter). */
static __thread struct fileops *tls_in;

static void
bufs_free(void *p)
{
    free(p);
    tls_tx = tls_rx = NULL;
}

static void
bufs_key_init(void)
{
    (void)pthread_key_create(&bufs_key, bufs_free);
}

static int
buffers(void)
{
    if (tls_tx)
        return 0;
    (void)pthread_once(&bufs_once, bufs_key_init);
    struct bufs *b = malloc(sizeof(*b));
    if (!b || pthread_setspecific(bufs_key, b) != 0) {
        free(b);
        return -ENOMEM;
    }
    tls_tx = b->tx;
    tls_rx = b->rx;
    return 0;
}

/* --- handles --- */

static struct fileops *
alloc_handle(void)
{
    struct fileops *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&f->lock, &a);
    pthread_mutexattr_destroy(&a);
    pthread_cond_init(&f->idle, NULL);
    atomic_init(&f->refs, 1);
    atomic_init(&f->shut, false);
    f->ws_fd = f->view_fd = f->image_fd = f->userns_fd = -EBADF;
    f->timeout_ms = FILEOPS_TIMEOUT_MS;
    f->long_timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    for (unsigned i = 0; i < FILEOPS_HELPERS; i++)
        f->h[i].sock = f->h[i].pidfd = -EBADF;
    return f;
}

static int
dup_or_none(int fd)
{
    if (fd < 0)
        return -EBADF;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    return d < 0 ? -errno : d;
}

int
fileops_new_direct(int ws_fd, int view_fd, const struct vfs_ids *ids, uid_t uid, gid_t gid,
                   bool as_root, struct fileops **ret)
{
    struct fileops *f = alloc_handle();
    if (!f)
        return -ENOMEM;
    f->ws_fd = dup_or_none(ws_fd);
    f->view_fd = dup_or_none(view_fd);
    if ((ws_fd >= 0 && f->ws_fd < 0) || (view_fd >= 0 && f->view_fd < 0)) {
        int r = f->ws_fd < 0 ? f->ws_fd : f->view_fd;
        fileops_unref(f);
        return r;
    }
    f->ids = *ids;
    f->uid = (uint32_t)uid;
    f->gid = (uint32_t)gid;
    f->as_root = as_root;
    *ret = f;
    return 0;
}

int
fileops_new_remote(const struct fileops_remote *c, struct fileops **ret, struct err *err)
{
    struct fileops *f = alloc_handle();
    if (!f)
        return -ENOMEM;
    f->remote = true;
    f->ns = c->ns;
    f->as_root = c->as_root;
    f->uid = c->uid;
    f->gid = c->gid;
    f->ids = c->ids;
    f->caps = c->as_root && c->ns ? c->caps : 0;
    (void)snprintf(f->label, sizeof(f->label), "%s", c->label ? c->label : "a sandbox");
    if (c->start) {
        /* The starter holds the descriptors and sends the identity. */
        f->start = c->start;
        f->idmap = c->idmap;
        f->stop = c->stop;
        f->start_ud = c->start_ud;
        f->has_view = c->has_view;
        *ret = f;
        return 0;
    }
    f->image_fd = dup_or_none(c->image_fd);
    f->userns_fd = dup_or_none(c->userns_fd);
    f->ws_fd = dup_or_none(c->ws_fd);
    f->view_fd = dup_or_none(c->view_fd);
    if (f->image_fd < 0 || f->ws_fd < 0 || (c->ns && f->userns_fd < 0) ||
        (c->view_fd >= 0 && f->view_fd < 0)) {
        fileops_unref(f);
        return err_set(err, EBADF, "cannot keep the descriptors of %s's file helper",
                       c->label ? c->label : "a sandbox");
    }
    if (c->bpf_len > FOP_BPF_MAX) {
        fileops_unref(f);
        return err_set(err, E2BIG, "the seccomp program is larger than %d bytes", FOP_BPF_MAX);
    }
    if (c->bpf_len) {
        f->bpf = malloc(c->bpf_len);
        if (!f->bpf) {
            fileops_unref(f);
            return -ENOMEM;
        }
        memcpy(f->bpf, c->bpf, c->bpf_len);
        f->bpf_len = c->bpf_len;
    }
    *ret = f;
    return 0;
}

struct fileops *
fileops_ref(struct fileops *f)
{
    if (f)
        atomic_fetch_add(&f->refs, 1);
    return f;
}

/* Ends a helper process, if any: kill, reap, close. By its owner (or
 * with the lock when it is idle). One from f->start is not our child: the
 * kill may be refused (the closed socket ends a healthy one anyway; one
 * that hangs failed() has its starter kill) and its parent reaps it;
 * waiting for it here could only fail, or take another process's exit if
 * its pid were reused. */
static void
stop_helper(struct helper *h)
{
    if (h->pidfd >= 0)
        (void)syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
    if (h->pidfd >= 0 && h->child) {
        siginfo_t si;
        while (waitid((idtype_t)P_PIDFD, (id_t)h->pidfd, &si, WEXITED | __WALL) < 0 &&
               errno == EINTR)
            ;
    }
    h->pidfd = safe_close(h->pidfd);
    h->sock = safe_close(h->sock);
    h->pid = 0;
}

struct fileops *
fileops_unref(struct fileops *f)
{
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1)
        return NULL;
    for (unsigned i = 0; i < FILEOPS_HELPERS; i++)
        stop_helper(&f->h[i]);
    safe_close(f->ws_fd);
    safe_close(f->view_fd);
    safe_close(f->image_fd);
    safe_close(f->userns_fd);
    free(f->bpf);
    pthread_cond_destroy(&f->idle);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return NULL;
}

void
fileops_shutdown(struct fileops *f)
{
    if (!f || !f->remote)
        return;
    /* A call in flight looks at shut at least every FILEOPS_CANCEL_TICK_MS, ends
     * its helper and gives it back; the idle ones end here. */
    atomic_store(&f->shut, true);
    pthread_mutex_lock(&f->lock);
    for (;;) {
        bool busy = false;
        for (unsigned i = 0; i < FILEOPS_HELPERS; i++) {
            if (f->h[i].busy)
                busy = true;
            else
                stop_helper(&f->h[i]);
        }
        if (!busy || tls_in == f)
            break; /* none busy, or called from a callback of this handle */
        pthread_cond_wait(&f->idle, &f->lock);
    }
    f->userns_fd = safe_close(f->userns_fd);
    pthread_mutex_unlock(&f->lock);
}

void
fileops_set_timeouts(struct fileops *f, int ms, int long_ms)
{
    pthread_mutex_lock(&f->lock);
    f->timeout_ms = ms;
    f->long_timeout_ms = long_ms;
    pthread_mutex_unlock(&f->lock);
}

pid_t
fileops_helper_pid(struct fileops *f)
{
    pid_t p = 0;
    pthread_mutex_lock(&f->lock);
    for (unsigned i = 0; i < FILEOPS_HELPERS && !p; i++)
        p = f->h[i].pid;
    pthread_mutex_unlock(&f->lock);
    return p;
}

/* --- the wire --- */

/* Copies the helper's message into err, replacing what a log or terminal
 * could take for something else. */
static int
helper_err(struct err *err, int errnum, const char *msg)
{
    char m[ERR_MSG_MAX];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n < sizeof(m) - 1; p++)
        m[n++] = *p < 0x20 || *p >= 0x7f ? '?' : (char)*p;
    m[n] = '\0';
    return err_set(err, errnum, "%s", m[0] ? m : strerror(errnum));
}

static int
failed(struct fileops *f, struct helper *h, int r, struct err *err, const char *why)
{
    /* It may hang (a deadline) or be taken over (a malformed answer): the
     * closed socket is not enough, and a helper we did not fork only its
     * starter may kill. */
    if (!h->child && h->pidfd >= 0 && f->stop)
        f->stop(f->start_ud, h->token);
    stop_helper(h);
    return err_set(err, r == -ETIMEDOUT ? ETIMEDOUT : EIO, "the file helper of %s failed: %s",
                   f->label, why);
}

static int
send_packet(int sock, void *buf, size_t n, int fd, int fd2)
{
    int fds[2] = {fd, fd2};
    return fdpass_send(sock, buf, n, fds, fd < 0 ? 0 : fd2 < 0 ? 1 : 2, 0);
}

static ssize_t
recv_packet(int sock, int timeout_ms, const atomic_bool *cancel, int *ret_fd, unsigned *ret_nfds)
{
    return fileops_helper_recv(sock, tls_rx, FOP_MSG_MAX, timeout_ms, cancel, ret_fd, ret_nfds);
}

/* The pid behind a pidfd (for fileops_helper_pid()), 0 if unknown. */
static pid_t
pidfd_pid(int pidfd)
{
    char path[64], b[1024];
    (void)snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, sizeof(b) - 1);
    if (n <= 0)
        return 0;
    b[n] = '\0';
    char *p = strstr(b, "\nPid:\t");
    if (!p)
        return 0;
    p += strlen("\nPid:\t");
    char *nl = strchr(p, '\n');
    if (nl)
        *nl = '\0';
    int32_t pid;
    return parse_i32(p, &pid) == 0 && pid > 0 ? (pid_t)pid : 0;
}

/* A helper from f->start: the socket and pidfd it gave are ours to keep. */
static int
spawn_elsewhere(struct fileops *f, struct helper *h, struct err *err)
{
    int sock = -EBADF, pidfd = -EBADF;
    uint64_t token = 0;
    int r = f->start(f->start_ud, f->as_root, &sock, &pidfd, &token, err);
    if (r < 0)
        return r;
    if (sock < 0 || pidfd < 0) {
        safe_close(sock);
        safe_close(pidfd);
        return err_set(err, EIO, "cannot start the file helper of %s (no helper came back)",
                       f->label);
    }
    h->sock = sock;
    h->pidfd = pidfd;
    h->pid = pidfd_pid(pidfd);
    h->child = false;
    h->token = token;
    return 0;
}

static int
spawn(struct fileops *f, struct helper *h, struct err *err)
{
    if (f->start)
        return spawn_elsewhere(f, h, err);
    h->child = true;
    struct fileops_helper_spec spec = {
            .image_fd = f->image_fd,
            .ws_fd = f->ws_fd,
            .view_fd = f->view_fd,
            .userns_fd = f->userns_fd,
            .ns = f->ns,
            .as_root = f->as_root,
            .uid = f->uid,
            .gid = f->gid,
            .ids = f->ids,
            .caps = f->caps,
            .bpf = f->bpf,
            .bpf_len = f->bpf_len,
            .label = f->label,
            .cancel = &f->shut,
    };
    return fileops_helper_start(&spec, &h->sock, &h->pidfd, &h->pid, err);
}

/* One call: the request, its answer handler, what came back. */
struct call {
    struct fop_request rq;
    int send_fd;
    int send_fd2; /* a second descriptor (V_WATCH_ADD), or -1 */
    int timeout_ms;
    /* entry consumers (listing requests); the first error they return
     * stops further calls and is the call's result once the rest has been
     * read */
    int (*fentry)(struct call *c, const struct files_entry *e);
    int (*ventry)(struct call *c, const struct vfs_entry *e);
    void *ud;
    struct vfs_entry *ve; /* storage for ventry batches and FOP_R_VENTRY */
    int stop;
    int want;          /* the helper slot that must answer (uploads), or -1 */
    uint64_t want_gen; /* ... in this life of it */
    unsigned helper;   /* the slot that answered, */
    uint64_t gen;      /* in this life */
    /* results */
    struct fop_answer a;
    int fd;
};

/* Whether fd is what request type t promises to hand back. */
static bool
fd_fits(enum fop_type t, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return false;
    int acc = fcntl(fd, F_GETFL);
    if (acc < 0)
        return false;
    acc &= O_ACCMODE;
    switch (t) {
    case FOP_F_OPEN_READ:
    case FOP_V_OPEN_READ:
        return S_ISREG(st.st_mode) && (acc == O_RDONLY || acc == O_RDWR);
    case FOP_F_UPLOAD_BEGIN:
    case FOP_V_UPLOAD_BEGIN:
        return S_ISREG(st.st_mode) && (acc == O_WRONLY || acc == O_RDWR);
    case FOP_V_OPEN_DIR:
    case FOP_V_OPEN_BELOW:
        return S_ISDIR(st.st_mode);
    default:
        return false;
    }
}

static int
batch(struct fileops *f, struct helper *h, struct call *c, struct err *err)
{
    int r;
    if (c->a.type == FOP_R_FENTRIES) {
        if (c->rq.type != FOP_F_WALK)
            return failed(f, h, -EBADMSG, err, "an unasked listing");
        struct files_entry e;
        while ((r = fop_next_fentry(&c->a, &e)) == 1)
            if (c->stop == 0 && (r = c->fentry(c, &e)) < 0)
                c->stop = r;
    } else {
        if (c->rq.type != FOP_V_LIST)
            return failed(f, h, -EBADMSG, err, "an unasked listing");
        while ((r = fop_next_ventry(&c->a, c->ve)) == 1)
            if (c->stop == 0 && (r = c->ventry(c, c->ve)) < 0)
                c->stop = r;
    }
    return r < 0 ? failed(f, h, r, err, "a malformed listing") : 0;
}

/* Takes a helper for one call: slot want (of life gen) when >= 0, else any
 * idle one, or a free slot to start one in, or waits. */
static int
acquire(struct fileops *f, int want, uint64_t gen, struct helper **ret, struct err *err)
{
    if (tls_in == f)
        return err_set(err, EDEADLK, "a file callback called back into %s's file helper", f->label);
    pthread_mutex_lock(&f->lock);
    struct helper *h = NULL;
    for (;;) {
        if (atomic_load(&f->shut)) {
            pthread_mutex_unlock(&f->lock);
            return err_set(err, ESRCH, "%s is gone", f->label);
        }
        if (want >= 0) {
            h = &f->h[want];
            if (h->gen != gen || h->sock < 0) {
                pthread_mutex_unlock(&f->lock);
                return err_set(err, EIO, "the file helper of %s that held the upload is gone",
                               f->label);
            }
            if (!h->busy)
                break;
        } else {
            struct helper *empty = NULL;
            h = NULL;
            for (unsigned i = 0; i < FILEOPS_HELPERS && !h; i++) {
                if (!f->h[i].busy && f->h[i].sock >= 0)
                    h = &f->h[i];
                else if (!f->h[i].busy && !empty)
                    empty = &f->h[i];
            }
            if (!h)
                h = empty;
            if (h)
                break;
        }
        pthread_cond_wait(&f->idle, &f->lock);
    }
    h->busy = true;
    pthread_mutex_unlock(&f->lock);
    *ret = h;
    return 0;
}

static void
release(struct fileops *f, struct helper *h)
{
    pthread_mutex_lock(&f->lock);
    if (atomic_load(&f->shut))
        stop_helper(h);
    h->busy = false;
    pthread_cond_broadcast(&f->idle);
    pthread_mutex_unlock(&f->lock);
}

static int
call_helper(struct fileops *f, struct helper *h, struct call *c, struct err *err)
{
    int r;
    if ((r = buffers()) < 0)
        return r;
    for (int attempt = 0;; attempt++) {
        if (h->sock < 0) {
            if (c->want >= 0)
                return err_set(err, EIO, "the file helper of %s that held the upload is gone",
                               f->label);
            if ((r = spawn(f, h, err)) < 0)
                return r;
            pthread_mutex_lock(&f->lock);
            h->gen = ++f->gens;
            pthread_mutex_unlock(&f->lock);
        }
        long n = fop_encode_request(tls_tx, FOP_MSG_MAX, &c->rq);
        if (n == -ENAMETOOLONG || n == -EMSGSIZE)
            return err_set(err, ENAMETOOLONG, "a path longer than %d bytes: '%.256s...'",
                           PATH_MAX_LEN, c->rq.a ? c->rq.a : "");
        if (n < 0)
            return err_set(err, EINVAL, "a malformed file request (%s)",
                           c->rq.a ? "bad path" : "bad fields");
        r = send_packet(h->sock, tls_tx, (size_t)n, c->send_fd, c->send_fd2);
        if (r == 0)
            break;
        /* Gone while idle: nothing of this request was seen. Once. */
        stop_helper(h);
        if (attempt > 0 || c->want >= 0 || (r != -EPIPE && r != -ECONNRESET))
            return err_set(err, EIO, "cannot reach the file helper of %s", f->label);
    }
    c->gen = h->gen;
    for (;;) {
        int fd;
        unsigned nfds;
        ssize_t k = recv_packet(h->sock, c->timeout_ms, &f->shut, &fd, &nfds);
        if (k == -ESRCH) {
            stop_helper(h);
            return err_set(err, ESRCH, "%s is gone", f->label);
        }
        if (k < 0)
            return failed(f, h, (int)k, err,
                          k == -ETIMEDOUT    ? "it did not answer in time"
                          : k == -EBADMSG    ? "an oversized answer"
                          : k == -ECONNRESET ? "it ended"
                                             : "cannot read its answer");
        if (fop_decode_answer(tls_rx, (size_t)k, nfds, &c->a) < 0) {
            safe_close(fd);
            return failed(f, h, -EBADMSG, err, "a malformed answer");
        }
        if (c->a.type == FOP_R_FENTRIES || c->a.type == FOP_R_VENTRIES) {
            if ((r = batch(f, h, c, err)) < 0)
                return r;
            continue;
        }
        if (c->a.type == FOP_R_ERR)
            return helper_err(err, c->a.errnum, c->a.msg);
        if (c->a.type != fop_answer_type(c->rq.type) || (nfds && !fd_fits(c->rq.type, fd))) {
            safe_close(fd);
            return failed(f, h, -EBADMSG, err,
                          c->a.type != fop_answer_type(c->rq.type)
                                  ? "an answer to another question"
                                  : "a descriptor of the wrong kind");
        }
        if (c->a.type == FOP_R_VENTRY && fop_next_ventry(&c->a, c->ve) != 1)
            return failed(f, h, -EBADMSG, err, "a malformed entry");
        if (c->stop < 0) {
            safe_close(fd);
            return c->stop;
        }
        c->fd = fd;
        return 0;
    }
}

static int
rcall(struct fileops *f, struct call *c, struct err *err)
{
    struct helper *h = NULL;
    c->fd = -EBADF;
    int r = acquire(f, c->want, c->want_gen, &h, err);
    if (r < 0)
        return r;
    pthread_mutex_lock(&f->lock);
    c->timeout_ms = c->timeout_ms == FILEOPS_LONG_TIMEOUT_MS ? f->long_timeout_ms : f->timeout_ms;
    pthread_mutex_unlock(&f->lock);
    c->helper = (unsigned)(h - f->h);
    tls_in = f;
    r = call_helper(f, h, c, err);
    tls_in = NULL;
    release(f, h);
    return r;
}

static void
call_init(struct call *c, enum fop_type t, const char *a)
{
    memset(c, 0, sizeof(*c));
    c->rq.type = t;
    c->rq.a = a;
    c->send_fd = c->send_fd2 = -1;
    c->timeout_ms = FILEOPS_TIMEOUT_MS;
    c->fd = -EBADF;
    c->want = -1;
}

/* --- the workspace --- */

int
fileops_stat(struct fileops *f, const char *rel, struct files_stat *ret, struct err *err)
{
    if (!f->remote)
        return files_stat(f->ws_fd, rel, ret, err);
    struct call c;
    call_init(&c, FOP_F_STAT, rel);
    int r = rcall(f, &c, err);
    if (r == 0)
        *ret = c.a.st;
    return r;
}

int
fileops_open_read(struct fileops *f, const char *rel, int *ret_fd, struct files_stat *ret,
                  struct err *err)
{
    if (!f->remote)
        return files_open_read(f->ws_fd, rel, ret_fd, ret, err);
    struct call c;
    call_init(&c, FOP_F_OPEN_READ, rel);
    int r = rcall(f, &c, err);
    if (r < 0)
        return r;
    *ret = c.a.st;
    *ret_fd = c.fd;
    return 0;
}

static int need_view(struct fileops *f, struct err *err);

static int
upload_begin(struct fileops *f, bool view, const char *path, uint64_t max_bytes,
             struct fileops_upload **ret, struct err *err)
{
    struct fileops_upload *up = calloc(1, sizeof(*up));
    int r;
    if (!up)
        return -ENOMEM;
    up->fd = -EBADF;
    up->max = max_bytes;
    up->view = view;
    (void)snprintf(up->rel, sizeof(up->rel), "%s", path);
    if (!f->remote) {
        r = view ? vfs_upload_begin(f->view_fd, &f->ids, path, f->as_root, max_bytes, &up->vdirect,
                                    err)
                 : files_upload_begin(f->ws_fd, path, f->uid, f->gid, max_bytes, &up->direct, err);
        if (r < 0) {
            free(up);
            return r;
        }
        up->fd = view ? vfs_upload_fd(up->vdirect) : files_upload_fd(up->direct);
    } else {
        struct call c;
        call_init(&c, view ? FOP_V_UPLOAD_BEGIN : FOP_F_UPLOAD_BEGIN, path);
        r = rcall(f, &c, err);
        if (r < 0) {
            free(up);
            return r;
        }
        up->id = c.a.u;
        up->fd = c.fd;
        up->helper = c.helper;
        up->gen = c.gen;
    }
    up->f = fileops_ref(f);
    *ret = up;
    return 0;
}

int
fileops_upload_begin(struct fileops *f, const char *rel, uint64_t max_bytes,
                     struct fileops_upload **ret, struct err *err)
{
    return upload_begin(f, false, rel, max_bytes, ret, err);
}

int
fileops_vupload_begin(struct fileops *f, const char *path, uint64_t max_bytes,
                      struct fileops_upload **ret, struct err *err)
{
    int r = need_view(f, err);
    return r < 0 ? r : upload_begin(f, true, path, max_bytes, ret, err);
}

int
fileops_upload_write(struct fileops_upload *up, const void *data, size_t n, struct err *err)
{
    if (n > up->max - up->written)
        return err_set(err, EFBIG, "'/%.512s' would be larger than %llu bytes", up->rel,
                       (unsigned long long)up->max);
    int r = write_full(up->fd, data, n);
    if (r == -EDQUOT)
        return err_set(err, EDQUOT,
                       "'%s%.512s' does not fit: the sandbox's disk bound (disk_mb) is reached",
                       up->view ? "" : "/", up->rel);
    if (r == -ENOSPC)
        return err_set(err, ENOSPC, "no space left for '%s%.512s'", up->view ? "" : "/", up->rel);
    if (r < 0)
        return err_setx(err, -r, "cannot write '/%.512s'", up->rel);
    up->written += n;
    return 0;
}

int
fileops_upload_fd(const struct fileops_upload *up)
{
    return up->fd;
}

uint64_t
fileops_upload_size(const struct fileops_upload *up)
{
    return up->written;
}

static void
upload_free(struct fileops_upload *up)
{
    if (!up->direct && !up->vdirect)
        safe_close(up->fd);
    fileops_unref(up->f);
    free(up);
}

/* Commits a remote upload on the helper that holds it. */
static int
remote_commit(struct fileops_upload *up, struct call *c, struct err *err)
{
    /* Our copy of the staging file goes first: the link must see all data. */
    up->fd = safe_close(up->fd);
    call_init(c, up->view ? FOP_V_UPLOAD_COMMIT : FOP_F_UPLOAD_COMMIT, NULL);
    c->rq.u = up->id;
    c->want = (int)up->helper;
    c->want_gen = up->gen;
    return rcall(up->f, c, err);
}

int
fileops_upload_commit(struct fileops_upload *up, struct files_stat *ret, bool *ret_created,
                      struct err *err)
{
    int r;
    assert(!up->view);
    if (up->direct) {
        r = files_upload_commit(up->direct, ret, ret_created, err);
        up->direct = NULL;
        up->fd = -EBADF;
        upload_free(up);
        return r;
    }
    struct call c;
    r = remote_commit(up, &c, err);
    if (r == 0) {
        *ret = c.a.st;
        *ret_created = c.a.u == 1;
    }
    upload_free(up);
    return r;
}

int
fileops_vupload_commit(struct fileops_upload *up, bool *ret_created, struct err *err)
{
    int r;
    bool created = false;
    assert(up->view);
    if (up->vdirect) {
        r = vfs_upload_commit(up->vdirect, &created, err);
        up->vdirect = NULL;
        up->fd = -EBADF;
    } else {
        struct call c;
        r = remote_commit(up, &c, err);
        created = r == 0 && c.a.u == 1;
    }
    if (r == 0 && ret_created)
        *ret_created = created;
    upload_free(up);
    return r;
}

void
fileops_upload_abort(struct fileops_upload *up)
{
    if (!up)
        return;
    if (up->direct || up->vdirect) {
        files_upload_abort(up->direct);
        vfs_upload_abort(up->vdirect);
        up->direct = NULL;
        up->vdirect = NULL;
        up->fd = -EBADF;
    } else {
        struct call c;
        call_init(&c, up->view ? FOP_V_UPLOAD_ABORT : FOP_F_UPLOAD_ABORT, NULL);
        c.rq.u = up->id;
        c.want = (int)up->helper;
        c.want_gen = up->gen;
        (void)rcall(up->f, &c, NULL);
    }
    upload_free(up);
}

static int
simple(struct fileops *f, enum fop_type t, const char *a, const char *b, uint32_t u,
       struct err *err)
{
    struct call c;
    call_init(&c, t, a);
    c.rq.b = b;
    c.rq.u = u;
    if (t == FOP_F_RMDIR || t == FOP_V_REMOVE)
        c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    return rcall(f, &c, err);
}

int
fileops_delete(struct fileops *f, const char *rel, struct err *err)
{
    if (!f->remote)
        return files_delete(f->ws_fd, rel, err);
    return simple(f, FOP_F_DELETE, rel, NULL, 0, err);
}

int
fileops_mkdir(struct fileops *f, const char *rel, bool *ret_created, struct err *err)
{
    if (!f->remote)
        return files_mkdir(f->ws_fd, rel, f->uid, f->gid, ret_created, err);
    struct call c;
    call_init(&c, FOP_F_MKDIR, rel);
    int r = rcall(f, &c, err);
    if (r == 0)
        *ret_created = c.a.u == 1;
    return r;
}

int
fileops_rmdir(struct fileops *f, const char *rel, struct err *err)
{
    if (!f->remote)
        return files_rmdir(f->ws_fd, rel, err);
    return simple(f, FOP_F_RMDIR, rel, NULL, 0, err);
}

int
fileops_rename(struct fileops *f, const char *from, const char *to, bool overwrite, struct err *err)
{
    if (!f->remote)
        return files_rename(f->ws_fd, from, to, overwrite, f->uid, f->gid, err);
    return simple(f, FOP_F_RENAME, from, to, overwrite ? 1 : 0, err);
}

/* Keeps the entries of a remote walk in a files_tree (already sorted). */
static int
keep_fentry(struct call *c, const struct files_entry *in)
{
    struct files_tree *t = c->ud;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct files_entry *v = realloc(t->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    struct files_entry *e = &t->v[t->n];
    *e = *in;
    e->path = strdup(in->path);
    e->target = in->target ? strdup(in->target) : NULL;
    if (!e->path || (in->target && !e->target)) {
        free(e->path);
        free(e->target);
        return -ENOMEM;
    }
    t->n++;
    return 0;
}

int
fileops_tree_list(struct fileops *f, const char *rel, const struct files_walk_opts *opts,
                  struct files_tree *ret, struct err *err)
{
    if (!f->remote)
        return files_tree_list(f->ws_fd, rel, opts, ret, err);
    struct files_tree t = {0};
    struct call c;
    call_init(&c, FOP_F_WALK, rel);
    c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    c.rq.max = opts ? opts->max : 0;
    c.rq.u = opts && opts->limits_as_entries ? 1 : 0;
    if (opts && opts->prune)
        c.rq.prune = *opts->prune;
    c.fentry = keep_fentry;
    c.ud = &t;
    int r = rcall(f, &c, err);
    if (r == -ENOMEM)
        r = err_set(err, ENOMEM, "out of memory listing '/%.256s'", rel);
    if (r < 0) {
        files_tree_free(&t);
        return r;
    }
    t.skipped = c.a.v;
    *ret = t;
    return 0;
}

int
fileops_walk(struct fileops *f, const char *rel, files_walk_fn fn, void *ud, struct err *err)
{
    if (!f->remote)
        return files_walk(f->ws_fd, rel, fn, ud, err);
    struct files_tree t = {0};
    int r = fileops_tree_list(f, rel, NULL, &t, err);
    for (size_t i = 0; r == 0 && i < t.n; i++)
        r = fn(&t.v[i], ud);
    files_tree_free(&t);
    return r;
}

/* --- the view --- */

static int
need_view(struct fileops *f, struct err *err)
{
    if (f->start ? !f->has_view : f->view_fd < 0)
        return err_set(err, EOPNOTSUPP, "%s has no view of its own (not ns mode)", f->label);
    return 0;
}

int
fileops_vstat(struct fileops *f, const char *path, struct vfs_entry *ret, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_stat(f->view_fd, &f->ids, path, ret, err);
    struct call c;
    call_init(&c, FOP_V_STAT, path);
    c.ve = ret;
    return rcall(f, &c, err);
}

int
fileops_vstat_fd(struct fileops *f, int fd, const char *path, struct vfs_entry *ret,
                 struct err *err)
{
    if (!f->remote)
        return vfs_stat_fd(fd, &f->ids, path, ret, err);
    struct call c;
    call_init(&c, FOP_V_STAT_FD, path);
    c.send_fd = fd;
    c.ve = ret;
    return rcall(f, &c, err);
}

struct vlist_ctx {
    vfs_list_fn fn;
    void *ud;
};

static int
pass_ventry(struct call *c, const struct vfs_entry *e)
{
    struct vlist_ctx *x = c->ud;
    return x->fn(x->ud, e);
}

int
fileops_vlist(struct fileops *f, const char *path, unsigned depth, vfs_list_fn fn, void *ud,
              struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_list(f->view_fd, &f->ids, path, depth, fn, ud, err);
    _cleanup_free_ struct vfs_entry *e = malloc(sizeof(*e));
    if (!e)
        return -ENOMEM;
    struct vlist_ctx x = {fn, ud};
    struct call c;
    call_init(&c, FOP_V_LIST, path);
    c.rq.u = depth > VFS_MAX_DEPTH ? VFS_MAX_DEPTH : depth;
    c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    c.ventry = pass_ventry;
    c.ud = &x;
    c.ve = e;
    return rcall(f, &c, err);
}

static int
open_fd(struct fileops *f, enum fop_type t, const char *path, int send_fd, int *ret_fd,
        uint64_t *ret_size, struct err *err)
{
    struct call c;
    call_init(&c, t, path);
    c.send_fd = send_fd;
    int r = rcall(f, &c, err);
    if (r < 0)
        return r;
    *ret_fd = c.fd;
    if (ret_size)
        *ret_size = c.a.v;
    return 0;
}

int
fileops_vopen_dir(struct fileops *f, const char *path, int *ret_fd, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_open_dir(f->view_fd, path, ret_fd, err);
    return open_fd(f, FOP_V_OPEN_DIR, path, -1, ret_fd, NULL, err);
}

int
fileops_vopen_below(struct fileops *f, int dirfd, const char *rel, int *ret_fd, struct err *err)
{
    if (!f->remote)
        return vfs_open_below(dirfd, rel, ret_fd, err);
    return open_fd(f, FOP_V_OPEN_BELOW, rel, dirfd, ret_fd, NULL, err);
}

int
fileops_vwatch_add(struct fileops *f, int ifd, int dirfd, uint32_t mask, int *ret_wd,
                   struct err *err)
{
    if (!mask || (mask & ~(uint32_t)FOP_WATCH_MASK))
        return err_set(err, EINVAL, "an inotify mask with other bits than events");
    if (!f->remote) {
        char proc[64];
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
        int wd = inotify_add_watch(ifd, proc, mask);
        if (wd < 0)
            return -errno;
        *ret_wd = wd;
        return 0;
    }
    struct call c;
    call_init(&c, FOP_V_WATCH_ADD, NULL);
    c.rq.u = mask;
    c.send_fd = ifd;
    c.send_fd2 = dirfd;
    int r = rcall(f, &c, err);
    if (r == 0)
        *ret_wd = (int)c.a.u;
    return r;
}

int
fileops_vmkdir(struct fileops *f, const char *path, bool *ret_created, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_mkdir(f->view_fd, &f->ids, path, f->as_root, ret_created, err);
    struct call c;
    call_init(&c, FOP_V_MKDIR, path);
    r = rcall(f, &c, err);
    if (r == 0)
        *ret_created = c.a.u == 1;
    return r;
}

int
fileops_vrename(struct fileops *f, const char *src, const char *dst, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_rename(f->view_fd, &f->ids, src, dst, f->as_root, err);
    return simple(f, FOP_V_RENAME, src, dst, 0, err);
}

int
fileops_vremove(struct fileops *f, const char *path, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_remove(f->view_fd, path, err);
    return simple(f, FOP_V_REMOVE, path, NULL, 0, err);
}

int
fileops_vopen_read(struct fileops *f, const char *path, int *ret_fd, uint64_t *ret_size,
                   struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_open_read(f->view_fd, &f->ids, path, f->as_root, ret_fd, ret_size, err);
    return open_fd(f, FOP_V_OPEN_READ, path, -1, ret_fd, ret_size, err);
}

int
fileops_vset_meta(struct fileops *f, int fd, const struct vfs_meta *m, struct err *err)
{
    if (!f->remote)
        return vfs_set_meta(fd, m, err);
    struct call c;
    call_init(&c, FOP_V_SET_META, NULL);
    c.send_fd = fd;
    if (m)
        c.rq.meta = *m;
    return rcall(f, &c, err);
}

/* --- snapshots --- */

/* dirfd, abxd's own directory, as the helper should see it: in ns mode an
 * idmapped mount, so that its files stored with the sandbox's own ids
 * (0..65535) are the sandbox's and nothing else. */
static int
helper_view_of(struct fileops *f, int dirfd, struct err *err)
{
    if (!f->ns) {
        int d = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        return d < 0 ? err_setx(err, errno, "cannot duplicate a directory") : d;
    }
    if (f->start) {
        /* No user namespace here: whoever starts the helpers maps it. */
        int fd = -EBADF;
        if (atomic_load(&f->shut))
            return err_set(err, ESRCH, "%s is gone", f->label);
        if (!f->idmap)
            return err_set(err, EOPNOTSUPP, "%s's files cannot be mapped for its helper here",
                           f->label);
        int r = f->idmap(f->start_ud, dirfd, &fd, err);
        return r < 0 ? r : fd;
    }
    pthread_mutex_lock(&f->lock);
    int u = f->userns_fd >= 0 ? fcntl(f->userns_fd, F_DUPFD_CLOEXEC, 3) : -ESRCH;
    pthread_mutex_unlock(&f->lock);
    if (u < 0)
        return u == -ESRCH ? err_set(err, ESRCH, "%s is gone", f->label)
                           : err_setx(err, errno, "cannot duplicate a namespace");
    int r = jail_idmap_tree(u, dirfd, false, err);
    safe_close(u);
    return r;
}

int
fileops_vcopy_in(struct fileops *f, int srcdir, const char *src, const char *dst, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return vfs_copy_in(f->view_fd, &f->ids, srcdir, src, dst, f->as_root, err);
    _cleanup_close_ int d = helper_view_of(f, srcdir, err);
    if (d < 0)
        return d;
    struct call c;
    call_init(&c, FOP_V_COPY_IN, src);
    c.rq.b = dst;
    c.send_fd = d;
    c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    return rcall(f, &c, err);
}

int
fileops_snapshot_out(struct fileops *f, int dstfd, uint64_t max_bytes, struct snapshot_stats *ret,
                     struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return snapshot_copy_out(f->view_fd, &f->ids, dstfd, max_bytes, ret, err);
    _cleanup_close_ int d = helper_view_of(f, dstfd, err);
    if (d < 0)
        return d;
    struct call c;
    call_init(&c, FOP_S_COPY_OUT, NULL);
    c.send_fd = d;
    c.rq.max = max_bytes;
    c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    r = rcall(f, &c, err);
    if (r == 0)
        *ret = c.a.snap;
    return r;
}

int
fileops_snapshot_in(struct fileops *f, int srcfd, struct err *err)
{
    int r = need_view(f, err);
    if (r < 0)
        return r;
    if (!f->remote)
        return snapshot_copy_in(srcfd, f->view_fd, &f->ids, err);
    _cleanup_close_ int d = helper_view_of(f, srcfd, err);
    if (d < 0)
        return d;
    struct call c;
    call_init(&c, FOP_S_COPY_IN, NULL);
    c.send_fd = d;
    c.timeout_ms = FILEOPS_LONG_TIMEOUT_MS;
    return rcall(f, &c, err);
}
