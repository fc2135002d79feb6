/*
 * relay.h - relays one HTTP request to an upstream socket and its answer
 * back: the engine of a reverse proxy. It knows HTTP and sockets, not who
 * the upstream is or how it was reached: the caller dials (in whatever
 * network namespace) and hands the connected socket over.
 *
 * A plain request is forwarded with its target verbatim, hop-by-hop headers
 * dropped and "Connection: close"; its body streams through, the client's
 * upload paused while HTTP_RELAY_BUF bytes wait for the upstream. The
 * answer is parsed by httpresp (the upstream is hostile: bounded head,
 * strict framing, de-chunked) and relayed as a streamed response that reads
 * the upstream only as fast as the client takes it. An upgrade request is
 * forwarded as one; if the upstream answers 101, the client gets 101 with
 * the upstream's headers and both sockets are pumped through two
 * HTTP_RELAY_BUF buffers until either side closes (what is buffered is
 * flushed first). Any other answer is relayed as plain HTTP.
 *
 * Everything runs on the loop's thread. The relay belongs to the request
 * (its userdata) and is freed when the request is over.
 */
#ifndef ABX_HTTP_RELAY_H
#define ABX_HTTP_RELAY_H

#include <stdbool.h>
#include <stddef.h>

struct err;
struct http_req;
struct http_relay;
struct loop;

#define HTTP_RELAY_BUF        (64 * 1024) /* bytes buffered each way */
#define HTTP_RELAY_CONNECT_MS (10 * 1000) /* from http_relay_new() to a connected upstream */

/* Why a relay gave up before the client had an answer. */
enum http_relay_fail {
    HTTP_RELAY_REFUSED,         /* the upstream refused the connection */
    HTTP_RELAY_CONNECT,         /* connecting failed: errnum, or detail */
    HTTP_RELAY_CONNECT_TIMEOUT, /* no connection within HTTP_RELAY_CONNECT_MS */
    HTTP_RELAY_ANSWER_TIMEOUT,  /* connected, but no answer head in time */
    HTTP_RELAY_RESET,           /* reading the answer failed: errnum */
    HTTP_RELAY_BAD_RESPONSE,    /* not valid HTTP: detail says why (NULL: it closed) */
    HTTP_RELAY_UNASKED_UPGRADE, /* a 101 to a request that asked for none */
    HTTP_RELAY_NO_MEMORY,
    HTTP_RELAY_WATCH,       /* the loop cannot watch the upstream */
    HTTP_RELAY_BODY_BUFFER, /* the request body could not be buffered */
};

struct http_relay_ops {
    /* The relay gives up and the client has no answer yet: answer req
     * (valid once). errnum is the cause (positive) or 0; detail is text for
     * the cause or NULL. */
    void (*fail)(void *ud, struct http_req *req, enum http_relay_fail why, int errnum,
                 const char *detail);
    /* The relay is freed (the request is over); ud is not used again. */
    void (*done)(void *ud);
};

/* Whether a request target may be sent upstream verbatim (no controls, no
 * spaces). */
bool http_relay_target_ok(const char *target);

/* Starts relaying req: builds the head for target, takes the body as it
 * comes and arms the connect deadline. The relay is req's from here on (its
 * userdata); *ret is borrowed, valid until ops->done. label prefixes the
 * relay's debug lines ("sandbox=x port=y"). On failure nothing is kept and
 * req is not answered: -EINVAL (err says why: a bad Content-Length) or
 * -ENOMEM. */
int http_relay_new(struct http_req *req, struct loop *loop, const char *target, const char *label,
                   const struct http_relay_ops *ops, void *ud, struct http_relay **ret,
                   struct err *err);

/* Hands over the upstream socket (taken over; non-blocking; pending: its
 * connect is still in progress). Once the relay is over it just closes fd. */
void http_relay_connected(struct http_relay *r, int fd, bool pending);

/* The caller could not reach the upstream: gives up with why (see
 * enum http_relay_fail). A no-op once the relay is over. */
void http_relay_fail(struct http_relay *r, enum http_relay_fail why, int errnum,
                     const char *detail);

/* Hop-by-hop header fields (RFC 9110 7.6.1), plus the framing fields the
 * server sets itself: never relayed. */
bool http_hop_by_hop(const char *name);

/* Whether the comma-separated token list (a Connection header; NULL = none)
 * names name, case-insensitively. */
bool http_token_listed(const char *list, const char *name);

#endif
