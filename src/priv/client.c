/*
 * client.c - the unprivileged side's calls to the parent: one synchronous
 * request/reply under a deadline, events copied out of their packet and
 * delivered from the loop.
 */
#include "priv/client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
};

struct priv_client {
    struct loop *loop;
    int fd;
    struct loop_io *io;
    bool dead, deferred;
    uint32_t seq;
    struct priv_host_facts host;
    struct priv_jail *jails;
    struct event *evq[PRIV_EVQ_MAX];
    unsigned evh, evn;
    char tx[PRIV_MSG_MAX];
    char rx[PRIV_MSG_MAX];
    struct priv_msg m; /* the last reply decoded (pointers into rx) */
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

/* The connection is lost: every jail hears its end, once. */
static void
die(struct priv_client *c)
{
    if (c->dead)
        return;
    c->dead = true;
    loop_io_free(c->io);
    c->io = NULL;
    c->fd = safe_close(c->fd);
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
}

static void
deliver(struct priv_client *c, const struct event *e)
{
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
    (void)snprintf(e->id, sizeof(e->id), "%s", m->id);
    e->token = m->u64;
    e->pid = m->pid;
    e->status = m->status;
    e->errnum = m->errnum;
    (void)snprintf(e->text, sizeof(e->text), "%s", m->text ? m->text : "");
    e->ready = m->ready;
    if (m->type == PRIV_EV_READY && !m->errnum) {
        (void)snprintf(e->home_user, sizeof(e->home_user), "%s", m->ready.home_user);
        (void)snprintf(e->home_root, sizeof(e->home_root), "%s", m->ready.home_root);
    }
    e->ready.home_user = e->ready.home_root = NULL;
}

static void
drain_queue(void *ud)
{
    struct priv_client *c = ud;
    c->deferred = false;
    while (c->evn) {
        struct event *e = c->evq[c->evh];
        c->evh = (c->evh + 1) % PRIV_EVQ_MAX;
        c->evn--;
        if (!c->dead)
            deliver(c, e);
        free(e);
    }
}

/* Keeps an event that came while a call waited. */
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
    if (!c->deferred && loop_defer(c->loop, drain_queue, c) == 0)
        c->deferred = true;
    return 0;
}

/* Receives and decodes one packet into c->m; fds in fds[0..PRIV_FDS_MAX). */
static int
recv_one(struct priv_client *c, int *fds, int flags)
{
    unsigned nfds;
    ssize_t n = fdpass_recv(c->fd, c->rx, sizeof(c->rx), flags, fds, PRIV_FDS_MAX, &nfds);
    if (n == -EAGAIN)
        return n;
    if (n <= 0)
        return n == 0 ? -ECONNRESET : (int)n;
    if (priv_decode_answer(c->rx, (size_t)n, nfds, &c->m) < 0) {
        fdpass_close(fds, nfds < PRIV_FDS_MAX ? nfds : PRIV_FDS_MAX);
        return -EBADMSG;
    }
    return 0;
}

static void
on_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct priv_client *c = ud;
    int fds[PRIV_FDS_MAX];
    (void)io;
    (void)revents;

    for (unsigned k = 0; k < 64 && !c->dead; k++) {
        int r = recv_one(c, fds, MSG_DONTWAIT);
        if (r == -EAGAIN)
            return;
        if (r < 0 || !priv_is_event((int)c->m.type)) {
            if (r == 0)
                fdpass_close(fds, priv_type_fds(c->m.type));
            die(c); /* a reply nobody asked for, or worse */
            return;
        }
        if (c->evn) {
            /* keep the order: behind those a call held back */
            if (queue_event(c, &c->m) < 0)
                die(c);
            continue;
        }
        struct event e;
        copy_event(&e, &c->m);
        deliver(c, &e);
    }
}

/* Sends m (its seq set here) with fds, waits for its reply (c->m) and the
 * reply's descriptors (ret_fds, exactly priv_type_fds(want)). */
static int
call(struct priv_client *c, struct priv_msg *m, const int *fds, unsigned nfds, int *ret_fds,
     struct err *err)
{
    enum priv_type want = priv_reply_type(m->type);
    int got[PRIV_FDS_MAX];

    if (c->dead)
        return err_set(err, ENOTCONN, "the connection to the parent is lost");
    c->seq = c->seq == UINT32_MAX ? 1 : c->seq + 1;
    m->seq = c->seq;
    long n = priv_encode(c->tx, sizeof(c->tx), m);
    if (n < 0)
        return err_set(err, n == -EMSGSIZE ? E2BIG : EINVAL, "cannot send %s to the parent: %s",
                       priv_type_name(m->type),
                       n == -EMSGSIZE ? "too large" : "a field is out of range");
    uint64_t deadline = now_msec() + PRIV_CALL_TIMEOUT_MS;
    int r;
    for (;;) {
        r = fdpass_send(c->fd, c->tx, (size_t)n, fds, nfds, MSG_DONTWAIT);
        if (r != -EAGAIN)
            break;
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        uint64_t now = now_msec();
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
            r = -ETIMEDOUT;
            break;
        }
    }
    for (; r == 0;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        uint64_t now = now_msec();
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
            r = -ETIMEDOUT;
            break;
        }
        r = recv_one(c, got, MSG_DONTWAIT);
        if (r == -EAGAIN || r == -EINTR) {
            r = 0;
            continue;
        }
        if (r < 0)
            break;
        if (priv_is_event((int)c->m.type)) {
            r = queue_event(c, &c->m);
            continue;
        }
        if (c->m.seq != m->seq || (c->m.type != want && c->m.type != PRIV_R_ERR)) {
            fdpass_close(got, priv_type_fds(c->m.type));
            r = -EBADMSG;
            break;
        }
        if (c->m.type == PRIV_R_ERR)
            return err_set(err, c->m.errnum, "%s", c->m.text);
        for (unsigned i = 0; i < priv_type_fds(want); i++)
            ret_fds[i] = got[i];
        return 0;
    }
    die(c);
    return err_set(err, r == -ETIMEDOUT ? ETIMEDOUT : ECONNRESET, "the parent %s a %s request",
                   r == -ETIMEDOUT ? "did not answer" : "failed", priv_type_name(m->type));
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
    if ((r = fd_set_nonblock(sock, true)) < 0 ||
        (r = loop_io_add(loop, sock, EPOLLIN, on_io, c, &c->io)) < 0) {
        safe_close(sock);
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
    safe_close(c->fd);
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
    /* a drain_queue still deferred finds nothing: free after the loop's turn */
    if (!c->deferred || loop_defer(c->loop, free, c) < 0)
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
    return call(j->c, &m, sp->fds, 3, NULL, err);
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
    struct priv_msg m = {.type = PRIV_OPEN_HELPER, .flag = as_root};
    int fds[2];
    int r = fd_call(j, &m, NULL, 0, fds, err);
    if (r == 0) {
        *ret_sock = fds[0];
        *ret_pidfd = fds[1];
    }
    return r;
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
    struct priv_msg m = {.type = PRIV_IDMAP};
    return fd_call(j, &m, &dirfd, 1, ret_fd, err);
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
