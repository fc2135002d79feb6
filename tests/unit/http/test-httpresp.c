/*
 * test-httpresp.c - the upstream response parser: the same head and body
 * however the bytes are split (one at a time, at every offset); each body
 * framing (Content-Length, chunked with extensions and trailer, until
 * close, none for HEAD/204/304); interim 1xx skipped, 101 stopping at the
 * head; every refusal (status line, control characters, bare CR, obs-fold,
 * field names, conflicting lengths, transfer codings, chunk sizes, sizes
 * past the limits, truncation); output never larger than its input.
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

#include "http/httpresp.h"
#include "util/buf.h"

struct out {
    struct buf body;
    size_t fed; /* bytes of the current feed: no piece may be larger */
};

static int
on_body(void *ud, const void *data, size_t n)
{
    struct out *o = ud;
    assert_true(n > 0 && n <= o->fed);
    assert_int_equal(buf_put(&o->body, data, n), 0);
    return 0;
}

struct result {
    int r; /* the last feed's result, or finish's */
    unsigned status;
    size_t nhdr;
    enum httpresp_body kind;
    size_t rest; /* bytes after the message when it was done */
    char body[8192];
    size_t body_len;
};

/* Feeds s in pieces of step bytes (0 = whole), then finishes when closed. */
static void
run(const char *s, size_t len, bool head_req, size_t step, bool closed, struct result *res)
{
    struct httpresp *p = NULL;
    struct out o;
    struct err err = {0};
    size_t at = 0;
    int r = HTTPRESP_MORE;

    memset(res, 0, sizeof(*res));
    buf_init(&o.body, BUF_UNLIMITED);
    assert_int_equal(httpresp_new(head_req, &p), 0);
    while (at < len) {
        size_t n = step ? MIN(step, len - at) : len - at;
        size_t used = 0;
        o.fed = n;
        r = httpresp_feed(p, s + at, n, on_body, &o, &used, &err);
        if (r < 0)
            break;
        assert_true(used <= n);
        at += used;
        if (r == HTTPRESP_HEAD) {
            res->status = httpresp_status(p);
            res->nhdr = httpresp_header_count(p);
            res->kind = httpresp_body_kind(p);
            continue;
        }
        if (r == HTTPRESP_DONE) {
            res->rest = len - at;
            break;
        }
        assert_int_equal(used, n);
    }
    if (r == HTTPRESP_HEAD) {
        /* The input ended with the head: ask once more (a bodiless message is done). */
        size_t used = 0;
        o.fed = 0;
        r = httpresp_feed(p, "", 0, on_body, &o, &used, &err);
    }
    if (r >= 0 && r != HTTPRESP_DONE && closed)
        r = httpresp_finish(p, &err);
    if (r < 0)
        assert_true(err.msg[0] != '\0');
    res->r = r;
    assert_true(o.body.len < sizeof(res->body));
    memcpy(res->body, o.body.data, o.body.len);
    res->body_len = o.body.len;
    buf_done(&o.body);
    httpresp_free(p);
}

/* The same result for every split: whole, bytewise, and in two at each offset. */
static void
run_all(const char *s, bool head_req, bool closed, struct result *res)
{
    size_t len = strlen(s);
    struct result a, b;

    run(s, len, head_req, 0, closed, res);
    run(s, len, head_req, 1, closed, &a);
    assert_int_equal(a.r, res->r);
    assert_int_equal(a.body_len, res->body_len);
    assert_memory_equal(a.body, res->body, res->body_len);
    for (size_t cut = 1; cut < len; cut++) {
        run(s, len, head_req, cut, closed, &b);
        assert_int_equal(b.r, res->r);
        assert_int_equal(b.status, res->status);
        assert_int_equal(b.body_len, res->body_len);
        assert_memory_equal(b.body, res->body, res->body_len);
    }
}

static void
test_content_length(void **state)
{
    struct result r;
    (void)state;
    run_all("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhelloEXTRA",
            false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.nhdr, 2);
    assert_int_equal(r.kind, HTTPRESP_BODY_LENGTH);
    assert_int_equal(r.body_len, 5);
    assert_memory_equal(r.body, "hello", 5);
    assert_int_equal(r.rest, 5);

    /* A list of equal values is one length; zero is done at once. */
    run_all("HTTP/1.0 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc", false, false,
            &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.body_len, 3);
    run_all("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.body_len, 0);
}

static void
test_head_fields(void **state)
{
    struct httpresp *p = NULL;
    size_t used;
    const char *s = "HTTP/1.1 404 Not  Found \r\nX-A:  spaced value \t\r\nset-cookie: a=1\r\n"
                    "Set-Cookie: b=2\r\nEmpty:\r\n\r\n";
    (void)state;

    assert_int_equal(httpresp_new(false, &p), 0);
    assert_int_equal(httpresp_feed(p, s, strlen(s), NULL, NULL, &used, NULL), HTTPRESP_HEAD);
    assert_int_equal(used, strlen(s));
    assert_int_equal(httpresp_status(p), 404);
    assert_int_equal(httpresp_minor(p), 1);
    assert_string_equal(httpresp_reason(p), "Not  Found");
    assert_int_equal(httpresp_header_count(p), 4);
    assert_string_equal(httpresp_get(p, "x-a"), "spaced value");
    assert_string_equal(httpresp_get(p, "SET-COOKIE"), "a=1");
    assert_string_equal(httpresp_header(p, 2)->value, "b=2");
    assert_string_equal(httpresp_get(p, "Empty"), "");
    assert_null(httpresp_get(p, "nope"));
    assert_null(httpresp_header(p, 4));
    assert_int_equal(httpresp_body_kind(p), HTTPRESP_BODY_CLOSE);
    p = httpresp_free(p);

    /* No reason phrase, bare LF line ends. */
    s = "HTTP/1.1 204\nA: b\n\n";
    assert_int_equal(httpresp_new(false, &p), 0);
    assert_int_equal(httpresp_feed(p, s, strlen(s), NULL, NULL, &used, NULL), HTTPRESP_HEAD);
    assert_int_equal(httpresp_status(p), 204);
    assert_string_equal(httpresp_reason(p), "");
    assert_int_equal(httpresp_body_kind(p), HTTPRESP_BODY_NONE);
    assert_int_equal(httpresp_feed(p, "x", 1, NULL, NULL, &used, NULL), HTTPRESP_DONE);
    assert_int_equal(used, 0);
    httpresp_free(p);
}

static void
test_chunked(void **state)
{
    struct result r;
    (void)state;
    run_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 99\r\n\r\n"
            "5;name=value;x=\"q\"\r\nhello\r\n1 \r\n,\r\n00000000000000000000006\n world\n"
            "0\r\nX-Trailer: yes\r\nOther: t\r\n\r\nnext",
            false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.kind, HTTPRESP_BODY_CHUNKED);
    assert_int_equal(r.body_len, 12);
    assert_memory_equal(r.body, "hello, world", 12);
    assert_int_equal(r.rest, 4);

    /* Upper-case hex, no trailer. */
    run_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
            false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.body_len, 10);
}

static void
test_close_delimited(void **state)
{
    struct result r;
    (void)state;
    run_all("HTTP/1.1 200 OK\r\n\r\nall of this", false, true, &r);
    assert_int_equal(r.r, 0);
    assert_int_equal(r.kind, HTTPRESP_BODY_CLOSE);
    assert_int_equal(r.body_len, 11);
    assert_memory_equal(r.body, "all of this", 11);
}

static void
test_no_body(void **state)
{
    struct result r;
    (void)state;
    /* HEAD: the Content-Length describes a body that is not there. */
    run_all("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", true, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.kind, HTTPRESP_BODY_NONE);
    run_all("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.body_len, 0);
}

static void
test_interim_and_upgrade(void **state)
{
    struct result r;
    (void)state;
    run_all("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.nhdr, 1);
    assert_memory_equal(r.body, "ok", 2);

    /* 101: the head is all; what follows is the new protocol's. */
    run_all("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
            "\x81\x02hi",
            false, false, &r);
    assert_int_equal(r.r, HTTPRESP_DONE);
    assert_int_equal(r.status, 101);
    assert_int_equal(r.kind, HTTPRESP_BODY_NONE);
    assert_int_equal(r.body_len, 0);
    assert_int_equal(r.rest, 4);
}

static void
expect_error(const char *s, size_t len, int want, bool closed)
{
    struct result r;
    run(s, len, false, 0, closed, &r);
    assert_int_equal(r.r, want);
    run(s, len, false, 1, closed, &r);
    assert_int_equal(r.r, want);
}

#define EXPECT_EPROTO(lit)      expect_error(lit, sizeof(lit) - 1, -EPROTO, true)
#define EXPECT_EPROTO_OPEN(lit) expect_error(lit, sizeof(lit) - 1, -EPROTO, false)

static void
test_refused(void **state)
{
    (void)state;
    EXPECT_EPROTO_OPEN("HELLO WORLD\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/2 200 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 20 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 2000 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 099 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 2x0 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 O\x01K\r\n\r\n");
    EXPECT_EPROTO_OPEN("\r\nHTTP/1.1 200 OK\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nA: b\r\n continued\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nBad Name: b\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\n: b\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nA: \x7f\r\n\r\n");
    expect_error("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", 27, -EPROTO, false);
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nContent-Length: ,\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\rx");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;\x01\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "10000000000000000\r\n");
    EXPECT_EPROTO_OPEN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA\rB\r\n\r\n");

    /* Cut short, noticed at the close. */
    EXPECT_EPROTO("");
    EXPECT_EPROTO("HTTP/1.1 200 OK\r\nContent-Le");
    EXPECT_EPROTO("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort");
    EXPECT_EPROTO("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n100\r\nabc");
    EXPECT_EPROTO("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n");
}

static void
test_limits(void **state)
{
    struct buf b;
    struct result r;
    (void)state;

    /* A head one byte over the limit, and one just under it. */
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "HTTP/1.1 200 OK\r\nX-Big: "), 0);
    while (b.len < HTTPRESP_HEAD_MAX - 4)
        assert_int_equal(buf_putc(&b, 'a'), 0);
    assert_int_equal(buf_puts(&b, "\r\n\r\n"), 0);
    assert_int_equal(b.len, HTTPRESP_HEAD_MAX);
    run(b.data, b.len, false, 0, false, &r);
    assert_int_equal(r.r, HTTPRESP_MORE); /* the body runs until close */
    assert_int_equal(r.status, 200);
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "HTTP/1.1 200 OK\r\nX-Big: "), 0);
    while (b.len < HTTPRESP_HEAD_MAX - 3)
        assert_int_equal(buf_putc(&b, 'a'), 0);
    assert_int_equal(buf_puts(&b, "\r\n\r\n"), 0);
    run(b.data, b.len, false, 0, false, &r);
    assert_int_equal(r.r, -EMSGSIZE);
    run(b.data, b.len, false, 1000, false, &r);
    assert_int_equal(r.r, -EMSGSIZE);

    /* Too many fields. */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "HTTP/1.1 200 OK\r\n"), 0);
    for (int i = 0; i <= HTTPRESP_HEADERS_MAX; i++)
        assert_int_equal(buf_printf(&b, "H%d: v\r\n", i), 0);
    assert_int_equal(buf_puts(&b, "\r\n"), 0);
    run(b.data, b.len, false, 0, false, &r);
    assert_int_equal(r.r, -EMSGSIZE);

    /* An endless chunk extension, an endless trailer. */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;"), 0);
    for (int i = 0; i < HTTPRESP_LINE_MAX; i++)
        assert_int_equal(buf_putc(&b, 'e'), 0);
    run(b.data, b.len, false, 0, false, &r);
    assert_int_equal(r.r, -EMSGSIZE);
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"), 0);
    for (int i = 0; i <= HTTPRESP_HEAD_MAX / 8; i++)
        assert_int_equal(buf_puts(&b, "T: abc\r\n"), 0);
    run(b.data, b.len, false, 0, false, &r);
    assert_int_equal(r.r, -EMSGSIZE);
    buf_done(&b);
}

static int
stop_body(void *ud, const void *data, size_t n)
{
    (void)ud;
    (void)data;
    (void)n;
    return -ENOSPC;
}

static void
test_sticky(void **state)
{
    struct httpresp *p = NULL;
    size_t used;
    const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
    const char *head_end = strstr(s, "\r\n\r\n") + 4;
    (void)state;

    /* The callback's error stops it, and stays. */
    assert_int_equal(httpresp_new(false, &p), 0);
    assert_int_equal(httpresp_feed(p, s, strlen(s), stop_body, NULL, &used, NULL), HTTPRESP_HEAD);
    assert_int_equal(used, (size_t)(head_end - s));
    assert_int_equal(httpresp_feed(p, head_end, 4, stop_body, NULL, &used, NULL), -ENOSPC);
    assert_int_equal(httpresp_feed(p, head_end, 4, NULL, NULL, &used, NULL), -ENOSPC);
    assert_int_equal(httpresp_finish(p, NULL), -ENOSPC);
    p = httpresp_free(p);

    /* Done stays done; finish then agrees. */
    assert_int_equal(httpresp_new(false, &p), 0);
    assert_int_equal(httpresp_feed(p, s, strlen(s), NULL, NULL, &used, NULL), HTTPRESP_HEAD);
    assert_int_equal(httpresp_feed(p, head_end, 4, NULL, NULL, &used, NULL), HTTPRESP_DONE);
    assert_int_equal(httpresp_feed(p, "more", 4, NULL, NULL, &used, NULL), HTTPRESP_DONE);
    assert_int_equal(used, 0);
    assert_int_equal(httpresp_finish(p, NULL), 0);
    httpresp_free(p);
    assert_null(httpresp_free(NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_content_length), cmocka_unit_test(test_head_fields),
            cmocka_unit_test(test_chunked),        cmocka_unit_test(test_close_delimited),
            cmocka_unit_test(test_no_body),        cmocka_unit_test(test_interim_and_upgrade),
            cmocka_unit_test(test_refused),        cmocka_unit_test(test_limits),
            cmocka_unit_test(test_sticky),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
