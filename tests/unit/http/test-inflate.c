/*
 * test-inflate.c - streaming gzip decoding: the same bytes for every way of
 * splitting a member (with a name, extra field and header CRC), one byte
 * at a time and empty; a 64 MiB bomb comes out in bounded pieces; corrupt
 * data, a wrong CRC or length, a zlib or raw stream, truncation, trailing
 * garbage and a second member are refused; the callback stops it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "http/inflate.h"
#include "util/buf.h"

struct sink {
    struct buf out;
    size_t calls, biggest, total;
    bool keep;         /* store the bytes, not only count them */
    size_t stop_after; /* fail once total exceeds this, 0 = never */
};

static int
on_out(void *ud, const void *data, size_t n)
{
    struct sink *s = ud;
    assert_true(n > 0 && n <= INFLATE_CHUNK);
    s->calls++;
    s->biggest = MAX(s->biggest, n);
    s->total += n;
    if (s->keep)
        assert_int_equal(buf_put(&s->out, data, n), 0);
    if (s->stop_after && s->total > s->stop_after)
        return -EFBIG;
    return 0;
}

static void
sink_init(struct sink *s)
{
    memset(s, 0, sizeof(*s));
    buf_init(&s->out, BUF_UNLIMITED);
    s->keep = true;
}

/* Compresses in into out with the given window bits (31 = gzip, 15 = zlib,
 * -15 = raw); a gzip header with name, extra and CRC when fancy. */
static void
compress_to(struct buf *out, const void *in, size_t len, int wbits, bool fancy)
{
    z_stream zs = {0};
    gz_header head = {0};
    unsigned char tmp[16384];
    int zr;

    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    if (fancy) {
        head.name = (Bytef *)"name.txt";
        head.extra = (Bytef *)"XXext";
        head.extra_len = 5;
        head.hcrc = 1;
        assert_int_equal(deflateSetHeader(&zs, &head), Z_OK);
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    do {
        zs.next_out = tmp;
        zs.avail_out = sizeof(tmp);
        zr = deflate(&zs, Z_FINISH);
        assert_true(zr == Z_OK || zr == Z_STREAM_END);
        assert_int_equal(buf_put(out, tmp, sizeof(tmp) - zs.avail_out), 0);
    } while (zr != Z_STREAM_END);
    (void)deflateEnd(&zs);
}

static const char text[] = "The quick brown fox jumps over the lazy dog.\n"
                           "\0\x01\x02 binary \xff\xfe and the quick brown fox again, again.\n";

/* Decodes in as the given pieces; feed errors and then finish's. */
static int
decode(const void *in, size_t len, const size_t *cuts, size_t ncuts, struct sink *s,
       struct err *err)
{
    _cleanup_(inflate_freep) struct inflate *z = NULL;
    size_t at = 0;
    int r;

    assert_int_equal(inflate_new(&z), 0);
    r = 0;
    for (size_t i = 0; i <= ncuts && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        r = inflate_feed(z, (const char *)in + at, to - at, on_out, s, err);
        at = to;
    }
    return r < 0 ? r : inflate_finish(z, err);
}

static void
test_every_split(void **state)
{
    struct buf gz;
    (void)state;
    for (int fancy = 0; fancy < 2; fancy++) {
        buf_init(&gz, BUF_UNLIMITED);
        compress_to(&gz, text, sizeof(text) - 1, 31, fancy);
        for (size_t i = 0; i <= gz.len; i++)
            for (size_t j = i; j <= gz.len; j++) {
                struct sink s;
                size_t cuts[2] = {i, j};
                sink_init(&s);
                assert_int_equal(decode(gz.data, gz.len, cuts, 2, &s, NULL), 0);
                assert_int_equal(s.out.len, sizeof(text) - 1);
                assert_memory_equal(s.out.data, text, sizeof(text) - 1);
                buf_done(&s.out);
            }
        /* one byte at a time */
        struct sink s;
        size_t *cuts = calloc(gz.len, sizeof(*cuts));
        assert_non_null(cuts);
        for (size_t i = 0; i < gz.len; i++)
            cuts[i] = i;
        sink_init(&s);
        assert_int_equal(decode(gz.data, gz.len, cuts, gz.len, &s, NULL), 0);
        assert_int_equal(s.out.len, sizeof(text) - 1);
        assert_memory_equal(s.out.data, text, sizeof(text) - 1);
        buf_done(&s.out);
        free(cuts);
        buf_done(&gz);
    }
}

static void
test_empty_member(void **state)
{
    struct buf gz;
    struct sink s;
    (void)state;
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, "", 0, 31, false);
    sink_init(&s);
    assert_int_equal(decode(gz.data, gz.len, NULL, 0, &s, NULL), 0);
    assert_int_equal(s.calls, 0);
    buf_done(&s.out);
    buf_done(&gz);
}

static void
test_bomb(void **state)
{
    size_t n = 64 * 1024 * 1024;
    char *zeros = calloc(1, n);
    struct buf gz;
    struct sink s;
    (void)state;
    assert_non_null(zeros);
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, zeros, n, 31, false);
    free(zeros);
    assert_true(gz.len < n / 500);
    sink_init(&s);
    s.keep = false;
    assert_int_equal(decode(gz.data, gz.len, NULL, 0, &s, NULL), 0);
    assert_int_equal(s.total, n);
    assert_true(s.biggest <= INFLATE_CHUNK);
    /* the caller's limit stops it early */
    sink_init(&s);
    s.keep = false;
    s.stop_after = 1024 * 1024;
    assert_int_equal(decode(gz.data, gz.len, NULL, 0, &s, NULL), -EFBIG);
    assert_true(s.total <= 1024 * 1024 + INFLATE_CHUNK);
    buf_done(&gz);
}

static void
expect_fail(const void *in, size_t len, const char *msg_part)
{
    struct sink s;
    struct err err = {0};
    sink_init(&s);
    assert_int_equal(decode(in, len, NULL, 0, &s, &err), -EPROTO);
    assert_int_equal(err.errnum, EPROTO);
    if (!strstr(err.msg, msg_part))
        fail_msg("message '%s' lacks '%s'", err.msg, msg_part);
    buf_done(&s.out);
}

static void
test_corrupt(void **state)
{
    struct buf gz, bad;
    (void)state;
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, text, sizeof(text) - 1, 31, false);

    /* every single-byte corruption of the deflate data or trailer fails
     * (the header's MTIME, XFL and OS bytes carry no check) */
    for (size_t i = 10; i < gz.len; i++) {
        buf_init(&bad, BUF_UNLIMITED);
        assert_int_equal(buf_put(&bad, gz.data, gz.len), 0);
        bad.data[i] ^= 0x55;
        expect_fail(bad.data, bad.len, "");
        buf_done(&bad);
    }
    buf_init(&bad, BUF_UNLIMITED);
    assert_int_equal(buf_put(&bad, gz.data, gz.len), 0);
    bad.data[gz.len - 8] ^= 1;
    expect_fail(bad.data, bad.len, "incorrect data check");
    bad.data[gz.len - 8] ^= 1;
    bad.data[gz.len - 1] ^= 1;
    expect_fail(bad.data, bad.len, "incorrect length check");
    buf_done(&bad);

    /* not gzip: a bad magic, a zlib stream, a raw deflate stream, text */
    buf_init(&bad, BUF_UNLIMITED);
    assert_int_equal(buf_put(&bad, gz.data, gz.len), 0);
    bad.data[1] = 0x00;
    expect_fail(bad.data, bad.len, "corrupt gzip stream: incorrect header check");
    buf_reset(&bad);
    compress_to(&bad, text, sizeof(text) - 1, 15, false);
    expect_fail(bad.data, bad.len, "corrupt gzip stream");
    buf_reset(&bad);
    compress_to(&bad, text, sizeof(text) - 1, -15, false);
    expect_fail(bad.data, bad.len, "corrupt gzip stream");
    expect_fail("hello world, this is not gzip", 29, "corrupt gzip stream");
    buf_done(&bad);
    buf_done(&gz);
}

static void
test_truncated(void **state)
{
    struct buf gz;
    (void)state;
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, text, sizeof(text) - 1, 31, true);
    for (size_t n = 0; n < gz.len; n++)
        expect_fail(gz.data, n, "truncated");
    buf_done(&gz);
}

static void
test_trailing(void **state)
{
    struct buf gz, two;
    struct sink s;
    struct err err = {0};
    _cleanup_(inflate_freep) struct inflate *z = NULL;
    (void)state;
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, text, sizeof(text) - 1, 31, false);

    /* in the same chunk */
    buf_init(&two, BUF_UNLIMITED);
    assert_int_equal(buf_put(&two, gz.data, gz.len), 0);
    assert_int_equal(buf_putc(&two, '\n'), 0);
    expect_fail(two.data, two.len, "data after the end");
    /* a second member */
    assert_int_equal(buf_put(&two, gz.data, gz.len), 0);
    expect_fail(two.data, two.len, "data after the end");
    buf_done(&two);

    /* in a later chunk: the whole text came out before */
    sink_init(&s);
    assert_int_equal(inflate_new(&z), 0);
    assert_int_equal(inflate_feed(z, gz.data, gz.len, on_out, &s, NULL), 0);
    assert_int_equal(inflate_feed(z, "", 0, on_out, &s, NULL), 0);
    assert_int_equal(inflate_feed(z, "\0", 1, on_out, &s, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "data after the end"));
    assert_int_equal(s.out.len, sizeof(text) - 1);
    /* spent */
    assert_int_equal(inflate_finish(z, NULL), -EPROTO);
    buf_done(&s.out);
    buf_done(&gz);
}

static void
test_callback_stops(void **state)
{
    _cleanup_(inflate_freep) struct inflate *z = NULL;
    char *big = malloc(1024 * 1024);
    struct buf gz;
    struct sink s;
    (void)state;
    assert_non_null(big);
    for (size_t i = 0; i < 1024 * 1024; i++)
        big[i] = (char)(i % 251);
    buf_init(&gz, BUF_UNLIMITED);
    compress_to(&gz, big, 1024 * 1024, 31, false);
    sink_init(&s);
    s.stop_after = 1;
    assert_int_equal(inflate_new(&z), 0);
    assert_int_equal(inflate_feed(z, gz.data, gz.len, on_out, &s, NULL), -EFBIG);
    assert_int_equal(s.calls, 1);
    assert_int_equal(inflate_feed(z, gz.data, 1, on_out, &s, NULL), -EFBIG);
    assert_int_equal(inflate_finish(z, NULL), -EFBIG);
    assert_int_equal(s.calls, 1);
    assert_memory_equal(s.out.data, big, s.out.len);
    buf_done(&s.out);
    buf_done(&gz);
    free(big);
    assert_null(inflate_free(NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_split),    cmocka_unit_test(test_empty_member),
            cmocka_unit_test(test_bomb),           cmocka_unit_test(test_corrupt),
            cmocka_unit_test(test_truncated),      cmocka_unit_test(test_trailing),
            cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
