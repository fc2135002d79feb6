/*
 * buf.h - a growable byte buffer with a hard size limit.
 *
 * After buf_init() a buffer is never NULL and always NUL-terminated (the NUL
 * is not counted in len). Growth past max fails with -EFBIG and leaves the
 * buffer unchanged, so every buffer a client can make us fill has a bound.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cleanup.h"

struct buf {
    char *data; /* len bytes then a NUL; points at a static "" until first growth */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated, 0 while data is the static "" */
    size_t max; /* largest len allowed */
};

#define BUF_UNLIMITED SIZE_MAX

void buf_init(struct buf *b, size_t max);
void buf_done(struct buf *b);
void buf_reset(struct buf *b);

/* Ensures room for extra more bytes (plus the NUL). -EFBIG past max, -ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
int buf_put(struct buf *b, const void *data, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Drops the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);

/* Returns the heap string (caller frees) and reinitialises b; NULL on OOM. */
char *buf_steal(struct buf *b);

static inline void
buf_donep(struct buf *b)
{
    buf_done(b);
}
#define _cleanup_buf_ _cleanup_(buf_donep)
