/*
 * resolver.c - the sandboxes' resolver: sockets, timers and the state of
 * each query around dns.h's rules (see resolver.h for the design). Not a
 * cache and not a recursive resolver: every allowed query is asked of the
 * upstream servers, which do the recursion.
 *
 * Re-entrancy is kept out by construction: nothing that runs while a
 * sandbox TCP connection is reading (handle_message()) ever finishes a
 * query or closes a connection; a query whose first upstream attempt
 * fails at once is finished from its timer, armed to fire now.
 */
#include "net/resolver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/dns.h"
#include "net/names.h"
#include "net/policy.h"
#include "util/buf.h"
#include "util/fd.h"
#include "util/list.h"
#include "util/loop.h"
#include "util/rand.h"
#include "util/timeutil.h"

#define UDP_BATCH      64  /* datagrams read per wakeup, so one busy sandbox cannot starve */
#define ACCEPT_BATCH   16  /* connections accepted per wakeup */
#define UPSTREAM_QUERY 512 /* bytes of the query we send upstream (header, name, OPT) */

struct rconn;

struct rquery {
    struct resolver *r;
    struct list link;      /* r->queries */
    struct list conn_link; /* conn->queries, when it came over TCP */
    struct rconn *conn;    /* NULL: came over UDP */
    struct resolver_client client;
    struct sockaddr_storage src; /* UDP: where the answer goes */
    socklen_t src_len;
    struct dns_query q;
    struct resolver_upstream ups[RESOLVER_UPSTREAMS_MAX];
    size_t n_ups;
    size_t up_i; /* the server being asked */
    uint16_t up_id;
    uint8_t up_buf[2 + UPSTREAM_QUERY]; /* TCP length, then the query */
    size_t up_len;                      /* bytes of the query, after the length */
    bool tcp;                           /* this attempt is the TCP fallback */
    bool tcp_counted;                   /* counted in r->n_tcp_up */
    int fd;
    struct loop_io *io;
    struct loop_timer *timer;
    size_t sent;     /* TCP: bytes of up_buf written */
    uint8_t len2[2]; /* TCP: the answer's length */
    size_t got;      /* TCP: bytes of len2 and ans read */
    uint8_t *ans;    /* TCP: the answer, of ans_len bytes */
    size_t ans_len;
};

struct rconn {
    struct resolver *r;
    struct list link;    /* r->conns */
    struct list queries; /* struct rquery.conn_link */
    struct resolver_client client;
    int fd;
    struct loop_io *io;
    struct loop_timer *idle;
    uint64_t active_msec; /* last complete message read or answer written */
    uint8_t in[2 + DNS_QUERY_MAX];
    size_t in_len;
    struct buf out; /* length-prefixed answers not yet written */
    unsigned inflight;
    bool eof;    /* the sandbox half-closed: answer, then close */
    bool broken; /* close at the next chance */
};

struct resolver {
    struct loop *loop;
    resolver_lookup_fn lookup;
    void *userdata;
    int udp_fd, tcp_fd;
    bool own_udp, own_tcp;
    struct loop_io *udp_io, *tcp_io;
    uint16_t udp_port, tcp_port;
    struct resolver_upstream ups[RESOLVER_UPSTREAMS_MAX];
    size_t n_ups;
    unsigned timeout_ms, inflight_max, inflight_sandbox_max, conns_max, conns_sandbox_max;
    unsigned idle_ms;
    struct list queries;
    struct list conns;
    unsigned n_inflight, n_conns, n_tcp_up;
    struct resolver_totals totals;
    /* Scratch, one user at a time (one thread). */
    uint8_t in[DNS_QUERY_MAX + 1];
    uint8_t rx[DNS_ANSWER_MAX];
    uint8_t out[DNS_ANSWER_MAX];
    struct dns_result res;
};

static void conn_after(struct rconn *c);

static int
sa_to_addr(const struct sockaddr_storage *ss, struct net_addr *ret)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;

    if (ss->ss_family == AF_INET) {
        memcpy(&a4, ss, sizeof(a4));
        return net_addr_from_bytes(&a4.sin_addr, 4, ret);
    }
    if (ss->ss_family == AF_INET6) {
        memcpy(&a6, ss, sizeof(a6));
        return net_addr_from_bytes(&a6.sin6_addr, 16, ret);
    }
    return -EAFNOSUPPORT;
}

static socklen_t
addr_to_sa(const struct net_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};

    memset(ss, 0, sizeof(*ss));
    if (a->family == AF_INET) {
        memcpy(&a4.sin_addr, a->bytes, 4);
        memcpy(ss, &a4, sizeof(a4));
        return sizeof(a4);
    }
    memcpy(&a6.sin6_addr, a->bytes, 16);
    memcpy(ss, &a6, sizeof(a6));
    return sizeof(a6);
}

static uint16_t
local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof(ss);
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;

    if (getsockname(fd, (struct sockaddr *)&ss, &n) < 0)
        return 0;
    if (ss.ss_family == AF_INET) {
        memcpy(&a4, &ss, sizeof(a4));
        return ntohs(a4.sin_port);
    }
    memcpy(&a6, &ss, sizeof(a6));
    return ntohs(a6.sin6_port);
}

static int
check_upstreams(const struct resolver_upstream *u, size_t n, struct err *err)
{
    if (n < 1 || n > RESOLVER_UPSTREAMS_MAX)
        return err_set(err, EINVAL, "%zu upstream servers, want 1 to %d", n,
                       RESOLVER_UPSTREAMS_MAX);
    for (size_t i = 0; i < n; i++)
        if (u[i].addr.family != AF_INET && u[i].addr.family != AF_INET6)
            return err_set(err, EINVAL, "upstream server %zu has no address", i + 1);
    return 0;
}

/* The answer for q's sandbox: over its TCP connection, or by UDP. */
static void
reply(struct resolver *r, struct rconn *conn, const struct sockaddr_storage *src, socklen_t src_len,
      const uint8_t *msg, size_t len)
{
    uint8_t len2[2] = {(uint8_t)(len >> 8), (uint8_t)len};

    if (conn) {
        /* Both parts or neither: a half-queued answer would desynchronise
         * the stream. */
        if (conn->out.len + 2 + len > conn->out.max || buf_put(&conn->out, len2, 2) < 0 ||
            buf_put(&conn->out, msg, len) < 0)
            conn->broken = true;
        return;
    }
    if (sendto(r->udp_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)src,
               src_len) < 0)
        r->totals.errors++;
}

static void
reply_rcode(struct resolver *r, const struct dns_query *q, int rcode, struct rconn *conn,
            const struct sockaddr_storage *src, socklen_t src_len)
{
    size_t n = 0;

    if (dns_answer_rcode(q, rcode, r->out, sizeof(r->out), &n) == 0)
        reply(r, conn, src, src_len, r->out, n);
}

/* Closes the current upstream attempt's socket and watcher. */
static void
query_close_attempt(struct rquery *q)
{
    loop_io_free(q->io);
    q->io = NULL;
    if (q->fd >= 0)
        (void)close(q->fd);
    q->fd = -EBADF;
    free(q->ans);
    q->ans = NULL;
    q->ans_len = q->got = q->sent = 0;
    if (q->tcp_counted)
        q->r->n_tcp_up--;
    q->tcp_counted = false;
}

/* Frees q; kick: let its TCP connection go on (never while it reads). */
static void
query_free(struct rquery *q, bool kick)
{
    struct resolver *r = q->r;
    struct rconn *conn = q->conn;

    query_close_attempt(q);
    loop_timer_free(q->timer);
    list_remove(&q->link);
    r->n_inflight--;
    q->client.stats->inflight--;
    if (conn) {
        list_remove(&q->conn_link);
        conn->inflight--;
    }
    free(q);
    if (conn && kick)
        conn_after(conn);
}

static void query_io(struct loop_io *io, uint32_t revents, void *userdata);

/* Starts asking server q->up_i over UDP (or TCP: q->tcp). */
static int
query_attempt(struct rquery *q)
{
    struct resolver *r = q->r;
    const struct resolver_upstream *u = &q->ups[q->up_i];
    struct sockaddr_storage ss;
    socklen_t sl = addr_to_sa(&u->addr, u->port ? u->port : 53, &ss);
    int type = q->tcp ? SOCK_STREAM : SOCK_DGRAM;
    int k;

    query_close_attempt(q);
    if (q->tcp) {
        if (r->n_tcp_up >= RESOLVER_TCP_UPSTREAM_MAX)
            return -EBUSY;
        r->n_tcp_up++;
        q->tcp_counted = true;
    } else {
        k = rand_bytes(&q->up_id, sizeof(q->up_id));
        if (k < 0)
            return k;
        k = dns_upstream_query(&q->q, q->up_id, q->up_buf + 2, UPSTREAM_QUERY, &q->up_len);
        if (k < 0)
            return k;
        q->up_buf[0] = (uint8_t)(q->up_len >> 8);
        q->up_buf[1] = (uint8_t)q->up_len;
    }
    q->fd = socket(u->addr.family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (q->fd < 0)
        return -errno;
    /* Connected: the kernel drops datagrams from any other address and
     * port, and reports ICMP errors to us. */
    if (connect(q->fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS)
        return -errno;
    if (!q->tcp && send(q->fd, q->up_buf + 2, q->up_len, MSG_NOSIGNAL) < 0)
        return -errno;
    k = loop_io_add(r->loop, q->fd, q->tcp ? EPOLLOUT : EPOLLIN, query_io, q, &q->io);
    if (k < 0)
        return k;
    return loop_timer_arm(q->timer, now_msec() + r->timeout_ms);
}

/* The end of q: SERVFAIL when every server failed. */
static void
query_servfail(struct rquery *q)
{
    q->client.stats->servfail++;
    reply_rcode(q->r, &q->q, DNS_SERVFAIL, q->conn, &q->src, q->src_len);
    query_free(q, true);
}

/* The current server failed: the next one, else SERVFAIL. */
static void
query_next(struct rquery *q)
{
    q->client.stats->upstream_failures++;
    q->tcp = false;
    while (++q->up_i < q->n_ups) {
        if (query_attempt(q) >= 0)
            return;
        q->client.stats->upstream_failures++;
    }
    query_servfail(q);
}

static void
query_timeout(struct loop_timer *t, void *userdata)
{
    (void)t;
    query_next(userdata);
}

/* An upstream answer of len bytes in msg. Returns -EPROTO when it must be
 * ignored (keep waiting), else 0 with q finished or moved on. */
static int
query_answer(struct rquery *q, const uint8_t *msg, size_t len)
{
    struct resolver *r = q->r;
    size_t n = 0;
    int k;

    k = dns_answer_filter(&q->q, q->up_id, msg, len, q->client.policy, q->conn != NULL, r->out,
                          sizeof(r->out), &n, &r->res, NULL);
    if (k == -EPROTO && !q->tcp)
        return -EPROTO;
    if (k == -EAGAIN && !q->tcp) {
        q->client.stats->tcp_fallbacks++;
        q->tcp = true;
        if (query_attempt(q) < 0)
            query_next(q);
        return 0;
    }
    if (k < 0 || (r->res.rcode == DNS_SERVFAIL && q->up_i + 1 < q->n_ups)) {
        query_next(q);
        return 0;
    }
    q->client.stats->answered++;
    if (r->res.denied)
        q->client.stats->denied++;
    if (q->client.names)
        (void)dns_result_record(&r->res, q->client.names, now_msec() / 1000);
    reply(r, q->conn, &q->src, q->src_len, r->out, n);
    query_free(q, true);
    return 0;
}

static void
query_io_udp(struct rquery *q)
{
    struct resolver *r = q->r;

    for (int i = 0; i < UDP_BATCH; i++) {
        ssize_t n = recv(q->fd, r->rx, sizeof(r->rx), MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                query_next(q); /* an ICMP error: the server is not there */
            return;
        }
        if (query_answer(q, r->rx, (size_t)n) == 0)
            return;
    }
}

static void
query_io_tcp(struct rquery *q, uint32_t revents)
{
    ssize_t n;

    if (q->sent < 2 + q->up_len) {
        if (!(revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        n = send(q->fd, q->up_buf + q->sent, 2 + q->up_len - q->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                query_next(q);
            return;
        }
        q->sent += (size_t)n;
        if (q->sent == 2 + q->up_len && loop_io_set_events(q->io, EPOLLIN) < 0)
            query_next(q);
        return;
    }
    for (;;) {
        if (q->got < 2)
            n = read(q->fd, q->len2 + q->got, 2 - q->got);
        else
            n = read(q->fd, q->ans + q->got - 2, q->ans_len - (q->got - 2));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            query_next(q); /* an error, or closed before the whole answer */
            return;
        }
        q->got += (size_t)n;
        if (q->got == 2) {
            /* At most DNS_ANSWER_MAX by construction (16 bits). */
            q->ans_len = (size_t)q->len2[0] << 8 | q->len2[1];
            q->ans = q->ans_len ? malloc(q->ans_len) : NULL;
            if (!q->ans) {
                query_next(q);
                return;
            }
        }
        if (q->got > 2 && q->got == 2 + q->ans_len) {
            /* Over TCP, -EPROTO is a broken server, not a stray
             * packet: query_answer() moves on. */
            (void)query_answer(q, q->ans, q->ans_len);
            return;
        }
    }
}

static void
query_io(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct rquery *q = userdata;

    (void)io;
    if (q->tcp)
        query_io_tcp(q, revents);
    else
        query_io_udp(q);
}

/* One message from a known sandbox, over UDP (conn NULL) or TCP. Never
 * finishes a query or frees conn (see the top of this file). */
static void
handle_message(struct resolver *r, const struct resolver_client *c, struct rconn *conn,
               const struct sockaddr_storage *src, socklen_t src_len, const uint8_t *msg,
               size_t len)
{
    struct resolver_stats *st = c->stats;
    struct policy_decision d;
    struct rquery *q = NULL;
    size_t n = 0;
    int k, rc;

    st->queries++;
    q = calloc(1, sizeof(*q));
    if (!q) {
        st->dropped++;
        return;
    }
    k = dns_query_parse(msg, len, &q->q, NULL);
    if (k < 0) {
        free(q);
        rc = dns_rcode_of(k);
        if (rc < 0 || dns_answer_error(msg, len, rc, r->out, sizeof(r->out), &n) < 0) {
            st->dropped++;
            return;
        }
        st->refused++;
        reply(r, conn, src, src_len, r->out, n);
        return;
    }
    if (!dns_type_allowed(q->q.qtype, c->dns_flags)) {
        st->refused++;
        reply_rcode(r, &q->q, DNS_REFUSED, conn, src, src_len);
        free(q);
        return;
    }
    if (!policy_check_name(c->policy, q->q.name, &d)) {
        st->denied++;
        reply_rcode(r, &q->q, DNS_NXDOMAIN, conn, src, src_len);
        free(q);
        return;
    }
    if (st->inflight >= r->inflight_sandbox_max || r->n_inflight >= r->inflight_max) {
        st->refused++;
        st->over_limit++;
        reply_rcode(r, &q->q, DNS_REFUSED, conn, src, src_len);
        free(q);
        return;
    }
    if (loop_timer_new(r->loop, query_timeout, q, &q->timer) < 0) {
        st->servfail++;
        reply_rcode(r, &q->q, DNS_SERVFAIL, conn, src, src_len);
        free(q);
        return;
    }
    q->r = r;
    q->client = *c;
    q->conn = conn;
    q->fd = -EBADF;
    if (src) {
        memcpy(&q->src, src, src_len);
        q->src_len = src_len;
    }
    memcpy(q->ups, r->ups, sizeof(q->ups));
    q->n_ups = r->n_ups;
    list_add_tail(&r->queries, &q->link);
    list_init(&q->conn_link);
    if (conn) {
        list_add_tail(&conn->queries, &q->conn_link);
        conn->inflight++;
    }
    r->n_inflight++;
    st->inflight++;
    st->forwarded++;
    /* A first attempt that fails at once is handled from the timer (the
     * caller may be reading conn). */
    if (query_attempt(q) < 0)
        (void)loop_timer_arm(q->timer, now_msec());
}

static void
udp_io(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct resolver *r = userdata;

    (void)io;
    (void)revents;
    for (int i = 0; i < UDP_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        struct resolver_client c;
        struct net_addr a;

        /* MSG_TRUNC: the datagram's real length, so an oversized query is
         * seen as one (FORMERR) and not parsed cut short. */
        ssize_t n = recvfrom(r->udp_fd, r->in, sizeof(r->in), MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&ss, &sl);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                r->totals.errors++;
            return;
        }
        if (sa_to_addr(&ss, &a) < 0 || r->lookup(&a, &c, r->userdata) < 0) {
            r->totals.unknown++;
            continue;
        }
        handle_message(r, &c, NULL, &ss, sl, r->in, MIN((size_t)n, sizeof(r->in)));
    }
}

int
resolver_datagram(struct resolver *r, const struct net_addr *src, uint16_t port, const void *msg,
                  size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = addr_to_sa(src, port, &ss);
    struct resolver_client c;

    if (r->lookup(src, &c, r->userdata) < 0) {
        r->totals.unknown++;
        return -ENOENT;
    }
    handle_message(r, &c, NULL, &ss, sl, msg, len);
    return 0;
}

static void
conn_close(struct rconn *c)
{
    struct resolver *r = c->r;

    list_foreach_safe (i, tmp, &c->queries) {
        struct rquery *q = list_entry(i, struct rquery, conn_link);
        q->client.stats->dropped++;
        query_free(q, false);
    }
    loop_io_free(c->io);
    loop_timer_free(c->idle);
    if (c->fd >= 0)
        (void)close(c->fd);
    buf_done(&c->out);
    list_remove(&c->link);
    r->n_conns--;
    c->client.stats->tcp_conns--;
    free(c);
}

/* Handles the complete messages read, while the in-flight cap allows. */
static void
conn_process(struct rconn *c)
{
    while (!c->broken && c->inflight < RESOLVER_TCP_INFLIGHT && c->in_len >= 2) {
        size_t len = (size_t)c->in[0] << 8 | c->in[1];
        if (len == 0 || len > DNS_QUERY_MAX) {
            c->broken = true; /* cannot be read, nor skipped within our bounds */
            return;
        }
        if (c->in_len < 2 + len)
            return;
        handle_message(c->r, &c->client, c, NULL, 0, c->in + 2, len);
        c->in_len -= 2 + len;
        memmove(c->in, c->in + 2 + len, c->in_len);
        c->active_msec = now_msec();
    }
}

/* Sets what c waits for, or closes it. The last thing its callers do. */
static void
conn_update(struct rconn *c)
{
    bool idle = c->inflight == 0 && c->out.len == 0;
    uint32_t ev = 0;

    if (c->broken || (c->eof && idle)) {
        conn_close(c);
        return;
    }
    if (!c->eof && c->inflight < RESOLVER_TCP_INFLIGHT && c->in_len < sizeof(c->in))
        ev |= EPOLLIN;
    if (c->out.len)
        ev |= EPOLLOUT;
    if (loop_io_get_events(c->io) != ev && loop_io_set_events(c->io, ev) < 0) {
        conn_close(c);
        return;
    }
    /* Idle counts from the last whole message: dribbling bytes does not
     * keep a connection. */
    if (idle)
        (void)loop_timer_arm(c->idle, c->active_msec + c->r->idle_ms);
    else
        loop_timer_disarm(c->idle);
}

static void
conn_after(struct rconn *c)
{
    conn_process(c);
    conn_update(c);
}

static void
conn_idle(struct loop_timer *t, void *userdata)
{
    (void)t;
    conn_close(userdata);
}

static void
conn_io(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct rconn *c = userdata;
    ssize_t n;

    (void)io;
    if (revents & (EPOLLERR | EPOLLHUP)) {
        conn_close(c); /* both directions gone: nobody to answer */
        return;
    }
    while (c->out.len) {
        n = send(c->fd, c->out.data, c->out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                c->broken = true;
            break;
        }
        buf_consume(&c->out, (size_t)n);
        if (c->out.len == 0)
            c->active_msec = now_msec();
    }
    if ((revents & EPOLLIN) && !c->broken && !c->eof && c->in_len < sizeof(c->in)) {
        n = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
        if (n == 0)
            c->eof = true;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            c->broken = true;
        else if (n > 0)
            c->in_len += (size_t)n;
    }
    conn_after(c);
}

static void
tcp_accept_one(struct resolver *r, int fd, const struct sockaddr_storage *ss)
{
    _cleanup_close_ int cfd = fd;
    struct resolver_client cl;
    struct net_addr a;
    struct rconn *c;

    if (sa_to_addr(ss, &a) < 0 || r->lookup(&a, &cl, r->userdata) < 0) {
        r->totals.unknown++;
        return;
    }
    if (r->n_conns >= r->conns_max || cl.stats->tcp_conns >= r->conns_sandbox_max) {
        cl.stats->over_limit++;
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->r = r;
    c->client = cl;
    c->fd = -EBADF;
    c->active_msec = now_msec();
    list_init(&c->queries);
    buf_init(&c->out, RESOLVER_TCP_OUT_MAX);
    if (loop_timer_new(r->loop, conn_idle, c, &c->idle) < 0 ||
        loop_io_add(r->loop, cfd, EPOLLIN, conn_io, c, &c->io) < 0) {
        loop_timer_free(c->idle);
        free(c);
        return;
    }
    c->fd = TAKE_FD(cfd);
    list_add_tail(&r->conns, &c->link);
    r->n_conns++;
    cl.stats->tcp_conns++;
    conn_update(c);
}

static void
tcp_io(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct resolver *r = userdata;

    (void)io;
    (void)revents;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(r->tcp_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                r->totals.errors++;
            return;
        }
        tcp_accept_one(r, fd, &ss);
    }
}

static int
bind_socket(int type, const struct net_addr *a, uint16_t port, int *ret_fd, struct err *err)
{
    _cleanup_close_ int fd = -EBADF;
    struct sockaddr_storage ss;
    socklen_t sl;
    char s[NET_ADDR_STR];
    const char *kind = type == SOCK_STREAM ? "TCP" : "UDP";
    int one = 1;

    if (a->family != AF_INET && a->family != AF_INET6)
        return err_set(err, EINVAL, "the resolver's listen address has no family");
    sl = addr_to_sa(a, port, &ss);
    net_addr_format(a, s);
    fd = socket(a->family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_setx(err, errno, "cannot make the resolver's %s socket", kind);
    if (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
        return err_setx(err, errno, "cannot set SO_REUSEADDR on the resolver's TCP socket");
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0)
        return err_setx(err, errno, "cannot bind the resolver's %s socket to '%s' port %u", kind, s,
                        port);
    if (type == SOCK_STREAM && listen(fd, 128) < 0)
        return err_setx(err, errno, "cannot listen on '%s' port %u", s, port);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int
resolver_new(const struct resolver_config *c, struct resolver **ret, struct err *err)
{
    _cleanup_(resolver_freep) struct resolver *r = NULL;
    int k;

    if (!c->loop || !c->lookup)
        return err_set(err, EINVAL, "the resolver needs a loop and a lookup");
    k = check_upstreams(c->upstreams, c->n_upstreams, err);
    if (k < 0)
        return k;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->loop = c->loop;
    r->lookup = c->lookup;
    r->userdata = c->userdata;
    r->udp_fd = r->tcp_fd = -EBADF;
    list_init(&r->queries);
    list_init(&r->conns);
    memcpy(r->ups, c->upstreams, c->n_upstreams * sizeof(*r->ups));
    r->n_ups = c->n_upstreams;
    r->timeout_ms = c->timeout_ms ? c->timeout_ms : RESOLVER_TIMEOUT_MS;
    r->inflight_max = c->inflight_max ? c->inflight_max : RESOLVER_INFLIGHT_MAX;
    r->inflight_sandbox_max =
            c->inflight_sandbox_max ? c->inflight_sandbox_max : RESOLVER_INFLIGHT_SANDBOX_MAX;
    r->conns_max = c->tcp_conns_max ? c->tcp_conns_max : RESOLVER_TCP_CONNS_MAX;
    r->conns_sandbox_max =
            c->tcp_conns_sandbox_max ? c->tcp_conns_sandbox_max : RESOLVER_TCP_CONNS_SANDBOX;
    r->idle_ms = c->tcp_idle_ms ? c->tcp_idle_ms : RESOLVER_TCP_IDLE_MS;

    if (c->udp_fd >= 0) {
        r->udp_fd = c->udp_fd;
    } else {
        k = bind_socket(SOCK_DGRAM, &c->listen, c->port, &r->udp_fd, err);
        if (k < 0)
            return k;
        r->own_udp = true;
    }
    r->udp_port = local_port(r->udp_fd);
    if (c->tcp_fd >= 0) {
        r->tcp_fd = c->tcp_fd;
    } else {
        k = bind_socket(SOCK_STREAM, &c->listen, c->port ? c->port : r->udp_port, &r->tcp_fd, err);
        if (k < 0)
            return k;
        r->own_tcp = true;
    }
    r->tcp_port = local_port(r->tcp_fd);
    if (!r->own_udp && (k = fd_set_nonblock(r->udp_fd, true)) < 0)
        return err_setx(err, -k, "cannot make the resolver's UDP socket non-blocking");
    if (!r->own_tcp && (k = fd_set_nonblock(r->tcp_fd, true)) < 0)
        return err_setx(err, -k, "cannot make the resolver's TCP socket non-blocking");
    k = loop_io_add(r->loop, r->udp_fd, EPOLLIN, udp_io, r, &r->udp_io);
    if (k < 0)
        return err_setx(err, -k, "cannot watch the resolver's UDP socket");
    k = loop_io_add(r->loop, r->tcp_fd, EPOLLIN, tcp_io, r, &r->tcp_io);
    if (k < 0)
        return err_setx(err, -k, "cannot watch the resolver's TCP socket");
    *ret = TAKE_PTR(r);
    return 0;
}

struct resolver *
resolver_free(struct resolver *r)
{
    if (!r)
        return NULL;
    /* Half-built by resolver_new(): the lists are set up first. */
    list_foreach_safe (i, tmp, &r->conns) {
        conn_close(list_entry(i, struct rconn, link));
    }
    list_foreach_safe (i, tmp, &r->queries) {
        struct rquery *q = list_entry(i, struct rquery, link);
        q->client.stats->dropped++;
        query_free(q, false);
    }
    loop_io_free(r->udp_io);
    loop_io_free(r->tcp_io);
    if (r->own_udp && r->udp_fd >= 0)
        (void)close(r->udp_fd);
    if (r->own_tcp && r->tcp_fd >= 0)
        (void)close(r->tcp_fd);
    free(r);
    return NULL;
}

uint16_t
resolver_udp_port(const struct resolver *r)
{
    return r->udp_port;
}

uint16_t
resolver_tcp_port(const struct resolver *r)
{
    return r->tcp_port;
}

size_t
resolver_forget(struct resolver *r, uint64_t id)
{
    size_t n = 0;

    /* Connections first: closing one frees its queries, which may be
     * the next ones in r->queries. */
    list_foreach_safe (i, tmp, &r->conns) {
        struct rconn *c = list_entry(i, struct rconn, link);
        if (c->client.id == id) {
            n += 1 + c->inflight;
            conn_close(c);
        }
    }
    list_foreach_safe (i, tmp, &r->queries) {
        struct rquery *q = list_entry(i, struct rquery, link);
        if (q->client.id == id) {
            q->client.stats->dropped++;
            query_free(q, false);
            n++;
        }
    }
    return n;
}

int
resolver_set_upstreams(struct resolver *r, const struct resolver_upstream *u, size_t n,
                       struct err *err)
{
    int k = check_upstreams(u, n, err);

    if (k < 0)
        return k;
    memset(r->ups, 0, sizeof(r->ups));
    memcpy(r->ups, u, n * sizeof(*u));
    r->n_ups = n;
    return 0;
}

void
resolver_totals(const struct resolver *r, struct resolver_totals *ret)
{
    *ret = r->totals;
    ret->inflight = r->n_inflight;
    ret->tcp_conns = r->n_conns;
}
