/*
 * ndjson.h - the NDJSON writer every streaming surface shares: one JSON
 * value per line, compact, '\n'-terminated (application/x-ndjson). It
 * encodes lines into a caller's struct buf (whose limit bounds a line) and
 * writes them to an http_stream; what the lines mean is the surface's.
 *
 * Functions return 0 on success and -errno on failure (-ENOMEM when a line
 * does not fit or cannot be encoded), and never log.
 *
 *   {"pid":42}
 *   {"stdout":"aGVsbG8K","offset":0}
 */
#ifndef ABX_HTTP_NDJSON_H
#define ABX_HTTP_NDJSON_H

#include <stddef.h>
#include <stdint.h>

#include "util/json.h"

struct buf;
struct http_stream;

/* Appends v as one line to b; steals v. */
int ndjson_line(struct buf *b, json_t *v);

/* Appends {"<key>":"<base64 of data>","offset":<offset>} as one line to b,
 * without building a JSON value (output is the hot path). key is a plain
 * ASCII name the caller chose, never input. */
int ndjson_data_line(struct buf *b, const char *key, const void *data, size_t len, uint64_t offset);

/* Encodes v (stolen) into line (reset first) and writes it to s. */
int ndjson_write(struct http_stream *s, struct buf *line, json_t *v);

/* ndjson_data_line() into line (reset first), written to s. */
int ndjson_write_data(struct http_stream *s, struct buf *line, const char *key, const void *data,
                      size_t len, uint64_t offset);

#endif
