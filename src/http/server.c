/*
 * server.c - libmicrohttpd in external-epoll mode, driven by our loop.
 *
 * Request lifecycle, as MHD calls us:
 *   headers in   -> begin(): the surface sets userdata and the body mode, or
 *                   answers at once (MHD then discards any body)
 *   body chunks  -> buffered (bounded) or handed to chunk()
 *   body done    -> done(): answer now, later (we suspend the connection),
 *                   or start a stream
 *   completed    -> on_close(); the request is freed when unreferenced
 * MHD only accepts a response from inside its callbacks or for a
 * suspended connection; respond() therefore parks the response and it is
 * queued either on the way out of the handler or right away (then the
 * connection is resumed).
 *
 * Slow and hostile clients. MHD's own connection timeout is an idle
 * timeout that every byte resets, its per-IP limit counts whole IPv6
 * addresses and closes without a word, and its framing is lenient (it
 * ignores Content-Length next to Transfer-Encoding, takes the first of two
 * Content-Lengths, treats "Content-Length : 5" as another header). So each
 * connection gets a struct http_conn (MHD's socket context) with a timer
 * on our loop: the request head has a deadline, a request body an idle
 * timeout and a minimum rate; when one passes we write a 408 ourselves (MHD
 * has nothing of ours to send then) and shutdown(2) the socket, which MHD
 * notices on its next run and closes. Connections are counted per client
 * (IPv4 address, IPv6 /64) and the excess is answered 429 and closed the
 * same way. The framing rules MHD does not enforce are checked on the
 * complete head, before the surface sees the request.
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/listen.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/timeutil.h"

#define HTTP_DEFAULT_BODY_MAX 0
#define HTTP_DRAIN_MAX        (64 * 1024 * 1024) /* body bytes we swallow after an error */
#define HTTP_LEN_NONE         UINT64_MAX         /* no Content-Length (none, or chunked) */
#define HTTP_CLIENT_BUCKETS   256                /* hash buckets of the per-client counts */

struct hdr {
    struct hdr *next;
    char *name, *value;
};

enum body_mode { BODY_NONE, BODY_BUFFER, BODY_STREAM, BODY_LATER };

/* Connections at once from one client: an IPv4 address or an IPv6 /64 (one
 * host usually holds a whole /64). */
struct client {
    struct client *next;
    uint8_t key[9]; /* 4 or 6, then the address or prefix (zero-padded) */
    unsigned conns;
};

/* Where a connection is, for its timer. */
enum conn_phase {
    PHASE_HEAD,     /* waiting for a complete request head: deadline */
    PHASE_BODY,     /* reading a request body: idle timeout and minimum rate */
    PHASE_BUSY,     /* the request is ours (working, answering, streaming): untimed */
    PHASE_UPGRADED, /* the socket belongs to an upgrade owner: untimed */
};

/* One client connection (MHD's socket context), from accept to close. */
struct http_conn {
    struct http_server *srv;
    int fd; /* MHD's; borrowed */
    struct client *client;
    struct http_req *req; /* the request in progress, or NULL */
    struct loop_timer *timer;
    enum conn_phase phase;
    uint64_t head_deadline; /* monotonic ms, PHASE_HEAD */
    uint64_t last_byte;     /* monotonic ms, PHASE_BODY: last body byte */
    uint64_t window_start;  /* monotonic ms, PHASE_BODY: rate window */
    uint64_t window_bytes;  /* body bytes in the current window */
    bool body_waits;        /* the body is paused or at a message boundary */
    bool killed;            /* shut down by us; MHD closes it on its next run */
    unsigned requests;      /* requests completed on it */
};

struct http_server {
    struct loop *loop;
    struct MHD_Daemon *mhd;
    struct loop_io *io;
    int listen_fd;
    uint16_t port;
    unsigned connections;
    bool kick; /* a connection was resumed: MHD_run before waiting */
    void (*begin)(struct http_req *req, void *ud);
    void *ud;
    struct http_req *suspended;    /* list of suspended requests, for shutdown */
    struct http_upgrade *upgrades; /* list of upgraded connections, for shutdown */
    unsigned max_per_client;
    uint64_t header_timeout_ms, body_timeout_ms; /* 0 = off */
    unsigned body_min_rate;                      /* bytes/s, 0 = off */
    struct client *clients[HTTP_CLIENT_BUCKETS];
};

struct http_req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    int refs;
    char *method, *path;
    enum body_mode mode;
    size_t body_max;
    struct buf body;
    uint64_t drained;
    bool too_large, failed, done_called;
    void (*read_done)(struct http_req *, const char *, size_t);
    int (*chunk)(struct http_req *, const char *, size_t);
    void (*stream_done)(struct http_req *);
    struct MHD_Response *pending;
    unsigned pending_status;
    bool answered, queued, suspended, closed, in_handler;
    struct hdr *headers;
    void *ud;
    void (*on_close)(struct http_req *, void *);
    struct http_stream *stream;
    struct http_req *susp_next, *susp_prev;
    char *uri;        /* the request target as sent (path?query), NULL if unknown */
    bool nul_escaped; /* the target holds "%00" */
    bool begun;       /* begin() ran */
    bool http11;      /* HTTP/1.1 (upgrades need it) */
    bool body_paused; /* http_req_pause_body() */
    struct http_upgrade *upgrade;
    struct http_conn *hc;    /* NULL once the request is over */
    uint64_t content_length; /* as announced, HTTP_LEN_NONE without one */
    bool has_body;           /* a Content-Length above 0, or chunked */
    bool answer_now;         /* a response chosen before the body: send it unread */
    bool relay;              /* http_stream_start_relay() */
};

struct http_upgrade {
    struct http_server *srv;
    struct MHD_UpgradeResponseHandle *urh;
    http_upgrade_fn fn;
    void *ud;
    bool started, closed;
    struct http_upgrade *next, *prev; /* srv->upgrades while started and not closed */
};

struct http_stream {
    struct http_req *req;
    const struct http_stream_ops *ops;
    void *ud;
    struct buf buf;
    bool ended, aborted, waiting, in_fill, mhd_gone, released, closed_called, in_closed;
};

/* --- suspension bookkeeping --- */

static void
req_suspend(struct http_req *req)
{
    if (req->suspended || req->closed)
        return;
    MHD_suspend_connection(req->conn);
    req->suspended = true;
    struct http_server *s = req->srv;
    req->susp_prev = NULL;
    req->susp_next = s->suspended;
    if (s->suspended)
        s->suspended->susp_prev = req;
    s->suspended = req;
}

static void
req_resume(struct http_req *req)
{
    if (!req->suspended)
        return;
    struct http_server *s = req->srv;
    if (req->susp_prev)
        req->susp_prev->susp_next = req->susp_next;
    else
        s->suspended = req->susp_next;
    if (req->susp_next)
        req->susp_next->susp_prev = req->susp_prev;
    req->suspended = false;
    MHD_resume_connection(req->conn);
    /* In external polling mode MHD only notices on its next run. */
    s->kick = true;
}

/* --- slow clients: one timer per connection --- */

/* Writes a complete error response straight to the socket: only while MHD
 * has nothing of ours to send on it (no request yet, or none answered), so
 * the bytes cannot interleave with MHD's. Best effort: the socket is shut
 * down right after, whatever the client reads. */
static void
send_raw_error(int fd, unsigned status, const char *reason, const char *code, const char *msg)
{
    char body[320], b[640];
    int bn = snprintf(body, sizeof(body), "{\"error\":\"%s\",\"message\":\"%s\"}", code, msg);
    if (bn < 0 || (size_t)bn >= sizeof(body))
        return;
    int n = snprintf(b, sizeof(b),
                     "HTTP/1.1 %u %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %d\r\n\r\n%s",
                     status, reason, status == 429 ? "Retry-After: 1\r\n" : "", bn, body);
    if (n < 0 || (size_t)n >= sizeof(b))
        return;
    (void)send(fd, b, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Ends a connection from outside MHD's callbacks: MHD sees the shut-down
 * socket on its next run (it is in MHD's epoll set, or resumed into it)
 * and closes it, telling on_completed() and on_connection(). */
static void
conn_kill(struct http_conn *hc, unsigned status, const char *reason, const char *code,
          const char *msg)
{
    if (hc->killed)
        return;
    hc->killed = true;
    loop_timer_disarm(hc->timer);
    struct http_req *req = hc->req;
    if (status && (!req || !req->queued))
        send_raw_error(hc->fd, status, reason, code, msg);
    (void)shutdown(hc->fd, SHUT_RDWR);
    if (req)
        req_resume(req);
    hc->srv->kick = true;
}

static void
conn_schedule(struct http_conn *hc)
{
    struct http_server *s = hc->srv;
    if (hc->killed)
        return;
    if (hc->phase == PHASE_HEAD && s->header_timeout_ms) {
        (void)loop_timer_arm(hc->timer, hc->head_deadline);
    } else if (hc->phase == PHASE_BODY && s->body_timeout_ms && !hc->body_waits) {
        uint64_t idle = hc->last_byte + s->body_timeout_ms;
        uint64_t window = hc->window_start + s->body_timeout_ms;
        (void)loop_timer_arm(hc->timer, s->body_min_rate && window < idle ? window : idle);
    } else {
        loop_timer_disarm(hc->timer);
    }
}

static void
conn_set_phase(struct http_conn *hc, enum conn_phase phase)
{
    uint64_t now = now_msec();
    hc->phase = phase;
    if (phase == PHASE_HEAD)
        hc->head_deadline = now + hc->srv->header_timeout_ms;
    hc->last_byte = hc->window_start = now;
    hc->window_bytes = 0;
    hc->body_waits = false;
    conn_schedule(hc);
}

/* Body bytes arrived (called for every piece MHD hands us). */
static void
conn_body_bytes(struct http_conn *hc, size_t n)
{
    hc->last_byte = now_msec();
    hc->window_bytes += n;
}

/* The body may wait (paused by us, or at a message boundary) or may not:
 * the clock starts afresh when it may not. */
static void
conn_body_waits(struct http_conn *hc, bool waits)
{
    if (hc->phase != PHASE_BODY || hc->body_waits == waits)
        return;
    hc->body_waits = waits;
    if (!waits) {
        hc->last_byte = hc->window_start = now_msec();
        hc->window_bytes = 0;
    }
    conn_schedule(hc);
}

static void
conn_timer(struct loop_timer *t, void *ud)
{
    struct http_conn *hc = ud;
    struct http_server *s = hc->srv;
    uint64_t now = now_msec();
    char msg[128];
    (void)t;

    if (hc->phase == PHASE_HEAD && now >= hc->head_deadline) {
        (void)snprintf(msg, sizeof(msg), "the request head did not arrive within %llu s",
                       (unsigned long long)(s->header_timeout_ms / 1000));
        log_debug("http: closing connection fd=%d: %s", hc->fd, msg);
        /* A kept-alive connection that has not begun another request is
         * closed without a word: a 408 there could cross a request the
         * client is just sending and be taken for its answer. */
        bool idle = hc->requests > 0 && !hc->req;
        conn_kill(hc, idle ? 0 : 408, "Request Timeout", "timeout", msg);
        return;
    }
    if (hc->phase == PHASE_BODY && !hc->body_waits) {
        if (now >= hc->last_byte + s->body_timeout_ms) {
            (void)snprintf(msg, sizeof(msg), "no request body byte arrived for %llu s",
                           (unsigned long long)(s->body_timeout_ms / 1000));
            log_debug("http: closing connection fd=%d: %s", hc->fd, msg);
            conn_kill(hc, 408, "Request Timeout", "timeout", msg);
            return;
        }
        if (s->body_min_rate && now >= hc->window_start + s->body_timeout_ms) {
            uint64_t need = (uint64_t)s->body_min_rate * (now - hc->window_start) / 1000;
            if (hc->window_bytes < need) {
                (void)snprintf(msg, sizeof(msg), "the request body arrived slower than %u bytes/s",
                               s->body_min_rate);
                log_debug("http: closing connection fd=%d: %s", hc->fd, msg);
                conn_kill(hc, 408, "Request Timeout", "timeout", msg);
                return;
            }
            hc->window_start = now;
            hc->window_bytes = 0;
        }
    }
    conn_schedule(hc);
}

static void
client_key(const struct sockaddr *sa, uint8_t key[9])
{
    memset(key, 0, 9);
    if (sa && sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            key[0] = 4;
            memcpy(key + 1, a->s6_addr + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a->s6_addr, 8); /* the /64 */
        }
    }
}

static struct client **
client_slot(struct http_server *s, const uint8_t key[9])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < 9; i++)
        h = (h ^ key[i]) * 16777619u;
    struct client **p = &s->clients[h % HTTP_CLIENT_BUCKETS];
    while (*p && memcmp((*p)->key, key, 9))
        p = &(*p)->next;
    return p;
}

static void
client_put(struct http_server *s, struct client *c)
{
    if (!c || --c->conns > 0)
        return;
    struct client **p = client_slot(s, c->key);
    *p = c->next;
    free(c);
}

static struct http_conn *
conn_new(struct http_server *s, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct http_conn *hc = NULL;
    struct client **p;
    uint8_t key[9];
    if (!fi)
        return NULL;
    hc = calloc(1, sizeof(*hc));
    if (!hc)
        goto fail;
    hc->srv = s;
    hc->fd = fi->connect_fd;
    if (loop_timer_new(s->loop, conn_timer, hc, &hc->timer) < 0)
        goto fail;
    client_key(ai ? ai->client_addr : NULL, key);
    p = client_slot(s, key);
    if (!*p) {
        *p = calloc(1, sizeof(**p));
        if (!*p)
            goto fail;
        memcpy((*p)->key, key, sizeof(key));
    }
    hc->client = *p;
    hc->client->conns++;
    conn_set_phase(hc, PHASE_HEAD);
    if (s->max_per_client && hc->client->conns > s->max_per_client) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg), "more than %u connections at once from one address",
                       s->max_per_client);
        log_debug("http: refusing connection fd=%d: %s", hc->fd, msg);
        conn_kill(hc, 429, "Too Many Requests", "too_many_connections", msg);
    }
    return hc;

fail:
    /* Out of memory: refuse the connection rather than leave it untimed. */
    if (hc)
        loop_timer_free(hc->timer);
    free(hc);
    (void)shutdown(fi->connect_fd, SHUT_RDWR);
    s->kick = true;
    return NULL;
}

static void
conn_free(struct http_conn *hc)
{
    if (!hc)
        return;
    if (hc->req)
        hc->req->hc = NULL;
    loop_timer_free(hc->timer);
    client_put(hc->srv, hc->client);
    free(hc);
}

static struct http_conn *
conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* --- requests --- */

void
http_req_ref(struct http_req *req)
{
    req->refs++;
}

static void
free_headers(struct hdr *h)
{
    while (h) {
        struct hdr *n = h->next;
        free(h->name);
        free(h->value);
        free(h);
        h = n;
    }
}

void
http_req_unref(struct http_req *req)
{
    if (!req || --req->refs > 0)
        return;
    if (req->pending && !req->queued)
        MHD_destroy_response(req->pending);
    free_headers(req->headers);
    buf_done(&req->body);
    free(req->method);
    free(req->path);
    free(req->uri);
    free(req->upgrade);
    free(req);
}

bool
http_req_closed(const struct http_req *req)
{
    return req->closed;
}

const char *
http_req_method(const struct http_req *req)
{
    return req->method;
}

const char *
http_req_path(const struct http_req *req)
{
    return req->path;
}

bool
http_req_nul_escaped(const struct http_req *req)
{
    return req->nul_escaped;
}

bool
http_req_is_head(const struct http_req *req)
{
    return !strcmp(req->method, "HEAD");
}

const char *
http_req_header(struct http_req *req, const char *name)
{
    if (req->closed)
        return NULL;
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

struct header_iter {
    int (*fn)(void *ud, const char *name, const char *value);
    void *ud;
    int r;
};

static enum MHD_Result
header_iter_one(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct header_iter *it = cls;
    (void)kind;
    it->r = it->fn(it->ud, key, value ? value : "");
    return it->r < 0 ? MHD_NO : MHD_YES;
}

int
http_req_headers(struct http_req *req, int (*fn)(void *ud, const char *name, const char *value),
                 void *ud)
{
    struct header_iter it = {fn, ud, 0};
    if (req->closed)
        return 0;
    (void)MHD_get_connection_values(req->conn, MHD_HEADER_KIND, header_iter_one, &it);
    return it.r < 0 ? it.r : 0;
}

const char *
http_req_query(struct http_req *req, const char *name)
{
    if (req->closed)
        return NULL;
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

void
http_req_set_userdata(struct http_req *req, void *ud, void (*on_close)(struct http_req *, void *))
{
    req->ud = ud;
    req->on_close = on_close;
}

void *
http_req_userdata(const struct http_req *req)
{
    return req->ud;
}

static void respond_error(struct http_req *req, unsigned status, const char *code, const char *msg);
static void respond_error_close(struct http_req *req, unsigned status, const char *code,
                                const char *msg);

void
http_req_read_body(struct http_req *req, size_t max,
                   void (*done)(struct http_req *, const char *, size_t))
{
    req->mode = BODY_BUFFER;
    req->body_max = max;
    buf_init(&req->body, max);
    req->read_done = done;
    if (req->content_length != HTTP_LEN_NONE && req->content_length > max) {
        /* Refused before a byte of it is stored; the answer goes out
         * before the body is read when the client waits for 100-continue
         * or the body is too large to drop (see expects_small_body()). */
        char msg[128];
        (void)snprintf(msg, sizeof(msg), "request body is larger than %zu bytes", max);
        http_req_add_header(req, "Connection", "close");
        respond_error(req, 413, "too_large", msg);
    }
}

void
http_req_stream_body(struct http_req *req, int (*chunk)(struct http_req *, const char *, size_t),
                     void (*done)(struct http_req *))
{
    req->mode = BODY_STREAM;
    req->chunk = chunk;
    req->stream_done = done;
}

void
http_req_answer_later(struct http_req *req)
{
    req->mode = BODY_LATER;
}

void
http_req_add_header(struct http_req *req, const char *name, const char *value)
{
    struct hdr *h = calloc(1, sizeof(*h));
    if (!h)
        return;
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        free(h);
        return;
    }
    /* Appended: relayed headers keep their order (Set-Cookie twice...). */
    struct hdr **tail = &req->headers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
}

/* --- proxying: the raw request, body back-pressure --- */

const char *
http_req_uri(const struct http_req *req)
{
    return req->uri;
}

void
http_req_pause_body(struct http_req *req)
{
    if (req->done_called || req->answered || req->closed || req->mode != BODY_STREAM)
        return;
    req->body_paused = true;
    if (req->hc)
        conn_body_waits(req->hc, true); /* we are the slow one */
    req_suspend(req);
}

void
http_req_resume_body(struct http_req *req)
{
    if (!req->body_paused)
        return;
    req->body_paused = false;
    if (req->hc)
        conn_body_waits(req->hc, false);
    req_resume(req);
}

void
http_req_body_at_boundary(struct http_req *req, bool at_boundary)
{
    if (req->hc && !req->body_paused)
        conn_body_waits(req->hc, at_boundary);
}

bool
http_req_answered(const struct http_req *req)
{
    return req->answered;
}

/* Queues the parked response if MHD allows it now. */
static enum MHD_Result
flush_pending(struct http_req *req)
{
    if (!req->pending || req->queued)
        return MHD_YES;
    enum MHD_Result r = MHD_queue_response(req->conn, req->pending_status, req->pending);
    MHD_destroy_response(req->pending);
    req->pending = NULL;
    req->queued = true;
    return r;
}

static void
park(struct http_req *req, unsigned status, struct MHD_Response *resp)
{
    uint64_t keep = req->srv->header_timeout_ms / 1000;
    if (keep && status != 101 && !req->relay) {
        /* How long an idle kept-alive connection lives (the header deadline):
         * clients that honour the hint retire it first instead of racing
         * our close with their next request. A relayed answer carries only
         * the upstream's headers. */
        char v[32];
        (void)snprintf(v, sizeof(v), "timeout=%llu", (unsigned long long)keep);
        (void)MHD_add_response_header(resp, "Keep-Alive", v);
    }
    for (struct hdr *h = req->headers; h; h = h->next)
        (void)MHD_add_response_header(resp, h->name, h->value);
    free_headers(req->headers);
    req->headers = NULL;
    req->answered = true;
    req->pending = resp;
    req->pending_status = status;
    if (req->suspended) {
        /* MHD allows queueing on a suspended connection once the request
         * is complete; then wake it. While its body is still arriving (a
         * paused body) it is queued when the body is done, in on_access(). */
        if (req->done_called)
            (void)flush_pending(req);
        if (req->body_paused && req->hc)
            conn_body_waits(req->hc, false);
        req->body_paused = false;
        req_resume(req);
    }
    /* Otherwise we are inside a handler and it queues on the way out. */
}

void
http_respond(struct http_req *req, unsigned status, const char *content_type, const void *body,
             size_t len)
{
    if (req->answered || req->closed)
        return;
    struct MHD_Response *resp =
            MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) {
        log_err("out of memory creating a response");
        return;
    }
    if (content_type)
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    park(req, status, resp);
}

void
http_respond_fd(struct http_req *req, unsigned status, const char *content_type, int fd,
                uint64_t size)
{
    if (req->answered || req->closed) {
        safe_close(fd);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_fd64(size, fd);
    if (!resp) {
        safe_close(fd);
        http_respond(req, 500, "application/json",
                     "{\"error\":\"internal\",\"message\":\"cannot stream the file\"}", 56);
        return;
    }
    if (content_type)
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    park(req, status, resp);
}

static void respond_error(struct http_req *req, unsigned status, const char *code, const char *msg);

/* A file body whose pieces a checker sees before they go out. */
struct checked_fd {
    int fd;
    uint64_t size, off;
    const struct http_body_check *chk;
    void *ud;
    bool failed;
};

static ssize_t
checked_fd_read(void *cls, uint64_t pos, char *out, size_t max)
{
    struct checked_fd *c = cls;
    if (c->failed || pos != c->off || c->off >= c->size)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t want = (size_t)MIN((uint64_t)max, c->size - c->off);
    ssize_t k;
    do
        k = pread(c->fd, out, want, (off_t)c->off);
    while (k < 0 && errno == EINTR);
    if (k <= 0) {
        /* Short or unreadable: MHD would wait forever for the rest. */
        c->failed = true;
        (void)c->chk->end(c->ud, k < 0 ? -errno : -ENODATA);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (c->chk->piece(c->ud, out, (size_t)k) < 0 ||
        (c->off + (uint64_t)k == c->size && c->chk->end(c->ud, 0) < 0)) {
        c->failed = true; /* this piece, the last one at least, never goes out */
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    c->off += (uint64_t)k;
    return k;
}

static void
checked_fd_free(void *cls)
{
    struct checked_fd *c = cls;
    safe_close(c->fd);
    c->chk->free(c->ud);
    free(c);
}

void
http_respond_fd_checked(struct http_req *req, unsigned status, const char *content_type, int fd,
                        uint64_t size, const struct http_body_check *chk, void *ud)
{
    struct checked_fd *c = NULL;
    struct MHD_Response *resp = NULL;

    if (req->answered || req->closed)
        goto gone;
    if (size == 0 && chk->end(ud, 0) < 0) {
        respond_error(req, 500, "integrity_error", "the content is damaged");
        goto gone;
    }
    c = calloc(1, sizeof(*c));
    if (c)
        resp = MHD_create_response_from_callback(size, 64 * 1024, checked_fd_read, c,
                                                 checked_fd_free);
    if (!resp) {
        free(c);
        respond_error(req, 500, "internal", "cannot stream the file");
        goto gone;
    }
    *c = (struct checked_fd){.fd = fd, .size = size, .chk = chk, .ud = ud};
    if (content_type)
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    park(req, status, resp);
    return;
gone:
    safe_close(fd);
    chk->free(ud);
}

/* --- streams --- */

static void
stream_maybe_free(struct http_stream *s)
{
    if (s->mhd_gone && s->released && !s->in_closed) {
        buf_done(&s->buf);
        free(s);
    }
}

static void
stream_closed(struct http_stream *s)
{
    if (s->closed_called)
        return;
    s->closed_called = true;
    if (s->ops && s->ops->closed && !s->released)
        s->ops->closed(s, s->ud);
}

static ssize_t
stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    struct http_stream *s = cls;
    (void)pos;

    if (s->aborted)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (s->buf.len == 0 && !s->ended && !s->released && s->ops && s->ops->fill) {
        s->in_fill = true;
        s->ops->fill(s, s->ud);
        s->in_fill = false;
        if (s->aborted)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (s->buf.len > 0) {
        size_t n = MIN(max, s->buf.len);
        memcpy(out, s->buf.data, n);
        buf_consume(&s->buf, n);
        return (ssize_t)n;
    }
    if (s->ended || s->released)
        return MHD_CONTENT_READER_END_OF_STREAM;
    s->waiting = true;
    req_suspend(s->req);
    return 0;
}

static void
stream_free_cb(void *cls)
{
    struct http_stream *s = cls;
    s->mhd_gone = true;
    s->in_closed = true; /* the owner may release s from its closed() */
    stream_closed(s);
    s->in_closed = false;
    stream_maybe_free(s);
}

static int
stream_start(struct http_req *req, unsigned status, const char *content_type, bool relay,
             const struct http_stream_ops *ops, void *ud, struct http_stream **ret)
{
    if (req->answered || req->closed)
        return -ECONNRESET;
    struct http_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->req = req;
    s->ops = ops;
    s->ud = ud;
    buf_init(&s->buf, HTTP_STREAM_BUF);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                  stream_read, s, stream_free_cb);
    if (!resp) {
        free(s);
        return -ENOMEM;
    }
    if (content_type)
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (!relay)
        (void)MHD_add_response_header(resp, "Cache-Control", "no-store");
    req->stream = s;
    req->relay = relay;
    park(req, status, resp);
    *ret = s;
    return 0;
}

int
http_stream_start(struct http_req *req, unsigned status, const char *content_type,
                  const struct http_stream_ops *ops, void *ud, struct http_stream **ret)
{
    return stream_start(req, status, content_type, false, ops, ud, ret);
}

int
http_stream_start_relay(struct http_req *req, unsigned status, const struct http_stream_ops *ops,
                        void *ud, struct http_stream **ret)
{
    return stream_start(req, status, NULL, true, ops, ud, ret);
}

int
http_stream_write(struct http_stream *s, const void *data, size_t len)
{
    if (s->aborted || s->ended || s->mhd_gone)
        return -EPIPE;
    if (len > http_stream_room(s))
        return -EAGAIN;
    int r = buf_put(&s->buf, data, len);
    if (r < 0)
        return r == -EFBIG ? -EAGAIN : r;
    if (!s->in_fill)
        http_stream_wake(s);
    return 0;
}

size_t
http_stream_room(const struct http_stream *s)
{
    return s->buf.len >= HTTP_STREAM_BUF ? 0 : HTTP_STREAM_BUF - s->buf.len;
}

void
http_stream_wake(struct http_stream *s)
{
    if (s->in_fill || !s->waiting || s->mhd_gone)
        return;
    s->waiting = false;
    req_resume(s->req);
}

void
http_stream_end(struct http_stream *s)
{
    s->ended = true;
    http_stream_wake(s);
}

void
http_stream_abort(struct http_stream *s)
{
    s->aborted = true;
    http_stream_wake(s);
}

void
http_stream_release(struct http_stream *s)
{
    if (!s)
        return;
    s->released = true;
    s->ops = NULL;
    if (!s->mhd_gone)
        http_stream_wake(s);
    stream_maybe_free(s);
}

/* --- protocol upgrades --- */

static void
upgrade_unlink(struct http_upgrade *u)
{
    struct http_server *s = u->srv;
    if (u->prev)
        u->prev->next = u->next;
    else if (s->upgrades == u)
        s->upgrades = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->next = u->prev = NULL;
}

/* MHD sent the 101 and hands the socket over (from inside MHD_run). */
static void
on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
           size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    struct http_upgrade *u = cls;
    struct http_server *s = u->srv;
    struct http_conn *hc = conn_of(conn);
    (void)con_cls;
    if (hc)
        conn_set_phase(hc, PHASE_UPGRADED); /* the owner times its socket */
    u->urh = urh;
    u->started = true;
    u->prev = NULL;
    u->next = s->upgrades;
    if (s->upgrades)
        s->upgrades->prev = u;
    s->upgrades = u;
    u->fn(u, sock, extra, extra_len, u->ud);
}

void
http_respond_upgrade(struct http_req *req, http_upgrade_fn fn, void *ud)
{
    if (req->answered || req->closed || req->upgrade)
        return;
    if (!req->http11) {
        respond_error(req, 400, "bad_request", "a protocol upgrade needs HTTP/1.1");
        return;
    }
    struct http_upgrade *u = calloc(1, sizeof(*u));
    if (!u) {
        respond_error(req, 500, "internal", "out of memory");
        return;
    }
    u->srv = req->srv;
    u->fn = fn;
    u->ud = ud;
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, u);
    if (!resp) {
        free(u);
        respond_error(req, 500, "internal", "out of memory");
        return;
    }
    req->upgrade = u; /* freed with the request */
    park(req, 101, resp);
}

void
http_upgrade_close(struct http_upgrade *u)
{
    if (!u || !u->started || u->closed)
        return;
    u->closed = true;
    upgrade_unlink(u);
    (void)MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
    /* MHD finishes the connection (on_completed) on its next run. */
    u->srv->kick = true;
}

/* --- MHD callbacks --- */

static void
respond_error(struct http_req *req, unsigned status, const char *code, const char *msg)
{
    char b[512];
    int n = snprintf(b, sizeof(b), "{\"error\":\"%s\",\"message\":\"%s\"}", code, msg);
    http_respond(req, status, "application/json", b, (size_t)n);
}

/* An answer to a request whose framing cannot be trusted: sent before the
 * body is read, and the connection closes after it. */
static void
respond_error_close(struct http_req *req, unsigned status, const char *code, const char *msg)
{
    if (req->answered || req->closed)
        return;
    http_req_add_header(req, "Connection", "close");
    respond_error(req, status, code, msg);
    req->answer_now = true;
}

/* A response chosen before the body was read (an error, usually) is sent
 * only after the body has been read and dropped, if it is small enough:
 * clients that write the whole body before reading (most HTTP libraries
 * without Expect: 100-continue) otherwise see a reset connection instead of
 * our answer. Larger bodies are not worth reading; the answer goes out at
 * once and the connection is closed. A request without a body is answered
 * from the next call too: MHD closes the connection after a response queued
 * in the first call (it cannot know the body was consumed). */
static bool
expects_small_body(struct http_req *req)
{
    /* A client waiting for 100-continue sends no body after our answer. */
    const char *expect = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Expect");
    if (expect && req->has_body)
        return false;
    /* Chunked: drained up to HTTP_DRAIN_MAX, then cut. No body at all:
     * answering from the next call keeps the connection. */
    return req->content_length == HTTP_LEN_NONE || req->content_length <= HTTP_DRAIN_MAX;
}

static struct http_req *
req_new(struct http_server *srv, struct MHD_Connection *conn)
{
    struct http_req *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->srv = srv;
    req->conn = conn;
    req->refs = 1;
    req->content_length = HTTP_LEN_NONE;
    buf_init(&req->body, 0);
    req->hc = conn_of(conn);
    if (req->hc)
        req->hc->req = req;
    return req;
}

/* --- strict framing --- */

struct framing {
    unsigned cl, te, host; /* how many of each header */
    const char *cl_value, *te_value;
    const char *bad; /* the first problem, a constant message */
    char name[48];   /* the header it is in (token characters only) */
};

static bool
is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static enum MHD_Result
framing_one(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct framing *f = cls;
    (void)kind;
    if (f->bad)
        return MHD_NO;
    if (!key || !*key) {
        f->bad = "a header has an empty name";
        return MHD_NO;
    }
    for (const unsigned char *k = (const unsigned char *)key; *k; k++)
        if (!is_tchar(*k)) {
            /* "Content-Length : 5" would be another header to MHD. */
            f->bad = "a header name holds a character that is not allowed there";
            return MHD_NO;
        }
    for (const unsigned char *v = (const unsigned char *)(value ? value : ""); *v; v++)
        if ((*v < 0x20 && *v != '\t') || *v == 0x7f) {
            (void)strscpy(f->name, key, sizeof(f->name));
            f->bad = "a header value holds a control character";
            return MHD_NO;
        }
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        f->cl++;
        f->cl_value = value ? value : "";
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->te++;
        f->te_value = value ? value : "";
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) {
        f->host++;
    }
    return MHD_YES;
}

/* What MHD 0.9.75 lets through and a stricter peer (a proxy in front of
 * us) may read differently: a request target with spaces or control
 * characters, header names outside the token set, control characters in
 * values, two Content-Lengths, Content-Length next to Transfer-Encoding
 * (MHD silently prefers the latter), a coding other than chunked (MHD would
 * read the body until the connection ends), chunked in HTTP/1.0, and Host
 * missing or repeated. Malformed chunk lines, oversized chunk sizes (over
 * 64 bits), non-numeric Content-Lengths and oversized heads MHD refuses
 * itself. Fills req->content_length and has_body. */
static int
check_framing(struct http_req *req, const char *version, char *msg, size_t n)
{
    struct framing f = {0};
    bool v10 = !strcmp(version, MHD_HTTP_VERSION_1_0);
    (void)MHD_get_connection_values(req->conn, MHD_HEADER_KIND, framing_one, &f);
    if (f.bad) {
        if (f.name[0])
            (void)snprintf(msg, n, "%s (%s)", f.bad, f.name);
        else
            (void)snprintf(msg, n, "%s", f.bad);
        return -EINVAL;
    }
    for (const unsigned char *u = (const unsigned char *)(req->uri ? req->uri : ""); *u; u++)
        if (*u <= 0x20 || *u == 0x7f) {
            (void)snprintf(msg, n, "the request target holds a space or a control character");
            return -EINVAL;
        }
    const char *why = NULL;
    uint64_t len = 0;
    if (f.cl > 1)
        why = "more than one Content-Length header";
    else if (f.te > 1)
        why = "more than one Transfer-Encoding header";
    else if (f.cl && f.te)
        why = "Content-Length and Transfer-Encoding together";
    else if (f.te && strcasecmp(f.te_value, "chunked"))
        why = "the only Transfer-Encoding accepted is 'chunked'";
    else if (f.te && v10)
        why = "Transfer-Encoding in an HTTP/1.0 request";
    else if (f.host > 1 || (!v10 && f.host == 0))
        why = "the request needs exactly one Host header";
    else if (f.cl && parse_u64(f.cl_value, &len) < 0)
        why = "Content-Length is not a number";
    if (why) {
        (void)snprintf(msg, n, "%s", why);
        return -EINVAL;
    }
    if (f.cl)
        req->content_length = len;
    req->has_body = f.te || len > 0;
    return 0;
}

/* MHD's URI logger sees the request target before it is split and
 * unescaped: the request is born here to keep it (a proxy forwards it
 * verbatim). Its return value becomes the request's con_cls. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_req *req = req_new(cls, conn);
    if (req) {
        req->uri = strdup(uri); /* NULL on OOM: http_req_uri() says unknown */
        /* unescape() decodes every "%00" of the target, in the path and in
         * the query alike, so this is exactly "a NUL was sent". */
        req->nul_escaped = strstr(uri, "%00") != NULL;
    }
    return req;
}

static enum MHD_Result
on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
          const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    struct http_server *srv = cls;
    struct http_req *req = *con_cls;

    if (req && (!req->hc || req->hc->killed))
        return MHD_NO; /* refused, timed out or untracked: MHD closes it */
    if (!req || !req->begun) {
        if (!req) {
            req = req_new(srv, conn);
            if (!req)
                return MHD_NO;
            *con_cls = req; /* on_completed() frees it */
            if (!req->hc || req->hc->killed)
                return MHD_NO;
        }
        req->begun = true;
        req->http11 = version && !strcmp(version, MHD_HTTP_VERSION_1_1);
        req->method = strdup(method);
        req->path = strdup(url);
        if (!req->method || !req->path)
            return MHD_NO;
        char why[160];
        if (check_framing(req, version ? version : "", why, sizeof(why)) < 0) {
            log_debug("http: refusing a request on fd=%d: %s", req->hc->fd, why);
            conn_set_phase(req->hc, PHASE_BUSY);
            respond_error_close(req, 400, "bad_request", why);
            return flush_pending(req);
        }
        /* The head is in; a body, if any, is timed from now on. */
        conn_set_phase(req->hc, req->has_body ? PHASE_BODY : PHASE_BUSY);
        req->in_handler = true;
        srv->begin(req, srv->ud);
        req->in_handler = false;
        if (req->pending && !req->answer_now && expects_small_body(req))
            return MHD_YES; /* read (and drop) the body first: see below */
        return flush_pending(req);
    }

    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        conn_body_bytes(req->hc, n);
        if (req->answered || req->too_large || req->failed) {
            req->drained += n;
            return req->drained > HTTP_DRAIN_MAX ? MHD_NO : MHD_YES;
        }
        switch (req->mode) {
        case BODY_BUFFER:
            if (buf_put(&req->body, upload_data, n) < 0)
                req->too_large = true;
            break;
        case BODY_STREAM:
            req->in_handler = true;
            if (req->chunk(req, upload_data, n) < 0)
                req->failed = true;
            req->in_handler = false;
            break;
        default:
            req->too_large = true;
            break;
        }
        return MHD_YES;
    }

    if (!req->done_called) {
        req->done_called = true;
        conn_set_phase(req->hc, PHASE_BUSY);
        req->in_handler = true;
        if (req->answered) {
            /* answered while the body was arriving */
        } else if (req->too_large) {
            char msg[128];
            (void)snprintf(msg, sizeof(msg), "request body is larger than %zu bytes",
                           req->mode == BODY_BUFFER ? req->body_max : (size_t)0);
            respond_error(req, 413, "too_large", msg);
        } else if (req->failed) {
            respond_error(req, 500, "internal", "the request body could not be stored");
        } else if (req->mode == BODY_BUFFER) {
            req->read_done(req, req->body.data, req->body.len);
        } else if (req->mode == BODY_STREAM) {
            req->stream_done(req);
        } else if (req->mode == BODY_LATER) {
            /* answered from the loop when the work is done */
        } else {
            /* A surface that picked no body mode and did not answer. */
            respond_error(req, 500, "internal", "request was not handled");
        }
        req->in_handler = false;
    }
    if (req->pending)
        return flush_pending(req);
    if (!req->answered)
        req_suspend(req); /* answered later, asynchronously */
    return MHD_YES;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    struct http_req *req = *con_cls;
    struct http_conn *hc = conn_of(conn);
    (void)cls;
    (void)toe;
    /* A connection kept alive waits for its next request head from now. */
    if (hc) {
        hc->req = NULL;
        hc->requests++;
        if (hc->phase != PHASE_UPGRADED)
            conn_set_phase(hc, PHASE_HEAD);
    }
    if (!req)
        return;
    req->hc = NULL;
    *con_cls = NULL;
    req_resume(req);
    req->closed = true;
    if (req->on_close)
        req->on_close(req, req->ud);
    http_req_unref(req);
}

static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
              enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        srv->connections++;
        *socket_context = conn_new(srv, conn);
    } else {
        if (srv->connections > 0)
            srv->connections--;
        conn_free(*socket_context);
        *socket_context = NULL;
    }
}

__attribute__((format(printf, 2, 0))) static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    char b[512];
    (void)cls;
    (void)vsnprintf(b, sizeof(b), fmt, ap);
    size_t n = strlen(b);
    while (n && b[n - 1] == '\n')
        b[--n] = '\0';
    log_debug("http: %s", b);
}

/* Percent-decodes in place. %00 becomes 0x01 rather than ending the C
 * string there (which would silently name something shorter); routes that
 * take names refuse such a request (http_req_nul_escaped()), since 0x01
 * is itself a byte a file name may hold. */
static size_t
unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '%' && r[1] && r[2]) {
            int hi = r[1], lo = r[2];
            int h = hi >= '0' && hi <= '9'   ? hi - '0'
                    : hi >= 'a' && hi <= 'f' ? hi - 'a' + 10
                    : hi >= 'A' && hi <= 'F' ? hi - 'A' + 10
                                             : -1;
            int l = lo >= '0' && lo <= '9'   ? lo - '0'
                    : lo >= 'a' && lo <= 'f' ? lo - 'a' + 10
                    : lo >= 'A' && lo <= 'F' ? lo - 'A' + 10
                                             : -1;
            if (h >= 0 && l >= 0) {
                int v = h * 16 + l;
                *w++ = v == 0 ? 0x01 : (char)v;
                r += 2;
                continue;
            }
        }
        *w++ = *r;
    }
    *w = '\0';
    return (size_t)(w - s);
}

static void
on_mhd_io(struct loop_io *io, uint32_t revents, void *ud)
{
    struct http_server *s = ud;
    (void)io;
    (void)revents;
    (void)MHD_run(s->mhd);
}

static int64_t
prepare(void *ud)
{
    struct http_server *s = ud;
    MHD_UNSIGNED_LONG_LONG t = 0;
    /* In external polling mode MHD acts only inside MHD_run(): run it when
     * a connection was resumed or MHD says work is due now (its epoll fd is
     * edge-triggered, so a ready connection does not wake us again). */
    for (int i = 0; i < 16; i++) {
        bool have = MHD_get_timeout(s->mhd, &t) == MHD_YES;
        if (!s->kick && !(have && t == 0))
            return have ? (int64_t)t : -1;
        s->kick = false;
        (void)MHD_run(s->mhd);
    }
    return 0;
}

int
http_server_new(struct loop *loop, const struct http_server_config *c, struct http_server **ret,
                struct err *err)
{
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->begin = c->begin;
    s->ud = c->ud;
    s->max_per_client = c->max_per_client;
    s->header_timeout_ms = (uint64_t)c->header_timeout_s * 1000;
    s->body_timeout_ms = (uint64_t)c->body_timeout_s * 1000;
    s->body_min_rate = c->body_min_rate;
    int fd = c->listen_fd > 0 ? c->listen_fd : listen_tcp(c->host, c->port, &s->port, err);
    if (fd < 0) {
        free(s);
        return fd;
    }
    if (c->listen_fd > 0)
        s->port = listen_port(fd);
    s->listen_fd = fd;
    s->mhd = MHD_start_daemon(
            MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0,
            NULL, NULL, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
            MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, c->max_connections,
            MHD_OPTION_CONNECTION_TIMEOUT, c->conn_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            c->conn_memory, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape,
            s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
            /* abxd ignores SIGPIPE; saying so lets MHD use sendfile(). */
            MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int)1, MHD_OPTION_END);
    if (!s->mhd) {
        close(fd);
        free(s);
        return err_set(err, EIO, "cannot start the HTTP server");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    int r = loop_io_add(loop, info->epoll_fd, EPOLLIN, on_mhd_io, s, &s->io);
    if (r < 0) {
        MHD_stop_daemon(s->mhd);
        close(fd);
        free(s);
        return err_setx(err, -r, "cannot watch the HTTP server");
    }
    loop_set_prepare(loop, prepare, s);
    *ret = s;
    return 0;
}

void
http_server_free(struct http_server *s)
{
    if (!s)
        return;
    /* MHD must not be stopped with suspended connections. */
    while (s->suspended) {
        struct http_req *req = s->suspended;
        if (req->stream)
            req->stream->aborted = true;
        req_resume(req);
    }
    /* Upgraded connections end too; their owners hear it from on_close. */
    while (s->upgrades)
        http_upgrade_close(s->upgrades);
    loop_set_prepare(s->loop, NULL, NULL);
    loop_io_free(s->io);
    MHD_stop_daemon(s->mhd);
    safe_close(s->listen_fd);
    free(s);
}

uint16_t
http_server_port(const struct http_server *s)
{
    return s->port;
}

unsigned
http_server_connections(const struct http_server *s)
{
    return s->connections;
}
