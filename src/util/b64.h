/*
 * b64.h - base64 (RFC 4648, standard alphabet) for NDJSON output and stdin.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

static inline size_t
b64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Appends the encoding of n bytes to b. */
int b64_encode(struct buf *b, const void *data, size_t n);

/* Decodes s (len bytes, padding optional, no whitespace) and appends the
 * bytes to out. -EINVAL on any character outside the alphabet, misplaced
 * padding or non-zero trailing bits. */
int b64_decode(struct buf *out, const char *s, size_t len);
