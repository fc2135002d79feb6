/*
 * parent.c - the privileged parent's server: connections, the sandboxes
 * they created, one handler per verb.
 *
 * A request is handled to the end before the next is read: every jail.h
 * call it makes returns at once, so a reply is always the next answer
 * with that seq, and "in flight" is one request per connection. What is
 * asynchronous (a create, a spawn, an exit, a kill) comes back as events;
 * a SPAWN gets no reply at all, only its EV_SPAWNED (do_spawn()), and a
 * SET_RECORD none either (do_set_record()), so the peer sends them
 * without waiting.
 * Answers go out at once unless the peer's socket is full; then they
 * queue, up to PRIV_SENDQ_MAX, and past that the connection ends rather
 * than grow. Received descriptors are closed on every path.
 */
#include "priv/parent.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "jail/proto.h"
#include "priv/proto.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/fdpass.h"
#include "util/parse.h"
#include "util/timeutil.h"

_Static_assert(PRIV_ARGS_BYTES_MAX == PROTO_MAX_MSG, "SPAWN_LARGE's block is bounded as init's");
_Static_assert(PRIV_HDR_SIZE + 8 + 4 + PRIV_ID_MAX + 1 + 4 + 52 + 2 * (4 + PRIV_PATH_MAX + 1) + 4 +
                               PRIV_RECORD_MAX <=
                       PRIV_MSG_MAX,
               "one orphan with the largest record fits an R_LIST page");

struct qmsg {
    struct qmsg *next;
    size_t len;
    int fds[PRIV_FDS_MAX];
    unsigned nfds;
    char data[];
};

struct conn {
    struct priv_parent *p;
    int fd;
    struct loop_io *io;
    bool hello, dead;
    struct qmsg *head, *tail;
    unsigned qn;
};

struct helper {
    struct sandbox *sb;
    int pidfd;
    uint32_t number; /* R_HELPER's, never 0 while it runs */
    struct loop_io *io;
};

enum sb_state { SB_CREATING, SB_READY, SB_DYING };

struct sandbox {
    struct priv_parent *p;
    struct conn *owner;    /* NULL once its connection ended: an orphan */
    uint64_t orphan_until; /* monotonic ms its grace ends; 0 = owned, or kept forever */
    char id[PRIV_ID_MAX + 1];
    struct jail *j;
    enum sb_state state;
    int view_fd;
    int upper_area; /* index in p->areas, -1 */
    struct helper helpers[PRIV_HELPERS_MAX];
    void *record; /* SET_RECORD's bytes, NULL = none */
    uint32_t record_len;
};

struct area {
    struct conn *owner;
    bool used;
    bool installing; /* its writable layer is becoming a layer (LAYER_INSTALL) */
    bool has_first;  /* a sandbox wrote into it: first is its root's host uid */
    uid_t first;
    char name[PRIV_NAME_MAX + 1];
    char path[PATH_MAX];
};

/* A LAYER_INSTALL on the layer worker; its EV_LAYER goes to conn if that
 * is still there when it is done (conn_end() clears it). */
struct layer_job {
    struct priv_parent *p; /* NULL once the parent is gone */
    struct conn *conn;
    int area; /* index in p->areas */
    char layer[PRIV_NAME_MAX + 1];
};

struct priv_parent {
    struct priv_parent_config cfg;
    struct layer_job *jobs[PRIV_LAYER_JOBS_MAX];
    struct conn *conns[PRIV_CONNS_MAX];
    struct sandbox **sbs; /* cfg.max_sandboxes slots */
    unsigned nsbs;
    struct area areas[PRIV_AREAS_MAX];
    struct loop_timer *grace; /* armed for the earliest orphan_until */
    bool dying;               /* in priv_parent_free() */
    uint32_t helper_seq;      /* the last helper number issued */
    char tx[PRIV_MSG_MAX];
    char rx[PRIV_MSG_MAX];
    struct priv_msg m;   /* the request being handled (large: argv/env) */
    struct priv_msg out; /* an R_LIST being built */
};

static const struct jail_callbacks jail_cb;

/* --- sending --- */

static void conn_end(struct conn *c);

static void
queue_free(struct conn *c)
{
    while (c->head) {
        struct qmsg *q = c->head;
        c->head = q->next;
        fdpass_close(q->fds, q->nfds);
        free(q);
    }
    c->tail = NULL;
    c->qn = 0;
}

/* Sends what is queued; false when the connection ended. */
static bool
flush(struct conn *c)
{
    while (c->head) {
        struct qmsg *q = c->head;
        int r = fdpass_send(c->fd, q->data, q->len, q->fds, q->nfds, MSG_DONTWAIT);
        if (r == -EAGAIN)
            return loop_io_set_events(c->io, EPOLLIN | EPOLLOUT) == 0 || (conn_end(c), false);
        if (r < 0) {
            conn_end(c);
            return false;
        }
        c->head = q->next;
        if (!c->head)
            c->tail = NULL;
        c->qn--;
        fdpass_close(q->fds, q->nfds);
        free(q);
    }
    (void)loop_io_set_events(c->io, EPOLLIN);
    return true;
}

/* Encodes m and sends it with fds (taken, closed once sent). */
static void
send_msg(struct conn *c, const struct priv_msg *m, int *fds, unsigned nfds)
{
    if (!c || c->dead) {
        fdpass_close(fds, nfds);
        return;
    }
    long n = priv_encode(c->p->tx, sizeof(c->p->tx), m);
    if (n < 0 || c->qn >= PRIV_SENDQ_MAX) {
        /* Our own answer does not encode (a bug), or the peer is not reading. */
        fdpass_close(fds, nfds);
        conn_end(c);
        return;
    }
    struct qmsg *q = malloc(sizeof(*q) + (size_t)n);
    if (!q) {
        fdpass_close(fds, nfds);
        conn_end(c);
        return;
    }
    q->next = NULL;
    q->len = (size_t)n;
    q->nfds = nfds;
    for (unsigned i = 0; i < nfds; i++)
        q->fds[i] = fds[i];
    memcpy(q->data, c->p->tx, (size_t)n);
    if (c->tail)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    c->qn++;
    if (c->qn == 1)
        (void)flush(c);
}

static void reply_err(struct conn *c, uint32_t seq, int r, const struct err *err, const char *fmt,
                      ...) _printf_(5, 6);

/* r (-errno) as the wire's positive errno; EIO when out of its range. */
static int
wire_errno(int r)
{
    int e = r < 0 ? -r : r;
    return e <= 0 || e > PRIV_ERRNO_MAX ? EIO : e;
}

static void
reply_err(struct conn *c, uint32_t seq, int r, const struct err *err, const char *fmt, ...)
{
    char text[PRIV_TEXT_MAX + 1] = "";
    int e = wire_errno(r);
    if (err_isset(err)) {
        (void)snprintf(text, sizeof(text), "%s", err->msg);
    } else {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
    }
    for (char *s = text; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
    struct priv_msg m = {.type = PRIV_R_ERR, .seq = seq, .errnum = e, .text = text};
    send_msg(c, &m, NULL, 0);
}

static void
reply(struct conn *c, uint32_t seq, enum priv_type t)
{
    struct priv_msg m = {.type = t, .seq = seq};
    send_msg(c, &m, NULL, 0);
}

/* A SPAWN refused before init was asked: its one answer, an EV_SPAWNED
 * with its token (proto.h), never a reply. step is a fixed word. */
static void
spawn_refuse(struct conn *c, const struct priv_msg *m, int r, const char *step)
{
    struct priv_msg e = {.type = PRIV_EV_SPAWNED,
                         .id = m->id,
                         .u64 = m->u64,
                         .errnum = wire_errno(r),
                         .text = step};
    send_msg(c, &e, NULL, 0);
}

/* --- sandboxes --- */

static struct sandbox *
sb_find(struct priv_parent *p, const char *id)
{
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++)
        if (p->sbs[i] && !strcmp(p->sbs[i]->id, id))
            return p->sbs[i];
    return NULL;
}

static void
helper_stop(struct helper *h)
{
    if (h->pidfd < 0)
        return;
    loop_io_free(h->io);
    h->io = NULL;
    (void)syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    while (waitid((idtype_t)P_PIDFD, (id_t)h->pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
        ;
    h->pidfd = safe_close(h->pidfd);
    h->number = 0;
}

/* Reaps the helper if it has ended (its exit event may still be on its
 * way); whether its slot is free now. */
static bool
helper_reap(struct helper *h)
{
    siginfo_t si = {0};
    if (h->pidfd < 0)
        return true;
    if (waitid((idtype_t)P_PIDFD, (id_t)h->pidfd, &si, WEXITED | WNOHANG | __WALL) < 0 ||
        si.si_pid == 0)
        return false;
    loop_io_free(h->io);
    h->io = NULL;
    h->pidfd = safe_close(h->pidfd);
    h->number = 0;
    return true;
}

static void
on_helper_exit(struct loop_io *io, uint32_t revents, void *ud)
{
    struct helper *h = ud;
    (void)io;
    (void)revents;
    helper_stop(h); /* reaps it; the kill finds it gone */
}

/* Frees the slot (and, later, the jail: not from inside its callback). */
static void
jail_free_later(void *ud)
{
    jail_free(ud);
}

static void
sb_drop(struct sandbox *sb)
{
    struct priv_parent *p = sb->p;
    for (unsigned i = 0; i < PRIV_HELPERS_MAX; i++)
        helper_stop(&sb->helpers[i]);
    safe_close(sb->view_fd);
    free(sb->record);
    if (sb->upper_area >= 0)
        p->areas[sb->upper_area].used = false;
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++)
        if (p->sbs[i] == sb) {
            p->sbs[i] = NULL;
            p->nsbs--;
        }
    if (sb->j && loop_defer(p->cfg.loop, jail_free_later, sb->j) < 0)
        jail_free(sb->j); /* out of memory: at once, and hope */
    free(sb);
}

static void
event_gone(struct sandbox *sb)
{
    struct priv_msg m = {.type = PRIV_EV_GONE, .id = sb->id};
    send_msg(sb->owner, &m, NULL, 0);
}

/* The sandbox's "/" as a descriptor, the way sandbox-local.c pins it: init
 * is our child, not reaped while the jail is ready, so /proc/<pid>/root is
 * the root it pivoted into; never the host's own. */
static int
pin_view(struct sandbox *sb)
{
    char path[64];
    struct stat a, b;
    pid_t pid = jail_init_pid(sb->j);
    if (jail_host_mode(sb->p->cfg.host) != JAIL_NS)
        return -EOPNOTSUPP;
    if (pid <= 0)
        return -ESRCH;
    (void)snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &a) < 0 || stat("/", &b) < 0 || (a.st_dev == b.st_dev && a.st_ino == b.st_ino)) {
        safe_close(fd);
        return -EXDEV;
    }
    return fd;
}

/* What EV_READY (and an R_LIST entry) tells of a ready jail. */
static void
ready_facts(struct jail *j, struct priv_ready *f)
{
    *f = (struct priv_ready){
            .timings = *jail_get_timings(j),
            .user_uid = (uint32_t)jail_user_uid(j),
            .user_gid = (uint32_t)jail_user_gid(j),
            .root_uid = (uint32_t)jail_root_uid(j),
            .init_pid = (int32_t)jail_init_pid(j),
            .home_user = jail_home(j, false),
            .home_root = jail_home(j, true),
    };
}

static void
on_ready(struct jail *j, int r, const struct err *err, void *ud)
{
    struct sandbox *sb = ud;
    struct priv_msg m = {.type = PRIV_EV_READY, .id = sb->id, .text = ""};

    if (r < 0) {
        char text[PRIV_TEXT_MAX + 1];
        (void)snprintf(text, sizeof(text), "%s",
                       err_isset(err) ? err->msg : "the sandbox could not be created");
        for (char *s = text; *s; s++)
            if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                *s = '?';
        m.errnum = -r > 0 && -r <= PRIV_ERRNO_MAX ? -r : EIO;
        m.text = text;
        send_msg(sb->owner, &m, NULL, 0);
        event_gone(sb);
        sb_drop(sb);
        return;
    }
    sb->state = sb->state == SB_DYING ? SB_DYING : SB_READY;
    sb->view_fd = pin_view(sb);
    if (sb->upper_area >= 0) {
        sb->p->areas[sb->upper_area].first = jail_root_uid(j);
        sb->p->areas[sb->upper_area].has_first = true;
    }
    ready_facts(j, &m.ready);
    send_msg(sb->owner, &m, NULL, 0);
}

static void
on_spawned(struct jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct sandbox *sb = ud;
    char text[PRIV_TEXT_MAX + 1] = "";
    (void)j;
    if (r < 0)
        (void)snprintf(text, sizeof(text), "%s", step ? step : "spawn");
    for (char *s = text; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
    struct priv_msg m = {.type = PRIV_EV_SPAWNED,
                         .id = sb->id,
                         .u64 = token,
                         .pid = r < 0 ? 0 : (int32_t)pid,
                         .errnum = r < 0 ? (-r <= PRIV_ERRNO_MAX ? -r : EIO) : 0,
                         .text = text};
    if (r == 0 && pid <= 0)
        m.errnum = EIO;
    send_msg(sb->owner, &m, NULL, 0);
}

static void
on_exited(struct jail *j, pid_t pid, int status, void *ud)
{
    struct sandbox *sb = ud;
    (void)j;
    if (pid <= 0)
        return;
    struct priv_msg m = {.type = PRIV_EV_EXITED, .id = sb->id, .pid = pid, .status = status};
    send_msg(sb->owner, &m, NULL, 0);
}

static void
on_gone(struct jail *j, void *ud)
{
    struct sandbox *sb = ud;
    (void)j;
    event_gone(sb);
    sb_drop(sb);
}

static const struct jail_callbacks jail_cb = {
        .ready = on_ready,
        .spawned = on_spawned,
        .exited = on_exited,
        .gone = on_gone,
};

/* --- the verbs --- */

/* The sandbox id names, if this connection may use it in state want (or
 * any state but dying when want is -1); else NULL and *ret_r: -ENOENT
 * (none of this connection's), -ESRCH (dying), -EBUSY (not ready yet). */
static struct sandbox *
sb_get(struct conn *c, const char *id, int want, int *ret_r)
{
    struct sandbox *sb = sb_find(c->p, id);
    *ret_r = 0;
    if (!sb || sb->owner != c)
        *ret_r = -ENOENT;
    else if (sb->state == SB_DYING)
        *ret_r = -ESRCH;
    else if (want >= 0 && sb->state != (enum sb_state)want)
        *ret_r = -EBUSY;
    return *ret_r < 0 ? NULL : sb;
}

/* sb_get() for a request that gets a reply: a refusal is its R_ERR. */
static struct sandbox *
sb_of(struct conn *c, const struct priv_msg *m, int want)
{
    int r;
    struct sandbox *sb = sb_get(c, m->id, want, &r);
    if (r == -ENOENT)
        reply_err(c, m->seq, r, NULL, "no sandbox '%s'", m->id);
    else if (r == -ESRCH)
        reply_err(c, m->seq, r, NULL, "sandbox '%s' is being killed", m->id);
    else if (r < 0)
        reply_err(c, m->seq, r, NULL, "sandbox '%s' is not ready yet", m->id);
    return sb;
}

static struct area *
area_of(struct conn *c, const char *name)
{
    for (unsigned i = 0; i < PRIV_AREAS_MAX; i++)
        if (c->p->areas[i].name[0] && c->p->areas[i].owner == c &&
            !strcmp(c->p->areas[i].name, name))
            return &c->p->areas[i];
    return NULL;
}

static void
do_hello(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    char missing[PRIV_MISS_MAX + 1];
    struct buf b;

    if (c->hello) {
        reply_err(c, m->seq, -EALREADY, NULL, "HELLO was already said");
        return;
    }
    if (m->a != PRIV_VERSION) {
        reply_err(c, m->seq, -EPROTONOSUPPORT, NULL, "protocol version %u, not %u", m->a,
                  PRIV_VERSION);
        conn_end(c);
        return;
    }
    c->hello = true;
    buf_init(&b, PRIV_MISS_MAX);
    (void)jail_host_missing(p->cfg.host, &b);
    (void)snprintf(missing, sizeof(missing), "%s", b.data);
    buf_done(&b);
    for (char *s = missing; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
    struct priv_msg a = {.type = PRIV_R_HELLO, .seq = m->seq};
    a.hello = (struct priv_hello){.version = PRIV_VERSION,
                                  .mode = (uint32_t)jail_host_mode(p->cfg.host),
                                  .uid_slots = p->cfg.max_sandboxes,
                                  .has_disk = jail_host_disk(p->cfg.host) != NULL,
                                  .oom_protect = jail_host_oom_protect(p->cfg.host),
                                  .root_caps = jail_root_caps(),
                                  .missing = missing};
    send_msg(c, &a, NULL, 0);
}

static void
do_create(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    char paths[JAIL_MAX_LAYERS][PATH_MAX];
    const char *layers[JAIL_MAX_LAYERS];
    const char *ldir = jail_host_layers_dir(p->cfg.host);
    struct err err = {0};
    int ai = -1;

    if (sb_find(p, m->id)) {
        reply_err(c, m->seq, -EEXIST, NULL, "sandbox '%s' exists", m->id);
        return;
    }
    if (p->nsbs >= p->cfg.max_sandboxes) {
        reply_err(c, m->seq, -EAGAIN, NULL, "all %u sandbox slots are in use",
                  p->cfg.max_sandboxes);
        return;
    }
    if (m->nlayers && !ldir) {
        reply_err(c, m->seq, -EOPNOTSUPP, NULL, "this host has no layers");
        return;
    }
    /* A name is one entry of the layers directory, which only this process
     * changes: what it resolves to now is what init will mount. */
    for (uint32_t i = 0; i < m->nlayers; i++) {
        struct stat st;
        int w = snprintf(paths[i], sizeof(paths[i]), "%s/%s", ldir, m->layers[i]);
        if (w < 0 || (size_t)w >= sizeof(paths[i]) || lstat(paths[i], &st) < 0 ||
            !S_ISDIR(st.st_mode)) {
            reply_err(c, m->seq, -ENOENT, NULL, "no layer '%s'", m->layers[i]);
            return;
        }
        layers[i] = paths[i];
    }
    if (m->upper) {
        struct area *a = area_of(c, m->upper);
        if (!a) {
            reply_err(c, m->seq, -ENOENT, NULL, "no area '%s'", m->upper);
            return;
        }
        if (a->used || a->installing) {
            reply_err(c, m->seq, -EBUSY, NULL, "area '%s' is in use", m->upper);
            return;
        }
        ai = (int)(a - p->areas);
    }
    struct sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb) {
        reply_err(c, m->seq, -ENOMEM, NULL, "out of memory");
        return;
    }
    sb->p = p;
    sb->owner = c;
    sb->view_fd = -EBADF;
    sb->upper_area = -1;
    for (unsigned i = 0; i < PRIV_HELPERS_MAX; i++)
        sb->helpers[i] = (struct helper){.sb = sb, .pidfd = -EBADF};
    (void)snprintf(sb->id, sizeof(sb->id), "%s", m->id);
    struct jail_fs fs = {.layers = layers,
                         .nlayers = m->nlayers,
                         .upper_area = m->upper,
                         .disk_bytes = m->fs_disk_bytes};
    bool with_fs = m->nlayers || m->upper || m->fs_disk_bytes;
    int r = jail_create(p->cfg.host, p->cfg.loop, m->id, &m->limits, with_fs ? &fs : NULL, &jail_cb,
                        sb, &sb->j, &err);
    if (r < 0) {
        free(sb);
        reply_err(c, m->seq, r, &err, "cannot create sandbox '%s'", m->id);
        return;
    }
    if (ai >= 0) {
        p->areas[ai].used = true;
        sb->upper_area = ai;
    }
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++)
        if (!p->sbs[i]) {
            p->sbs[i] = sb;
            break;
        }
    p->nsbs++;
    reply(c, m->seq, PRIV_R_OK);
}

/* A process's stdio may be a pipe, a socket or a character device (a
 * terminal, /dev/null): never a directory or a file of the peer's. */
static bool
stdio_ok(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 &&
           (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode));
}

/* SPAWN_LARGE's argv/env block from its memfd fd into m (pointers into
 * *ret_block, the caller's to free). Only a memfd sealed against every
 * change: the peer cannot alter what is decoded while it is decoded.
 * -EINVAL (no regular file, or a block that does not decode), -EPERM (not
 * sealed), -E2BIG, -ENOMEM, -EIO. */
static int
read_args(int fd, struct priv_msg *m, char **ret_block)
{
    const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
    struct stat st;

    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return -EINVAL;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & want) != want)
        return -EPERM;
    if (st.st_size <= 0 || st.st_size > PRIV_ARGS_BYTES_MAX)
        return -E2BIG;
    _cleanup_free_ char *block = malloc((size_t)st.st_size);
    if (!block)
        return -ENOMEM;
    for (size_t got = 0; got < (size_t)st.st_size;) {
        ssize_t n = pread(fd, block + got, (size_t)st.st_size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        got += (size_t)n;
    }
    /* A packet that decodes with a block that does not is refused, not
     * ended: the line between the two is the packet's own decoder. */
    if (priv_decode_args(block, (size_t)st.st_size, m) < 0)
        return -EINVAL;
    *ret_block = TAKE_PTR(block);
    return 0;
}

/* SPAWN and SPAWN_LARGE (m's argv/env are filled from the memfd). Every
 * path ends in exactly one EV_SPAWNED with m's token and no reply: a
 * refusal here, at once (spawn_refuse()); an accepted spawn when init
 * answers (on_spawned()), unless the sandbox goes first (proto.h). */
static void
do_spawn(struct conn *c, struct priv_msg *m, const int *fds)
{
    struct err err = {0};
    char cwd[PATH_MAX];
    _cleanup_free_ char *block = NULL;
    int r;

    struct sandbox *sb = sb_get(c, m->id, SB_READY, &r);
    if (!sb) {
        spawn_refuse(c, m, r, "sandbox");
        return;
    }
    for (int i = 0; i < 3; i++)
        if (!stdio_ok(fds[i])) {
            /* not a pipe, socket or terminal */
            spawn_refuse(c, m, -EINVAL, "stdio");
            return;
        }
    if (m->type == PRIV_SPAWN_LARGE && (r = read_args(fds[3], m, &block)) < 0) {
        spawn_refuse(c, m, r, "args");
        return;
    }
    /* Outside the ns mode the home is the workspace on the host: the peer
     * names it as processes do, the parent knows where it is. */
    const char *rest;
    if (jail_host_mode(c->p->cfg.host) != JAIL_NS &&
        (!strcmp(m->cwd, "/home/user") || startswith(m->cwd, "/home/user/", &rest))) {
        int w = snprintf(cwd, sizeof(cwd), "%s%s", jail_workspace_path(sb->j), m->cwd + 10);
        if (w < 0 || (size_t)w >= sizeof(cwd)) {
            spawn_refuse(c, m, -ENAMETOOLONG, "cwd");
            return;
        }
    } else {
        (void)snprintf(cwd, sizeof(cwd), "%s", m->cwd);
    }
    struct jail_spawn sp = {.root = m->flag == 1,
                            .cwd = cwd,
                            .argv = m->argv,
                            .env = m->env,
                            .fds = {fds[0], fds[1], fds[2]}};
    r = jail_spawn(sb->j, m->u64, &sp, &err);
    if (r < 0)
        spawn_refuse(c, m, r, "init"); /* -EAGAIN: init is not keeping up */
}

static void
do_stats(struct conn *c, const struct priv_msg *m)
{
    struct sandbox *sb = sb_of(c, m, SB_READY);
    struct priv_msg a = {.type = PRIV_R_STATS, .seq = m->seq};
    if (!sb)
        return;
    int r = jail_stats(sb->j, &a.stats);
    if (r < 0) {
        reply_err(c, m->seq, r, NULL, "cannot read the usage of sandbox '%s'", m->id);
        return;
    }
    a.disk_known = jail_disk_usage(sb->j, &a.disk_bytes) == 0;
    if (!a.disk_known)
        a.disk_bytes = 0;
    send_msg(c, &a, NULL, 0);
}

static void
do_open_helper(struct conn *c, const struct priv_msg *m)
{
    struct sandbox *sb = sb_of(c, m, SB_READY);
    struct err err = {0};
    int fds[2] = {-EBADF, -EBADF}, pidfd = -EBADF;
    struct helper *h = NULL;

    if (!sb)
        return;
    if (!c->p->cfg.start_helper) {
        reply_err(c, m->seq, -EOPNOTSUPP, NULL, "this parent starts no file helpers");
        return;
    }
    for (unsigned i = 0; i < PRIV_HELPERS_MAX && !h; i++)
        if (sb->helpers[i].pidfd < 0)
            h = &sb->helpers[i];
    /* A replacement may come before the old helper's exit event: reap the
     * ended ones now rather than refuse it a slot. */
    for (unsigned i = 0; i < PRIV_HELPERS_MAX && !h; i++)
        if (helper_reap(&sb->helpers[i]))
            h = &sb->helpers[i];
    if (!h) {
        reply_err(c, m->seq, -EMFILE, NULL, "sandbox '%s' has %d file helpers already", m->id,
                  PRIV_HELPERS_MAX);
        return;
    }
    int r = c->p->cfg.start_helper(c->p->cfg.helper_ud, sb->j, sb->view_fd, m->flag == 1, &fds[0],
                                   &pidfd, &err);
    if (r < 0) {
        reply_err(c, m->seq, r, &err, "cannot start the file helper of sandbox '%s'", m->id);
        return;
    }
    fds[1] = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    h->pidfd = pidfd;
    c->p->helper_seq = c->p->helper_seq == UINT32_MAX ? 1 : c->p->helper_seq + 1;
    h->number = c->p->helper_seq;
    if (fds[1] < 0 || loop_io_add(c->p->cfg.loop, pidfd, EPOLLIN, on_helper_exit, h, &h->io) < 0) {
        helper_stop(h);
        fdpass_close(fds, 2);
        reply_err(c, m->seq, -EMFILE, NULL, "cannot watch the file helper of sandbox '%s'", m->id);
        return;
    }
    struct priv_msg a = {.type = PRIV_R_HELPER, .seq = m->seq, .a = h->number};
    send_msg(c, &a, fds, 2);
}

static void
do_open_pty(struct conn *c, const struct priv_msg *m)
{
    struct sandbox *sb = sb_of(c, m, SB_READY);
    int unlock = 0;
    struct winsize ws = {.ws_row = (unsigned short)m->a, .ws_col = (unsigned short)m->b};

    if (!sb)
        return;
    if (sb->view_fd < 0) {
        reply_err(c, m->seq, -EOPNOTSUPP, NULL, "terminals need a sandbox with its own /dev");
        return;
    }
    /* Into /dev and /dev/pts (mounts), never through a symlink: the
     * sandbox's root is the sandbox's to change, devpts is not. */
    struct open_how how = {.flags = O_RDWR | O_NOCTTY | O_CLOEXEC,
                           .resolve =
                                   RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fds[2] = {-EBADF, -EBADF};
    fds[0] = (int)syscall(SYS_openat2, sb->view_fd, "dev/pts/ptmx", &how, sizeof(how));
    if (fds[0] < 0) {
        reply_err(c, m->seq, -errno, NULL, "cannot open the /dev/pts/ptmx of sandbox '%s'", m->id);
        return;
    }
    uid_t uid = m->flag ? jail_root_uid(sb->j) : jail_user_uid(sb->j);
    if (ioctl(fds[0], TIOCSPTLCK, &unlock) < 0 || ioctl(fds[0], TIOCSWINSZ, &ws) < 0 ||
        (fds[1] = ioctl(fds[0], TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
        fchown(fds[1], uid, (gid_t)-1) < 0) {
        int e = errno;
        fdpass_close(fds, 2);
        reply_err(c, m->seq, -e, NULL, "cannot set up a terminal in sandbox '%s'", m->id);
        return;
    }
    struct priv_msg a = {.type = PRIV_R_PTY, .seq = m->seq};
    send_msg(c, &a, fds, 2);
}

struct netns_job {
    int nsfd, family, type;
    int fd; /* out, or -errno */
};

/* On a thread of its own, so the parent's own thread never changes
 * namespace; the thread ends with it. */
static void *
netns_thread(void *ud)
{
    struct netns_job *job = ud;
    if (setns(job->nsfd, CLONE_NEWNET) < 0) {
        job->fd = -errno;
        return NULL;
    }
    job->fd = socket(job->family, job->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (job->fd < 0)
        job->fd = -errno;
    return NULL;
}

static void
do_netns_socket(struct conn *c, const struct priv_msg *m)
{
    struct sandbox *sb = sb_of(c, m, SB_READY);
    char path[64];
    pthread_t t;

    if (!sb)
        return;
    if (jail_host_mode(c->p->cfg.host) != JAIL_NS) {
        reply_err(c, m->seq, -EOPNOTSUPP, NULL, "sandbox '%s' has no network of its own", m->id);
        return;
    }
    /* init is our child and not reaped while the jail is ready. */
    (void)snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)jail_init_pid(sb->j));
    _cleanup_close_ int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        reply_err(c, m->seq, -errno, NULL, "cannot open the network of sandbox '%s'", m->id);
        return;
    }
    struct netns_job job = {.nsfd = nsfd, .family = (int)m->a, .type = (int)m->b, .fd = -EBADF};
    int r = pthread_create(&t, NULL, netns_thread, &job);
    if (r != 0) {
        reply_err(c, m->seq, -r, NULL, "cannot start a thread for the network of sandbox '%s'",
                  m->id);
        return;
    }
    (void)pthread_join(t, NULL);
    if (job.fd < 0) {
        reply_err(c, m->seq, job.fd, NULL, "cannot make a socket in sandbox '%s'", m->id);
        return;
    }
    struct priv_msg a = {.type = PRIV_R_FD, .seq = m->seq};
    send_msg(c, &a, &job.fd, 1);
}

/* Whether the directory fd is root or lies below it: walks ".." up at most
 * PRIV_IDMAP_DEPTH levels (the peer can move only what it owns). */
static bool
below_root(int fd, int root)
{
    struct stat rs, st;
    if (fstat(root, &rs) < 0 || fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
        return false;
    _cleanup_close_ int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    for (int i = 0; cur >= 0 && i <= PRIV_IDMAP_DEPTH; i++) {
        if (fstat(cur, &st) < 0)
            return false;
        if (st.st_dev == rs.st_dev && st.st_ino == rs.st_ino)
            return true;
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat us;
        if (up < 0 || fstat(up, &us) < 0 || (us.st_dev == st.st_dev && us.st_ino == st.st_ino)) {
            safe_close(up);
            return false; /* the top of the file system */
        }
        safe_close(cur);
        cur = up;
    }
    return false;
}

/* Whether fd is the very directory root is. */
static bool
same_dir(int fd, int root)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstat(root, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Removes what is inside the directory fd (taken) on a thread of its own:
 * a large tree must not hold the loop. Nothing is followed (rm_rf_at()). */
static void *
empty_thread(void *ud)
{
    int fd = (int)(intptr_t)ud;
    char **names = NULL;
    size_t n = 0;
    if (fd_dir_names(fd, PRIV_TREE_ENTRIES_MAX, &names, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            (void)rm_rf_at(fd, names[i]);
        fd_names_free(names, n);
    }
    (void)close(fd);
    return NULL;
}

static void
do_tree_empty(struct conn *c, const struct priv_msg *m, int dirfd)
{
    int root = c->p->cfg.idmap_root_fd;
    pthread_attr_t at;
    pthread_t t;

    if (root < 0) {
        reply_err(c, m->seq, -EPERM, NULL, "this parent empties no directories");
        return;
    }
    if (!below_root(dirfd, root) || same_dir(dirfd, root)) {
        reply_err(c, m->seq, -EPERM, NULL, "that directory is not one this parent may empty");
        return;
    }
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        reply_err(c, m->seq, -errno, NULL, "cannot open the directory to empty");
        return;
    }
    int r = pthread_attr_init(&at);
    if (r == 0) {
        (void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &at, empty_thread, (void *)(intptr_t)fd);
        (void)pthread_attr_destroy(&at);
    }
    if (r != 0) {
        (void)close(fd);
        reply_err(c, m->seq, -r, NULL, "cannot start emptying the directory");
        return;
    }
    reply(c, m->seq, PRIV_R_OK);
}

static void
do_idmap(struct conn *c, const struct priv_msg *m, int dirfd)
{
    struct sandbox *sb = sb_of(c, m, SB_READY);
    struct err err = {0};

    if (!sb)
        return;
    int ro_root = c->p->cfg.idmap_ro_root_fd;
    bool ro = ro_root >= 0 && below_root(dirfd, ro_root) && !same_dir(dirfd, ro_root);
    if (c->p->cfg.idmap_root_fd < 0 && !ro) {
        reply_err(c, m->seq, -EPERM, NULL, "this parent maps no directories");
        return;
    }
    if (!ro && !below_root(dirfd, c->p->cfg.idmap_root_fd)) {
        reply_err(c, m->seq, -EPERM, NULL, "that directory is not one this parent may map");
        return;
    }
    /* A directory of the peer's own, made for the sandbox's root to write
     * into through the mapping (a snapshot's tree): on disk it must be
     * owned by 0, which the mapping shows as that root - an owner the
     * mapping does not cover shows as nobody and is opened by no one. */
    struct stat st;
    if (!ro && fstat(dirfd, &st) == 0 && st.st_uid == c->p->cfg.peer_uid &&
        !same_dir(dirfd, c->p->cfg.idmap_root_fd) && fchownat(dirfd, "", 0, 0, AT_EMPTY_PATH) < 0) {
        reply_err(c, m->seq, -errno, NULL, "cannot give a directory to sandbox '%s''s root", m->id);
        return;
    }
    _cleanup_close_ int userns = jail_open_userns(sb->j);
    if (userns < 0) {
        reply_err(c, m->seq, userns, NULL, "cannot open the user namespace of sandbox '%s'", m->id);
        return;
    }
    int fd = jail_idmap_tree(userns, dirfd, ro, &err);
    if (fd < 0) {
        reply_err(c, m->seq, fd, &err, "cannot map a directory for sandbox '%s'", m->id);
        return;
    }
    struct priv_msg a = {.type = PRIV_R_FD, .seq = m->seq};
    send_msg(c, &a, &fd, 1);
}

static void
do_area(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    struct area *a = area_of(c, m->name);
    struct err err = {0};

    if (m->type == PRIV_AREA_CREATE) {
        if (a) {
            reply_err(c, m->seq, -EEXIST, NULL, "area '%s' exists", m->name);
            return;
        }
        for (unsigned i = 0; i < PRIV_AREAS_MAX && !a; i++)
            if (!p->areas[i].name[0])
                a = &p->areas[i];
        if (!a) {
            reply_err(c, m->seq, -EAGAIN, NULL, "%d areas exist already", PRIV_AREAS_MAX);
            return;
        }
        int r = jail_host_area_create(p->cfg.host, m->name, m->u64, a->path, sizeof(a->path), &err);
        if (r < 0) {
            reply_err(c, m->seq, r, &err, "cannot create area '%s'", m->name);
            return;
        }
        (void)snprintf(a->name, sizeof(a->name), "%s", m->name);
        a->owner = c;
        a->used = false;
        reply(c, m->seq, PRIV_R_OK);
        return;
    }
    if (!a) {
        reply_err(c, m->seq, -ENOENT, NULL, "no area '%s'", m->name);
        return;
    }
    if (m->type == PRIV_AREA_USAGE) {
        struct priv_msg u = {.type = PRIV_R_USAGE, .seq = m->seq};
        int r = jail_host_area_usage(p->cfg.host, m->name, &u.u64);
        if (r < 0)
            reply_err(c, m->seq, r, NULL, "cannot read the usage of area '%s'", m->name);
        else
            send_msg(c, &u, NULL, 0);
        return;
    }
    if (a->used || a->installing) {
        reply_err(c, m->seq, -EBUSY, NULL, "area '%s' is a sandbox's writable layer", m->name);
        return;
    }
    jail_host_area_destroy(p->cfg.host, m->name);
    memset(a, 0, sizeof(*a));
    reply(c, m->seq, PRIV_R_OK);
}

/* --- layers --- */

static void
layer_done(int r, const struct err *err, void *ud)
{
    struct layer_job *job = ud;
    struct priv_parent *p = job->p;
    if (p) {
        p->areas[job->area].installing = false;
        for (unsigned i = 0; i < PRIV_LAYER_JOBS_MAX; i++)
            if (p->jobs[i] == job)
                p->jobs[i] = NULL;
    }
    if (p && job->conn) {
        char text[PRIV_TEXT_MAX + 1] = "";
        if (r < 0)
            (void)snprintf(text, sizeof(text), "%s",
                           err_isset(err) ? err->msg : "the layer could not be installed");
        for (char *s = text; *s; s++)
            if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                *s = '?';
        struct priv_msg m = {.type = PRIV_EV_LAYER,
                             .layer = job->layer,
                             .errnum = r < 0 ? (-r <= PRIV_ERRNO_MAX ? -r : EIO) : 0,
                             .text = text};
        send_msg(job->conn, &m, NULL, 0);
    }
    free(job);
}

/* The area's writable layer becomes a layer, from the facts this process
 * keeps (whose uid range wrote it), never the peer's. */
static void
do_layer_install(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    struct area *a = area_of(c, m->name);
    struct err err = {0};
    unsigned slot = PRIV_LAYER_JOBS_MAX;

    if (!a) {
        reply_err(c, m->seq, -ENOENT, NULL, "no area '%s'", m->name);
        return;
    }
    if (a->used || a->installing || !a->has_first) {
        reply_err(c, m->seq, -EBUSY, NULL,
                  a->has_first ? "area '%s' is in use" : "no sandbox wrote into area '%s'",
                  m->name);
        return;
    }
    for (unsigned i = 0; i < PRIV_LAYER_JOBS_MAX && slot == PRIV_LAYER_JOBS_MAX; i++)
        if (!p->jobs[i])
            slot = i;
    if (slot == PRIV_LAYER_JOBS_MAX) {
        reply_err(c, m->seq, -EAGAIN, NULL, "%d layers are being installed already",
                  PRIV_LAYER_JOBS_MAX);
        return;
    }
    struct layer_job *job = calloc(1, sizeof(*job));
    if (!job) {
        reply_err(c, m->seq, -ENOMEM, NULL, "out of memory");
        return;
    }
    *job = (struct layer_job){.p = p, .conn = c, .area = (int)(a - p->areas)};
    (void)snprintf(job->layer, sizeof(job->layer), "%s", m->layer);
    int r = jail_host_layer_install(p->cfg.host, a->name, m->layer, a->first, layer_done, job,
                                    &err);
    if (r < 0) {
        free(job);
        reply_err(c, m->seq, r, &err, "cannot install layer '%s'", m->layer);
        return;
    }
    a->installing = true;
    p->jobs[slot] = job;
    reply(c, m->seq, PRIV_R_OK);
}

/* --- re-adoption --- */

static void
grace_arm(struct priv_parent *p)
{
    uint64_t first = 0;
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++) {
        struct sandbox *sb = p->sbs[i];
        if (sb && !sb->owner && sb->orphan_until && sb->state != SB_DYING &&
            (!first || sb->orphan_until < first))
            first = sb->orphan_until;
    }
    if (first)
        (void)loop_timer_arm(p->grace, first);
    else
        loop_timer_disarm(p->grace);
}

/* Orphans nobody adopted within the grace are killed (their EV_GONE goes
 * to nobody). */
static void
on_grace(struct loop_timer *t, void *ud)
{
    struct priv_parent *p = ud;
    uint64_t now = now_msec();
    (void)t;
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++) {
        struct sandbox *sb = p->sbs[i];
        if (!sb || sb->owner || !sb->orphan_until || sb->orphan_until > now ||
            sb->state == SB_DYING)
            continue;
        sb->orphan_until = 0;
        sb->state = SB_DYING;
        jail_kill(sb->j); /* may drop sb: p->sbs[i] is read again */
    }
    grace_arm(p);
}

/* One-way: no reply (the network process sends it on its loop for every
 * change of a sandbox and must not wait a round trip each time). A record
 * for a sandbox that is not, or no longer, the peer's (it died meanwhile)
 * has nothing to describe and is dropped; one that cannot be kept leaves
 * none, so that a sandbox is never taken over half-known. */
static void
do_set_record(struct conn *c, const struct priv_msg *m)
{
    int r;
    struct sandbox *sb = sb_get(c, m->id, -1, &r);
    void *rec = NULL;
    if (!sb)
        return;
    if (m->record_len && (rec = malloc(m->record_len)))
        memcpy(rec, m->record, m->record_len);
    free(sb->record);
    sb->record = rec;
    sb->record_len = rec ? m->record_len : 0;
}

static void
fill_entry(struct sandbox *sb, struct priv_entry *e)
{
    *e = (struct priv_entry){.id = sb->id,
                             .ready = sb->state == SB_READY,
                             .record = sb->record,
                             .record_len = sb->record_len};
    if (e->ready)
        ready_facts(sb->j, &e->facts);
}

static void
do_list(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    struct priv_msg *a = &p->out;
    size_t used = 8; /* next, n */
    uint32_t i = m->a;

    memset(a, 0, sizeof(*a));
    a->type = PRIV_R_LIST;
    a->seq = m->seq;
    a->a = PRIV_LIST_END;
    for (; i < p->cfg.max_sandboxes; i++) {
        struct sandbox *sb = p->sbs[i];
        if (!sb || sb->owner || sb->state == SB_DYING)
            continue;
        struct priv_entry e;
        fill_entry(sb, &e);
        size_t n = priv_entry_size(&e);
        if (a->nlist == PRIV_LIST_MAX || used + n > PRIV_BODY_MAX) {
            a->a = i; /* the next page starts here */
            break;
        }
        a->list[a->nlist++] = e;
        used += n;
    }
    send_msg(c, a, NULL, 0);
}

static void
do_adopt(struct conn *c, const struct priv_msg *m)
{
    struct priv_parent *p = c->p;
    struct sandbox *sb = sb_find(p, m->id);
    struct priv_msg *a = &p->out;

    if (!sb) {
        reply_err(c, m->seq, -ENOENT, NULL, "no sandbox '%s'", m->id);
        return;
    }
    if (sb->owner == c) {
        reply_err(c, m->seq, -EALREADY, NULL, "sandbox '%s' is this connection's already", m->id);
        return;
    }
    if (sb->owner) {
        reply_err(c, m->seq, -EBUSY, NULL, "sandbox '%s' belongs to another connection", m->id);
        return;
    }
    if (sb->state == SB_DYING) {
        reply_err(c, m->seq, -ESRCH, NULL, "sandbox '%s' is being killed", m->id);
        return;
    }
    sb->owner = c;
    sb->orphan_until = 0;
    grace_arm(p);
    /* Its writable area comes along: the adopter destroys it after the
     * sandbox is gone. */
    if (sb->upper_area >= 0 && !p->areas[sb->upper_area].owner)
        p->areas[sb->upper_area].owner = c;
    memset(a, 0, sizeof(*a));
    a->type = PRIV_R_LIST;
    a->seq = m->seq;
    a->a = PRIV_LIST_END;
    a->nlist = 1;
    fill_entry(sb, &a->list[0]);
    send_msg(c, a, NULL, 0);
}

static void
do_kill_helper(struct conn *c, const struct priv_msg *m)
{
    struct sandbox *sb = sb_of(c, m, -1);
    if (!sb)
        return;
    for (unsigned i = 0; i < PRIV_HELPERS_MAX; i++) {
        struct helper *h = &sb->helpers[i];
        if (m->a && h->pidfd >= 0 && h->number == m->a) {
            helper_stop(h); /* kills and reaps it: its slot is free on return */
            reply(c, m->seq, PRIV_R_OK);
            return;
        }
    }
    reply_err(c, m->seq, -ESRCH, NULL, "sandbox '%s' runs no file helper %u", m->id,
              (unsigned)m->a);
}

static void
handle(struct conn *c, struct priv_msg *m, int *fds)
{
    struct sandbox *sb;
    struct err err = {0};
    int r;

    switch (m->type) {
    case PRIV_HELLO:
        do_hello(c, m);
        break;
    case PRIV_CREATE:
        do_create(c, m);
        break;
    case PRIV_SPAWN:
    case PRIV_SPAWN_LARGE:
        do_spawn(c, m, fds);
        break;
    case PRIV_SET_RECORD:
        do_set_record(c, m);
        break;
    case PRIV_LIST:
        do_list(c, m);
        break;
    case PRIV_ADOPT:
        do_adopt(c, m);
        break;
    case PRIV_KILL_HELPER:
        do_kill_helper(c, m);
        break;
    case PRIV_SIGNAL:
        if ((sb = sb_of(c, m, SB_READY))) {
            r = jail_signal(sb->j, m->pid, (int)m->a, m->flag == 1);
            if (r < 0)
                reply_err(c, m->seq, r, NULL, "cannot signal process %d", (int)m->pid);
            else
                reply(c, m->seq, PRIV_R_OK);
        }
        break;
    case PRIV_SET_LIMITS:
        if ((sb = sb_of(c, m, SB_READY))) {
            r = jail_set_limits(sb->j, &m->limits, &err);
            if (r < 0)
                reply_err(c, m->seq, r, &err, "cannot set the limits of sandbox '%s'", m->id);
            else
                reply(c, m->seq, PRIV_R_OK);
        }
        break;
    case PRIV_FREEZE:
        if ((sb = sb_of(c, m, SB_READY))) {
            r = jail_freeze(sb->j, m->flag == 1, &err);
            if (r < 0)
                reply_err(c, m->seq, r, &err, "cannot freeze sandbox '%s'", m->id);
            else
                reply(c, m->seq, PRIV_R_OK);
        }
        break;
    case PRIV_STATS:
        do_stats(c, m);
        break;
    case PRIV_KILL:
        if ((sb = sb_of(c, m, -1))) {
            sb->state = SB_DYING;
            reply(c, m->seq, PRIV_R_OK);
            jail_kill(sb->j); /* gone (or a failed ready) comes as an event */
        }
        break;
    case PRIV_OPEN_HELPER:
        do_open_helper(c, m);
        break;
    case PRIV_OPEN_PTY:
        do_open_pty(c, m);
        break;
    case PRIV_NETNS_SOCKET:
        do_netns_socket(c, m);
        break;
    case PRIV_IDMAP:
        do_idmap(c, m, fds[0]);
        break;
    case PRIV_LAYER_INSTALL:
        do_layer_install(c, m);
        break;
    case PRIV_TREE_EMPTY:
        do_tree_empty(c, m, fds[0]);
        break;
    case PRIV_AREA_CREATE:
    case PRIV_AREA_USAGE:
    case PRIV_AREA_DESTROY:
        do_area(c, m);
        break;
    default:
        conn_end(c); /* the decoder lets no other type through */
        break;
    }
}

/* --- connections --- */

static void
conn_free_later(void *ud)
{
    free(ud);
}

static void
conn_end(struct conn *c)
{
    struct priv_parent *p = c->p;
    if (c->dead)
        return;
    c->dead = true;
    loop_io_free(c->io);
    c->io = NULL;
    c->fd = safe_close(c->fd);
    queue_free(c);
    uint64_t until = p->cfg.orphan_grace_ms ? now_msec() + p->cfg.orphan_grace_ms : 0;
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++) {
        struct sandbox *sb = p->sbs[i];
        if (!sb || sb->owner != c)
            continue;
        /* Kept for an adopter (parent.h). Its helpers' sockets were the
         * dead process's alone: end them, hung or not. */
        sb->owner = NULL;
        sb->orphan_until = until;
        for (unsigned k = 0; k < PRIV_HELPERS_MAX; k++)
            helper_stop(&sb->helpers[k]);
    }
    if (!p->dying)
        grace_arm(p);
    for (unsigned i = 0; i < PRIV_AREAS_MAX; i++)
        if (p->areas[i].owner == c)
            p->areas[i].owner = NULL;
    for (unsigned i = 0; i < PRIV_LAYER_JOBS_MAX; i++)
        if (p->jobs[i] && p->jobs[i]->conn == c)
            p->jobs[i]->conn = NULL;
    for (unsigned i = 0; i < PRIV_CONNS_MAX; i++)
        if (p->conns[i] == c)
            p->conns[i] = NULL;
    if (loop_defer(p->cfg.loop, conn_free_later, c) < 0)
        c->p = NULL; /* leaked rather than freed under a caller */
}

static void
on_conn(struct loop_io *io, uint32_t revents, void *ud)
{
    struct conn *c = ud;
    struct priv_parent *p = c->p;
    (void)io;

    if ((revents & EPOLLOUT) && !flush(c))
        return;
    if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    /* One packet per wakeup: the loop stays fair to the jails' events. */
    int fds[PRIV_FDS_MAX];
    unsigned nfds;
    ssize_t n = fdpass_recv(c->fd, p->rx, sizeof(p->rx), MSG_DONTWAIT, fds, PRIV_FDS_MAX, &nfds);
    if (n == -EAGAIN)
        return;
    if (n <= 0) {
        conn_end(c);
        return;
    }
    if (priv_decode_request(p->rx, (size_t)n, nfds, &p->m) < 0 ||
        (!c->hello && p->m.type != PRIV_HELLO)) {
        fdpass_close(fds, nfds < PRIV_FDS_MAX ? nfds : PRIV_FDS_MAX);
        conn_end(c);
        return;
    }
    handle(c, &p->m, fds);
    fdpass_close(fds, nfds);
}

static int serve(struct priv_parent *p, int sock, bool check_peer, struct err *err);

int
priv_parent_serve(struct priv_parent *p, int sock, struct err *err)
{
    return serve(p, sock, true, err);
}

int
priv_parent_serve_child(struct priv_parent *p, int sock, struct err *err)
{
    return serve(p, sock, false, err);
}

static int
serve(struct priv_parent *p, int sock, bool check_peer, struct err *err)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    struct conn *c = NULL;
    unsigned slot = PRIV_CONNS_MAX;
    int type;
    socklen_t tl = sizeof(type);

    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
        safe_close(sock);
        return err_set(err, EINVAL, "the unprivileged side's socket is no SOCK_SEQPACKET");
    }
    if (check_peer &&
        (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != p->cfg.peer_uid)) {
        safe_close(sock);
        return err_set(err, EPERM, "the peer is uid %u, not %u", (unsigned)cr.uid,
                       (unsigned)p->cfg.peer_uid);
    }
    for (unsigned i = 0; i < PRIV_CONNS_MAX && slot == PRIV_CONNS_MAX; i++)
        if (!p->conns[i])
            slot = i;
    if (slot == PRIV_CONNS_MAX) {
        safe_close(sock);
        return err_set(err, EBUSY, "%d connections are served already", PRIV_CONNS_MAX);
    }
    if (fd_set_nonblock(sock, true) < 0 || !(c = calloc(1, sizeof(*c)))) {
        safe_close(sock);
        return err_set(err, ENOMEM, "out of memory");
    }
    c->p = p;
    c->fd = sock;
    int r = loop_io_add(p->cfg.loop, sock, EPOLLIN, on_conn, c, &c->io);
    if (r < 0) {
        safe_close(sock);
        free(c);
        return err_setx(err, -r, "cannot watch the unprivileged side's socket");
    }
    p->conns[slot] = c;
    return 0;
}

int
priv_parent_new(const struct priv_parent_config *c, struct priv_parent **ret, struct err *err)
{
    if (!c->host || !c->loop || c->max_sandboxes == 0)
        return err_set(err, EINVAL, "a parent needs a jail host, a loop and sandbox slots");
    struct priv_parent *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->cfg = *c;
    p->sbs = calloc(c->max_sandboxes, sizeof(*p->sbs));
    if (!p->sbs || loop_timer_new(c->loop, on_grace, p, &p->grace) < 0) {
        free(p->sbs);
        free(p);
        return -ENOMEM;
    }
    *ret = p;
    return 0;
}

struct priv_parent *
priv_parent_free(struct priv_parent *p)
{
    if (!p)
        return NULL;
    p->dying = true;
    loop_timer_free(p->grace);
    p->grace = NULL;
    for (unsigned i = 0; i < PRIV_CONNS_MAX; i++)
        if (p->conns[i]) {
            struct conn *c = p->conns[i];
            conn_end(c);
        }
    for (unsigned i = 0; i < p->cfg.max_sandboxes; i++) {
        struct sandbox *sb = p->sbs[i];
        if (!sb)
            continue;
        for (unsigned k = 0; k < PRIV_HELPERS_MAX; k++)
            helper_stop(&sb->helpers[k]);
        safe_close(sb->view_fd);
        jail_free(sb->j); /* kills and reaps; no callback */
        free(sb->record);
        free(sb);
        p->sbs[i] = NULL;
    }
    for (unsigned i = 0; i < PRIV_LAYER_JOBS_MAX; i++)
        if (p->jobs[i])
            p->jobs[i]->p = NULL; /* its worker finishes; the next start collects */
    for (unsigned i = 0; i < PRIV_AREAS_MAX; i++)
        if (p->areas[i].name[0] && !p->areas[i].installing)
            jail_host_area_destroy(p->cfg.host, p->areas[i].name);
    /* Deferred frees of connections and jails run on the loop; run them. */
    (void)loop_run_once(p->cfg.loop, 0);
    free(p->sbs);
    free(p);
    return NULL;
}

unsigned
priv_parent_conns(const struct priv_parent *p)
{
    unsigned n = 0;
    for (unsigned i = 0; i < PRIV_CONNS_MAX; i++)
        n += p->conns[i] != NULL;
    return n;
}

unsigned
priv_parent_sandboxes(const struct priv_parent *p)
{
    return p->nsbs;
}
