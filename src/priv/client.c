/*
 * client.c - the unprivileged side's calls to the parent: one synchronous
 * request/reply under a deadline (a spawn: the send alone), events copied
 * out of their packet and delivered from the loop.
 *
 * The socket is shared by the loop thread and workers under c->wire (see
 * client.h for why that order is safe); what the loop alone touches (the
 * jails, their callbacks, c->tx/c->rx/c->m) has no lock. A worker that
 * reads events queues them and wakes the loop through c->efd; one that
 * finds the connection broken marks it and wakes the loop, which ends it.
 */
#include "priv/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"
#include "util/fdpass.h"
#include "util/timeutil.h"

struct priv_jail {
    struct priv_client *c;
    struct priv_jail *next;
    char id[PRIV_ID_MAX + 1];
    const struct priv_jail_callbacks *cb;
    void *ud;
    bool ready, gone, failed, killed, freed;
    struct jail_timings timings;
    uint32_t user_uid, user_gid, root_uid;
    pid_t init_pid;
    char home_user[PRIV_PATH_MAX + 1], home_root[PRIV_PATH_MAX + 1];
};

/* An event, copied out of its packet. */
struct event {
    enum priv_type type;
    char id[PRIV_ID_MAX + 1];
    uint64_t token;
    int32_t pid, status;
    int errnum;
    char text[PRIV_TEXT_MAX + 1];
    struct priv_ready ready;
    char home_user[PRIV_PATH_MAX + 1], home_root[PRIV_PATH_MAX + 1];
    char layer[PRIV_NAME_MAX + 1]; /* EV_LAYER */
};

/* A LAYER_INSTALL waiting for its EV_LAYER. */
struct layer_op {
    char layer[PRIV_NAME_MAX + 1]; /* "" = a free slot */
    priv_layer_fn fn;
    void *ud;
};

struct priv_client {
    struct loop *loop;
    pthread_mutex_t wire; /* fd, seq, broken, the event queue */
    int fd;
    struct loop_io *io;
    int efd; /* eventfd: a worker queued events or broke the connection */
    struct loop_io *eio;
    bool dead;   /* the loop ended the connection */
    bool broken; /* a worker saw it fail; the loop ends it */
    uint32_t seq;
    struct priv_host_facts host;
    struct priv_jail *jails;
    struct layer_op layer_ops[PRIV_LAYER_OPS_MAX];
    struct event *evq[PRIV_EVQ_MAX];
    unsigned evh, evn;
    char tx[PRIV_MSG_MAX];
    char rx[PRIV_MSG_MAX];
    size_t rx_len;
    struct priv_msg m; /* the last reply decoded (pointers into rx); the loop's */
};

/* A call's buffers: the loop's own (c->tx, c->rx, c->m) or a worker's. */
struct bufs {
    char *tx, *rx;
    size_t *rx_len;
    struct priv_msg *reply;
};

struct worker_bufs {
    char tx[PRIV_MSG_MAX];
    char rx[PRIV_MSG_MAX];
    size_t rx_len;
    struct priv_msg reply;
};

static struct priv_jail *
find(struct priv_client *c, const char *id)
{
    for (struct priv_jail *j = c->jails; j; j = j->next)
        if (!strcmp(j->id, id) && !j->gone)
            return j;
    return NULL;
}

static void
unlink_jail(struct priv_jail *j)
{
    for (struct priv_jail **p = &j->c->jails; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            return;
        }
}

static void layer_end(struct priv_client *c, const char *layer, int r, const char *text);

/* The connection is lost: every jail hears its end, once. */
static void
die(struct priv_client *c)
{
    if (c->dead)
        return;
    loop_io_free(c->io);
    c->io = NULL;
    /* A worker in a call holds the wire: wait for it (its own deadline
     * bounds that), so no thread polls a closed or reused descriptor. */
    pthread_mutex_lock(&c->wire);
    c->dead = true;
    c->fd = safe_close(c->fd);
    pthread_mutex_unlock(&c->wire);
    struct priv_jail *j = c->jails;
    while (j) {
        struct priv_jail *next = j->next;
        bool was_ready = j->ready;
        j->gone = true;
        if (j->freed) {
            unlink_jail(j);
            free(j);
        } else if (!was_ready && !j->failed && j->cb && j->cb->ready) {
            struct err err = {0};
            j->failed = true;
            (void)err_set(&err, ECONNRESET, "lost the parent of sandbox '%s'", j->id);
            j->cb->ready(j, -ECONNRESET, &err, j->ud);
        } else if (was_ready && j->cb && j->cb->gone) {
            j->cb->gone(j, j->ud);
        }
        j = next;
    }
    layer_end(c, NULL, -ECONNRESET, "lost the parent while it installed a layer");
}

/* Ends the LAYER_INSTALL of layer (NULL: every one) with r. */
static void
layer_end(struct priv_client *c, const char *layer, int r, const char *text)
{
    for (unsigned i = 0; i < PRIV_LAYER_OPS_MAX; i++) {
        struct layer_op op = c->layer_ops[i];
        if (!op.layer[0] || (layer && strcmp(op.layer, layer) != 0))
            continue;
        struct err err = {0};
        c->layer_ops[i].layer[0] = '\0'; /* free before the call, which may install again */
        if (r < 0)
            (void)err_set(&err, -r, "%s", text && text[0] ? text : strerror(-r));
        op.fn(r, r < 0 ? &err : NULL, op.ud);
        if (layer)
            return; /* one install per name; fn may have started the next */
    }
}

static void
deliver(struct priv_client *c, const struct event *e)
{
    if (e->type == PRIV_EV_LAYER) {
        layer_end(c, e->layer, e->errnum ? -e->errnum : 0, e->text);
        return;
    }
    struct priv_jail *j = find(c, e->id);
    if (!j)
        return; /* a jail freed meanwhile */
    switch (e->type) {
    case PRIV_EV_READY:
        if (j->ready || j->failed)
            return;
        if (e->errnum) {
            struct err err = {0};
            (void)err_set(&err, e->errnum, "%s", e->text[0] ? e->text : strerror(e->errnum));
            j->failed = true;
            if (!j->freed && j->cb && j->cb->ready)
                j->cb->ready(j, -e->errnum, &err, j->ud);
            return;
        }
        j->ready = true;
        j->timings = e->ready.timings;
        j->user_uid = e->ready.user_uid;
        j->user_gid = e->ready.user_gid;
        j->root_uid = e->ready.root_uid;
        j->init_pid = e->ready.init_pid;
        memcpy(j->home_user, e->home_user, sizeof(j->home_user));
        memcpy(j->home_root, e->home_root, sizeof(j->home_root));
        if (!j->freed && j->cb && j->cb->ready)
            j->cb->ready(j, 0, NULL, j->ud);
        return;
    case PRIV_EV_SPAWNED:
        if (!j->freed && j->cb && j->cb->spawned)
            j->cb->spawned(j, e->token, e->pid, e->errnum ? -e->errnum : 0, e->text, j->ud);
        return;
    case PRIV_EV_EXITED:
        if (!j->freed && j->cb && j->cb->exited)
            j->cb->exited(j, e->pid, e->status, j->ud);
        return;
    case PRIV_EV_GONE: {
        bool tell = j->ready && !j->freed;
        j->gone = true;
        j->ready = false;
        if (j->freed) {
            unlink_jail(j);
            free(j);
        } else if (tell && j->cb && j->cb->gone) {
            j->cb->gone(j, j->ud);
        }
        return;
    }
    default:
        return;
    }
}

static void
copy_event(struct event *e, const struct priv_msg *m)
{
    memset(e, 0, sizeof(*e));
    e->type = m->type;
    (void)snprintf(e->id, sizeof(e->id), "%s", m->id ? m->id : "");
    e->token = m->u64;
    e->pid = m->pid;
    e->status = m->status;
    e->errnum = m->errnum;
    (void)snprintf(e->text, sizeof(e->text), "%s", m->text ? m->text : "");
    e->ready = m->ready;
    if (m->layer)
        (void)snprintf(e->layer, sizeof(e->layer), "%s", m->layer);
    if (m->type == PRIV_EV_READY && !m->errnum) {
        (void)snprintf(e->home_user, sizeof(e->home_user), "%s", m->ready.home_user);
        (void)snprintf(e->home_root, sizeof(e->home_root), "%s", m->ready.home_root);
    }
    e->ready.home_user = e->ready.home_root = NULL;
}

/* On the loop: delivers what calls queued, in order, without the wire
 * held (a callback may call again). */
static void
drain_queue(struct priv_client *c)
{
    for (;;) {
        pthread_mutex_lock(&c->wire);
        struct event *e = NULL;
        if (c->evn) {
            e = c->evq[c->evh];
            c->evh = (c->evh + 1) % PRIV_EVQ_MAX;
            c->evn--;
        }
        pthread_mutex_unlock(&c->wire);
        if (!e)
            return;
        if (!c->dead)
            deliver(c, e);
        free(e);
    }
}

static void
wake(struct priv_client *c)
{
    uint64_t one = 1;
    (void)!write(c->efd, &one, sizeof(one)); /* a full counter is awake already */
}

/* Keeps an event that came while a call waited; the wire is held. */
static int
queue_event(struct priv_client *c, const struct priv_msg *m)
{
    struct event *e = malloc(sizeof(*e));
    if (!e || c->evn == PRIV_EVQ_MAX) {
        free(e);
        return -ENOBUFS;
    }
    copy_event(e, m);
    c->evq[(c->evh + c->evn) % PRIV_EVQ_MAX] = e;
    c->evn++;
    wake(c);
    return 0;
}

/* Receives and decodes one packet into b; fds in fds[0..PRIV_FDS_MAX).
 * The wire is held. */
static int
recv_one(struct priv_client *c, const struct bufs *b, int *fds, int flags)
{
    unsigned nfds;
    ssize_t n = fdpass_recv(c->fd, b->rx, PRIV_MSG_MAX, flags, fds, PRIV_FDS_MAX, &nfds);
    if (n == -EAGAIN)
        return (int)n;
    if (n <= 0)
        return n == 0 ? -ECONNRESET : (int)n;
    if (priv_decode_answer(b->rx, (size_t)n, nfds, b->reply) < 0) {
        fdpass_close(fds, nfds < PRIV_FDS_MAX ? nfds : PRIV_FDS_MAX);
        return -EBADMSG;
    }
    *b->rx_len = (size_t)n;
    return 0;
}

static void
on_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct priv_client *c = ud;
    const struct bufs b = {c->tx, c->rx, &c->rx_len, &c->m};
    int fds[PRIV_FDS_MAX];
    (void)io;
    (void)revents;

    for (unsigned k = 0; k < 64 && !c->dead; k++) {
        pthread_mutex_lock(&c->wire);
        int r = c->broken ? -ECONNRESET : recv_one(c, &b, fds, MSG_DONTWAIT);
        if (r == -EAGAIN) {
            pthread_mutex_unlock(&c->wire);
            return;
        }
        if (r < 0 || !priv_is_event((int)c->m.type)) {
            pthread_mutex_unlock(&c->wire);
            if (r == 0)
                fdpass_close(fds, priv_type_fds(c->m.type));
            die(c); /* a reply nobody asked for, or worse */
            return;
        }
        if (c->evn) {
            /* keep the order: behind those a call held back */
            r = queue_event(c, &c->m);
            pthread_mutex_unlock(&c->wire);
            if (r < 0)
                die(c);
            continue;
        }
        struct event e;
        copy_event(&e, &c->m);
        pthread_mutex_unlock(&c->wire);
        deliver(c, &e);
    }
}

static void
on_wake(struct loop_io *io, uint32_t revents, void *ud)
{
    struct priv_client *c = ud;
    uint64_t n;
    (void)io;
    (void)revents;
    (void)!read(c->efd, &n, sizeof(n));
    pthread_mutex_lock(&c->wire);
    bool broken = c->broken;
    pthread_mutex_unlock(&c->wire);
    drain_queue(c); /* what came before the break, in order */
    if (broken)
        die(c);
}

/* How a call ended: 0, its R_ERR (-errnum, the connection is fine), or
 * the connection failed (broken set). */
enum { CALL_OK, CALL_REFUSED, CALL_BROKEN };

/* Sends m (its seq set here) with fds, waits for its reply (b->reply)
 * and the reply's descriptors (ret_fds, exactly priv_type_fds(want)).
 * Takes and releases the wire; the whole exchange is under it, so the
 * first reply read is this request's (client.h). A request that gets no
 * reply (SPAWN) returns once it is sent. */
static int
exchange(struct priv_client *c, struct priv_msg *m, const int *fds, unsigned nfds, int *ret_fds,
         const struct bufs *b, int *ret_how, struct err *err)
{
    enum priv_type want = priv_reply_type(m->type);
    uint64_t deadline = now_msec() + PRIV_CALL_TIMEOUT_MS;
    struct timespec ts;
    int got[PRIV_FDS_MAX];
    int r;

    *ret_how = CALL_REFUSED;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += PRIV_CALL_TIMEOUT_MS / 1000;
    r = pthread_mutex_clocklock(&c->wire, CLOCK_MONOTONIC, &ts);
    if (r != 0)
        return err_set(err, r == ETIMEDOUT ? ETIMEDOUT : r, "the connection to the parent is busy");
    if (c->dead || c->broken) {
        pthread_mutex_unlock(&c->wire);
        return err_set(err, ENOTCONN, "the connection to the parent is lost");
    }
    c->seq = c->seq == UINT32_MAX ? 1 : c->seq + 1;
    m->seq = c->seq;
    long n = priv_encode(b->tx, PRIV_MSG_MAX, m);
    if (n < 0) {
        pthread_mutex_unlock(&c->wire);
        return err_set(err, n == -EMSGSIZE ? E2BIG : EINVAL, "cannot send %s to the parent: %s",
                       priv_type_name(m->type),
                       n == -EMSGSIZE ? "too large" : "a field is out of range");
    }
    for (;;) {
        r = fdpass_send(c->fd, b->tx, (size_t)n, fds, nfds, MSG_DONTWAIT);
        if (r != -EAGAIN)
            break;
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        uint64_t now = now_msec();
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
            r = -ETIMEDOUT;
            break;
        }
    }
    if (r == 0 && !want) {
        /* SPAWN: no reply comes (proto.h), its EV_SPAWNED is an event like
         * any other; the wire is free for the next caller at once. */
        pthread_mutex_unlock(&c->wire);
        *ret_how = CALL_OK;
        return 0;
    }
    for (; r == 0;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        uint64_t now = now_msec();
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
            r = -ETIMEDOUT;
            break;
        }
        r = recv_one(c, b, got, MSG_DONTWAIT);
        if (r == -EAGAIN || r == -EINTR) {
            r = 0;
            continue;
        }
        if (r < 0)
            break;
        if (priv_is_event((int)b->reply->type)) {
            r = queue_event(c, b->reply);
            continue;
        }
        if (b->reply->seq != m->seq || (b->reply->type != want && b->reply->type != PRIV_R_ERR)) {
            fdpass_close(got, priv_type_fds(b->reply->type));
            r = -EBADMSG;
            break;
        }
        pthread_mutex_unlock(&c->wire);
        if (b->reply->type == PRIV_R_ERR)
            return err_set(err, b->reply->errnum, "%s", b->reply->text);
        for (unsigned i = 0; i < priv_type_fds(want); i++)
            ret_fds[i] = got[i];
        *ret_how = CALL_OK;
        return 0;
    }
    /* The loop ends the connection; until then nobody uses it. */
    c->broken = true;
    (void)shutdown(c->fd, SHUT_RDWR);
    wake(c);
    pthread_mutex_unlock(&c->wire);
    *ret_how = CALL_BROKEN;
    return err_set(err, r == -ETIMEDOUT ? ETIMEDOUT : ECONNRESET, "the parent %s a %s request",
                   r == -ETIMEDOUT ? "did not answer" : "failed", priv_type_name(m->type));
}

/* A call from the loop thread: the reply is in c->m. A broken connection
 * ends here and now, as before. */
static int
call(struct priv_client *c, struct priv_msg *m, const int *fds, unsigned nfds, int *ret_fds,
     struct err *err)
{
    const struct bufs b = {c->tx, c->rx, &c->rx_len, &c->m};
    int how;
    int r = exchange(c, m, fds, nfds, ret_fds, &b, &how, err);
    if (how == CALL_BROKEN)
        die(c);
    return r;
}

/* A call from any thread, with buffers of its own; the loop ends a
 * broken connection when it wakes. */
static int
call_any(struct priv_client *c, struct priv_msg *m, const int *fds, unsigned nfds, int *ret_fds,
         struct worker_bufs *w, struct err *err)
{
    const struct bufs b = {w->tx, w->rx, &w->rx_len, &w->reply};
    int how;
    return exchange(c, m, fds, nfds, ret_fds, &b, &how, err);
}

/* --- the client --- */

int
priv_client_new(struct loop *loop, int sock, struct priv_client **ret, struct err *err)
{
    struct priv_client *c = calloc(1, sizeof(*c));
    int r;

    if (!c) {
        safe_close(sock);
        return -ENOMEM;
    }
    c->loop = loop;
    c->fd = sock;
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    (void)pthread_mutex_init(&c->wire, NULL);
    if (c->efd < 0) {
        r = -errno;
        safe_close(sock);
        pthread_mutex_destroy(&c->wire);
        free(c);
        return err_setx(err, -r, "cannot make the client's eventfd");
    }
    if ((r = fd_set_nonblock(sock, true)) < 0 ||
        (r = loop_io_add(loop, sock, EPOLLIN, on_io, c, &c->io)) < 0 ||
        (r = loop_io_add(loop, c->efd, EPOLLIN, on_wake, c, &c->eio)) < 0) {
        loop_io_free(c->io);
        safe_close(sock);
        safe_close(c->efd);
        pthread_mutex_destroy(&c->wire);
        free(c);
        return err_setx(err, -r, "cannot watch the parent's socket");
    }
    struct priv_msg m = {.type = PRIV_HELLO, .a = PRIV_VERSION};
    r = call(c, &m, NULL, 0, NULL, err);
    if (r < 0) {
        priv_client_free(c);
        return r;
    }
    c->host = (struct priv_host_facts){.mode = (enum jail_mode)c->m.hello.mode,
                                       .uid_slots = c->m.hello.uid_slots,
                                       .has_disk = c->m.hello.has_disk,
                                       .oom_protect = c->m.hello.oom_protect,
                                       .root_caps = c->m.hello.root_caps};
    (void)snprintf(c->host.missing, sizeof(c->host.missing), "%s", c->m.hello.missing);
    *ret = c;
    return 0;
}

struct priv_client *
priv_client_free(struct priv_client *c)
{
    if (!c)
        return NULL;
    loop_io_free(c->io);
    loop_io_free(c->eio); /* a wake-up still pending is not dispatched */
    safe_close(c->fd);
    safe_close(c->efd);
    while (c->jails) {
        struct priv_jail *j = c->jails;
        c->jails = j->next;
        free(j);
    }
    while (c->evn) {
        free(c->evq[c->evh]);
        c->evh = (c->evh + 1) % PRIV_EVQ_MAX;
        c->evn--;
    }
    pthread_mutex_destroy(&c->wire);
    free(c);
    return NULL;
}

const struct priv_host_facts *
priv_client_host(const struct priv_client *c)
{
    return &c->host;
}

bool
priv_client_connected(const struct priv_client *c)
{
    return !c->dead;
}

/* --- jails --- */

int
priv_jail_create(struct priv_client *c, const char *id, const struct jail_limits *limits,
                 const struct priv_fs *fs, const struct priv_jail_callbacks *cb, void *userdata,
                 struct priv_jail **ret, struct err *err)
{
    struct priv_msg m = {.type = PRIV_CREATE, .id = id, .limits = *limits};

    if (!priv_id_ok(id))
        return err_set(err, EINVAL, "'%s' is not a sandbox id", id);
    if (find(c, id))
        return err_set(err, EEXIST, "sandbox '%s' exists", id);
    if (fs) {
        if (fs->nlayers > JAIL_MAX_LAYERS)
            return err_set(err, E2BIG, "more than %d layers", JAIL_MAX_LAYERS);
        for (size_t i = 0; i < fs->nlayers; i++)
            m.layers[i] = fs->layers[i];
        m.nlayers = (uint32_t)fs->nlayers;
        m.upper = fs->upper;
        m.fs_disk_bytes = fs->disk_bytes;
    }
    struct priv_jail *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    int r = call(c, &m, NULL, 0, NULL, err);
    if (r < 0) {
        free(j);
        return r;
    }
    j->c = c;
    (void)snprintf(j->id, sizeof(j->id), "%s", id);
    j->cb = cb;
    j->ud = userdata;
    j->next = c->jails;
    c->jails = j;
    *ret = j;
    return 0;
}

void
priv_jail_set_callbacks(struct priv_jail *j, const struct priv_jail_callbacks *cb, void *userdata)
{
    j->cb = cb;
    j->ud = userdata;
}

static int
simple(struct priv_jail *j, struct priv_msg *m, struct err *err)
{
    if (j->gone || !j->ready)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    m->id = j->id;
    return call(j->c, m, NULL, 0, NULL, err);
}

/* argv/env past a body: in a sealed memfd, as SPAWN_LARGE's 4th fd. */
static int
spawn_large(struct priv_jail *j, struct priv_msg *m, const int *stdio, struct err *err)
{
    _cleanup_free_ char *block = malloc(PRIV_ARGS_BYTES_MAX);
    _cleanup_close_ int mfd = -EBADF;

    if (!block)
        return -ENOMEM;
    long n = priv_encode_args(block, PRIV_ARGS_BYTES_MAX, m);
    if (n < 0)
        return err_set(err, n == -EMSGSIZE ? E2BIG : EINVAL, "argv and env %s",
                       n == -EMSGSIZE ? "are larger than 256 KiB" : "are malformed");
    mfd = memfd_create("abx-spawn-args", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0)
        return err_setx(err, errno, "cannot make a memfd for a spawn's argv and env");
    for (long off = 0; off < n;) {
        ssize_t k = write(mfd, block + off, (size_t)(n - off));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return err_setx(err, k < 0 ? errno : EIO, "cannot fill the memfd of a spawn");
        off += k;
    }
    if (fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
        return err_setx(err, errno, "cannot seal the memfd of a spawn");
    struct priv_msg *lm = m;
    lm->type = PRIV_SPAWN_LARGE;
    memset(lm->argv, 0, sizeof(lm->argv));
    memset(lm->env, 0, sizeof(lm->env));
    int fds[4] = {stdio[0], stdio[1], stdio[2], mfd};
    return call(j->c, lm, fds, 4, NULL, err);
}

int
priv_jail_spawn(struct priv_jail *j, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    static struct priv_msg m; /* argv and env make it large: one loop, one call at a time */
    size_t n = 0;

    if (j->gone || !j->ready)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    memset(&m, 0, sizeof(m));
    m = (struct priv_msg){
            .type = PRIV_SPAWN, .id = j->id, .u64 = token, .flag = sp->root, .cwd = sp->cwd};
    for (; sp->argv[n]; n++) {
        if (n >= PRIV_ARGS_MAX)
            return err_set(err, E2BIG, "more than %d arguments", PRIV_ARGS_MAX);
        m.argv[n] = sp->argv[n];
    }
    for (size_t i = 0; sp->env && sp->env[i]; i++) {
        if (n + i >= PRIV_ARGS_MAX)
            return err_set(err, E2BIG, "more than %d arguments and variables", PRIV_ARGS_MAX);
        m.env[i] = sp->env[i];
    }
    /* c->tx is the loop's: a trial encode says whether it fits a body */
    m.seq = 1;
    if (priv_encode(j->c->tx, sizeof(j->c->tx), &m) != -EMSGSIZE)
        return call(j->c, &m, sp->fds, 3, NULL, err);
    return spawn_large(j, &m, sp->fds, err);
}

int
priv_jail_signal(struct priv_jail *j, pid_t pid, int sig, bool group)
{
    struct priv_msg m = {
            .type = PRIV_SIGNAL, .pid = (int32_t)pid, .a = (uint32_t)sig, .flag = group};
    return simple(j, &m, NULL);
}

int
priv_jail_set_limits(struct priv_jail *j, const struct jail_limits *l, struct err *err)
{
    struct priv_msg m = {.type = PRIV_SET_LIMITS, .limits = *l};
    return simple(j, &m, err);
}

int
priv_jail_freeze(struct priv_jail *j, bool frozen, struct err *err)
{
    struct priv_msg m = {.type = PRIV_FREEZE, .flag = frozen};
    return simple(j, &m, err);
}

int
priv_jail_stats(struct priv_jail *j, struct cgroup_stats *ret)
{
    struct priv_msg m = {.type = PRIV_STATS};
    int r = simple(j, &m, NULL);
    if (r == 0)
        *ret = j->c->m.stats;
    return r;
}

int
priv_jail_disk_usage(struct priv_jail *j, uint64_t *ret_bytes)
{
    struct priv_msg m = {.type = PRIV_STATS};
    int r = simple(j, &m, NULL);
    if (r < 0)
        return r;
    if (!j->c->m.disk_known)
        return -EOPNOTSUPP;
    *ret_bytes = j->c->m.disk_bytes;
    return 0;
}

void
priv_jail_kill(struct priv_jail *j)
{
    if (j->killed || j->gone || j->failed)
        return;
    struct priv_msg m = {.type = PRIV_KILL, .id = j->id};
    j->killed = true;
    (void)call(j->c, &m, NULL, 0, NULL, NULL);
}

void
priv_jail_free(struct priv_jail *j)
{
    if (!j)
        return;
    if (j->gone || j->c->dead) {
        unlink_jail(j);
        free(j);
        return;
    }
    /* Its EV_GONE frees it. */
    priv_jail_kill(j);
    j->freed = true;
    if (j->c->dead) {
        unlink_jail(j);
        free(j);
    }
}

const char *
priv_jail_id(const struct priv_jail *j)
{
    return j->id;
}

bool
priv_jail_is_ready(const struct priv_jail *j)
{
    return j->ready && !j->gone;
}

const struct jail_timings *
priv_jail_timings(const struct priv_jail *j)
{
    return &j->timings;
}

uid_t
priv_jail_user_uid(const struct priv_jail *j)
{
    return j->user_uid;
}

gid_t
priv_jail_user_gid(const struct priv_jail *j)
{
    return j->user_gid;
}

uid_t
priv_jail_root_uid(const struct priv_jail *j)
{
    return j->root_uid;
}

pid_t
priv_jail_init_pid(const struct priv_jail *j)
{
    return j->init_pid;
}

const char *
priv_jail_home(const struct priv_jail *j, bool root)
{
    return root ? j->home_root : j->home_user;
}

static int
fd_call(struct priv_jail *j, struct priv_msg *m, const int *fds, unsigned nfds, int *ret,
        struct err *err)
{
    if (j->gone || !j->ready)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    m->id = j->id;
    return call(j->c, m, fds, nfds, ret, err);
}

int
priv_jail_open_helper(struct priv_jail *j, bool as_root, int *ret_sock, int *ret_pidfd,
                      struct err *err)
{
    uint32_t number;
    if (j->gone || !j->ready)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    return priv_client_open_helper(j->c, j->id, as_root, ret_sock, ret_pidfd, &number, err);
}

int
priv_jail_open_pty(struct priv_jail *j, bool as_root, unsigned rows, unsigned cols, int *ret_master,
                   int *ret_tty, struct err *err)
{
    struct priv_msg m = {.type = PRIV_OPEN_PTY, .flag = as_root, .a = rows, .b = cols};
    int fds[2];
    int r = fd_call(j, &m, NULL, 0, fds, err);
    if (r == 0) {
        *ret_master = fds[0];
        *ret_tty = fds[1];
    }
    return r;
}

int
priv_jail_netns_socket(struct priv_jail *j, int family, int type, int *ret_fd, struct err *err)
{
    struct priv_msg m = {.type = PRIV_NETNS_SOCKET, .a = (uint32_t)family, .b = (uint32_t)type};
    return fd_call(j, &m, NULL, 0, ret_fd, err);
}

int
priv_jail_idmap(struct priv_jail *j, int dirfd, int *ret_fd, struct err *err)
{
    if (j->gone || !j->ready)
        return err_set(err, ESRCH, "sandbox '%s' is not running", j->id);
    return priv_client_idmap(j->c, j->id, dirfd, ret_fd, err);
}

int
priv_jail_set_record(struct priv_jail *j, const void *record, size_t len, struct err *err)
{
    struct priv_msg m = {
            .type = PRIV_SET_RECORD, .id = j->id, .record = record, .record_len = (uint32_t)len};
    if (j->gone || j->failed)
        return err_set(err, ESRCH, "sandbox '%s' is gone", j->id);
    if (len > PRIV_RECORD_MAX)
        return err_set(err, E2BIG, "a record is at most %d bytes", PRIV_RECORD_MAX);
    return call(j->c, &m, NULL, 0, NULL, err);
}

/* --- from any thread --- */

int
priv_client_open_helper(struct priv_client *c, const char *id, bool as_root, int *ret_sock,
                        int *ret_pidfd, uint32_t *ret_helper, struct err *err)
{
    struct priv_msg m = {.type = PRIV_OPEN_HELPER, .id = id, .flag = as_root};
    _cleanup_free_ struct worker_bufs *w = malloc(sizeof(*w));
    int fds[2];
    if (!w)
        return -ENOMEM;
    int r = call_any(c, &m, NULL, 0, fds, w, err);
    if (r < 0)
        return r;
    *ret_sock = fds[0];
    *ret_pidfd = fds[1];
    *ret_helper = w->reply.a;
    return 0;
}

int
priv_client_kill_helper(struct priv_client *c, const char *id, uint32_t helper, struct err *err)
{
    struct priv_msg m = {.type = PRIV_KILL_HELPER, .id = id, .a = helper};
    _cleanup_free_ struct worker_bufs *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    return call_any(c, &m, NULL, 0, NULL, w, err);
}

int
priv_client_idmap(struct priv_client *c, const char *id, int dirfd, int *ret_fd, struct err *err)
{
    struct priv_msg m = {.type = PRIV_IDMAP, .id = id};
    _cleanup_free_ struct worker_bufs *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    return call_any(c, &m, &dirfd, 1, ret_fd, w, err);
}

int
priv_client_tree_empty(struct priv_client *c, int dirfd, struct err *err)
{
    struct priv_msg m = {.type = PRIV_TREE_EMPTY};
    _cleanup_free_ struct worker_bufs *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    return call_any(c, &m, &dirfd, 1, NULL, w, err);
}

void
priv_fileops_init(struct priv_fileops *t, struct priv_client *c, const char *id)
{
    t->c = c;
    (void)snprintf(t->id, sizeof(t->id), "%s", id);
}

int
priv_fileops_start(void *ud, bool as_root, int *ret_sock, int *ret_pidfd, uint64_t *ret_token,
                   struct err *err)
{
    const struct priv_fileops *t = ud;
    uint32_t number = 0;
    int r = priv_client_open_helper(t->c, t->id, as_root, ret_sock, ret_pidfd, &number, err);
    if (r >= 0)
        *ret_token = number;
    return r;
}

void
priv_fileops_stop(void *ud, uint64_t token)
{
    const struct priv_fileops *t = ud;
    /* Gone already, or the sandbox is: nothing left to kill. */
    if (token && token <= UINT32_MAX)
        (void)priv_client_kill_helper(t->c, t->id, (uint32_t)token, NULL);
}

int
priv_fileops_idmap(void *ud, int dirfd, int *ret_fd, struct err *err)
{
    const struct priv_fileops *t = ud;
    return priv_client_idmap(t->c, t->id, dirfd, ret_fd, err);
}

/* --- re-adoption --- */

static void
take_facts(struct priv_jail *j, const struct priv_entry *e)
{
    j->ready = e->ready;
    if (!e->ready)
        return;
    j->timings = e->facts.timings;
    j->user_uid = e->facts.user_uid;
    j->user_gid = e->facts.user_gid;
    j->root_uid = e->facts.root_uid;
    j->init_pid = e->facts.init_pid;
    (void)snprintf(j->home_user, sizeof(j->home_user), "%s", e->facts.home_user);
    (void)snprintf(j->home_root, sizeof(j->home_root), "%s", e->facts.home_root);
}

/* A page of c->m copied out of c->rx, so fn may call into the client. */
struct page {
    char data[PRIV_MSG_MAX];
    struct priv_msg m;
};

int
priv_client_orphans(struct priv_client *c, priv_orphan_fn fn, void *ud, struct err *err)
{
    _cleanup_free_ struct page *pg = malloc(sizeof(*pg));
    uint32_t cursor = 0;
    int r;

    if (!pg)
        return -ENOMEM;
    /* Every page starts past the one before: at most one page per slot. */
    for (uint32_t pages = 0; pages <= c->host.uid_slots; pages++) {
        struct priv_msg m = {.type = PRIV_LIST, .a = cursor};
        r = call(c, &m, NULL, 0, NULL, err);
        if (r < 0)
            return r;
        memcpy(pg->data, c->rx, c->rx_len);
        if (priv_decode_answer(pg->data, c->rx_len, 0, &pg->m) < 0)
            return err_set(err, EBADMSG, "the parent's list does not decode again");
        uint32_t next = pg->m.a;
        for (uint32_t i = 0; i < pg->m.nlist; i++)
            if ((r = fn(&pg->m.list[i], ud)) < 0)
                return r;
        if (next == PRIV_LIST_END)
            return 0;
        if (next <= cursor && pages > 0)
            return err_set(err, EBADMSG, "the parent's list does not advance");
        cursor = next;
    }
    return err_set(err, EBADMSG, "the parent's list has more pages than slots");
}

int
priv_jail_adopt(struct priv_client *c, const char *id, const struct priv_jail_callbacks *cb,
                void *userdata, struct priv_jail **ret, struct err *err)
{
    struct priv_msg m = {.type = PRIV_ADOPT, .id = id};

    if (!priv_id_ok(id))
        return err_set(err, EINVAL, "'%s' is not a sandbox id", id);
    if (find(c, id))
        return err_set(err, EEXIST, "sandbox '%s' is this client's already", id);
    struct priv_jail *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    int r = call(c, &m, NULL, 0, NULL, err);
    if (r < 0) {
        free(j);
        return r;
    }
    if (c->m.nlist != 1 || strcmp(c->m.list[0].id, id) != 0) {
        free(j);
        die(c);
        return err_set(err, EBADMSG, "the parent adopted something else than '%s'", id);
    }
    j->c = c;
    (void)snprintf(j->id, sizeof(j->id), "%s", id);
    take_facts(j, &c->m.list[0]);
    j->cb = cb;
    j->ud = userdata;
    j->next = c->jails;
    c->jails = j;
    *ret = j;
    return 0;
}

/* --- areas --- */

int
priv_area_create(struct priv_client *c, const char *name, uint64_t limit_bytes, struct err *err)
{
    struct priv_msg m = {.type = PRIV_AREA_CREATE, .name = name, .u64 = limit_bytes};
    return call(c, &m, NULL, 0, NULL, err);
}

int
priv_area_usage(struct priv_client *c, const char *name, uint64_t *ret_bytes)
{
    struct priv_msg m = {.type = PRIV_AREA_USAGE, .name = name};
    int r = call(c, &m, NULL, 0, NULL, NULL);
    if (r == 0)
        *ret_bytes = c->m.u64;
    return r;
}

int
priv_area_destroy(struct priv_client *c, const char *name, struct err *err)
{
    struct priv_msg m = {.type = PRIV_AREA_DESTROY, .name = name};
    return call(c, &m, NULL, 0, NULL, err);
}

int
priv_layer_install(struct priv_client *c, const char *area, const char *layer, priv_layer_fn fn,
                   void *userdata, struct err *err)
{
    struct layer_op *op = NULL;
    for (unsigned i = 0; i < PRIV_LAYER_OPS_MAX; i++) {
        if (c->layer_ops[i].layer[0] && !strcmp(c->layer_ops[i].layer, layer))
            return err_set(err, EEXIST, "layer '%.64s' is being installed", layer);
        if (!op && !c->layer_ops[i].layer[0])
            op = &c->layer_ops[i];
    }
    if (!op)
        return err_set(err, EAGAIN, "%d layers are being installed", PRIV_LAYER_OPS_MAX);
    if (!priv_name_ok(layer))
        return err_set(err, EINVAL, "'%.64s' is no layer name", layer);
    struct priv_msg m = {.type = PRIV_LAYER_INSTALL, .name = area, .layer = layer};
    int r = call(c, &m, NULL, 0, NULL, err);
    if (r < 0)
        return r;
    /* Its EV_LAYER comes after the R_OK, so never before this. */
    (void)snprintf(op->layer, sizeof(op->layer), "%s", layer);
    op->fn = fn;
    op->ud = userdata;
    return 0;
}
