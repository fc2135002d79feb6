/*
 * ports.c - the port proxy: HTTP whose Host is <port>-<sandbox>.<domain>
 * reaches the server listening on that port inside the sandbox, WebSocket
 * (any protocol upgrade) included. It is not a general forward proxy: the
 * only upstream is 127.0.0.1 (or ::1) in a sandbox's own network namespace.
 *
 * A sandbox's network namespace has only loopback up, so the upstream
 * socket must be made inside it. This file never holds or enters the
 * namespace: it asks the sandbox for a non-blocking socket made there
 * (sandbox_netns_socket(), which refuses a sandbox that shares the host's
 * network), one per dial, and starts the connect on the loop; the socket
 * stays bound to the namespace it was born in.
 *
 * The HTTP itself (head and body upstream, the answer back, the pump after
 * a 101) is http/relay.c's; this file finds the sandbox, checks its
 * capability, dials and words the 502s.
 *
 * No API key: E2B's proxy lets port traffic through (public ports, no
 * traffic tokens here). The sandbox's template must grant "ports"; an
 * unknown, dying or paused sandbox, a closed port and a broken upstream
 * are answered 502 with the JSON bodies of E2B's proxy.
 */
#include "api/ports/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "http/relay.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

/* One forwarded request: ports' side of its relay. */
struct fwd {
    struct http_relay *relay; /* owns this (ops.done frees it) */
    char id[PORTS_ID_MAX + 1];
    uint16_t port;
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

/* --- the dial --- */

/* Starts a connect from fd, a non-blocking socket of family, to the port
 * on loopback; pending when it is still in progress. */
static int
start_connect(int fd, int family, uint16_t port, bool *ret_pending)
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
    *ret_pending = false;
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
        if (errno != EINPROGRESS)
            return -errno;
        *ret_pending = true;
    }
    return 0;
}

/* Dials the port from fd4 (taken over), an IPv4 socket in the sandbox's
 * namespace, or else over IPv6, and hands the socket to the relay. */
static void
dial(struct sandbox *sb, struct fwd *f, int fd4)
{
    _cleanup_close_ int fd = fd4;
    bool pending = false;

    int r = start_connect(fd, AF_INET, f->port, &pending);
    if (r < 0) {
        /* A server bound to ::1 only. */
        _cleanup_close_ int fd6 =
                sandbox_netns_socket(sb, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, NULL);
        if (fd6 >= 0 && start_connect(fd6, AF_INET6, f->port, &pending) == 0) {
            safe_close(fd);
            fd = TAKE_FD(fd6);
            r = 0;
        }
    }
    if (r == -ECONNREFUSED) {
        http_relay_fail(f->relay, HTTP_RELAY_REFUSED, ECONNREFUSED, NULL);
        return;
    }
    if (r < 0) {
        http_relay_fail(f->relay, HTTP_RELAY_CONNECT, -r, NULL);
        return;
    }
    http_relay_connected(f->relay, TAKE_FD(fd), pending);
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
    free(ud);
}

static const struct http_relay_ops fwd_ops = {
        .fail = fwd_fail,
        .done = fwd_done,
};

void
ports_begin(struct api *a, struct http_req *req, uint16_t port, const char *id)
{
    struct err err = {0};
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
    /* The first socket before the relay: a refusal is answered as such. */
    _cleanup_close_ int fd =
            sandbox_netns_socket(e->sb, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, &err);
    if (fd < 0) {
        char msg[320];
        log_debug("sandbox=%s port=%u: %s", id, port, err.msg);
        if (fd == -ESRCH)
            (void)snprintf(msg, sizeof(msg), "The sandbox was not found");
        else if (fd == -EOPNOTSUPP)
            /* uid and none isolation share the host's network: forwarding
             * there would open the host's loopback services to anyone. */
            (void)snprintf(msg, sizeof(msg),
                           "Ports need the sandbox's own network namespace (isolation '%s')",
                           a->cfg.isolation ? a->cfg.isolation : "?");
        else
            (void)snprintf(msg, sizeof(msg), "Cannot enter the sandbox's network (%s)",
                           strerror(-fd));
        answer_502(req, id, port, msg);
        return;
    }
    table_touch(e);

    struct fwd *f = calloc(1, sizeof(*f));
    if (!f) {
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
        if (r == -EINVAL)
            api_error_msg(req, 400, "bad_request", "%s", err.msg);
        else
            api_error(req, -ENOMEM, NULL);
        return;
    }

    dial(e->sb, f, TAKE_FD(fd)); /* may end the relay, f with it */
}
