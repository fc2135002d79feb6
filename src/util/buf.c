/*
 * buf.c - bounded growable buffer (after git's strbuf and curl's dynbuf).
 */
#include "util/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf_empty[1];

void
buf_init(struct buf *b, size_t max)
{
    b->data = buf_empty;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void
buf_done(struct buf *b)
{
    if (b->cap)
        free(b->data);
    buf_init(b, b->max);
}

void
buf_reset(struct buf *b)
{
    b->len = 0;
    b->data[0] = '\0';
}

int
buf_reserve(struct buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return -EFBIG;
    if (b->len + extra == SIZE_MAX)
        return -ENOMEM; /* no room for the NUL */
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = b->cap ? realloc(b->data, cap) : malloc(cap);
    if (!p)
        return -ENOMEM;
    if (!b->cap)
        p[0] = '\0';
    b->data = p;
    b->cap = cap;
    return 0;
}

int
buf_put(struct buf *b, const void *data, size_t n)
{
    int r = buf_reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int
buf_puts(struct buf *b, const char *s)
{
    return buf_put(b, s, strlen(s));
}

int
buf_putc(struct buf *b, char c)
{
    return buf_put(b, &c, 1);
}

int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0)
        return -EINVAL;
    int r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    (void)vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

void
buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *
buf_steal(struct buf *b)
{
    char *p = b->cap ? b->data : strdup("");
    buf_init(b, b->max);
    return p;
}
