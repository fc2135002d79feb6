/*
 * relay.c - the HTTP relay of a reverse proxy (see relay.h): request head
 * and body upstream, the answer's head and body back through httpresp, and
 * the byte pump after a 101. Every read from the upstream is bounded by
 * what the client side has room for, so a fast upstream and a slow client
 * never grow a buffer past HTTP_RELAY_BUF.
 */
#include "http/relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/httpresp.h"
#include "http/server.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/err.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/loop.h"
#include "util/parse.h"
#include "util/timeutil.h"

#define RELAY_REQ_HEAD_MAX    (256 * 1024) /* the request head sent upstream */
#define RELAY_IDLE_TIMEOUT_MS (600 * 1000) /* no byte either way this long: cut */

enum phase {
    PH_CONNECT,   /* waiting for the caller's socket */
    PH_HEAD,      /* sending the request, waiting for the response head */
    PH_BODY,      /* relaying the response body */
    PH_UPGRADING, /* 101 parked for the client, waiting for its socket */
    PH_PUMP,      /* raw bytes both ways */
    PH_OVER,      /* answered and upstream closed; waiting for on_close */
};

struct http_relay {
    struct loop *loop;
    struct http_req *req;
    const struct http_relay_ops *ops;
    void *ud;
    char label[128]; /* for debug lines */
    enum phase phase;
    int fd; /* upstream */
    struct loop_io *io;
    struct loop_timer *timer;
    bool connecting;
    struct buf out; /* to the upstream: request head and body, then client bytes */
    bool chunked_body, body_done, out_failed;
    bool upgrade; /* the client asked for a protocol upgrade */
    char upgrade_proto[256];
    struct httpresp *resp;
    struct http_stream *stream;
    bool stream_waits; /* the stream was full: read again on fill */
    /* pump */
    struct http_upgrade *up;
    int cfd; /* the client's socket (MHD's) */
    struct loop_io *cio;
    struct buf in; /* from the upstream to the client */
    bool c_eof, u_eof;
};

static char scratch[HTTP_RELAY_BUF]; /* one loop thread: reads land here first */

/* --- the relay --- */

/* Reads up to max bytes onto the end of b: > 0 bytes, 0 end of file,
 * -EAGAIN nothing yet, or -errno. */
static ssize_t
read_into(int fd, struct buf *b, size_t max)
{
    int r = buf_reserve(b, max);
    if (r < 0)
        return r;
    ssize_t n = recv(fd, b->data + b->len, max, 0);
    if (n < 0)
        return errno == EINTR ? -EAGAIN : -errno;
    b->len += (size_t)n;
    b->data[b->len] = '\0';
    return n;
}

static void relay_over(struct http_relay *p);
static void up_update(struct http_relay *p);
static void pump_update(struct http_relay *p);
static void pump_close(struct http_relay *p);

static int
watch(struct loop *l, struct loop_io **io, int fd, uint32_t events, loop_io_fn fn, void *ud)
{
    /* No interest at all means no watcher: a level-triggered HUP we do not
     * want to act on yet would otherwise spin the loop. */
    if (!events) {
        loop_io_free(*io);
        *io = NULL;
        return 0;
    }
    if (*io)
        return loop_io_set_events(*io, events);
    return loop_io_add(l, fd, events, fn, ud, io);
}

static void
touch(struct http_relay *p)
{
    (void)loop_timer_arm(p->timer, now_msec() + RELAY_IDLE_TIMEOUT_MS);
}

static void
close_upstream(struct http_relay *p)
{
    loop_io_free(p->io);
    p->io = NULL;
    p->fd = safe_close(p->fd);
}

/* The request is answered (or cannot be any more): drop the upstream. */
static void
relay_over(struct http_relay *p)
{
    p->phase = PH_OVER;
    close_upstream(p);
    loop_timer_disarm(p->timer);
    http_req_resume_body(p->req);
}

static void
give_up(struct http_relay *p, enum http_relay_fail why, int errnum, const char *detail)
{
    log_debug("%s: relay failed (%d%s%s)", p->label, (int)why, detail ? ": " : "",
              detail ? detail : "");
    if (!http_req_answered(p->req))
        p->ops->fail(p->ud, p->req, why, errnum, detail);
    else if (p->stream)
        http_stream_abort(p->stream);
    relay_over(p);
}

/* Frees what http_relay_new() made, without telling the caller. */
static void
free_half(struct http_relay *p)
{
    close_upstream(p);
    loop_io_free(p->cio); /* the socket is MHD's */
    loop_timer_free(p->timer);
    http_stream_release(p->stream);
    httpresp_free(p->resp);
    buf_done(&p->out);
    buf_done(&p->in);
    free(p);
}

static void
relay_free(struct http_relay *p)
{
    if (!p)
        return;
    if (p->ops->done)
        p->ops->done(p->ud);
    free_half(p);
}

static void
relay_on_close(struct http_req *req, void *ud)
{
    (void)req;
    relay_free(ud);
}

/* --- response body --- */

static int
body_out(void *ud, const void *data, size_t n)
{
    struct http_relay *p = ud;
    return p->stream ? http_stream_write(p->stream, data, n) : -EPIPE;
}

static void
body_feed(struct http_relay *p, const char *data, size_t n)
{
    struct err err = {0};
    size_t used;
    int r = httpresp_feed(p->resp, data, n, body_out, p, &used, &err);
    if (r == HTTPRESP_DONE) {
        if (p->stream)
            http_stream_end(p->stream);
        relay_over(p);
    } else if (r < 0) {
        log_debug("%s: bad response body: %s", p->label, err.msg[0] ? err.msg : strerror(-r));
        if (p->stream)
            http_stream_abort(p->stream);
        relay_over(p);
    }
}

/* Reads what the stream has room for (never more: the de-chunked body is
 * never larger than what carried it). */
static void
body_read(struct http_relay *p)
{
    while (p->phase == PH_BODY && p->stream) {
        size_t room = MIN(http_stream_room(p->stream), sizeof(scratch));
        if (room == 0) {
            p->stream_waits = true;
            return;
        }
        ssize_t n = recv(p->fd, scratch, room, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            log_debug("%s: reading the body: %s", p->label, strerror(errno));
            http_stream_abort(p->stream);
            relay_over(p);
            return;
        }
        touch(p);
        if (n == 0) {
            struct err err = {0};
            if (httpresp_finish(p->resp, &err) == 0) {
                http_stream_end(p->stream);
            } else {
                log_debug("%s: %s", p->label, err.msg);
                http_stream_abort(p->stream);
            }
            relay_over(p);
            return;
        }
        body_feed(p, scratch, (size_t)n);
        if ((size_t)n < room)
            return;
    }
}

static void
stream_fill(struct http_stream *s, void *ud)
{
    struct http_relay *p = ud;
    (void)s;
    if (p->phase != PH_BODY)
        return;
    p->stream_waits = false;
    body_read(p);
    up_update(p);
}

static void
stream_closed(struct http_stream *s, void *ud)
{
    struct http_relay *p = ud;
    http_stream_release(s);
    p->stream = NULL;
    if (p->phase == PH_BODY)
        relay_over(p); /* the client went away */
}

static const struct http_stream_ops relay_ops = {
        .fill = stream_fill,
        .closed = stream_closed,
};

/* --- response head --- */

bool
http_token_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = list; s && *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - s) == n && !strncasecmp(s, name, n))
            return true;
        s = e;
    }
    return false;
}

/* Hop-by-hop fields (RFC 9110 7.6.1) and the framing MHD sets itself. */
bool
http_hop_by_hop(const char *name)
{
    static const char *const names[] = {
            "Connection",
            "Keep-Alive",
            "Proxy-Connection",
            "Proxy-Authenticate",
            "Proxy-Authorization",
            "TE",
            "Trailer",
            "Transfer-Encoding",
            "Upgrade",
            "Content-Length",
            "Expect",
    };
    for (size_t i = 0; i < ELEMENTSOF(names); i++)
        if (!strcasecmp(name, names[i]))
            return true;
    return false;
}

static void
relay_headers(struct http_relay *p)
{
    const char *conn = httpresp_get(p->resp, "Connection");
    size_t n = httpresp_header_count(p->resp);
    for (size_t i = 0; i < n; i++) {
        const struct httpresp_header *h = httpresp_header(p->resp, i);
        if (http_hop_by_hop(h->name) || http_token_listed(conn, h->name))
            continue;
        http_req_add_header(p->req, h->name, h->value);
    }
}

static void on_upgraded(struct http_upgrade *u, int fd, const char *extra, size_t extra_len,
                        void *ud);

static void
on_head(struct http_relay *p, const char *rest, size_t len)
{
    unsigned status = httpresp_status(p->resp);

    if (status == 101) {
        const char *proto = httpresp_get(p->resp, "Upgrade");
        if (!p->upgrade || !proto || !*proto) {
            give_up(p, HTTP_RELAY_UNASKED_UPGRADE, 0, NULL);
            return;
        }
        /* What the upstream sent after its 101 is the new protocol's. */
        if (buf_put(&p->in, rest, len) < 0) {
            give_up(p, HTTP_RELAY_NO_MEMORY, ENOMEM, NULL);
            return;
        }
        relay_headers(p);
        http_req_add_header(p->req, "Connection", "Upgrade");
        http_req_add_header(p->req, "Upgrade", proto);
        p->phase = PH_UPGRADING;
        http_respond_upgrade(p->req, on_upgraded, p);
        return;
    }
    relay_headers(p);
    if (httpresp_body_kind(p->resp) == HTTPRESP_BODY_NONE) {
        /* HEAD, 204, 304: not a stream, since MHD 0.9.75 ends even a
         * bodiless chunked answer with a last chunk, which breaks clients. */
        http_respond(p->req, status, NULL, "", 0);
        relay_over(p);
        return;
    }
    int r = http_stream_start_relay(p->req, status, &relay_ops, p, &p->stream);
    if (r < 0) {
        relay_over(p); /* the client is gone */
        return;
    }
    p->phase = PH_BODY;
    body_feed(p, rest, len);
}

static void
head_read(struct http_relay *p)
{
    struct err err = {0};
    size_t used;

    ssize_t n = recv(p->fd, scratch, sizeof(scratch), 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        give_up(p, HTTP_RELAY_RESET, errno, NULL);
        return;
    }
    touch(p);
    int r = n == 0 ? httpresp_finish(p->resp, &err)
                   : httpresp_feed(p->resp, scratch, (size_t)n, NULL, NULL, &used, &err);
    if (r == HTTPRESP_MORE && n > 0)
        return;
    if (r == HTTPRESP_HEAD) {
        on_head(p, scratch + used, (size_t)n - used);
        return;
    }
    give_up(p, HTTP_RELAY_BAD_RESPONSE, 0, err.msg[0] ? err.msg : NULL);
}

/* --- upstream I/O --- */

static void
up_write(struct http_relay *p)
{
    while (p->out.len > 0 && !p->out_failed) {
        ssize_t n = send(p->fd, p->out.data, p->out.len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            /* It stopped reading (answered early, or died): drop the rest
             * and still read what it says. */
            log_debug("%s: writing upstream: %s", p->label, strerror(errno));
            p->out_failed = true;
            buf_reset(&p->out);
            break;
        }
        buf_consume(&p->out, (size_t)n);
        touch(p);
    }
    if (p->out.len < HTTP_RELAY_BUF && p->phase != PH_PUMP)
        http_req_resume_body(p->req);
}

static void
connected(struct http_relay *p)
{
    p->connecting = false;
    p->phase = PH_HEAD;
    touch(p);
}

static void
up_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct http_relay *p = ud;
    (void)io;

    if (p->connecting) {
        int e = 0;
        socklen_t l = sizeof(e);
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
            e = errno;
        if (e == ECONNREFUSED) {
            give_up(p, HTTP_RELAY_REFUSED, ECONNREFUSED, NULL);
            return;
        }
        if (e) {
            give_up(p, HTTP_RELAY_CONNECT, e, NULL);
            return;
        }
        connected(p);
    }
    if (p->phase == PH_PUMP) {
        if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            up_write(p);
        if ((revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !p->u_eof &&
            p->in.len < HTTP_RELAY_BUF) {
            ssize_t n = read_into(p->fd, &p->in, HTTP_RELAY_BUF);
            if (n > 0)
                touch(p);
            else if (n != -EAGAIN)
                p->u_eof = true; /* closed, reset or out of memory: the end */
        }
        if (p->out_failed) {
            pump_close(p);
            return;
        }
        pump_update(p);
        return;
    }
    if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        up_write(p);
    if (p->phase == PH_HEAD && (revents & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        head_read(p);
    else if (p->phase == PH_BODY && (revents & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        body_read(p);
    up_update(p);
}

static void
up_update(struct http_relay *p)
{
    uint32_t ev = 0;
    if (p->fd < 0 || p->phase == PH_OVER)
        return;
    if (p->connecting) {
        ev = EPOLLOUT;
    } else {
        if (p->out.len && !p->out_failed)
            ev |= EPOLLOUT;
        if (p->phase == PH_HEAD || (p->phase == PH_BODY && p->stream && !p->stream_waits))
            ev |= EPOLLIN;
    }
    if (watch(p->loop, &p->io, p->fd, ev, up_io, p) < 0)
        give_up(p, HTTP_RELAY_WATCH, 0, NULL);
}

static void
on_timer(struct loop_timer *t, void *ud)
{
    struct http_relay *p = ud;
    (void)t;
    switch (p->phase) {
    case PH_CONNECT:
        give_up(p, HTTP_RELAY_CONNECT_TIMEOUT, 0, NULL);
        break;
    case PH_HEAD:
        give_up(p, p->connecting ? HTTP_RELAY_CONNECT_TIMEOUT : HTTP_RELAY_ANSWER_TIMEOUT, 0, NULL);
        break;
    case PH_BODY:
        log_debug("%s: the response stalled, cutting it", p->label);
        if (p->stream)
            http_stream_abort(p->stream);
        relay_over(p);
        break;
    case PH_PUMP:
        pump_close(p);
        break;
    default:
        break;
    }
}

/* --- the pump (after 101) --- */

static void
pump_close(struct http_relay *p)
{
    loop_io_free(p->cio);
    p->cio = NULL;
    close_upstream(p);
    loop_timer_disarm(p->timer);
    p->phase = PH_OVER;
    http_upgrade_close(p->up); /* on_close follows */
}

static void
client_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct http_relay *p = ud;
    (void)io;

    if ((revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && p->in.len) {
        ssize_t n = send(p->cfd, p->in.data, p->in.len, MSG_NOSIGNAL);
        if (n > 0) {
            buf_consume(&p->in, (size_t)n);
            touch(p);
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            pump_close(p);
            return;
        }
    }
    if ((revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !p->c_eof && p->out.len < HTTP_RELAY_BUF) {
        ssize_t n = read_into(p->cfd, &p->out, HTTP_RELAY_BUF);
        if (n > 0)
            touch(p);
        else if (n != -EAGAIN)
            p->c_eof = true;
    }
    pump_update(p);
}

static void
pump_update(struct http_relay *p)
{
    if (p->phase != PH_PUMP)
        return;
    /* Either side closing ends it, once what it sent is passed on. */
    if ((p->u_eof && p->in.len == 0) || (p->c_eof && p->out.len == 0) || p->out_failed) {
        pump_close(p);
        return;
    }
    uint32_t cev = 0, uev = 0;
    if (!p->c_eof && p->out.len < HTTP_RELAY_BUF)
        cev |= EPOLLIN;
    if (p->in.len)
        cev |= EPOLLOUT;
    if (!p->u_eof && p->in.len < HTTP_RELAY_BUF)
        uev |= EPOLLIN;
    if (p->out.len)
        uev |= EPOLLOUT;
    if (watch(p->loop, &p->cio, p->cfd, cev, client_io, p) < 0 ||
        watch(p->loop, &p->io, p->fd, uev, up_io, p) < 0)
        pump_close(p);
}

static void
on_upgraded(struct http_upgrade *u, int fd, const char *extra, size_t extra_len, void *ud)
{
    struct http_relay *p = ud;

    p->up = u;
    p->cfd = fd;
    if (p->phase != PH_UPGRADING || p->fd < 0) {
        pump_close(p);
        return;
    }
    p->phase = PH_PUMP;
    /* The upgrade request had no body: out is empty unless the upstream has
     * not read all of the head yet. */
    if (extra_len && buf_put(&p->out, extra, extra_len) < 0) {
        pump_close(p);
        return;
    }
    touch(p);
    pump_update(p);
}

/* --- the request --- */

struct fwd {
    struct http_relay *p;
    struct buf *b;
    const char *conn; /* the client's Connection tokens */
};

static int
collect_connection(void *ud, const char *name, const char *value)
{
    struct buf *b = ud;
    if (!strcasecmp(name, "Connection"))
        (void)buf_printf(b, "%s,", value); /* past 16 KiB the rest is ignored */
    return 0;
}

static int
forward_header(void *ud, const char *name, const char *value)
{
    struct fwd *f = ud;
    if (http_hop_by_hop(name) || http_token_listed(f->conn, name)) {
        /* Content-Length frames the body we forward as is. */
        if (strcasecmp(name, "Content-Length") != 0 || f->p->chunked_body)
            return 0;
    }
    if (strpbrk(name, "\r\n") || strpbrk(value, "\r\n"))
        return 0;
    return buf_printf(f->b, "%s: %s\r\n", name, value);
}

bool
http_relay_target_ok(const char *t)
{
    if (!t || !*t)
        return false;
    for (const unsigned char *c = (const unsigned char *)t; *c; c++)
        if (*c <= ' ' || *c == 0x7f)
            return false;
    return true;
}

static int
chunk_in(struct http_req *req, const char *data, size_t len)
{
    struct http_relay *p = http_req_userdata(req);
    if (p->phase == PH_OVER || p->out_failed)
        return 0; /* answered or upstream gone: the body is dropped */
    int r = 0;
    if (p->chunked_body)
        r = buf_printf(&p->out, "%zx\r\n", len);
    if (r >= 0)
        r = buf_put(&p->out, data, len);
    if (r >= 0 && p->chunked_body)
        r = buf_put(&p->out, "\r\n", 2);
    if (r < 0) {
        give_up(p, HTTP_RELAY_BODY_BUFFER, 0, NULL);
        return 0;
    }
    if (p->out.len >= HTTP_RELAY_BUF)
        http_req_pause_body(req);
    up_update(p);
    return 0;
}

static void
body_in_done(struct http_req *req)
{
    struct http_relay *p = http_req_userdata(req);
    p->body_done = true;
    if (p->phase == PH_OVER || p->out_failed)
        return;
    if (p->chunked_body && buf_put(&p->out, "0\r\n\r\n", 5) < 0) {
        give_up(p, HTTP_RELAY_BODY_BUFFER, 0, NULL);
        return;
    }
    up_update(p);
}

static int
build_head(struct http_relay *p, const char *target)
{
    struct buf conn;
    struct fwd f = {.p = p, .b = &p->out};
    const char *up_hdr = http_req_header(p->req, "Upgrade");
    int r;

    buf_init(&conn, 16 * 1024);
    (void)http_req_headers(p->req, collect_connection, &conn);
    f.conn = conn.data;
    if (up_hdr && *up_hdr && http_token_listed(conn.data, "upgrade") && !p->chunked_body &&
        p->body_done && strlen(up_hdr) < sizeof(p->upgrade_proto) && !strpbrk(up_hdr, "\r\n")) {
        p->upgrade = true;
        (void)snprintf(p->upgrade_proto, sizeof(p->upgrade_proto), "%s", up_hdr);
    }
    r = buf_printf(&p->out, "%s %s HTTP/1.1\r\n", http_req_method(p->req), target);
    if (r >= 0)
        r = http_req_headers(p->req, forward_header, &f);
    if (r >= 0 && p->chunked_body)
        r = buf_puts(&p->out, "Transfer-Encoding: chunked\r\n");
    if (r >= 0)
        r = p->upgrade ? buf_printf(&p->out, "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
                                    p->upgrade_proto)
                       : buf_puts(&p->out, "Connection: close\r\n\r\n");
    buf_done(&conn);
    return r;
}

int
http_relay_new(struct http_req *req, struct loop *loop, const char *target, const char *label,
               const struct http_relay_ops *ops, void *ud, struct http_relay **ret, struct err *err)
{
    uint64_t cl = 0;

    struct http_relay *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->req = req;
    p->ops = ops;
    p->ud = ud;
    p->fd = -EBADF;
    p->cfd = -EBADF;
    (void)snprintf(p->label, sizeof(p->label), "%s", label);
    buf_init(&p->out, RELAY_REQ_HEAD_MAX);
    buf_init(&p->in, 2 * HTTP_RELAY_BUF);

    const char *te = http_req_header(req, "Transfer-Encoding");
    const char *cls = http_req_header(req, "Content-Length");
    p->chunked_body = te != NULL;
    if (!p->chunked_body && cls && parse_u64(cls, &cl) < 0) {
        free_half(p);
        return err_set(err, EINVAL, "Content-Length is not a number");
    }
    p->body_done = !p->chunked_body && cl == 0;
    if (httpresp_new(http_req_is_head(req), &p->resp) < 0 ||
        loop_timer_new(loop, on_timer, p, &p->timer) < 0 || build_head(p, target) < 0) {
        free_half(p);
        return -ENOMEM;
    }
    http_req_set_userdata(req, p, relay_on_close);
    if (p->body_done)
        http_req_answer_later(req);
    else
        http_req_stream_body(req, chunk_in, body_in_done);
    (void)loop_timer_arm(p->timer, now_msec() + HTTP_RELAY_CONNECT_MS);
    *ret = p;
    return 0;
}

void
http_relay_connected(struct http_relay *p, int fd, bool pending)
{
    if (p->phase != PH_CONNECT) {
        safe_close(fd);
        return;
    }
    p->fd = fd;
    if (pending)
        p->connecting = true;
    else
        connected(p);
    up_update(p);
}

void
http_relay_fail(struct http_relay *p, enum http_relay_fail why, int errnum, const char *detail)
{
    if (p->phase == PH_OVER)
        return;
    give_up(p, why, errnum, detail);
}
