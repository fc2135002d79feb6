/*
 * inflate.c - gzip decoding with zlib's inflate().
 *
 * inflateInit2() with 16 + MAX_WBITS accepts a gzip wrapper only and checks
 * its CRC-32 and length trailer; Z_STREAM_END therefore means a complete,
 * verified member. zlib's avail_in is an unsigned int, so a chunk larger
 * than that is fed in slices. Output is drained whenever the buffer fills,
 * which is what bounds memory for highly compressed input.
 */
#include "http/inflate.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#define ZLIB_CONST /* next_in is a pointer to const */
#include <zlib.h>

struct inflate {
    z_stream strm;
    bool ended; /* Z_STREAM_END seen: the member and its trailer are complete */
    int failed; /* first error returned, 0 = none */
    unsigned char out[INFLATE_CHUNK];
};

int
inflate_new(struct inflate **ret)
{
    struct inflate *z = calloc(1, sizeof(*z));
    if (!z)
        return -ENOMEM;
    if (inflateInit2(&z->strm, 16 + MAX_WBITS) != Z_OK) {
        free(z);
        return -ENOMEM;
    }
    *ret = z;
    return 0;
}

struct inflate *
inflate_free(struct inflate *z)
{
    if (!z)
        return NULL;
    (void)inflateEnd(&z->strm);
    free(z);
    return NULL;
}

static int
inflate_fail(struct inflate *z, int r)
{
    z->failed = r;
    return r;
}

/* Runs inflate() over the input in strm until it is used up or the member
 * ends. */
static int
inflate_run(struct inflate *z, inflate_out_fn out, void *ud, struct err *err)
{
    for (;;) {
        z->strm.next_out = z->out;
        z->strm.avail_out = sizeof(z->out);
        int zr = inflate(&z->strm, Z_NO_FLUSH);
        size_t n = sizeof(z->out) - z->strm.avail_out;
        /* zlib reports what it produced before an error too: hand it out,
         * so the output does not depend on how the input was split. */
        if (n > 0) {
            int r = out(ud, z->out, n);
            if (r < 0)
                return r;
        }
        switch (zr) {
        case Z_OK:
            break;
        case Z_STREAM_END:
            z->ended = true;
            if (z->strm.avail_in > 0)
                return err_set(err, EPROTO, "data after the end of the gzip stream");
            return 0;
        case Z_BUF_ERROR:
            /* No progress possible: with room for output, that can only
             * mean all input was consumed. */
            if (z->strm.avail_in > 0)
                return err_set(err, EPROTO, "gzip decoder made no progress");
            return 0;
        case Z_MEM_ERROR:
            return err_set(err, ENOMEM, "out of memory decoding gzip");
        case Z_NEED_DICT:
            return err_set(err, EPROTO, "gzip stream needs a preset dictionary");
        default:
            return err_set(err, EPROTO, "corrupt gzip stream: %s",
                           z->strm.msg ? z->strm.msg : "unknown error");
        }
        if (z->strm.avail_in == 0 && z->strm.avail_out > 0)
            return 0;
    }
}

int
inflate_feed(struct inflate *z, const void *in, size_t len, inflate_out_fn out, void *ud,
             struct err *err)
{
    const unsigned char *p = in;

    if (z->failed)
        return err_set(err, -z->failed, "gzip stream already failed");
    while (len > 0) {
        if (z->ended)
            return inflate_fail(z, err_set(err, EPROTO, "data after the end of the gzip stream"));
        size_t n = MIN(len, (size_t)UINT_MAX);
        z->strm.next_in = p;
        z->strm.avail_in = (unsigned)n;
        int r = inflate_run(z, out, ud, err);
        if (r < 0)
            return inflate_fail(z, r);
        p += n;
        len -= n;
    }
    return 0;
}

int
inflate_finish(struct inflate *z, struct err *err)
{
    if (z->failed)
        return err_set(err, -z->failed, "gzip stream already failed");
    if (!z->ended)
        return inflate_fail(z, err_set(err, EPROTO, "gzip stream is truncated"));
    return 0;
}
