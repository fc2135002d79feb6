/*
 * fuzz-multipart.c - the multipart/form-data parser on arbitrary bodies
 * (boundary "b0und", small limits so they are reached), and boundary
 * extraction on arbitrary Content-Type values. The first input byte picks
 * where the rest is cut into three pieces; fed all at once, in those
 * pieces and one byte at a time the parser gives the same parts and the
 * same result. Callbacks come in order (begin, data, end), data is never
 * empty, parts and header bytes stay within the limits, and success means
 * the closing delimiter was seen. An extracted boundary is one the parser
 * accepts.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "http/multipart.h"
#include "util/buf.h"

#define BOUNDARY    "b0und"
#define HEADERS_MAX 200
#define PARTS_MAX   6

/* Events as 'B' and three length-prefixed strings (or 0xff for NULL), 'D'
 * with the length of a run of content however it was split, and 'E'. */
struct rec {
    struct buf log;
    struct buf run; /* content since the last event */
    unsigned begins, ends;
};

static void
put_len(struct buf *b, size_t n)
{
    CHECK(buf_put(b, &n, sizeof(n)) == 0);
}

static void
flush(struct rec *rec)
{
    if (!rec->run.len)
        return;
    CHECK(buf_putc(&rec->log, 'D') == 0);
    put_len(&rec->log, rec->run.len);
    CHECK(buf_put(&rec->log, rec->run.data, rec->run.len) == 0);
    buf_reset(&rec->run);
}

static int
on_begin(void *ud, const struct multipart_part *p)
{
    struct rec *rec = ud;
    const char *s[3] = {p->name, p->filename, p->content_type};
    CHECK(rec->begins == rec->ends);
    CHECK(++rec->begins <= PARTS_MAX);
    flush(rec);
    CHECK(buf_putc(&rec->log, 'B') == 0);
    for (int i = 0; i < 3; i++) {
        if (!s[i]) {
            CHECK(buf_putc(&rec->log, (char)0xff) == 0);
            continue;
        }
        CHECK(strlen(s[i]) < HEADERS_MAX);
        put_len(&rec->log, strlen(s[i]));
        CHECK(buf_puts(&rec->log, s[i]) == 0);
    }
    return 0;
}

static int
on_data(void *ud, const void *data, size_t len)
{
    struct rec *rec = ud;
    CHECK(rec->begins == rec->ends + 1);
    CHECK(len > 0);
    CHECK(buf_put(&rec->run, data, len) == 0);
    return 0;
}

static int
on_end(void *ud)
{
    struct rec *rec = ud;
    CHECK(rec->begins == ++rec->ends);
    flush(rec);
    CHECK(buf_putc(&rec->log, 'E') == 0);
    return 0;
}

static const struct multipart_cb cbs = {on_begin, on_data, on_end};

/* Parses the input as pieces ending at cuts (ascending), or byte by byte. */
static int
parse(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, bool bytes,
      struct rec *rec)
{
    struct multipart *mp = NULL;
    struct err err = {0};
    size_t at = 0;
    int r = 0;

    buf_init(&rec->log, BUF_UNLIMITED);
    buf_init(&rec->run, BUF_UNLIMITED);
    rec->begins = rec->ends = 0;
    CHECK(multipart_new(BOUNDARY, &cbs, rec, &mp) == 0);
    multipart_set_limits(mp, HEADERS_MAX, PARTS_MAX);
    if (bytes) {
        for (; at < size && r >= 0; at++)
            r = multipart_feed(mp, data + at, 1, &err);
    } else {
        for (size_t i = 0; i <= ncuts && r >= 0; i++) {
            size_t to = i < ncuts ? cuts[i] : size;
            r = multipart_feed(mp, data + at, to - at, &err);
            at = to;
        }
    }
    if (r >= 0)
        r = multipart_finish(mp, &err);
    multipart_free(mp);
    flush(rec);
    CHECK(r == 0 || r == -EPROTO || r == -EMSGSIZE);
    CHECK(r == 0 || (err.errnum == -r && err.msg[0]));
    if (r == 0)
        CHECK(rec->begins == rec->ends);
    return r;
}

static void
same(const struct rec *a, const struct rec *b)
{
    CHECK(a->log.len == b->log.len && memcmp(a->log.data, b->log.data, a->log.len) == 0);
}

static void
check_boundary(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    char out[MULTIPART_BOUNDARY_MAX + 1];
    struct multipart *mp = NULL;
    struct err err = {0};

    int r = multipart_boundary(s, out, sizeof(out), &err);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0) {
        CHECK(strlen(out) >= 1 && strlen(out) <= MULTIPART_BOUNDARY_MAX);
        CHECK(multipart_new(out, NULL, NULL, &mp) == 0);
        multipart_free(mp);
    } else {
        CHECK(err.errnum == EINVAL && err.msg[0]);
    }
    free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rec whole, pieces, bytes;

    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    size_t cuts[2];
    fuzz_cuts(sel, size, cuts);

    int r = parse(data, size, NULL, 0, false, &whole);
    CHECK(parse(data, size, cuts, 2, false, &pieces) == r);
    same(&whole, &pieces);
    if (size <= 16384) {
        CHECK(parse(data, size, NULL, 0, true, &bytes) == r);
        same(&whole, &bytes);
        buf_done(&bytes.log);
        buf_done(&bytes.run);
    }
    buf_done(&whole.log);
    buf_done(&whole.run);
    buf_done(&pieces.log);
    buf_done(&pieces.run);

    check_boundary(data, size);
    return 0;
}
