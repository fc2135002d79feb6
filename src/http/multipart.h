/*
 * multipart.h - a streaming multipart/form-data parser (RFC 7578, RFC 2046).
 *
 * Built for uploads of any size: the body is fed in chunks split anywhere
 * and each part's content goes out through part_data() as it arrives; only
 * part headers are buffered, and those are bounded. A body looks like this
 * (CRLF line ends, boundary "b"):
 *
 *     preamble, ignored
 *     --b
 *     Content-Disposition: form-data; name="file"; filename="a/b.txt"
 *     Content-Type: text/plain
 *
 *     ...content, any bytes...
 *     --b--
 *     epilogue, ignored
 *
 * The CRLF before each delimiter belongs to the delimiter, never to the
 * content. Strict where ambiguity could be abused: header lines end in
 * CRLF, folded headers, control characters and a second Content-
 * Disposition or Content-Type are refused, and so is a delimiter line with
 * anything but spaces or tabs after the boundary. In Content-Disposition
 * quoted values, \" stands for a quote and the WHATWG escapes %22, %0D and
 * %0A (what browsers and undici send for ", CR and LF) are decoded; nothing
 * else is, and a filename keeps its directories.
 *
 * This module knows bytes, not files or sandboxes. Functions return 0 or
 * -errno and never log; they fill err when given one. Not thread-safe.
 */
#pragma once

#include <stddef.h>

#include "util/cleanup.h"
#include "util/err.h"

#define MULTIPART_BOUNDARY_MAX 70          /* RFC 2046 */
#define MULTIPART_HEADERS_MAX  (16 * 1024) /* default: header bytes per part */
#define MULTIPART_PARTS_MAX    64          /* default: parts per body */

struct multipart;

/* What part_begin() learns about a part; the strings are valid during the
 * call only. */
struct multipart_part {
    const char *name;         /* Content-Disposition name, NULL when absent */
    const char *filename;     /* Content-Disposition filename, NULL when absent */
    const char *content_type; /* Content-Type value, NULL when absent */
};

/* Any callback may be NULL. A negative return stops parsing and is what
 * multipart_feed() returns. part_data() gets a part's content in pieces of
 * any size (data valid during the call only); part_end() runs only for a
 * part whose closing delimiter was seen, so after a failure the caller
 * discards the part it has open. */
struct multipart_cb {
    int (*part_begin)(void *ud, const struct multipart_part *p);
    int (*part_data)(void *ud, const void *data, size_t len);
    int (*part_end)(void *ud);
};

/* Extracts the boundary parameter of a Content-Type header value, which
 * must be multipart/form-data (type and parameter names case-insensitive,
 * value quoted or not), into out (outlen bytes, MULTIPART_BOUNDARY_MAX + 1
 * always suffice). -EINVAL when the type is another one, the parameter is
 * missing or given twice, or the boundary is not 1..70 RFC 2046 characters;
 * -ENOBUFS when out is too small; -ENOMEM. out is written only on success. */
int multipart_boundary(const char *content_type, char *out, size_t outlen, struct err *err);

/* Creates a parser for boundary (as multipart_boundary() returns it;
 * -EINVAL otherwise) with the default limits. cb is copied; ud is kept
 * and passed to every callback. */
int multipart_new(const char *boundary, const struct multipart_cb *cb, void *ud,
                  struct multipart **ret);
struct multipart *multipart_free(struct multipart *mp);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct multipart *, multipart_free)

/* Replaces the limits (before the first feed): at most headers_max bytes of
 * header lines per part, CRLFs included, and at most parts_max parts. */
void multipart_set_limits(struct multipart *mp, size_t headers_max, unsigned parts_max);

/* Parses len more bytes of the body, calling back as parts begin, carry
 * data and end. Errors: -EPROTO for a malformed body, -EMSGSIZE past a
 * limit, -ENOMEM, or what a callback returned. After an error the parser is
 * spent: every later call returns the same error without calling back. */
int multipart_feed(struct multipart *mp, const void *data, size_t len, struct err *err);

/* The body is over: -EPROTO unless the closing delimiter (--boundary--)
 * was seen. */
int multipart_finish(struct multipart *mp, struct err *err);
