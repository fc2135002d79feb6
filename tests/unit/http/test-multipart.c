/*
 * test-multipart.c - the streaming multipart/form-data parser: the same
 * parts for every way of splitting a sample body (two and three pieces,
 * one byte at a time), with binary content, near-delimiters, an empty part
 * and WHATWG-escaped names; hostile bodies (no boundary, no closing
 * delimiter, headers without a blank line, too long, too many parts,
 * folding, bare LF, junk after a delimiter, duplicate headers); long runs of
 * CR, LF and dashes in linear time; and boundary extraction from
 * Content-Type.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/multipart.h"
#include "util/buf.h"

/* Events as "<B name|filename|type>" (~ for NULL), raw data, "<E>". */
struct rec {
    struct buf log;
    unsigned begins, ends;
    int fail_data; /* part_data returns this when non-zero */
};

static void
put_str(struct buf *b, const char *s)
{
    assert_int_equal(buf_puts(b, s ? s : "~"), 0);
}

static int
on_begin(void *ud, const struct multipart_part *p)
{
    struct rec *rec = ud;
    assert_int_equal(rec->begins++, rec->ends);
    put_str(&rec->log, "<B ");
    put_str(&rec->log, p->name);
    put_str(&rec->log, "|");
    put_str(&rec->log, p->filename);
    put_str(&rec->log, "|");
    put_str(&rec->log, p->content_type);
    put_str(&rec->log, ">");
    return 0;
}

static int
on_data(void *ud, const void *data, size_t len)
{
    struct rec *rec = ud;
    assert_int_equal(rec->begins, rec->ends + 1);
    assert_true(len > 0);
    if (rec->fail_data)
        return rec->fail_data;
    assert_int_equal(buf_put(&rec->log, data, len), 0);
    return 0;
}

static int
on_end(void *ud)
{
    struct rec *rec = ud;
    assert_int_equal(rec->begins, ++rec->ends);
    put_str(&rec->log, "<E>");
    return 0;
}

static const struct multipart_cb cbs = {on_begin, on_data, on_end};

#define B  "----formdata-undici-0123456789"
#define BN "----formdata-undici-012345678" /* B but its last byte */
#define S_ "\r\n--" B "\r\n"
static const char sample[] =
        "preamble \r\n--" BN "X\r\n-- junk\r\n"
        "--" B "\r\n"
        "Content-Disposition: form-data; name=\"field\"\r\n"
        "\r\n"
        "value" S_
        "content-disposition: FORM-DATA; NAME=\"file\"; filename=\"a/b%22c%0D%0Ad.txt\"\r\n"
        "CONTENT-TYPE:  application/octet-stream \r\n"
        "X-Ignored: yes\r\n"
        "\r\n"
        "bin\0\r\n\r\n--\r\n--" BN "Y\r\n--" BN "\r\r\n--" BN "-\r\n-x--" B "\r\n-" S_
        "Content-Disposition: form-data; name=\"empty\"; filename=\"\"\r\n"
        "\r\n" S_
        "Content-Disposition: form-data; name=\"\\\"q\\\"\"; filename=\"C:\\dir\\%41%0d\"\r\n"
        "\r\n"
        "\r\n\r\n--" B "--  \r\n"
        "epilogue \r\n--" B "\r\n";
static const char sample_log[] =
        "<B field|~|~>value<E>"
        "<B file|a/b\"c\r\nd.txt|application/octet-stream>"
        "bin\0\r\n\r\n--\r\n--" BN "Y\r\n--" BN "\r\r\n--" BN "-\r\n-x--" B "\r\n-<E>"
        "<B empty||~><E>"
        "<B \"q\"|C:\\dir\\%41\r|~>\r\n<E>";

static void
rec_init(struct rec *rec)
{
    memset(rec, 0, sizeof(*rec));
    buf_init(&rec->log, BUF_UNLIMITED);
}

/* Parses len bytes as the given pieces (cuts ascending); the first error. */
static int
parse_cuts(const char *boundary, const void *data, size_t len, const size_t *cuts, size_t ncuts,
           struct rec *rec, struct err *err)
{
    _cleanup_(multipart_freep) struct multipart *mp = NULL;
    size_t at = 0;
    int r;

    assert_int_equal(multipart_new(boundary, &cbs, rec, &mp), 0);
    r = 0;
    for (size_t i = 0; i <= ncuts && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        r = multipart_feed(mp, (const char *)data + at, to - at, err);
        at = to;
    }
    return r < 0 ? r : multipart_finish(mp, err);
}

static int
parse(const char *boundary, const char *s, struct rec *rec, struct err *err)
{
    return parse_cuts(boundary, s, strlen(s), NULL, 0, rec, err);
}

static void
assert_sample_log(const struct rec *rec)
{
    if (rec->log.len != sizeof(sample_log) - 1 ||
        memcmp(rec->log.data, sample_log, sizeof(sample_log) - 1))
        fail_msg("got %zu bytes: %s", rec->log.len, rec->log.data);
}

static void
test_every_split(void **state)
{
    size_t n = sizeof(sample) - 1;
    (void)state;
    for (size_t i = 0; i <= n; i++)
        for (size_t j = i; j <= n; j += 3) {
            struct rec rec;
            size_t cuts[2] = {i, j};
            rec_init(&rec);
            assert_int_equal(parse_cuts(B, sample, n, cuts, 2, &rec, NULL), 0);
            assert_sample_log(&rec);
            buf_done(&rec.log);
        }
}

static void
test_byte_at_a_time(void **state)
{
    size_t n = sizeof(sample) - 1;
    size_t *cuts = calloc(n, sizeof(*cuts));
    struct rec rec;
    (void)state;
    assert_non_null(cuts);
    for (size_t i = 0; i < n; i++)
        cuts[i] = i;
    rec_init(&rec);
    assert_int_equal(parse_cuts(B, sample, n, cuts, n, &rec, NULL), 0);
    assert_sample_log(&rec);
    buf_done(&rec.log);
    free(cuts);
}

/* Random binary content full of near-delimiters, in random chunks. */
static void
test_binary_content(void **state)
{
    static const char *const bits[] = {"\r",      "\n",       "\r\n",        "-",  "--",   "\r\n--",
                                       "\r\n--b", "\r\n--bo", "\r\n--bound", "\0", "\xff", "x"};
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    struct buf content, body;
    struct rec rec;
    (void)state;

    buf_init(&content, BUF_UNLIMITED);
    for (int i = 0; i < 20000; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        const char *b = bits[rng % ELEMENTSOF(bits)];
        assert_int_equal(buf_put(&content, b, b[0] ? strlen(b) : 1), 0);
    }
    buf_init(&body, BUF_UNLIMITED);
    assert_int_equal(
            buf_puts(&body, "--boundary\r\nContent-Disposition: form-data; name=f\r\n\r\n"), 0);
    assert_int_equal(buf_put(&body, content.data, content.len), 0);
    assert_int_equal(buf_puts(&body, "\r\n--boundary--"), 0);

    for (int round = 0; round < 20; round++) {
        _cleanup_(multipart_freep) struct multipart *mp = NULL;
        rec_init(&rec);
        assert_int_equal(multipart_new("boundary", &cbs, &rec, &mp), 0);
        for (size_t at = 0; at < body.len;) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t n = MIN(body.len - at, rng % (round < 10 ? 16 : 4096) + 1);
            assert_int_equal(multipart_feed(mp, body.data + at, n, NULL), 0);
            at += n;
        }
        assert_int_equal(multipart_finish(mp, NULL), 0);
        assert_int_equal(rec.log.len, strlen("<B f|~|~>") + content.len + strlen("<E>"));
        assert_memory_equal(rec.log.data + strlen("<B f|~|~>"), content.data, content.len);
        buf_done(&rec.log);
    }
    buf_done(&content);
    buf_done(&body);
}

/* Runs of CR, LF and dashes, and near-misses of the longest boundary, are
 * linear: 8 MiB of them in one part. */
static void
test_long_runs(void **state)
{
    char boundary[MULTIPART_BOUNDARY_MAX + 1];
    static const char *const fills[] = {"\r", "\n", "-", "\r\n", "\r\n--", NULL};
    size_t size = 8 * 1024 * 1024;
    (void)state;

    memset(boundary, '-', MULTIPART_BOUNDARY_MAX);
    boundary[MULTIPART_BOUNDARY_MAX - 1] = 'z';
    boundary[MULTIPART_BOUNDARY_MAX] = '\0';
    for (size_t f = 0; f < ELEMENTSOF(fills); f++) {
        _cleanup_(multipart_freep) struct multipart *mp = NULL;
        struct rec rec;
        char *chunk = malloc(64 * 1024);
        assert_non_null(chunk);
        rec_init(&rec);
        assert_int_equal(multipart_new(boundary, &cbs, &rec, &mp), 0);
        assert_int_equal(multipart_feed(mp, "\r\n--", 4, NULL), 0);
        assert_int_equal(multipart_feed(mp, boundary, MULTIPART_BOUNDARY_MAX, NULL), 0);
        assert_int_equal(multipart_feed(mp, "\r\n\r\n", 4, NULL), 0);
        for (size_t i = 0; i < 64 * 1024; i++) {
            if (fills[f])
                chunk[i] = fills[f][i % strlen(fills[f])];
            else /* "\r\n--" and all of the boundary but its last byte */
                chunk[i] = (i % 74) < 4 ? "\r\n--"[i % 74] : (i % 74) == 73 ? 'x' : '-';
        }
        for (size_t at = 0; at < size; at += 64 * 1024)
            assert_int_equal(multipart_feed(mp, chunk, 64 * 1024, NULL), 0);
        assert_int_equal(multipart_finish(mp, NULL), -EPROTO);
        /* all of it is content; only what could still begin a delimiter
         * is held back */
        size_t got = rec.log.len - strlen("<B ~|~|~>");
        assert_true(got <= size && size - got < strlen("\r\n--") + MULTIPART_BOUNDARY_MAX);
        for (size_t at = 0; at < got; at += 64 * 1024)
            assert_memory_equal(rec.log.data + strlen("<B ~|~|~>") + at, chunk,
                                MIN(64 * 1024, got - at));
        buf_done(&rec.log);
        free(chunk);
    }
}

static void
expect_fail(const char *body, int want, const char *msg_part)
{
    struct rec rec;
    struct err err = {0};
    rec_init(&rec);
    int r = parse("b", body, &rec, &err);
    if (r != want)
        fail_msg("body '%s': got %d, want %d (%s)", body, r, want, err.msg);
    assert_int_equal(err.errnum, -want);
    if (!strstr(err.msg, msg_part))
        fail_msg("body '%s': message '%s' lacks '%s'", body, err.msg, msg_part);
    buf_done(&rec.log);
}

static void
test_malformed(void **state)
{
    (void)state;
    expect_fail("", -EPROTO, "first boundary");
    expect_fail("no delimiter at all\r\n-b\r\n--c", -EPROTO, "first boundary");
    expect_fail("--b\r\n\r\ndata", -EPROTO, "closing boundary");
    expect_fail("--b\r\n\r\ndata\r\n--b\r\n", -EPROTO, "inside part headers");
    expect_fail("--b\r\n\r\ndata\r\n--b-", -EPROTO, "closing boundary");
    expect_fail("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n--b--\r\n", -EPROTO,
                "malformed multipart header line");
    expect_fail("--b\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\n\r\n--b--", -EPROTO,
                "folded");
    expect_fail("--b\r\nContent-Type: text/plain\n\r\n\r\n--b--", -EPROTO, "CRLF");
    expect_fail("--b\r\nContent-Type: text\rplain\r\n\r\n\r\n--b--", -EPROTO, "control");
    expect_fail("--b\r\nContent-Type: a\r\nContent-Type: b\r\n\r\n\r\n--b--", -EPROTO,
                "two Content-Type");
    expect_fail("--b\r\nContent-Disposition: form-data\r\nContent-Disposition: form-data\r\n"
                "\r\n\r\n--b--",
                -EPROTO, "two Content-Disposition");
    expect_fail("--b\r\nContent-Disposition: attachment; name=a\r\n\r\n\r\n--b--", -EPROTO,
                "not form-data");
    expect_fail("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\n\r\n--b--", -EPROTO,
                "malformed multipart Content-Disposition");
    expect_fail("--b\r\nContent-Disposition: form-data; name=\"a\" x\r\n\r\n\r\n--b--", -EPROTO,
                "malformed multipart Content-Disposition");
    expect_fail("--b\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\n\r\n--b--", -EPROTO,
                "repeats 'name'");
    expect_fail("--b\r\nBad Name: x\r\n\r\n\r\n--b--", -EPROTO, "malformed multipart header");
    expect_fail("--b\n\r\n\r\n--b--", -EPROTO, "junk");
    expect_fail("--b\r\n\r\ndata\r\n--bb\r\n\r\n\r\n--b--", -EPROTO, "junk");
    expect_fail("--b \tx\r\n\r\n\r\n--b--", -EPROTO, "junk");
    expect_fail("--b\r\n\r\ndata\r\n--b-x", -EPROTO, "junk");
}

static void
test_accepted_forms(void **state)
{
    static const char *const cases[][2] = {
            /* transport padding, no preamble, no epilogue CRLF */
            {"--b \t \r\n\r\nx\r\n--b--", "<B ~|~|~>x<E>"},
            /* closing delimiter only: no parts at all */
            {"--b--", ""},
            /* unquoted values, odd spacing, parameters we do not use */
            {"--b\r\nContent-Disposition:form-data ;name=f ; size=3;filename = a.txt;\r\n\r\n\r\n"
             "--b--",
             "<B f|a.txt|~><E>"},
            /* Content-Disposition without parameters; empty Content-Type */
            {"--b\r\nContent-Disposition: form-data\r\nContent-Type:\r\n\r\n\r\n--b--",
             "<B ~|~|><E>"},
            /* UTF-8 in a filename, escapes only as WHATWG defines them */
            {"--b\r\nContent-Disposition: form-data; name=\"n\"; filename=\"\xc3\xa9%2%22%0A%0g%\"\r\n"
             "\r\n\r\n--b--",
             "<B n|\xc3\xa9%2\"\n%0g%|~><E>"},
            /* a preamble of CRLFs and dashes */
            {"\r\n\r\n----\r\n-\r\n--b\r\n\r\n\r\n\r\n--b--\r\n", "<B ~|~|~>\r\n<E>"},
            /* the epilogue may hold anything */
            {"--b\r\n\r\n\r\n--b--\r\n--b\r\nbroken\n", "<B ~|~|~><E>"},
    };
    (void)state;
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct rec rec;
        struct err err = {0};
        rec_init(&rec);
        int r = parse("b", cases[i][0], &rec, &err);
        if (r != 0)
            fail_msg("case %zu: %d (%s)", i, r, err.msg);
        assert_string_equal(rec.log.data, cases[i][1]);
        buf_done(&rec.log);
    }
}

static void
make_parts(struct buf *b, unsigned n)
{
    buf_init(b, BUF_UNLIMITED);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(buf_printf(b,
                                    "--b\r\nContent-Disposition: form-data; name=p%u\r\n\r\n"
                                    "%u\r\n",
                                    i, i),
                         0);
    assert_int_equal(buf_puts(b, "--b--"), 0);
}

static void
test_limits(void **state)
{
    struct buf body;
    struct rec rec;
    struct err err = {0};
    (void)state;

    make_parts(&body, MULTIPART_PARTS_MAX);
    rec_init(&rec);
    assert_int_equal(parse("b", body.data, &rec, NULL), 0);
    assert_int_equal(rec.ends, MULTIPART_PARTS_MAX);
    buf_done(&rec.log);
    buf_done(&body);

    make_parts(&body, MULTIPART_PARTS_MAX + 1);
    rec_init(&rec);
    assert_int_equal(parse("b", body.data, &rec, &err), -EMSGSIZE);
    assert_non_null(strstr(err.msg, "more than 64 parts"));
    assert_int_equal(rec.ends, MULTIPART_PARTS_MAX);
    buf_done(&rec.log);
    buf_done(&body);

    /* headers: exactly the limit (CRLFs counted), then one byte more */
    for (size_t extra = 0; extra < 2; extra++) {
        buf_init(&body, BUF_UNLIMITED);
        assert_int_equal(buf_puts(&body, "--b\r\nX-Pad: "), 0);
        size_t pad = MULTIPART_HEADERS_MAX - strlen("X-Pad: \r\n\r\n") + extra;
        for (size_t i = 0; i < pad; i++)
            assert_int_equal(buf_putc(&body, 'p'), 0);
        assert_int_equal(buf_puts(&body, "\r\n\r\nx\r\n--b--"), 0);
        rec_init(&rec);
        err_clear(&err);
        assert_int_equal(parse("b", body.data, &rec, &err), extra ? -EMSGSIZE : 0);
        if (extra)
            assert_non_null(strstr(err.msg, "16384 bytes"));
        buf_done(&rec.log);
        buf_done(&body);
    }

    /* one endless header line is refused without buffering it all */
    {
        _cleanup_(multipart_freep) struct multipart *mp = NULL;
        char chunk[4096];
        int r = 0;
        memset(chunk, 'h', sizeof(chunk));
        rec_init(&rec);
        assert_int_equal(multipart_new("b", &cbs, &rec, &mp), 0);
        multipart_set_limits(mp, 1000, 2);
        assert_int_equal(multipart_feed(mp, "--b\r\n", 5, NULL), 0);
        for (int i = 0; i < 100 && r == 0; i++)
            r = multipart_feed(mp, chunk, sizeof(chunk), NULL);
        assert_int_equal(r, -EMSGSIZE);
        buf_done(&rec.log);
    }

    /* smaller limits */
    {
        _cleanup_(multipart_freep) struct multipart *mp = NULL;
        make_parts(&body, 3);
        rec_init(&rec);
        assert_int_equal(multipart_new("b", &cbs, &rec, &mp), 0);
        multipart_set_limits(mp, 1000, 2);
        assert_int_equal(multipart_feed(mp, body.data, body.len, NULL), -EMSGSIZE);
        assert_int_equal(rec.ends, 2);
        buf_done(&rec.log);
        buf_done(&body);
    }
}

static void
test_callback_stops(void **state)
{
    _cleanup_(multipart_freep) struct multipart *mp = NULL;
    struct rec rec;
    (void)state;
    rec_init(&rec);
    rec.fail_data = -EFBIG;
    assert_int_equal(multipart_new("b", &cbs, &rec, &mp), 0);
    assert_int_equal(multipart_feed(mp, "--b\r\n\r\ndata\r\n--b--", 18, NULL), -EFBIG);
    assert_int_equal(rec.ends, 0);
    /* spent */
    assert_int_equal(multipart_feed(mp, "x", 1, NULL), -EFBIG);
    assert_int_equal(multipart_finish(mp, NULL), -EFBIG);
    assert_int_equal(rec.begins, 1);
    buf_done(&rec.log);
}

static void
test_no_callbacks(void **state)
{
    _cleanup_(multipart_freep) struct multipart *mp = NULL;
    (void)state;
    assert_int_equal(multipart_new(B, NULL, NULL, &mp), 0);
    assert_int_equal(multipart_feed(mp, sample, sizeof(sample) - 1, NULL), 0);
    assert_int_equal(multipart_feed(mp, "", 0, NULL), 0);
    assert_int_equal(multipart_finish(mp, NULL), 0);
}

static void
test_new(void **state)
{
    _cleanup_(multipart_freep) struct multipart *mp = NULL;
    char b71[72];
    (void)state;
    memset(b71, 'a', 71);
    b71[71] = '\0';
    assert_int_equal(multipart_new("", &cbs, NULL, &mp), -EINVAL);
    assert_int_equal(multipart_new(b71, &cbs, NULL, &mp), -EINVAL);
    assert_int_equal(multipart_new("a\rb", &cbs, NULL, &mp), -EINVAL);
    assert_int_equal(multipart_new("ab ", &cbs, NULL, &mp), -EINVAL);
    assert_null(mp);
    assert_int_equal(multipart_new(b71 + 1, &cbs, NULL, &mp), 0);
    assert_non_null(mp);
    assert_null(multipart_free(NULL));
}

static void
test_boundary(void **state)
{
    static const char *const good[][2] = {
            {"multipart/form-data; boundary=----formdata-undici-012", "----formdata-undici-012"},
            {"Multipart/Form-Data;BOUNDARY=\"a b:c\"", "a b:c"},
            {"multipart/form-data; charset=utf-8; boundary=\"q\\\"\"", NULL},
            {"multipart/form-data; x=\";boundary=no\"; boundary=yes ; y=z", "yes"},
            {"  multipart/form-data ; boundary = x ;", "x"},
            {"multipart/form-data; boundary=\"\\a\\b\"", "ab"},
    };
    static const char *const bad[] = {
            "multipart/form-data",
            "multipart/form-data; boundary=",
            "multipart/form-data; boundary=\"\"",
            "multipart/form-data; boundary=\"unterminated",
            "multipart/form-data; boundary=a; boundary=a",
            "multipart/form-data; boundary=\"trailing \"",
            "multipart/form-data; boundary=semi\"colon",
            "multipart/form-data; boundary=\"a\rb\"",
            "multipart/form-data; boundary=a\xc3\xa9",
            "multipart/mixed; boundary=a",
            "multipart/form-datax; boundary=a",
            "text/plain",
            "multipart/form-data boundary=a",
            "multipart/form-data; =a",
            "",
    };
    char out[MULTIPART_BOUNDARY_MAX + 1], in[128];
    (void)state;

    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        int r = multipart_boundary(good[i][0], out, sizeof(out), NULL);
        if (!good[i][1]) {
            assert_int_equal(r, -EINVAL); /* a quote is not a bchar */
            continue;
        }
        if (r != 0)
            fail_msg("'%s': %d", good[i][0], r);
        assert_string_equal(out, good[i][1]);
    }
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct err err = {0};
        memcpy(out, "untouched", sizeof("untouched"));
        if (multipart_boundary(bad[i], out, sizeof(out), &err) != -EINVAL)
            fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(err.errnum, EINVAL);
        assert_string_equal(out, "untouched");
    }

    /* 70 characters fit, 71 do not, quoted or not */
    for (int quoted = 0; quoted < 2; quoted++)
        for (int n = 70; n <= 71; n++) {
            const char *q = quoted ? "\"" : "";
            int len = snprintf(in, sizeof(in), "multipart/form-data; boundary=%s", q);
            memset(in + len, 'k', (size_t)n);
            snprintf(in + len + n, sizeof(in) - (size_t)(len + n), "%s", q);
            assert_int_equal(multipart_boundary(in, out, sizeof(out), NULL), n == 70 ? 0 : -EINVAL);
            if (n == 70)
                assert_int_equal(strlen(out), 70);
        }
    /* out too small */
    assert_int_equal(multipart_boundary("multipart/form-data; boundary=abc", out, 3, NULL),
                     -ENOBUFS);
    assert_int_equal(multipart_boundary("multipart/form-data; boundary=abc", out, 4, NULL), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_split),    cmocka_unit_test(test_byte_at_a_time),
            cmocka_unit_test(test_binary_content), cmocka_unit_test(test_long_runs),
            cmocka_unit_test(test_malformed),      cmocka_unit_test(test_accepted_forms),
            cmocka_unit_test(test_limits),         cmocka_unit_test(test_callback_stops),
            cmocka_unit_test(test_no_callbacks),   cmocka_unit_test(test_new),
            cmocka_unit_test(test_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
