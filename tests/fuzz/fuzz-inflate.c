/*
 * fuzz-inflate.c - streaming gzip decoding of arbitrary bodies, and of the
 * gzip encoding of arbitrary bytes. The first input byte picks where the
 * rest is cut into three pieces; fed in pieces or all at once the decoder
 * gives the same bytes and the same result, never hands out more than
 * INFLATE_CHUNK bytes at once, and only fails with -EPROTO (or the
 * callback's error once the output passes a limit). Compressing the input
 * and decoding it in pieces gives the input back.
 */
#include <errno.h>
#include <zlib.h>

#include "fuzz-common.h"
#include "http/inflate.h"
#include "util/buf.h"

#define OUT_MAX (1024 * 1024) /* output kept per run; a bomb stops here */

static int
on_out(void *ud, const void *data, size_t n)
{
    struct buf *out = ud;
    CHECK(n > 0 && n <= INFLATE_CHUNK);
    /* keep exactly the first OUT_MAX bytes, however they were cut */
    size_t keep = MIN(n, OUT_MAX - out->len);
    CHECK(buf_put(out, data, keep) == 0);
    return keep < n ? -EFBIG : 0;
}

static int
decode(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, struct buf *out)
{
    struct inflate *z = NULL;
    struct err err = {0};
    size_t at = 0;
    int r = 0;

    CHECK(inflate_new(&z) == 0);
    for (size_t i = 0; i <= ncuts && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : size;
        r = inflate_feed(z, data + at, to - at, on_out, out, &err);
        at = to;
    }
    if (r >= 0)
        r = inflate_finish(z, &err);
    inflate_free(z);
    CHECK(r == 0 || r == -EPROTO || r == -EFBIG);
    if (r == -EPROTO)
        CHECK(err.errnum == EPROTO && err.msg[0]);
    return r;
}

static void
round_trip(const uint8_t *data, size_t size, int level, const size_t *cuts)
{
    z_stream zs = {0};
    struct buf gz, out;
    unsigned char tmp[4096];
    int zr;

    buf_init(&gz, BUF_UNLIMITED);
    CHECK(deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    zs.next_in = (Bytef *)(uintptr_t)data;
    zs.avail_in = (uInt)size;
    do {
        zs.next_out = tmp;
        zs.avail_out = sizeof(tmp);
        zr = deflate(&zs, Z_FINISH);
        CHECK(zr == Z_OK || zr == Z_STREAM_END);
        CHECK(buf_put(&gz, tmp, sizeof(tmp) - zs.avail_out) == 0);
    } while (zr != Z_STREAM_END);
    (void)deflateEnd(&zs);

    /* the same relative cuts in the compressed stream */
    size_t gcuts[2] = {size ? cuts[0] * gz.len / size : 0, size ? cuts[1] * gz.len / size : 0};
    buf_init(&out, BUF_UNLIMITED);
    CHECK(decode((const uint8_t *)gz.data, gz.len, gcuts, 2, &out) == 0);
    CHECK(out.len == size && memcmp(out.data, data, size) == 0);
    buf_done(&out);
    buf_done(&gz);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf whole, pieces;

    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    size_t cuts[2];
    fuzz_cuts(sel, size, cuts);

    buf_init(&whole, BUF_UNLIMITED);
    buf_init(&pieces, BUF_UNLIMITED);
    int r = decode(data, size, NULL, 0, &whole);
    CHECK(decode(data, size, cuts, 2, &pieces) == r);
    CHECK(whole.len == pieces.len && memcmp(whole.data, pieces.data, whole.len) == 0);
    buf_done(&whole);
    buf_done(&pieces);

    if (size <= 4096)
        round_trip(data, size, sel % 10, cuts);
    return 0;
}
