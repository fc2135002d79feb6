/*
 * ndjson.c - splitting a byte stream into NDJSON lines as it arrives.
 *
 * libcurl hands the body over in chunks that end anywhere: in the middle of
 * a line, of a base64 quantum, or right after a '\n'. Lines that lie wholly
 * inside a chunk are passed on without copying; only the unfinished tail of
 * a chunk is kept, bounded by max_line. This file knows nothing about JSON.
 */
#include <errno.h>
#include <string.h>

#include "client/client-internal.h"

void
ndjson_init(struct ndjson *nd, size_t max_line)
{
    buf_init(&nd->partial, max_line);
    nd->max_line = max_line;
}

void
ndjson_done(struct ndjson *nd)
{
    buf_done(&nd->partial);
}

static int
emit(const char *line, size_t len, ndjson_line_fn fn, void *userdata)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return 0;
    return fn(line, len, userdata);
}

int
ndjson_feed(struct ndjson *nd, const char *data, size_t len, ndjson_line_fn fn, void *userdata)
{
    int r;

    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        if (!nl) {
            /* No end of line in the rest: keep it for the next chunk. */
            if (len > nd->max_line - nd->partial.len)
                return -EFBIG;
            return buf_put(&nd->partial, data, len);
        }
        size_t n = (size_t)(nl - data);
        if (nd->partial.len > 0) {
            if (n > nd->max_line - nd->partial.len)
                return -EFBIG;
            r = buf_put(&nd->partial, data, n);
            if (r < 0)
                return r;
            r = emit(nd->partial.data, nd->partial.len, fn, userdata);
            buf_reset(&nd->partial);
        } else {
            if (n > nd->max_line)
                return -EFBIG;
            r = emit(data, n, fn, userdata);
        }
        if (r < 0)
            return r;
        data = nl + 1;
        len -= n + 1;
    }
    return 0;
}

int
ndjson_finish(struct ndjson *nd, ndjson_line_fn fn, void *userdata)
{
    int r = 0;

    if (nd->partial.len > 0)
        r = emit(nd->partial.data, nd->partial.len, fn, userdata);
    buf_reset(&nd->partial);
    return r;
}
