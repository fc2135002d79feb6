/*
 * connect.h - Connect protocol envelopes (connectrpc.com), both ways.
 *
 * A streaming Connect body is a sequence of envelopes: one flag byte, a
 * 4-byte big-endian payload length, then the payload. Flag 0x02 marks the
 * end-stream envelope (a JSON object with an optional "error"), 0x00 a
 * message; 0x01 (compressed) is never accepted, since we do not negotiate
 * compression. Example, the end-stream envelope of a successful stream:
 *
 *     02 00 00 00 02 7b 7d                       "\x02" len=2 "{}"
 *
 * The decoder is incremental: it takes the body in chunks split anywhere
 * and hands each complete payload to a callback, buffering at most one
 * payload (bounded by its max). This module knows bytes, not JSON
 * messages or RPCs (the payload goes up as it came). Functions return 0
 * or -errno and never log; they fill err when given one. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define CONNECT_ENV_HEADER      5 /* bytes before each payload */
#define CONNECT_FLAG_DATA       0x00
#define CONNECT_FLAG_COMPRESSED 0x01 /* refused */
#define CONNECT_FLAG_END_STREAM 0x02
#define CONNECT_MSG_MAX         (4 * 1024 * 1024) /* default payload limit, bytes */

/* One complete envelope: flags is CONNECT_FLAG_DATA or _END_STREAM; payload
 * (len bytes, not NUL-terminated, non-NULL even when len is 0) is valid
 * during the call only. A negative return stops decoding and is returned
 * by connect_dec_feed(). */
typedef int (*connect_msg_fn)(void *ud, uint8_t flags, const uint8_t *payload, size_t len);

struct connect_dec {
    size_t max;                      /* largest payload accepted, bytes */
    uint8_t hdr[CONNECT_ENV_HEADER]; /* header bytes of the current envelope */
    size_t hdr_len;                  /* how many of them arrived */
    size_t need;                     /* payload length of the current envelope */
    struct buf msg;                  /* payload bytes buffered so far */
    int failed;                      /* first error returned, 0 = none */
};

/* Embedded decoder; max is the largest payload in bytes (CONNECT_MSG_MAX is a
 * sane default). connect_dec_done() frees what it buffers. */
void connect_dec_init(struct connect_dec *dec, size_t max);
void connect_dec_done(struct connect_dec *dec);

/* Decodes len more bytes of the body, calling cb for every envelope they
 * complete (any number, in order). Errors: -EMSGSIZE for a payload longer
 * than max (seen from its header, before any payload is buffered), -EPROTO
 * for the compressed flag or unknown flag bits, -ENOMEM, or what cb
 * returned. After an error the decoder is spent: every later call returns
 * the same error without calling cb. */
int connect_dec_feed(struct connect_dec *dec, const void *data, size_t len, connect_msg_fn cb,
                     void *ud, struct err *err);

/* No envelope is partly received (none yet, or the last one complete): a
 * client may pause its stream here, not inside an envelope. */
bool connect_dec_at_boundary(const struct connect_dec *dec);

/* The body is over: -EPROTO when it ended inside an envelope (truncated
 * header or payload), else 0 (also for an empty body). */
int connect_dec_finish(struct connect_dec *dec, struct err *err);

/* --- encoding --- */

/* Writes the 5-byte envelope header for a payload of len bytes. */
void connect_env_header(uint8_t out[CONNECT_ENV_HEADER], uint8_t flags, uint32_t len);

/* Appends a complete end-stream envelope to out: payload {} when code is
 * NULL, else {"error":{"code":"<code>","message":"<message>"}} (message NULL
 * is taken as ""). Both strings are JSON-escaped: quote and backslash with a
 * backslash, control characters as \u00XX, and bytes that are not valid
 * UTF-8 as \ufffd, so the payload is always valid JSON. On failure (-EFBIG
 * past out's max, -ENOMEM) out is left as it was. */
int connect_end_stream_json(struct buf *out, const char *code, const char *message);
