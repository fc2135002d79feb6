/*
 * proto.c - encoder and strict decoder of the parent <-> unprivileged side
 * messages (proto.h). One function per direction walks a type's fields;
 * check() holds every limit and runs on both sides, so the encoder refuses
 * exactly what the decoder would. No allocation, no logging.
 */
#include "priv/proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* --- writer and reader --- */

struct w {
    char *p;
    size_t len, cap;
    bool bad;
};

struct r {
    const char *p;
    size_t len, pos;
    bool bad;
};

static void
put(struct w *w, const void *v, size_t n)
{
    if (w->bad || n > w->cap - w->len) {
        w->bad = true;
        return;
    }
    if (n)
        memcpy(w->p + w->len, v, n);
    w->len += n;
}

static void
put_u32(struct w *w, uint32_t v)
{
    put(w, &v, sizeof(v));
}

static void
put_u64(struct w *w, uint64_t v)
{
    put(w, &v, sizeof(v));
}

static void
put_str(struct w *w, const char *s)
{
    /* bounded by the room left (a SPAWN_LARGE block is larger than a body) */
    size_t room = w->bad ? 0 : w->cap - w->len;
    size_t n = strnlen(s ? s : "", room + 1);
    if (n >= room) {
        w->bad = true;
        return;
    }
    put_u32(w, (uint32_t)n);
    put(w, s ? s : "", n + 1);
}

static void
put_bytes(struct w *w, const void *v, uint32_t n)
{
    put_u32(w, n);
    put(w, v, n);
}

static void
get(struct r *r, void *v, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        memset(v, 0, n);
        return;
    }
    memcpy(v, r->p + r->pos, n);
    r->pos += n;
}

static uint32_t
get_u32(struct r *r)
{
    uint32_t v;
    get(r, &v, sizeof(v));
    return v;
}

static uint64_t
get_u64(struct r *r)
{
    uint64_t v;
    get(r, &v, sizeof(v));
    return v;
}

/* A string of at most max bytes, NUL-terminated in the packet and with no
 * NUL inside; "" (and bad) otherwise. */
static const char *
get_str(struct r *r, size_t max)
{
    uint32_t n = get_u32(r);
    if (r->bad || n > max || (size_t)n + 1 > r->len - r->pos) {
        r->bad = true;
        return "";
    }
    const char *s = r->p + r->pos;
    if (s[n] != '\0' || memchr(s, '\0', n)) {
        r->bad = true;
        return "";
    }
    r->pos += (size_t)n + 1;
    return s;
}

/* A byte string of at most max bytes; NULL when empty (and bad). */
static const void *
get_bytes(struct r *r, size_t max, uint32_t *ret_len)
{
    uint32_t n = get_u32(r);
    *ret_len = 0;
    if (r->bad || n > max || n > r->len - r->pos) {
        r->bad = true;
        return NULL;
    }
    const void *v = r->p + r->pos;
    r->pos += n;
    *ret_len = n;
    return n ? v : NULL;
}

/* --- the rules both sides keep --- */

bool
priv_id_ok(const char *s)
{
    size_t n = s ? strnlen(s, PRIV_ID_MAX + 1) : 0;
    if (n == 0 || n > PRIV_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

bool
priv_name_ok(const char *s)
{
    size_t n = s ? strnlen(s, PRIV_NAME_MAX + 1) : 0;
    if (n == 0 || n > PRIV_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static bool
text_ok(const char *s, size_t max)
{
    size_t n = s ? strnlen(s, max + 1) : 0;
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

static bool
abs_path_ok(const char *s)
{
    size_t n = s ? strnlen(s, PRIV_PATH_MAX + 1) : 0;
    return n >= 1 && n <= PRIV_PATH_MAX && s[0] == '/';
}

static bool
env_ok(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq && eq != kv;
}

bool
priv_is_request(int t)
{
    return t >= PRIV_HELLO && t < _PRIV_REQUEST_MAX;
}

bool
priv_is_reply(int t)
{
    return t >= PRIV_R_OK && t < _PRIV_REPLY_MAX;
}

bool
priv_is_event(int t)
{
    return t >= PRIV_EV_READY && t < _PRIV_EVENT_MAX;
}

unsigned
priv_type_fds(enum priv_type t)
{
    switch (t) {
    case PRIV_SPAWN_LARGE:
        return 4;
    case PRIV_SPAWN:
        return 3;
    case PRIV_R_HELPER:
    case PRIV_R_PTY:
        return 2;
    case PRIV_IDMAP:
    case PRIV_TREE_EMPTY:
    case PRIV_R_FD:
        return 1;
    default:
        return 0;
    }
}

enum priv_type
priv_reply_type(enum priv_type t)
{
    switch (t) {
    case PRIV_HELLO:
        return PRIV_R_HELLO;
    case PRIV_STATS:
        return PRIV_R_STATS;
    case PRIV_OPEN_HELPER:
        return PRIV_R_HELPER;
    case PRIV_OPEN_PTY:
        return PRIV_R_PTY;
    case PRIV_NETNS_SOCKET:
    case PRIV_IDMAP:
        return PRIV_R_FD;
    case PRIV_AREA_USAGE:
        return PRIV_R_USAGE;
    case PRIV_LIST:
    case PRIV_ADOPT:
        return PRIV_R_LIST;
    case PRIV_SPAWN:
    case PRIV_SPAWN_LARGE:
        return 0; /* EV_SPAWNED answers */
    case PRIV_SET_RECORD:
        return 0; /* one-way */
    default:
        return priv_is_request(t) ? PRIV_R_OK : 0;
    }
}

const char *
priv_type_name(enum priv_type t)
{
    static const char *const req[] = {
            [PRIV_HELLO] = "HELLO",
            [PRIV_CREATE] = "CREATE",
            [PRIV_SPAWN] = "SPAWN",
            [PRIV_SIGNAL] = "SIGNAL",
            [PRIV_SET_LIMITS] = "SET_LIMITS",
            [PRIV_FREEZE] = "FREEZE",
            [PRIV_STATS] = "STATS",
            [PRIV_KILL] = "KILL",
            [PRIV_OPEN_HELPER] = "OPEN_HELPER",
            [PRIV_OPEN_PTY] = "OPEN_PTY",
            [PRIV_NETNS_SOCKET] = "NETNS_SOCKET",
            [PRIV_IDMAP] = "IDMAP",
            [PRIV_AREA_CREATE] = "AREA_CREATE",
            [PRIV_AREA_USAGE] = "AREA_USAGE",
            [PRIV_AREA_DESTROY] = "AREA_DESTROY",
            [PRIV_SET_RECORD] = "SET_RECORD",
            [PRIV_LIST] = "LIST",
            [PRIV_ADOPT] = "ADOPT",
            [PRIV_KILL_HELPER] = "KILL_HELPER",
            [PRIV_SPAWN_LARGE] = "SPAWN_LARGE",
            [PRIV_TREE_EMPTY] = "TREE_EMPTY",
            [PRIV_LAYER_INSTALL] = "LAYER_INSTALL",
    };
    if (priv_is_request((int)t))
        return req[t];
    switch (t) {
    case PRIV_R_OK:
        return "R_OK";
    case PRIV_R_ERR:
        return "R_ERR";
    case PRIV_R_HELLO:
        return "R_HELLO";
    case PRIV_R_STATS:
        return "R_STATS";
    case PRIV_R_HELPER:
        return "R_HELPER";
    case PRIV_R_PTY:
        return "R_PTY";
    case PRIV_R_FD:
        return "R_FD";
    case PRIV_R_USAGE:
        return "R_USAGE";
    case PRIV_R_LIST:
        return "R_LIST";
    case PRIV_EV_READY:
        return "EV_READY";
    case PRIV_EV_SPAWNED:
        return "EV_SPAWNED";
    case PRIV_EV_EXITED:
        return "EV_EXITED";
    case PRIV_EV_GONE:
        return "EV_GONE";
    case PRIV_EV_LAYER:
        return "EV_LAYER";
    default:
        return "unknown";
    }
}

static bool
has_id(enum priv_type t)
{
    return (priv_is_request((int)t) && t != PRIV_HELLO && t != PRIV_AREA_CREATE &&
            t != PRIV_AREA_USAGE && t != PRIV_AREA_DESTROY && t != PRIV_LIST &&
            t != PRIV_TREE_EMPTY && t != PRIV_LAYER_INSTALL) ||
           (priv_is_event((int)t) && t != PRIV_EV_LAYER);
}

static bool
ready_ok(const struct priv_ready *f)
{
    return f->init_pid >= 0 && abs_path_ok(f->home_user) && abs_path_ok(f->home_root);
}

/* A SPAWN's argv and env, wherever they travel. */
static bool
args_ok(const struct priv_msg *m)
{
    size_t n = 0;
    if (!m->argv[0] || !m->argv[0][0])
        return false;
    for (size_t i = 0; m->argv[i]; i++)
        if (++n > PRIV_ARGS_MAX)
            return false;
    for (size_t i = 0; m->env[i]; i++)
        if (++n > PRIV_ARGS_MAX || !env_ok(m->env[i]))
            return false;
    return true;
}

/* Every limit of a message, the same for both sides. */
static bool
check(const struct priv_msg *m)
{
    if (has_id(m->type) && !priv_id_ok(m->id))
        return false;
    if (priv_is_event((int)m->type) ? m->seq != 0 : m->seq == 0)
        return false;
    switch (m->type) {
    case PRIV_CREATE:
        if (m->nlayers > JAIL_MAX_LAYERS || (m->upper && !priv_name_ok(m->upper)))
            return false;
        for (uint32_t i = 0; i < m->nlayers; i++)
            if (!priv_name_ok(m->layers[i]))
                return false;
        return true;
    case PRIV_SPAWN:
        return m->flag <= 1 && abs_path_ok(m->cwd) && args_ok(m);
    case PRIV_SPAWN_LARGE:
        /* argv and env travel in the memfd, never in the body */
        return m->flag <= 1 && abs_path_ok(m->cwd) && !m->argv[0] && !m->env[0];
    case PRIV_SET_RECORD:
        return m->record_len <= PRIV_RECORD_MAX && (m->record || !m->record_len);
    case PRIV_R_LIST:
        if (m->nlist > PRIV_LIST_MAX)
            return false;
        for (uint32_t i = 0; i < m->nlist; i++) {
            const struct priv_entry *e = &m->list[i];
            if (!priv_id_ok(e->id) || e->record_len > PRIV_RECORD_MAX ||
                (!e->record && e->record_len) || (e->ready && !ready_ok(&e->facts)))
                return false;
        }
        return true;
    case PRIV_SIGNAL:
        return m->pid > 0 && m->a >= 1 && m->a <= PRIV_SIG_MAX && m->flag <= 1;
    case PRIV_FREEZE:
    case PRIV_OPEN_HELPER:
        return m->flag <= 1;
    case PRIV_OPEN_PTY:
        return m->flag <= 1 && m->a >= 1 && m->a <= PRIV_PTY_MAX && m->b >= 1 &&
               m->b <= PRIV_PTY_MAX;
    case PRIV_NETNS_SOCKET:
        return (m->a == AF_INET || m->a == AF_INET6) && (m->b == SOCK_STREAM || m->b == SOCK_DGRAM);
    case PRIV_AREA_CREATE:
    case PRIV_AREA_USAGE:
    case PRIV_AREA_DESTROY:
        return priv_name_ok(m->name);
    case PRIV_LAYER_INSTALL:
        return priv_name_ok(m->name) && priv_name_ok(m->layer);
    case PRIV_EV_LAYER:
        return priv_name_ok(m->layer) && m->errnum >= 0 && m->errnum <= PRIV_ERRNO_MAX &&
               text_ok(m->text, PRIV_TEXT_MAX);
    case PRIV_HELLO:
        return true;
    case PRIV_R_ERR:
        return m->errnum > 0 && m->errnum <= PRIV_ERRNO_MAX && text_ok(m->text, PRIV_TEXT_MAX);
    case PRIV_R_HELLO:
        return m->hello.mode < _JAIL_MODE_MAX && text_ok(m->hello.missing, PRIV_MISS_MAX);
    case PRIV_EV_READY:
        if (m->errnum < 0 || m->errnum > PRIV_ERRNO_MAX || !text_ok(m->text, PRIV_TEXT_MAX))
            return false;
        return m->errnum != 0 || ready_ok(&m->ready);
    case PRIV_EV_SPAWNED:
        if (m->errnum < 0 || m->errnum > PRIV_ERRNO_MAX || !text_ok(m->text, PRIV_TEXT_MAX))
            return false;
        return m->errnum ? m->pid == 0 : m->pid > 0;
    case PRIV_EV_EXITED:
        return m->pid > 0;
    default:
        return true;
    }
}

/* --- encoding --- */

static void
put_limits(struct w *w, const struct jail_limits *l)
{
    put_u64(w, l->memory_bytes);
    put_u32(w, l->cpu_millis);
    put_u32(w, l->pids);
    put_u64(w, l->disk_bytes);
}

/* argc, envc, then the strings: a SPAWN's tail. */
static void
put_args(struct w *w, const struct priv_msg *m)
{
    uint32_t argc = 0, envc = 0;
    while (m->argv[argc])
        argc++;
    while (m->env[envc])
        envc++;
    put_u32(w, argc);
    put_u32(w, envc);
    for (uint32_t i = 0; i < argc; i++)
        put_str(w, m->argv[i]);
    for (uint32_t i = 0; i < envc; i++)
        put_str(w, m->env[i]);
}

static void
put_ready(struct w *w, const struct priv_ready *f)
{
    put_u64(w, f->timings.prepare_us);
    put_u64(w, f->timings.clone_us);
    put_u64(w, f->timings.init_us);
    put_u64(w, f->timings.total_us);
    put_u32(w, f->user_uid);
    put_u32(w, f->user_gid);
    put_u32(w, f->root_uid);
    put_u32(w, (uint32_t)f->init_pid);
    put_str(w, f->home_user);
    put_str(w, f->home_root);
}

long
priv_encode(void *buf, size_t cap, const struct priv_msg *m)
{
    struct w w = {.p = buf, .cap = cap < PRIV_MSG_MAX ? cap : PRIV_MSG_MAX};
    struct priv_hdr h = {.magic = PRIV_MAGIC,
                         .type = (uint16_t)m->type,
                         .nfds = (uint16_t)priv_type_fds(m->type),
                         .seq = m->seq};

    if (!priv_is_request((int)m->type) && !priv_is_reply((int)m->type) &&
        !priv_is_event((int)m->type))
        return -EINVAL;
    if (!check(m))
        return -EINVAL;
    put(&w, &h, sizeof(h));
    if (has_id(m->type))
        put_str(&w, m->id);
    switch (m->type) {
    case PRIV_HELLO:
        put_u32(&w, m->a);
        break;
    case PRIV_CREATE:
        put_limits(&w, &m->limits);
        put_u32(&w, m->nlayers);
        for (uint32_t i = 0; i < m->nlayers; i++)
            put_str(&w, m->layers[i]);
        put_str(&w, m->upper ? m->upper : "");
        put_u64(&w, m->fs_disk_bytes);
        break;
    case PRIV_SPAWN:
    case PRIV_SPAWN_LARGE:
        put_u64(&w, m->u64);
        put_u32(&w, m->flag);
        put_str(&w, m->cwd);
        if (m->type == PRIV_SPAWN)
            put_args(&w, m);
        break;
    case PRIV_SET_RECORD:
        put_bytes(&w, m->record, m->record_len);
        break;
    case PRIV_LIST:
    case PRIV_KILL_HELPER:
    case PRIV_R_HELPER:
        put_u32(&w, m->a);
        break;
    case PRIV_R_LIST:
        put_u32(&w, m->a);
        put_u32(&w, m->nlist);
        for (uint32_t i = 0; i < m->nlist; i++) {
            const struct priv_entry *e = &m->list[i];
            put_str(&w, e->id);
            put_u32(&w, e->ready ? 1 : 0);
            if (e->ready)
                put_ready(&w, &e->facts);
            put_bytes(&w, e->record, e->record_len);
        }
        break;
    case PRIV_SIGNAL:
        put_u32(&w, (uint32_t)m->pid);
        put_u32(&w, m->a);
        put_u32(&w, m->flag);
        break;
    case PRIV_SET_LIMITS:
        put_limits(&w, &m->limits);
        break;
    case PRIV_FREEZE:
    case PRIV_OPEN_HELPER:
        put_u32(&w, m->flag);
        break;
    case PRIV_OPEN_PTY:
        put_u32(&w, m->flag);
        put_u32(&w, m->a);
        put_u32(&w, m->b);
        break;
    case PRIV_NETNS_SOCKET:
        put_u32(&w, m->a);
        put_u32(&w, m->b);
        break;
    case PRIV_AREA_CREATE:
        put_str(&w, m->name);
        put_u64(&w, m->u64);
        break;
    case PRIV_AREA_USAGE:
    case PRIV_AREA_DESTROY:
        put_str(&w, m->name);
        break;
    case PRIV_LAYER_INSTALL:
        put_str(&w, m->name);
        put_str(&w, m->layer);
        break;
    case PRIV_EV_LAYER:
        put_str(&w, m->layer);
        put_u32(&w, (uint32_t)m->errnum);
        put_str(&w, m->text);
        break;
    case PRIV_R_ERR:
        put_u32(&w, (uint32_t)m->errnum);
        put_str(&w, m->text);
        break;
    case PRIV_R_HELLO:
        put_u32(&w, m->hello.version);
        put_u32(&w, m->hello.mode);
        put_u32(&w, m->hello.uid_slots);
        put_u32(&w, m->hello.has_disk ? 1 : 0);
        put_u32(&w, m->hello.oom_protect ? 1 : 0);
        put_u64(&w, m->hello.root_caps);
        put_str(&w, m->hello.missing);
        break;
    case PRIV_R_STATS:
        put_u64(&w, m->stats.memory_bytes);
        put_u64(&w, m->stats.memory_peak);
        put_u64(&w, m->stats.pids);
        put_u64(&w, m->stats.cpu_usec);
        put_u64(&w, m->stats.oom_kills);
        put_u32(&w, m->disk_known ? 1 : 0);
        put_u64(&w, m->disk_bytes);
        break;
    case PRIV_R_USAGE:
        put_u64(&w, m->u64);
        break;
    case PRIV_EV_READY:
        put_u32(&w, (uint32_t)m->errnum);
        put_str(&w, m->text);
        if (m->errnum)
            break;
        put_ready(&w, &m->ready);
        break;
    case PRIV_EV_SPAWNED:
        put_u64(&w, m->u64);
        put_u32(&w, (uint32_t)m->pid);
        put_u32(&w, (uint32_t)m->errnum);
        put_str(&w, m->text);
        break;
    case PRIV_EV_EXITED:
        put_u32(&w, (uint32_t)m->pid);
        put_u32(&w, (uint32_t)m->status);
        break;
    default:
        break;
    }
    if (w.bad)
        return -EMSGSIZE;
    h.len = (uint32_t)(w.len - sizeof(h));
    memcpy(buf, &h, sizeof(h));
    return (long)w.len;
}

/* --- decoding --- */

static void
get_limits(struct r *r, struct jail_limits *l)
{
    l->memory_bytes = get_u64(r);
    l->cpu_millis = get_u32(r);
    l->pids = get_u32(r);
    l->disk_bytes = get_u64(r);
}

static uint32_t
get_bool(struct r *r)
{
    uint32_t v = get_u32(r);
    if (v > 1)
        r->bad = true;
    return v;
}

/* A SPAWN's tail into m->argv and m->env, each string at most max bytes. */
static int
get_args(struct r *r, struct priv_msg *m, size_t max)
{
    uint32_t argc = get_u32(r), envc = get_u32(r);
    if (r->bad || argc == 0 || argc > PRIV_ARGS_MAX || envc > PRIV_ARGS_MAX - argc)
        return -EBADMSG;
    for (uint32_t i = 0; i < argc && !r->bad; i++)
        m->argv[i] = get_str(r, max);
    for (uint32_t i = 0; i < envc && !r->bad; i++)
        m->env[i] = get_str(r, max);
    return r->bad ? -EBADMSG : 0;
}

static void
get_ready(struct r *r, struct priv_ready *f)
{
    f->timings.prepare_us = get_u64(r);
    f->timings.clone_us = get_u64(r);
    f->timings.init_us = get_u64(r);
    f->timings.total_us = get_u64(r);
    f->user_uid = get_u32(r);
    f->user_gid = get_u32(r);
    f->root_uid = get_u32(r);
    f->init_pid = (int32_t)get_u32(r);
    f->home_user = get_str(r, PRIV_PATH_MAX);
    f->home_root = get_str(r, PRIV_PATH_MAX);
}

static int
decode(const void *buf, size_t n, unsigned nfds, bool requests, struct priv_msg *m)
{
    struct priv_hdr h;
    struct r r = {.p = buf, .len = n, .pos = sizeof(h)};

    if (n < sizeof(h) || n > PRIV_MSG_MAX)
        return -EBADMSG;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != PRIV_MAGIC || h.len != n - sizeof(h))
        return -EBADMSG;
    if (requests ? !priv_is_request(h.type) : !priv_is_reply(h.type) && !priv_is_event(h.type))
        return -EBADMSG;
    if (h.nfds != nfds || nfds != priv_type_fds((enum priv_type)h.type))
        return -EBADMSG;
    memset(m, 0, sizeof(*m));
    m->type = (enum priv_type)h.type;
    m->seq = h.seq;
    if (has_id(m->type))
        m->id = get_str(&r, PRIV_ID_MAX);
    switch (m->type) {
    case PRIV_HELLO:
        m->a = get_u32(&r);
        break;
    case PRIV_CREATE: {
        get_limits(&r, &m->limits);
        m->nlayers = get_u32(&r);
        if (m->nlayers > JAIL_MAX_LAYERS)
            return -EBADMSG;
        for (uint32_t i = 0; i < m->nlayers; i++)
            m->layers[i] = get_str(&r, PRIV_NAME_MAX);
        const char *up = get_str(&r, PRIV_NAME_MAX);
        m->upper = up[0] ? up : NULL;
        m->fs_disk_bytes = get_u64(&r);
        break;
    }
    case PRIV_SPAWN:
    case PRIV_SPAWN_LARGE:
        m->u64 = get_u64(&r);
        m->flag = get_bool(&r);
        m->cwd = get_str(&r, PRIV_PATH_MAX);
        if (m->type == PRIV_SPAWN && get_args(&r, m, PRIV_BODY_MAX) < 0)
            return -EBADMSG;
        break;
    case PRIV_SET_RECORD:
        m->record = get_bytes(&r, PRIV_RECORD_MAX, &m->record_len);
        break;
    case PRIV_LIST:
    case PRIV_KILL_HELPER:
    case PRIV_R_HELPER:
        m->a = get_u32(&r);
        break;
    case PRIV_R_LIST:
        m->a = get_u32(&r);
        m->nlist = get_u32(&r);
        if (r.bad || m->nlist > PRIV_LIST_MAX)
            return -EBADMSG;
        for (uint32_t i = 0; i < m->nlist && !r.bad; i++) {
            struct priv_entry *e = &m->list[i];
            e->id = get_str(&r, PRIV_ID_MAX);
            e->ready = get_bool(&r);
            if (e->ready)
                get_ready(&r, &e->facts);
            e->record = get_bytes(&r, PRIV_RECORD_MAX, &e->record_len);
        }
        break;
    case PRIV_SIGNAL:
        m->pid = (int32_t)get_u32(&r);
        m->a = get_u32(&r);
        m->flag = get_bool(&r);
        break;
    case PRIV_SET_LIMITS:
        get_limits(&r, &m->limits);
        break;
    case PRIV_FREEZE:
    case PRIV_OPEN_HELPER:
        m->flag = get_bool(&r);
        break;
    case PRIV_OPEN_PTY:
        m->flag = get_bool(&r);
        m->a = get_u32(&r);
        m->b = get_u32(&r);
        break;
    case PRIV_NETNS_SOCKET:
        m->a = get_u32(&r);
        m->b = get_u32(&r);
        break;
    case PRIV_AREA_CREATE:
        m->name = get_str(&r, PRIV_NAME_MAX);
        m->u64 = get_u64(&r);
        break;
    case PRIV_AREA_USAGE:
    case PRIV_AREA_DESTROY:
        m->name = get_str(&r, PRIV_NAME_MAX);
        break;
    case PRIV_LAYER_INSTALL:
        m->name = get_str(&r, PRIV_NAME_MAX);
        m->layer = get_str(&r, PRIV_NAME_MAX);
        break;
    case PRIV_EV_LAYER: {
        m->layer = get_str(&r, PRIV_NAME_MAX);
        uint32_t e = get_u32(&r);
        m->errnum = e > PRIV_ERRNO_MAX ? -1 : (int)e;
        m->text = get_str(&r, PRIV_TEXT_MAX);
        break;
    }
    case PRIV_R_ERR:
        m->errnum = (int)get_u32(&r);
        m->text = get_str(&r, PRIV_TEXT_MAX);
        break;
    case PRIV_R_HELLO:
        m->hello.version = get_u32(&r);
        m->hello.mode = get_u32(&r);
        m->hello.uid_slots = get_u32(&r);
        m->hello.has_disk = get_bool(&r);
        m->hello.oom_protect = get_bool(&r);
        m->hello.root_caps = get_u64(&r);
        m->hello.missing = get_str(&r, PRIV_MISS_MAX);
        break;
    case PRIV_R_STATS:
        m->stats.memory_bytes = get_u64(&r);
        m->stats.memory_peak = get_u64(&r);
        m->stats.pids = get_u64(&r);
        m->stats.cpu_usec = get_u64(&r);
        m->stats.oom_kills = get_u64(&r);
        m->disk_known = get_bool(&r);
        m->disk_bytes = get_u64(&r);
        break;
    case PRIV_R_USAGE:
        m->u64 = get_u64(&r);
        break;
    case PRIV_EV_READY: {
        uint32_t e = get_u32(&r);
        m->errnum = e > PRIV_ERRNO_MAX ? -1 : (int)e;
        m->text = get_str(&r, PRIV_TEXT_MAX);
        if (e)
            break;
        get_ready(&r, &m->ready);
        break;
    }
    case PRIV_EV_SPAWNED: {
        m->u64 = get_u64(&r);
        m->pid = (int32_t)get_u32(&r);
        uint32_t e = get_u32(&r);
        m->errnum = e > PRIV_ERRNO_MAX ? -1 : (int)e;
        m->text = get_str(&r, PRIV_TEXT_MAX);
        break;
    }
    case PRIV_EV_EXITED:
        m->pid = (int32_t)get_u32(&r);
        m->status = (int32_t)get_u32(&r);
        break;
    default:
        break;
    }
    if (r.bad || r.pos != r.len || !check(m))
        return -EBADMSG;
    return 0;
}

int
priv_decode_request(const void *buf, size_t n, unsigned nfds, struct priv_msg *ret)
{
    return decode(buf, n, nfds, true, ret);
}

int
priv_decode_answer(const void *buf, size_t n, unsigned nfds, struct priv_msg *ret)
{
    return decode(buf, n, nfds, false, ret);
}

size_t
priv_entry_size(const struct priv_entry *e)
{
    size_t n = 4 + strlen(e->id) + 1 + 4 + 4 + e->record_len;
    if (e->ready)
        n += 4 * 8 + 4 * 4 + 4 + strlen(e->facts.home_user) + 1 + 4 + strlen(e->facts.home_root) +
             1;
    return n;
}

long
priv_encode_args(void *buf, size_t cap, const struct priv_msg *m)
{
    struct w w = {.p = buf, .cap = cap < PRIV_ARGS_BYTES_MAX ? cap : PRIV_ARGS_BYTES_MAX};
    if (!args_ok(m))
        return -EINVAL;
    put_args(&w, m);
    return w.bad ? -EMSGSIZE : (long)w.len;
}

int
priv_decode_args(const void *buf, size_t n, struct priv_msg *m)
{
    struct r r = {.p = buf, .len = n};
    memset(m->argv, 0, sizeof(m->argv));
    memset(m->env, 0, sizeof(m->env));
    if (n > PRIV_ARGS_BYTES_MAX || get_args(&r, m, PRIV_ARGS_BYTES_MAX) < 0 || r.pos != r.len ||
        !args_ok(m)) {
        memset(m->argv, 0, sizeof(m->argv));
        memset(m->env, 0, sizeof(m->env));
        return -EBADMSG;
    }
    return 0;
}
