/*
 * inflate.h - streaming gzip decoding of request bodies (Content-Encoding:
 * gzip), on zlib.
 *
 * The compressed body is fed in chunks split anywhere; the decompressed
 * bytes go out through a callback in pieces of at most INFLATE_CHUNK bytes,
 * so memory stays bounded whatever the compression ratio. The caller bounds
 * the total it accepts (a gzip bomb expands about a thousandfold; it is
 * refused by that limit, not here). Exactly one gzip member is accepted:
 * bytes after its trailer are an error, as are a zlib or raw deflate
 * stream, corrupt data and a wrong checksum or length in the trailer.
 *
 * This module knows bytes, not what they encode. Functions return 0 or
 * -errno and never log; they fill err when given one. Not thread-safe.
 */
#pragma once

#include <stddef.h>

#include "util/cleanup.h"
#include "util/err.h"

#define INFLATE_CHUNK (64 * 1024) /* largest piece handed to the callback, bytes */

struct inflate;

/* Receives n > 0 decompressed bytes (valid during the call only). A
 * negative return stops decoding and is returned by inflate_feed(). */
typedef int (*inflate_out_fn)(void *ud, const void *data, size_t n);

/* -ENOMEM only. */
int inflate_new(struct inflate **ret);
struct inflate *inflate_free(struct inflate *z);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct inflate *, inflate_free)

/* Decodes len more compressed bytes, calling out for what they yield.
 * Errors: -EPROTO for data that is not one well-formed gzip member (corrupt,
 * not gzip, bytes after the end), -ENOMEM, or what out returned. After an
 * error the decoder is spent: every later call returns the same error. */
int inflate_feed(struct inflate *z, const void *in, size_t len, inflate_out_fn out, void *ud,
                 struct err *err);

/* The body is over: -EPROTO unless the gzip member ended (trailer checked). */
int inflate_finish(struct inflate *z, struct err *err);
