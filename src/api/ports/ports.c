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
 * The HTTP itself (head and body upstream, the answer back, the pump after
 * a 101) is http/relay.c's; this file finds the sandbox, checks its
 * capability, pins its namespace, dials and words the 502s.
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
#include "http/relay.h"
#include "template/template.h"
#include "util/json.h"
#include "util/log.h"
#include "util/workq.h"

struct ports {
    struct workq *wq;
    int home_ns; /* abxd's own network namespace */
    dev_t home_dev;
    ino_t home_ino;
};

struct dial;

/* One forwarded request: ports' side of its relay. */
struct fwd {
    struct http_relay *relay; /* owns this (ops.done frees it) */
    struct dial *dial;        /* in flight, or NULL */
    char id[PORTS_ID_MAX + 1];
    uint16_t port;
};

/* A connect on the worker thread. */
struct dial {
    int nsfd;    /* the sandbox's namespace (a dup, ours) */
    int home_ns; /* borrowed from struct ports, which outlives every dial */
    uint16_t port;
    int r;         /* result: 0 or -errno */
    int fd;        /* the socket, when r == 0 */
    bool pending;  /* connect in progress */
    struct fwd *f; /* NULL once the request is gone */
};

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

static void
dial_done(void *ud)
{
    struct dial *d = ud;
    struct fwd *f = d->f;
    int r = d->r, fd = d->r == 0 ? d->fd : -EBADF;
    bool pending = d->pending;

    safe_close(d->nsfd);
    free(d);
    if (!f) {
        safe_close(fd);
        return;
    }
    f->dial = NULL;
    if (r == -ECONNREFUSED) {
        http_relay_fail(f->relay, HTTP_RELAY_REFUSED, ECONNREFUSED, NULL);
        return;
    }
    if (r < 0) {
        http_relay_fail(f->relay, HTTP_RELAY_CONNECT, -r, NULL);
        return;
    }
    http_relay_connected(f->relay, fd, pending);
}

/* --- the relay's end --- */

static void
fwd_fail(void *ud, struct http_req *req, enum http_relay_fail why, int errnum, const char *detail)
{
    struct fwd *f = ud;
    char msg[320];

    switch (why) {
    case HTTP_RELAY_REFUSED:
        (void)snprintf(msg, sizeof(msg), "The sandbox is running but port is not open");
        break;
    case HTTP_RELAY_CONNECT:
        (void)snprintf(msg, sizeof(msg), "Cannot connect to the port in the sandbox (%s)",
                       detail ? detail : strerror(errnum));
        break;
    case HTTP_RELAY_CONNECT_TIMEOUT:
        (void)snprintf(msg, sizeof(msg),
                       "The sandbox's server did not accept the connection in time");
        break;
    case HTTP_RELAY_ANSWER_TIMEOUT:
        (void)snprintf(msg, sizeof(msg), "The sandbox's server did not answer in time");
        break;
    case HTTP_RELAY_RESET:
        (void)snprintf(msg, sizeof(msg), "The sandbox's server reset the connection (%s)",
                       strerror(errnum));
        break;
    case HTTP_RELAY_BAD_RESPONSE:
        (void)snprintf(msg, sizeof(msg), "The sandbox's server sent an invalid HTTP response: %s",
                       detail ? detail : "it closed the connection");
        break;
    case HTTP_RELAY_UNASKED_UPGRADE:
        (void)snprintf(msg, sizeof(msg),
                       "The sandbox's server switched protocols without being asked to");
        break;
    case HTTP_RELAY_NO_MEMORY:
        (void)snprintf(msg, sizeof(msg), "out of memory");
        break;
    case HTTP_RELAY_WATCH:
        (void)snprintf(msg, sizeof(msg), "Cannot watch the connection to the sandbox");
        break;
    case HTTP_RELAY_BODY_BUFFER:
    default:
        (void)snprintf(msg, sizeof(msg), "The request body could not be buffered");
        break;
    }
    log_debug("sandbox=%s port=%u: %s", f->id, f->port, msg);
    answer_502(req, f->id, f->port, msg);
}

static void
fwd_done(void *ud)
{
    struct fwd *f = ud;
    if (f->dial)
        f->dial->f = NULL; /* dial_done closes its socket */
    free(f);
}

static const struct http_relay_ops fwd_ops = {
        .fail = fwd_fail,
        .done = fwd_done,
};

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

void
ports_begin(struct api *a, struct http_req *req, uint16_t port, const char *id)
{
    struct err err = {0};
    struct ports *ps = NULL;
    int r;

    struct entry *e = table_find(a->table, id);
    if (!e || e->state != E_READY || e->paused) {
        answer_not_found(req, id);
        return;
    }
    if (!api_need_cap(req, e, TEMPLATE_CAP_PORTS))
        return;
    const char *target = http_req_uri(req);
    if (!http_relay_target_ok(target)) {
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

    struct fwd *f = calloc(1, sizeof(*f));
    struct dial *d = calloc(1, sizeof(*d));
    if (!f || !d) {
        free(f);
        free(d);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    f->port = port;
    (void)snprintf(f->id, sizeof(f->id), "%s", id);
    char label[PORTS_ID_MAX + 32];
    (void)snprintf(label, sizeof(label), "sandbox=%s port=%u", id, port);
    r = http_relay_new(req, a->loop, target, label, &fwd_ops, f, &f->relay, &err);
    if (r < 0) {
        free(f);
        free(d);
        if (r == -EINVAL)
            api_error_msg(req, 400, "bad_request", "%s", err.msg);
        else
            api_error(req, -ENOMEM, NULL);
        return;
    }

    d->nsfd = fcntl(nsfd, F_DUPFD_CLOEXEC, 3);
    d->home_ns = ps->home_ns;
    d->port = port;
    d->fd = -EBADF;
    d->f = f;
    if (d->nsfd < 0 || workq_submit(ps->wq, dial_work, dial_done, d) < 0) {
        safe_close(d->nsfd);
        free(d);
        http_relay_fail(f->relay, HTTP_RELAY_CONNECT, ENOMEM, "out of resources");
        return;
    }
    f->dial = d;
}
