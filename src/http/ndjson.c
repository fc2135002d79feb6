/*
 * ndjson.c - NDJSON lines into a buffer and onto a stream (see ndjson.h).
 * Not a reader: clients parse NDJSON in client/ndjson.c.
 */
#include "http/ndjson.h"

#include <errno.h>

#include "http/server.h"
#include "util/b64.h"
#include "util/buf.h"

int
ndjson_line(struct buf *b, json_t *v)
{
    int r = json_dump_buf(v, b);
    json_decref(v);
    if (r < 0 || buf_putc(b, '\n') < 0)
        return -ENOMEM;
    return 0;
}

int
ndjson_data_line(struct buf *b, const char *key, const void *data, size_t len, uint64_t offset)
{
    int r = buf_printf(b, "{\"%s\":\"", key);
    if (r == 0)
        r = b64_encode(b, data, len);
    if (r == 0)
        r = buf_printf(b, "\",\"offset\":%llu}\n", (unsigned long long)offset);
    return r;
}

int
ndjson_write(struct http_stream *s, struct buf *line, json_t *v)
{
    buf_reset(line);
    int r = ndjson_line(line, v);
    if (r < 0)
        return r;
    return http_stream_write(s, line->data, line->len);
}

int
ndjson_write_data(struct http_stream *s, struct buf *line, const char *key, const void *data,
                  size_t len, uint64_t offset)
{
    buf_reset(line);
    int r = ndjson_data_line(line, key, data, len, offset);
    if (r < 0)
        return r;
    return http_stream_write(s, line->data, line->len);
}
