/*
 * proto.c - encoder and strict decoder for the abxd <-> init messages.
 *
 * Linked into abxd and into the static abx-init; uses no allocation, no
 * stdio and no errno-setting library calls beyond memcpy/strlen.
 */
#include "jail/proto.h"

#include <errno.h>
#include <string.h>

void
proto_writer_init(struct proto_writer *w, void *buf, size_t cap, uint32_t type)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->overflow = cap < sizeof(struct proto_hdr);
    if (!w->overflow) {
        struct proto_hdr h = {.type = type, .len = 0};
        memcpy(w->buf, &h, sizeof(h));
        w->len = sizeof(h);
    }
}

static void
put(struct proto_writer *w, const void *p, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    if (n) /* memcpy(dst, NULL, 0) is undefined */
        memcpy(w->buf + w->len, p, n);
    w->len += n;
}

void
proto_put_u32(struct proto_writer *w, uint32_t v)
{
    put(w, &v, sizeof(v));
}

void
proto_put_u64(struct proto_writer *w, uint64_t v)
{
    put(w, &v, sizeof(v));
}

void
proto_put_bytes(struct proto_writer *w, const void *p, uint32_t n)
{
    proto_put_u32(w, n);
    put(w, p, n);
}

void
proto_put_str(struct proto_writer *w, const char *s)
{
    size_t n = strlen(s);
    if (n > PROTO_MAX_MSG) {
        w->overflow = true;
        return;
    }
    proto_put_u32(w, (uint32_t)n);
    put(w, s, n + 1);
}

long
proto_writer_finish(struct proto_writer *w)
{
    if (w->overflow || w->len > PROTO_MAX_MSG)
        return -EMSGSIZE;
    uint32_t len = (uint32_t)w->len;
    memcpy(w->buf + offsetof(struct proto_hdr, len), &len, sizeof(len));
    return (long)w->len;
}

int
proto_reader_init(struct proto_reader *r, const void *buf, size_t n)
{
    struct proto_hdr h;

    r->buf = buf;
    r->len = n;
    r->pos = sizeof(h);
    r->bad = false;
    if (n < sizeof(h) || n > PROTO_MAX_MSG) {
        r->bad = true;
        return -EBADMSG;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.len != n || h.type > 0x7fffffffu) {
        r->bad = true;
        return -EBADMSG;
    }
    return (int)(h.type & 0x7fffffff);
}

static bool
get(struct proto_reader *r, void *p, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        memset(p, 0, n);
        return false;
    }
    memcpy(p, r->buf + r->pos, n);
    r->pos += n;
    return true;
}

uint32_t
proto_get_u32(struct proto_reader *r)
{
    uint32_t v;
    get(r, &v, sizeof(v));
    return v;
}

uint64_t
proto_get_u64(struct proto_reader *r)
{
    uint64_t v;
    get(r, &v, sizeof(v));
    return v;
}

const void *
proto_get_bytes(struct proto_reader *r, uint32_t *ret_len)
{
    uint32_t n = proto_get_u32(r);
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        *ret_len = 0;
        return "";
    }
    const void *p = r->buf + r->pos;
    r->pos += n;
    *ret_len = n;
    return p;
}

const char *
proto_get_str(struct proto_reader *r, uint32_t *ret_len)
{
    uint32_t n = proto_get_u32(r);
    /* n bytes, then the NUL; no NUL may hide inside. */
    if (r->bad || n >= r->len - r->pos || r->buf[r->pos + n] != '\0' ||
        memchr(r->buf + r->pos, '\0', n)) {
        r->bad = true;
        if (ret_len)
            *ret_len = 0;
        return "";
    }
    const char *s = r->buf + r->pos;
    r->pos += (size_t)n + 1;
    if (ret_len)
        *ret_len = n;
    return s;
}

int
proto_reader_done(const struct proto_reader *r)
{
    return (r->bad || r->pos != r->len) ? -EBADMSG : 0;
}

int
proto_encode_config(struct proto_writer *w, const struct proto_config *c)
{
    proto_put_u32(w, c->version);
    proto_put_u32(w, c->mode);
    proto_put_u32(w, c->user_uid);
    proto_put_u32(w, c->user_gid);
    proto_put_u32(w, c->root_uid_host);
    proto_put_u32(w, c->root_gid_host);
    proto_put_u32(w, c->tty_gid_host);
    proto_put_u64(w, c->root_bytes);
    proto_put_u64(w, c->tmp_bytes);
    proto_put_u64(w, c->shm_bytes);
    proto_put_str(w, c->rootmnt);
    proto_put_str(w, c->workspace);
    proto_put_str(w, c->etc);
    proto_put_str(w, c->hostname);
    proto_put_bytes(w, c->bpf, c->bpf_len);
    if (c->nbinds > PROTO_MAX_BINDS)
        return -E2BIG;
    proto_put_u32(w, c->nbinds);
    for (uint32_t i = 0; i < c->nbinds; i++) {
        proto_put_str(w, c->binds[i].src);
        proto_put_str(w, c->binds[i].dst);
        proto_put_u32(w, c->binds[i].flags);
    }
    if (c->ncgroups > PROTO_MAX_CGROUPS)
        return -E2BIG;
    proto_put_u32(w, c->ncgroups);
    for (uint32_t i = 0; i < c->ncgroups; i++)
        proto_put_str(w, c->cgroups[i]);
    if (c->nlayers > PROTO_MAX_LAYERS)
        return -E2BIG;
    proto_put_u32(w, c->nlayers);
    for (uint32_t i = 0; i < c->nlayers; i++)
        proto_put_str(w, c->layers[i]);
    proto_put_str(w, c->upper ? c->upper : "");
    proto_put_u64(w, c->upper_bytes);
    proto_put_str(w, c->sudo ? c->sudo : "");
    long n = proto_writer_finish(w);
    return n < 0 ? (int)n : 0;
}

int
proto_decode_config(const void *buf, size_t n, struct proto_config *c)
{
    struct proto_reader r;

    if (proto_reader_init(&r, buf, n) != PROTO_CONFIG)
        return -EBADMSG;
    memset(c, 0, sizeof(*c));
    c->version = proto_get_u32(&r);
    c->mode = proto_get_u32(&r);
    c->user_uid = proto_get_u32(&r);
    c->user_gid = proto_get_u32(&r);
    c->root_uid_host = proto_get_u32(&r);
    c->root_gid_host = proto_get_u32(&r);
    c->tty_gid_host = proto_get_u32(&r);
    c->root_bytes = proto_get_u64(&r);
    c->tmp_bytes = proto_get_u64(&r);
    c->shm_bytes = proto_get_u64(&r);
    c->rootmnt = proto_get_str(&r, NULL);
    c->workspace = proto_get_str(&r, NULL);
    c->etc = proto_get_str(&r, NULL);
    c->hostname = proto_get_str(&r, NULL);
    c->bpf = proto_get_bytes(&r, &c->bpf_len);
    c->nbinds = proto_get_u32(&r);
    if (c->nbinds > PROTO_MAX_BINDS)
        return -EBADMSG;
    for (uint32_t i = 0; i < c->nbinds; i++) {
        c->binds[i].src = proto_get_str(&r, NULL);
        c->binds[i].dst = proto_get_str(&r, NULL);
        c->binds[i].flags = proto_get_u32(&r);
    }
    c->ncgroups = proto_get_u32(&r);
    if (c->ncgroups > PROTO_MAX_CGROUPS)
        return -EBADMSG;
    for (uint32_t i = 0; i < c->ncgroups; i++)
        c->cgroups[i] = proto_get_str(&r, NULL);
    c->nlayers = proto_get_u32(&r);
    if (c->nlayers > PROTO_MAX_LAYERS)
        return -EBADMSG;
    for (uint32_t i = 0; i < c->nlayers; i++)
        c->layers[i] = proto_get_str(&r, NULL);
    c->upper = proto_get_str(&r, NULL);
    c->upper_bytes = proto_get_u64(&r);
    c->sudo = proto_get_str(&r, NULL);
    if (c->version != PROTO_VERSION || c->mode > PROTO_MODE_NONE)
        return -EBADMSG;
    return proto_reader_done(&r);
}

int
proto_encode_spawn(struct proto_writer *w, uint64_t token, uint32_t uid, uint32_t gid,
                   uint32_t flags, const char *cwd, const char *const *argv, const char *const *env)
{
    uint32_t argc = 0, envc = 0;
    while (argv[argc])
        argc++;
    while (env && env[envc])
        envc++;
    if (argc == 0 || argc + envc > PROTO_MAX_ARGS)
        return -E2BIG;
    proto_put_u64(w, token);
    proto_put_u32(w, uid);
    proto_put_u32(w, gid);
    proto_put_u32(w, flags);
    proto_put_str(w, cwd);
    proto_put_u32(w, argc);
    proto_put_u32(w, envc);
    for (uint32_t i = 0; i < argc; i++)
        proto_put_str(w, argv[i]);
    for (uint32_t i = 0; i < envc; i++)
        proto_put_str(w, env[i]);
    long n = proto_writer_finish(w);
    return n < 0 ? (int)n : 0;
}

int
proto_decode_spawn(struct proto_reader *r, struct proto_spawn *s)
{
    s->token = proto_get_u64(r);
    s->uid = proto_get_u32(r);
    s->gid = proto_get_u32(r);
    s->flags = proto_get_u32(r);
    s->cwd = proto_get_str(r, NULL);
    s->argc = proto_get_u32(r);
    s->envc = proto_get_u32(r);
    if (r->bad || s->argc == 0 || s->argc > PROTO_MAX_ARGS || s->envc > PROTO_MAX_ARGS ||
        s->argc + s->envc > PROTO_MAX_ARGS)
        return -EBADMSG;
    return 0;
}

int
proto_decode_event(const void *buf, size_t n, struct proto_event *ev)
{
    struct proto_reader r;
    int type = proto_reader_init(&r, buf, n);

    memset(ev, 0, sizeof(*ev));
    ev->step = "";
    if (type < 0)
        return -EBADMSG;
    ev->type = (uint32_t)type;
    switch (type) {
    case PROTO_NEED_MAP:
        break;
    case PROTO_READY:
        ev->usec = proto_get_u64(&r);
        break;
    case PROTO_FAILED:
        ev->errnum = proto_get_u32(&r);
        ev->step = proto_get_str(&r, NULL);
        break;
    case PROTO_SPAWNED:
        ev->token = proto_get_u64(&r);
        ev->pid = (int32_t)proto_get_u32(&r);
        ev->errnum = proto_get_u32(&r);
        ev->step = proto_get_str(&r, NULL);
        if (!r.bad && (ev->pid > 0) == (ev->errnum != 0))
            return -EBADMSG; /* exactly one of pid or error */
        break;
    case PROTO_EXITED:
        ev->pid = (int32_t)proto_get_u32(&r);
        ev->status = (int32_t)proto_get_u32(&r);
        if (!r.bad && ev->pid <= 0)
            return -EBADMSG;
        break;
    default:
        return -EBADMSG;
    }
    if (ev->errnum > 4095 || (ev->pid < 0))
        return -EBADMSG;
    return proto_reader_done(&r);
}
