/*
 * httpresp.h - an incremental parser of HTTP/1.x responses from a server we
 * do not trust (the port proxy's upstream: code inside a sandbox).
 *
 * Bytes are fed as they arrive, split anywhere. The parser first collects
 * the head (status line and header fields, at most HTTPRESP_HEAD_MAX bytes
 * and HTTPRESP_HEADERS_MAX fields), validates it strictly and works out how
 * the body is framed (RFC 9112 section 6.3): none (HEAD request, 1xx, 204,
 * 304), Content-Length, chunked or until the connection closes. Interim 1xx
 * responses other than 101 are skipped. The body then goes out through a
 * callback, de-chunked, in pieces never larger than the input that carried
 * them, so a caller that feeds at most N bytes receives at most N. Chunk
 * extensions and trailer fields are checked, bounded and dropped.
 *
 * What it refuses (-EPROTO): a status line that is not HTTP/1.0 or 1.1
 * with a three-digit code, control characters, a CR not followed by LF,
 * obs-fold continuation lines, header names that are not tokens,
 * conflicting or malformed Content-Length, transfer codings other than a
 * single "chunked", malformed chunk sizes and truncated messages.
 *
 * This module knows bytes, not sockets. Functions return >= 0 or -errno,
 * never log and fill err when given one. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cleanup.h"
#include "util/err.h"

#define HTTPRESP_HEAD_MAX    (64 * 1024) /* bytes of a status line plus header fields */
#define HTTPRESP_HEADERS_MAX 256         /* header fields in one head */
#define HTTPRESP_LINE_MAX    4096        /* bytes of one chunk-size line (with extensions) */

enum httpresp_body {
    HTTPRESP_BODY_NONE,    /* no body (HEAD, 1xx, 204, 304) */
    HTTPRESP_BODY_LENGTH,  /* Content-Length bytes */
    HTTPRESP_BODY_CHUNKED, /* chunked, decoded here */
    HTTPRESP_BODY_CLOSE,   /* everything until the connection closes */
};

/* What httpresp_feed() returns besides errors. */
enum {
    HTTPRESP_MORE = 0, /* all input consumed; the message needs more */
    HTTPRESP_HEAD = 1, /* the head just completed: inspect it, then feed the rest */
    HTTPRESP_DONE = 2, /* the message is complete; later bytes are not part of it */
};

struct httpresp_header {
    const char *name;  /* as sent (case kept) */
    const char *value; /* without surrounding whitespace */
};

struct httpresp;

/* head_request: the request was HEAD, so the response has no body. -ENOMEM. */
int httpresp_new(bool head_request, struct httpresp **ret);
struct httpresp *httpresp_free(struct httpresp *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct httpresp *, httpresp_free)

/* Receives n > 0 body bytes (valid during the call only); a negative
 * return stops parsing and is returned by httpresp_feed(). */
typedef int (*httpresp_body_fn)(void *ud, const void *data, size_t n);

/* Parses up to len more bytes and sets *ret_used to how many it consumed:
 * all of them for HTTPRESP_MORE, the head's end for HTTPRESP_HEAD (feed the
 * rest next), the message's end for HTTPRESP_DONE (what follows is not
 * HTTP: after a 101, the new protocol's first bytes). Errors: -EPROTO
 * malformed, -EMSGSIZE a head or trailer past its limit, -ENOMEM, or what
 * body returned. After an error or HTTPRESP_DONE every call returns the
 * same. body may be NULL to drop the body. */
int httpresp_feed(struct httpresp *p, const void *in, size_t len, httpresp_body_fn body, void *ud,
                  size_t *ret_used, struct err *err);

/* The connection closed: 0 when the message is complete (a body delimited
 * by the close ends here), -EPROTO when it was cut short. */
int httpresp_finish(struct httpresp *p, struct err *err);

/* The head, valid once httpresp_feed() returned HTTPRESP_HEAD. */
unsigned httpresp_status(const struct httpresp *p);
unsigned httpresp_minor(const struct httpresp *p); /* HTTP/1.<minor> */
const char *httpresp_reason(const struct httpresp *p);
size_t httpresp_header_count(const struct httpresp *p);
const struct httpresp_header *httpresp_header(const struct httpresp *p, size_t i);
/* The first field named name (case-insensitive), or NULL. */
const char *httpresp_get(const struct httpresp *p, const char *name);
enum httpresp_body httpresp_body_kind(const struct httpresp *p);
uint64_t httpresp_content_length(const struct httpresp *p); /* for HTTPRESP_BODY_LENGTH */
