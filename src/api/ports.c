/*
 * ports.c - the port proxy: HTTP whose Host is <port>-<sandbox>.<domain>
 * reaches the server listening on that port inside the sandbox, WebSocket
 * (any protocol upgrade) included. It is not a general forward proxy: the
 * only upstream is 127.0.0.1 (or ::1) in a sandbox's own network namespace.
 *
 * A sandbox's network namespace has only loopback up, so the upstream
 * socket must be made inside it, and the loop's thread never moves there.
 * A worker thread (a one-thread workq) enters the namespace (pinned once
 * per sandbox while it is ready: its init is our unreaped child, so the pid
 * cannot have been reused), creates a non-blocking socket, starts the
 * connect and goes back; the socket stays bound to the namespace it was
 * born in. Everything after that runs on the loop.
 *
 * A plain request is forwarded with its target verbatim, hop-by-hop headers
 * dropped and "Connection: close"; its body streams through, the client's
 * upload paused while PORTS_BUF bytes wait for the upstream. The answer is
 * parsed by httpresp (the upstream is hostile: bounded head, strict
 * framing, de-chunked) and relayed as a streamed response that reads the
 * upstream only as fast as the client takes it. An upgrade request is
 * forwarded as one; if the upstream answers 101, the client gets 101 with
 * the upstream's headers and both sockets are pumped through two PORTS_BUF
 * buffers until either side closes (what is buffered is flushed first).
 * Any other answer is relayed as plain HTTP.
 *
 * No API key: E2B's proxy lets port traffic through (public ports, no
 * traffic tokens here). The sandbox's template must grant "ports"; an
 * unknown, dying or paused sandbox, a closed port and a broken upstream
 * are answered 502 with the JSON bodies of E2B's proxy.
 */
#include "api/ports/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "http/httpresp.h"
#include "template/template.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/timeutil.h"
#include "util/workq.h"

#define PORTS_BUF                (64 * 1024)  /* bytes buffered each way */
#define PORTS_REQ_HEAD_MAX       (256 * 1024) /* the request head sent upstream */
#define PORTS_CONNECT_TIMEOUT_MS (10 * 1000)
#define PORTS_IDLE_TIMEOUT_MS    (600 * 1000) /* no byte either way this long: cut */

struct ports {
    struct workq *wq;
    int home_ns; /* abxd's own network namespace */
    dev_t home_dev;
    ino_t home_ino;
};

struct proxy;

/* A connect on the worker thread. */
struct dial {
    int nsfd;    /* the sandbox's namespace (a dup, ours) */
    int home_ns; /* borrowed from struct ports, which outlives every dial */
    uint16_t port;
    int r;           /* result: 0 or -errno */
    int fd;          /* the socket, when r == 0 */
    bool pending;    /* connect in progress */
    struct proxy *p; /* NULL once the request is gone */
};

enum phase {
    PH_CONNECT,   /* dialing */
    PH_HEAD,      /* sending the request, waiting for the response head */
    PH_BODY,      /* relaying the response body */
    PH_UPGRADING, /* 101 parked for the client, waiting for its socket */
    PH_PUMP,      /* raw bytes both ways */
    PH_OVER,      /* answered and upstream closed; waiting for on_close */
};

struct proxy {
    struct api *api;
    struct http_req *req;
    char id[PORTS_ID_MAX + 1];
    uint16_t port;
    enum phase phase;
    struct dial *dial;
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

static char scratch[PORTS_BUF]; /* one loop thread: reads land here first */

/* --- the host name --- */

int
ports_match_host(const char *host, const char *domain, uint16_t *ret_port, char *ret_id,
                 size_t idsz)
{
    size_t hl, dl, i;
    uint32_t port = 0;

    if (!host || !domain || !*domain || idsz < 2)
        return 0;
    hl = strlen(host);
    const char *colon = strrchr(host, ':');
    if (colon) {
        for (const char *c = colon + 1; *c; c++)
            if (*c < '0' || *c > '9')
                return 0;
        hl = (size_t)(colon - host);
    }
    if (hl && host[hl - 1] == '.')
        hl--; /* an absolute name */
    dl = strlen(domain);
    if (hl < dl + 4 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, domain, dl) != 0)
        return 0;
    hl -= dl + 1; /* the label: <port>-<id> */
    for (i = 0; i < hl && host[i] >= '0' && host[i] <= '9'; i++) {
        if (i == 5)
            return 0;
        port = port * 10 + (uint32_t)(host[i] - '0');
    }
    if (i == 0 || port == 0 || port > 65535 || i >= hl || host[i] != '-')
        return 0;
    i++;
    if (i == hl || hl - i >= idsz)
        return 0;
    size_t n = 0;
    for (; i < hl; i++) {
        char c = host[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return 0;
        ret_id[n++] = c;
    }
    ret_id[n] = '\0';
    *ret_port = (uint16_t)port;
    return 1;
}

/* --- answers --- */

static void
answer_not_found(struct http_req *req, const char *id)
{
    json_t *o = json_object();
    (void)json_set(o, "code", json_integer(502));
    (void)json_set(o, "message", json_string("The sandbox was not found"));
    (void)json_set(o, "sandboxId", json_string(id));
    api_json(req, 502, o);
}

static void
answer_502(struct http_req *req, const char *id, uint16_t port, const char *msg)
{
    json_t *o = json_object();
    (void)json_set(o, "message", json_string(msg));
    (void)json_set(o, "sandboxId", json_string(id));
    (void)json_set(o, "port", json_integer(port));
    (void)json_set(o, "code", json_integer(502));
    api_json(req, 502, o);
}

/* --- the worker side --- */

static int
try_connect(int family, uint16_t port, int *ret_fd, bool *ret_pending)
{
    struct sockaddr_storage ss;
    socklen_t sl;

    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET) {
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof(*in4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        in6->sin6_addr = in6addr_loopback;
        sl = sizeof(*in6);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    *ret_pending = false;
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
        if (errno != EINPROGRESS) {
            int r = -errno;
            (void)close(fd);
            return r;
        }
        *ret_pending = true;
    }
    *ret_fd = fd;
    return 0;
}

/* Runs on the worker thread: touches only d. */
static void
dial_work(void *ud)
{
    struct dial *d = ud;

    if (setns(d->nsfd, CLONE_NEWNET) < 0) {
        d->r = -errno;
        return; /* never make the socket anywhere else */
    }
    d->r = try_connect(AF_INET, d->port, &d->fd, &d->pending);
    if (d->r < 0) {
        /* A server bound to ::1 only. */
        int r6 = try_connect(AF_INET6, d->port, &d->fd, &d->pending);
        if (r6 == 0)
            d->r = 0;
    }
    /* Every dial enters its own sandbox first, so a failure to return only
     * leaves this idle thread elsewhere; nothing depends on it. */
    (void)setns(d->home_ns, CLONE_NEWNET);
}

/* --- the proxy --- */

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

static void proxy_over(struct proxy *p);
static void up_update(struct proxy *p);
static void pump_update(struct proxy *p);
static void pump_close(struct proxy *p);

static int
watch(struct api *a, struct loop_io **io, int fd, uint32_t events, loop_io_fn fn, void *ud)
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
    return loop_io_add(a->loop, fd, events, fn, ud, io);
}

static void
touch(struct proxy *p)
{
    (void)loop_timer_arm(p->timer, now_msec() + PORTS_IDLE_TIMEOUT_MS);
}

static void
close_upstream(struct proxy *p)
{
    loop_io_free(p->io);
    p->io = NULL;
    p->fd = safe_close(p->fd);
    if (p->dial) {
        p->dial->p = NULL;
        p->dial = NULL;
    }
}

/* The request is answered (or cannot be any more): drop the upstream. */
static void
proxy_over(struct proxy *p)
{
    p->phase = PH_OVER;
    close_upstream(p);
    loop_timer_disarm(p->timer);
    http_req_resume_body(p->req);
}

static void
fail_502(struct proxy *p, const char *msg)
{
    log_debug("sandbox=%s port=%u: %s", p->id, p->port, msg);
    if (!http_req_answered(p->req))
        answer_502(p->req, p->id, p->port, msg);
    else if (p->stream)
        http_stream_abort(p->stream);
    proxy_over(p);
}

static void
proxy_free(struct proxy *p)
{
    if (!p)
        return;
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
proxy_on_close(struct http_req *req, void *ud)
{
    (void)req;
    proxy_free(ud);
}

/* --- response body --- */

static int
body_out(void *ud, const void *data, size_t n)
{
    struct proxy *p = ud;
    return p->stream ? http_stream_write(p->stream, data, n) : -EPIPE;
}

static void
body_feed(struct proxy *p, const char *data, size_t n)
{
    struct err err = {0};
    size_t used;
    int r = httpresp_feed(p->resp, data, n, body_out, p, &used, &err);
    if (r == HTTPRESP_DONE) {
        if (p->stream)
            http_stream_end(p->stream);
        proxy_over(p);
    } else if (r < 0) {
        log_debug("sandbox=%s port=%u: bad response body: %s", p->id, p->port,
                  err.msg[0] ? err.msg : strerror(-r));
        if (p->stream)
            http_stream_abort(p->stream);
        proxy_over(p);
    }
}

/* Reads what the stream has room for (never more: the de-chunked body is
 * never larger than what carried it). */
static void
body_read(struct proxy *p)
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
            log_debug("sandbox=%s port=%u: reading the body: %s", p->id, p->port, strerror(errno));
            http_stream_abort(p->stream);
            proxy_over(p);
            return;
        }
        touch(p);
        if (n == 0) {
            struct err err = {0};
            if (httpresp_finish(p->resp, &err) == 0) {
                http_stream_end(p->stream);
            } else {
                log_debug("sandbox=%s port=%u: %s", p->id, p->port, err.msg);
                http_stream_abort(p->stream);
            }
            proxy_over(p);
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
    struct proxy *p = ud;
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
    struct proxy *p = ud;
    http_stream_release(s);
    p->stream = NULL;
    if (p->phase == PH_BODY)
        proxy_over(p); /* the client went away */
}

static const struct http_stream_ops relay_ops = {
        .fill = stream_fill,
        .closed = stream_closed,
};

/* --- response head --- */

static bool
token_listed(const char *list, const char *name)
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
static bool
hop_by_hop(const char *name)
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
relay_headers(struct proxy *p)
{
    const char *conn = httpresp_get(p->resp, "Connection");
    size_t n = httpresp_header_count(p->resp);
    for (size_t i = 0; i < n; i++) {
        const struct httpresp_header *h = httpresp_header(p->resp, i);
        if (hop_by_hop(h->name) || token_listed(conn, h->name))
            continue;
        http_req_add_header(p->req, h->name, h->value);
    }
}

static void on_upgraded(struct http_upgrade *u, int fd, const char *extra, size_t extra_len,
                        void *ud);

static void
on_head(struct proxy *p, const char *rest, size_t len)
{
    unsigned status = httpresp_status(p->resp);

    if (status == 101) {
        const char *proto = httpresp_get(p->resp, "Upgrade");
        if (!p->upgrade || !proto || !*proto) {
            fail_502(p, "The sandbox's server switched protocols without being asked to");
            return;
        }
        /* What the upstream sent after its 101 is the new protocol's. */
        if (buf_put(&p->in, rest, len) < 0) {
            fail_502(p, "out of memory");
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
        proxy_over(p);
        return;
    }
    int r = http_stream_start_relay(p->req, status, &relay_ops, p, &p->stream);
    if (r < 0) {
        proxy_over(p); /* the client is gone */
        return;
    }
    p->phase = PH_BODY;
    body_feed(p, rest, len);
}

static void
head_read(struct proxy *p)
{
    struct err err = {0};
    size_t used;

    ssize_t n = recv(p->fd, scratch, sizeof(scratch), 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        char msg[160];
        (void)snprintf(msg, sizeof(msg), "The sandbox's server reset the connection (%s)",
                       strerror(errno));
        fail_502(p, msg);
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
    char msg[sizeof(err.msg) + 64];
    (void)snprintf(msg, sizeof(msg), "The sandbox's server sent an invalid HTTP response: %s",
                   err.msg[0] ? err.msg : "it closed the connection");
    fail_502(p, msg);
}

/* --- upstream I/O --- */

static void
up_write(struct proxy *p)
{
    while (p->out.len > 0 && !p->out_failed) {
        ssize_t n = send(p->fd, p->out.data, p->out.len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            /* It stopped reading (answered early, or died): drop the rest
             * and still read what it says. */
            log_debug("sandbox=%s port=%u: writing upstream: %s", p->id, p->port, strerror(errno));
            p->out_failed = true;
            buf_reset(&p->out);
            break;
        }
        buf_consume(&p->out, (size_t)n);
        touch(p);
    }
    if (p->out.len < PORTS_BUF && p->phase != PH_PUMP)
        http_req_resume_body(p->req);
}

static void
connected(struct proxy *p)
{
    p->connecting = false;
    p->phase = PH_HEAD;
    touch(p);
}

static void
up_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct proxy *p = ud;
    (void)io;

    if (p->connecting) {
        int e = 0;
        socklen_t l = sizeof(e);
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
            e = errno;
        if (e == ECONNREFUSED) {
            fail_502(p, "The sandbox is running but port is not open");
            return;
        }
        if (e) {
            char msg[160];
            (void)snprintf(msg, sizeof(msg), "Cannot connect to the port in the sandbox (%s)",
                           strerror(e));
            fail_502(p, msg);
            return;
        }
        connected(p);
    }
    if (p->phase == PH_PUMP) {
        if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            up_write(p);
        if ((revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !p->u_eof && p->in.len < PORTS_BUF) {
            ssize_t n = read_into(p->fd, &p->in, PORTS_BUF);
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
up_update(struct proxy *p)
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
    if (watch(p->api, &p->io, p->fd, ev, up_io, p) < 0)
        fail_502(p, "Cannot watch the connection to the sandbox");
}

static void
dial_done(void *ud)
{
    struct dial *d = ud;
    struct proxy *p = d->p;
    int r = d->r, fd = d->r == 0 ? d->fd : -EBADF;
    bool pending = d->pending;

    safe_close(d->nsfd);
    free(d);
    if (!p) {
        safe_close(fd);
        return;
    }
    p->dial = NULL;
    if (r == -ECONNREFUSED) {
        fail_502(p, "The sandbox is running but port is not open");
        return;
    }
    if (r < 0) {
        char msg[160];
        (void)snprintf(msg, sizeof(msg), "Cannot connect to the port in the sandbox (%s)",
                       strerror(-r));
        fail_502(p, msg);
        return;
    }
    p->fd = fd;
    if (pending)
        p->connecting = true;
    else
        connected(p);
    up_update(p);
}

static void
on_timer(struct loop_timer *t, void *ud)
{
    struct proxy *p = ud;
    (void)t;
    switch (p->phase) {
    case PH_CONNECT:
        fail_502(p, "The sandbox's server did not accept the connection in time");
        break;
    case PH_HEAD:
        fail_502(p, p->connecting ? "The sandbox's server did not accept the connection in time"
                                  : "The sandbox's server did not answer in time");
        break;
    case PH_BODY:
        log_debug("sandbox=%s port=%u: the response stalled, cutting it", p->id, p->port);
        if (p->stream)
            http_stream_abort(p->stream);
        proxy_over(p);
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
pump_close(struct proxy *p)
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
    struct proxy *p = ud;
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
    if ((revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !p->c_eof && p->out.len < PORTS_BUF) {
        ssize_t n = read_into(p->cfd, &p->out, PORTS_BUF);
        if (n > 0)
            touch(p);
        else if (n != -EAGAIN)
            p->c_eof = true;
    }
    pump_update(p);
}

static void
pump_update(struct proxy *p)
{
    if (p->phase != PH_PUMP)
        return;
    /* Either side closing ends it, once what it sent is passed on. */
    if ((p->u_eof && p->in.len == 0) || (p->c_eof && p->out.len == 0) || p->out_failed) {
        pump_close(p);
        return;
    }
    uint32_t cev = 0, uev = 0;
    if (!p->c_eof && p->out.len < PORTS_BUF)
        cev |= EPOLLIN;
    if (p->in.len)
        cev |= EPOLLOUT;
    if (!p->u_eof && p->in.len < PORTS_BUF)
        uev |= EPOLLIN;
    if (p->out.len)
        uev |= EPOLLOUT;
    if (watch(p->api, &p->cio, p->cfd, cev, client_io, p) < 0 ||
        watch(p->api, &p->io, p->fd, uev, up_io, p) < 0)
        pump_close(p);
}

static void
on_upgraded(struct http_upgrade *u, int fd, const char *extra, size_t extra_len, void *ud)
{
    struct proxy *p = ud;

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
    struct proxy *p;
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
    if (hop_by_hop(name) || token_listed(f->conn, name)) {
        /* Content-Length frames the body we forward as is. */
        if (strcasecmp(name, "Content-Length") != 0 || f->p->chunked_body)
            return 0;
    }
    if (strpbrk(name, "\r\n") || strpbrk(value, "\r\n"))
        return 0;
    return buf_printf(f->b, "%s: %s\r\n", name, value);
}

static bool
valid_target(const char *t)
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
    struct proxy *p = http_req_userdata(req);
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
        fail_502(p, "The request body could not be buffered");
        return 0;
    }
    if (p->out.len >= PORTS_BUF)
        http_req_pause_body(req);
    up_update(p);
    return 0;
}

static void
body_in_done(struct http_req *req)
{
    struct proxy *p = http_req_userdata(req);
    p->body_done = true;
    if (p->phase == PH_OVER || p->out_failed)
        return;
    if (p->chunked_body && buf_put(&p->out, "0\r\n\r\n", 5) < 0) {
        fail_502(p, "The request body could not be buffered");
        return;
    }
    up_update(p);
}

static int
ports_get(struct api *a, struct ports **ret)
{
    struct stat st;
    int r;

    if (a->ports) {
        *ret = a->ports;
        return 0;
    }
    struct ports *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return -ENOMEM;
    ps->home_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (ps->home_ns < 0 || fstat(ps->home_ns, &st) < 0) {
        r = -errno;
        safe_close(ps->home_ns);
        free(ps);
        return r;
    }
    ps->home_dev = st.st_dev;
    ps->home_ino = st.st_ino;
    r = workq_new(a->loop, 1, &ps->wq);
    if (r < 0) {
        safe_close(ps->home_ns);
        free(ps);
        return r;
    }
    a->ports = ps;
    *ret = ps;
    return 0;
}

void
ports_free(struct api *a)
{
    struct ports *ps = a->ports;
    if (!ps)
        return;
    workq_free(ps->wq); /* finishes dials; their requests are gone */
    safe_close(ps->home_ns);
    free(ps);
    a->ports = NULL;
}

/* The sandbox's network namespace, pinned on first use. */
static int
pin_netns(struct api *a, struct ports *ps, struct entry *e, struct err *err)
{
    struct stat st;

    int *pinned = e->ext[a->ports_slot];
    if (pinned)
        return *pinned;
    pinned = malloc(sizeof(*pinned));
    if (!pinned)
        return err_set(err, ENOMEM, "Cannot pin the sandbox's network (out of memory)");
    int fd = sandbox_open_netns(e->sb);
    if (fd < 0)
        free(pinned);
    if (fd == -ESRCH)
        return err_set(err, ESRCH, "The sandbox was not found");
    if (fd < 0)
        return err_set(err, -fd, "Cannot enter the sandbox's network (%s)", strerror(-fd));
    if (fstat(fd, &st) < 0 || (st.st_dev == ps->home_dev && st.st_ino == ps->home_ino)) {
        (void)close(fd);
        free(pinned);
        /* uid and none isolation share the host's network: forwarding
         * there would open the host's loopback services to anyone. */
        return err_set(err, EOPNOTSUPP,
                       "Ports need the sandbox's own network namespace (isolation '%s')",
                       a->cfg.isolation ? a->cfg.isolation : "?");
    }
    *pinned = fd;
    e->ext[a->ports_slot] = pinned;
    return fd;
}

/* table hook: e goes, and its pinned namespace with it. */
static void
entry_free(struct entry *e, unsigned slot)
{
    int *pinned = e->ext[slot];
    if (pinned)
        (void)close(*pinned);
    free(pinned);
    e->ext[slot] = NULL;
}

int
ports_init(struct api *a)
{
    static const struct table_hooks hooks = {.free = entry_free};
    return table_add_hooks(a->table, &hooks, &a->ports_slot);
}

static int
build_head(struct proxy *p, const char *target)
{
    struct buf conn;
    struct fwd f = {.p = p, .b = &p->out};
    const char *up_hdr = http_req_header(p->req, "Upgrade");
    int r;

    buf_init(&conn, 16 * 1024);
    (void)http_req_headers(p->req, collect_connection, &conn);
    f.conn = conn.data;
    if (up_hdr && *up_hdr && token_listed(conn.data, "upgrade") && !p->chunked_body &&
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

void
ports_begin(struct api *a, struct http_req *req, uint16_t port, const char *id)
{
    struct err err = {0};
    struct ports *ps = NULL;
    uint64_t cl = 0;
    int r;

    struct entry *e = table_find(a->table, id);
    if (!e || e->state != E_READY || e->paused) {
        answer_not_found(req, id);
        return;
    }
    if (!api_need_cap(req, e, TEMPLATE_CAP_PORTS))
        return;
    const char *target = http_req_uri(req);
    if (!valid_target(target)) {
        api_error_msg(req, 400, "bad_request", "the request target cannot be forwarded");
        return;
    }
    r = ports_get(a, &ps);
    if (r < 0) {
        log_warn("sandbox=%s: cannot set up port forwarding: %s", id, strerror(-r));
        answer_502(req, id, port, "Port forwarding is not available on this host");
        return;
    }
    int nsfd = pin_netns(a, ps, e, &err);
    if (nsfd < 0) {
        log_debug("sandbox=%s port=%u: %s", id, port, err.msg);
        answer_502(req, id, port, err.msg);
        return;
    }
    table_touch(e);

    struct proxy *p = calloc(1, sizeof(*p));
    struct dial *d = calloc(1, sizeof(*d));
    if (!p || !d) {
        free(p);
        free(d);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    p->api = a;
    p->req = req;
    p->port = port;
    p->fd = -EBADF;
    p->cfd = -EBADF;
    (void)snprintf(p->id, sizeof(p->id), "%s", id);
    buf_init(&p->out, PORTS_REQ_HEAD_MAX);
    buf_init(&p->in, 2 * PORTS_BUF);
    http_req_set_userdata(req, p, proxy_on_close);

    const char *te = http_req_header(req, "Transfer-Encoding");
    const char *cls = http_req_header(req, "Content-Length");
    p->chunked_body = te != NULL;
    if (!p->chunked_body && cls && parse_u64(cls, &cl) < 0) {
        free(d);
        api_error_msg(req, 400, "bad_request", "Content-Length is not a number");
        return;
    }
    p->body_done = !p->chunked_body && cl == 0;
    if (httpresp_new(http_req_is_head(req), &p->resp) < 0 ||
        loop_timer_new(a->loop, on_timer, p, &p->timer) < 0 || build_head(p, target) < 0) {
        free(d);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    if (p->body_done)
        http_req_answer_later(req);
    else
        http_req_stream_body(req, chunk_in, body_in_done);

    d->nsfd = fcntl(nsfd, F_DUPFD_CLOEXEC, 3);
    d->home_ns = ps->home_ns;
    d->port = port;
    d->fd = -EBADF;
    d->p = p;
    if (d->nsfd < 0 || workq_submit(ps->wq, dial_work, dial_done, d) < 0) {
        safe_close(d->nsfd);
        free(d);
        fail_502(p, "Cannot connect to the port in the sandbox (out of resources)");
        return;
    }
    p->dial = d;
    (void)loop_timer_arm(p->timer, now_msec() + PORTS_CONNECT_TIMEOUT_MS);
}
