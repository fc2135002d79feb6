/*
 * server.h - the HTTP server every surface shares, on libmicrohttpd.
 *
 * MHD runs in external-epoll mode inside our loop, so requests, process
 * pipes, timers and sandboxes are all served by one thread. A surface gets
 * one begin() call per request once its headers are in; it picks how the
 * body is consumed (buffered up to a limit, or streamed chunk by chunk)
 * and answers whenever it is ready: at once, after some asynchronous work
 * (the connection is suspended meanwhile), or as a stream whose producer is
 * pulled for more data when the socket can take it and woken when it has
 * some. A slow client therefore suspends its stream instead of growing a
 * buffer, and the loop never blocks on a client.
 *
 * This module knows HTTP, not JSON or sandboxes. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/loop.h"

#define HTTP_STREAM_BUF (256 * 1024) /* bytes a stream buffers ahead of the socket */

/* Limits that keep one client from holding the server (docs/api.md,
 * "Limits"); abxd takes each from an ABX_HTTP_* variable. */
#define HTTP_MAX_CONNECTIONS 4096 /* connections at once, all clients */
#define HTTP_MAX_PER_CLIENT  512  /* connections at once from one IPv4 address or IPv6 /64 */
#define HTTP_HEADER_TIMEOUT_S                                                         \
    10                         /* a request head must be complete this long after the \
                                * connection opened or the previous request ended */
#define HTTP_BODY_TIMEOUT_S 30 /* a request body may go this long without a byte */
#define HTTP_BODY_MIN_RATE                               \
    500 /* bytes/s a request body must average over each \
         * HTTP_BODY_TIMEOUT_S window */

struct http_server;
struct http_req;
struct http_stream;
struct http_upgrade;

struct http_server_config {
    const char *host; /* numeric IPv4 or IPv6 address */
    uint16_t port;    /* 0 = any free port */
    int listen_fd;    /* > 0: serve this listening socket (taken) instead of host:port */
    unsigned max_connections;
    unsigned max_per_client; /* connections from one IPv4 address or IPv6 /64; 0 = no cap */
    unsigned conn_timeout_s; /* idle connections are closed after this */
    size_t conn_memory;      /* per-connection buffer; bounds request headers */
    /* Slow clients: a request head that is not complete header_timeout_s
     * after the connection opened (or its previous request ended), a body
     * that goes body_timeout_s without a byte or averages less than
     * body_min_rate bytes/s over a body_timeout_s window, is answered 408
     * and the connection closed. 0 turns each off. Response streams and
     * upgraded connections are never timed. */
    unsigned header_timeout_s;
    unsigned body_timeout_s;
    unsigned body_min_rate; /* bytes/s */
    void (*begin)(struct http_req *req, void *ud);
    void *ud;
};

int http_server_new(struct loop *loop, const struct http_server_config *c, struct http_server **ret,
                    struct err *err);
/* Resumes every suspended connection and stops the server. */
void http_server_free(struct http_server *s);
uint16_t http_server_port(const struct http_server *s);
unsigned http_server_connections(const struct http_server *s);

/* --- requests --- */

const char *http_req_method(const struct http_req *req);
const char *http_req_path(const struct http_req *req); /* percent-decoded */
/* Whether the request target held "%00". A decoded NUL would end the C
 * string, so the path and query values carry 0x01 in its place - a byte a
 * file name may hold - and a route that takes names must refuse the
 * request instead (400). False when the target is unknown (out of memory
 * before it was seen). */
bool http_req_nul_escaped(const struct http_req *req);
const char *http_req_header(struct http_req *req, const char *name);
const char *http_req_query(struct http_req *req, const char *name);
/* Calls fn for every request header in arrival order; fn returning < 0
 * stops and is returned. */
int http_req_headers(struct http_req *req, int (*fn)(void *ud, const char *name, const char *value),
                     void *ud);
bool http_req_is_head(const struct http_req *req);

/* Per-request state of the surface; on_close runs once when the request is
 * over (answered, or the client went away). */
void http_req_set_userdata(struct http_req *req, void *ud,
                           void (*on_close)(struct http_req *req, void *ud));
void *http_req_userdata(const struct http_req *req);

/* Buffers the body (413 when larger than max; at once, before any of it is
 * read, when its Content-Length says so) and calls done when it is
 * complete. Without a call to either body function the body must be
 * empty (else 413). */
void http_req_read_body(struct http_req *req, size_t max,
                        void (*done)(struct http_req *req, const char *body, size_t len));
/* Streams the body: chunk() for each piece (a negative return ends the
 * request with the response already set via http_respond*(), or 500),
 * then done(). */
void http_req_stream_body(struct http_req *req,
                          int (*chunk)(struct http_req *req, const char *data, size_t len),
                          void (*done)(struct http_req *req));

/* Takes no body (else 413) and answers later, from the loop: the request
 * waits, suspended, for http_respond*() or http_stream_start(). */
void http_req_answer_later(struct http_req *req);

/* Adds a header to the response about to be sent (streamed and upgrade
 * responses too); headers go out in the order they were added. */
void http_req_add_header(struct http_req *req, const char *name, const char *value);

/* --- for proxies --- */

/* The request target exactly as the client sent it (path and query, not
 * unescaped); NULL when unknown (out of memory). */
const char *http_req_uri(const struct http_req *req);
/* Back-pressure for a streamed body (http_req_stream_body()): stops reading
 * it from the client until resumed. Answering resumes it too. */
void http_req_pause_body(struct http_req *req);
void http_req_resume_body(struct http_req *req);

/* For a streamed body made of messages (Connect envelopes): at_boundary
 * says no message is partly received, so the client may wait there as long
 * as it likes (a long-lived client stream); inside a message the body
 * timeout and minimum rate apply again, counted afresh. */
void http_req_body_at_boundary(struct http_req *req, bool at_boundary);

/* Answers; valid once, at any time (a suspended request resumes). Bodies
 * are copied; fd is taken over. */
void http_respond(struct http_req *req, unsigned status, const char *content_type, const void *body,
                  size_t len);
void http_respond_fd(struct http_req *req, unsigned status, const char *content_type, int fd,
                     uint64_t size);
/* Like http_respond_fd() for size bytes of fd from offset 0, with a checker
 * that sees every piece before it goes out: piece() in order, then, once
 * all size bytes are read, end(ud, 0). The piece that completes the body
 * goes out only after end() returned 0; a negative return from either, a
 * read error or a file shorter than size (end(ud, -errno or -ENODATA))
 * cuts the connection before the last byte, so the client never sees a
 * complete body. An empty body is checked (end(ud, 0)) before the headers
 * go out, and answered 500 if it fails. free(ud) runs once, when the
 * response is over or could not be made. */
struct http_body_check {
    int (*piece)(void *ud, const void *data, size_t n);
    int (*end)(void *ud, int r);
    void (*free)(void *ud);
};
void http_respond_fd_checked(struct http_req *req, unsigned status, const char *content_type,
                             int fd, uint64_t size, const struct http_body_check *chk, void *ud);
bool http_req_answered(const struct http_req *req);

/* Keeps a reference to the request beyond begin()/done() for asynchronous
 * work; answering after on_close is a no-op. */
void http_req_ref(struct http_req *req);
void http_req_unref(struct http_req *req);
bool http_req_closed(const struct http_req *req);

/* --- streamed responses (chunked) --- */

struct http_stream_ops {
    /* The socket can take more: write what is available now. */
    void (*fill)(struct http_stream *s, void *ud);
    /* The response is over (ended, aborted or client gone). */
    void (*closed)(struct http_stream *s, void *ud);
};

int http_stream_start(struct http_req *req, unsigned status, const char *content_type,
                      const struct http_stream_ops *ops, void *ud, struct http_stream **ret);
/* The same for relaying another server's answer: only the headers added
 * with http_req_add_header() go out (no Content-Type or Cache-Control of
 * ours; Content-Length and Transfer-Encoding are MHD's to set). */
int http_stream_start_relay(struct http_req *req, unsigned status,
                            const struct http_stream_ops *ops, void *ud, struct http_stream **ret);
/* Appends up to HTTP_STREAM_BUF buffered bytes: -EAGAIN when full (wait for fill). */
int http_stream_write(struct http_stream *s, const void *data, size_t len);
size_t http_stream_room(const struct http_stream *s);
/* The producer has more: resume the connection if it waits. */
void http_stream_wake(struct http_stream *s);
/* Ends after the buffered data; or cuts the connection mid-body. */
void http_stream_end(struct http_stream *s);
void http_stream_abort(struct http_stream *s);
/* The producer lets go; the stream is freed once MHD has too. */
void http_stream_release(struct http_stream *s);

/* --- protocol upgrades (101 Switching Protocols) --- */

/* The 101 went out: fd is the client's socket (non-blocking, borrowed:
 * never close it, call http_upgrade_close()) and extra the bytes the client
 * sent after its request, which come before anything read from fd. */
typedef void (*http_upgrade_fn)(struct http_upgrade *u, int fd, const char *extra, size_t extra_len,
                                void *ud);

/* Answers 101 with the headers added by http_req_add_header(), which must
 * include "Connection: Upgrade" and "Upgrade"; then calls fn. If the client
 * goes away first fn never runs. Once fn ran, the request ends (on_close)
 * only after http_upgrade_close(), or when the server shuts down. An
 * HTTP/1.0 request gets 400 instead. */
void http_respond_upgrade(struct http_req *req, http_upgrade_fn fn, void *ud);
/* The owner is done with the socket: MHD closes it and ends the request.
 * Idempotent; a no-op before fn ran. */
void http_upgrade_close(struct http_upgrade *u);
