/*
 * test-connect.c - Connect envelopes: the decoder gives the same messages
 * for every way of splitting a sample stream (two and three pieces, one
 * byte at a time), refuses truncated envelopes, lengths past its limit,
 * the compressed flag and unknown flags, stops when the callback says so
 * and stays stopped, and knows when it sits between envelopes; the end-stream encoder writes exact
 * bytes, escapes strings into valid JSON (checked with jansson) and leaves the buffer as it was
 * when it does not fit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "http/connect.h"

/* Every envelope seen, as "<flags>:<len>:<payload>|". */
struct rec {
    struct buf log;
    unsigned calls;
    unsigned stop_at; /* the callback fails on this call (1-based), 0 = never */
};

static int
on_msg(void *ud, uint8_t flags, const uint8_t *payload, size_t len)
{
    struct rec *rec = ud;
    assert_non_null(payload);
    if (++rec->calls == rec->stop_at)
        return -ECANCELED;
    assert_int_equal(buf_printf(&rec->log, "%u:%zu:", flags, len), 0);
    assert_int_equal(buf_put(&rec->log, payload, len), 0);
    assert_int_equal(buf_putc(&rec->log, '|'), 0);
    return 0;
}

static void
add_env(struct buf *b, uint8_t flags, const void *payload, size_t len)
{
    uint8_t h[CONNECT_ENV_HEADER];
    connect_env_header(h, flags, (uint32_t)len);
    assert_int_equal(buf_put(b, h, sizeof(h)), 0);
    assert_int_equal(buf_put(b, payload, len), 0);
}

static const char binary[] = "\0\xff\r\n\x02\x00\x00\x00\x05";

static void
sample(struct buf *in)
{
    buf_init(in, BUF_UNLIMITED);
    add_env(in, 0, "{\"pid\":1}", 9);
    add_env(in, 0, "", 0);
    add_env(in, 0, binary, sizeof(binary) - 1);
    add_env(in, CONNECT_FLAG_END_STREAM, "{}", 2);
}

static const char sample_log[] = "0:9:{\"pid\":1}|0:0:|0:9:\0\xff\r\n\x02\x00\x00\x00\x05|2:2:{}|";

/* Decodes in as the given pieces (cuts ascending); returns the first error. */
static int
decode(const struct buf *in, const size_t *cuts, size_t ncuts, struct rec *rec, struct err *err)
{
    struct connect_dec dec;
    size_t at = 0;
    int r = 0;

    connect_dec_init(&dec, 64);
    for (size_t i = 0; i <= ncuts && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : in->len;
        r = connect_dec_feed(&dec, in->data + at, to - at, on_msg, rec, err);
        at = to;
    }
    if (r >= 0)
        r = connect_dec_finish(&dec, err);
    connect_dec_done(&dec);
    return r;
}

static void
assert_log(const struct rec *rec)
{
    assert_int_equal(rec->log.len, sizeof(sample_log) - 1);
    assert_memory_equal(rec->log.data, sample_log, sizeof(sample_log) - 1);
}

static void
test_every_split(void **state)
{
    struct buf in;
    (void)state;
    sample(&in);
    for (size_t i = 0; i <= in.len; i++)
        for (size_t j = i; j <= in.len; j++) {
            struct rec rec = {0};
            size_t cuts[2] = {i, j};
            buf_init(&rec.log, BUF_UNLIMITED);
            assert_int_equal(decode(&in, cuts, 2, &rec, NULL), 0);
            assert_log(&rec);
            buf_done(&rec.log);
        }
    buf_done(&in);
}

static void
test_byte_at_a_time(void **state)
{
    struct buf in;
    struct rec rec = {0};
    size_t cuts[64];
    (void)state;
    sample(&in);
    assert_true(in.len <= ELEMENTSOF(cuts));
    for (size_t i = 0; i < in.len; i++)
        cuts[i] = i;
    buf_init(&rec.log, BUF_UNLIMITED);
    assert_int_equal(decode(&in, cuts, in.len, &rec, NULL), 0);
    assert_log(&rec);
    buf_done(&rec.log);
    buf_done(&in);
}

static int
feed_all(size_t max, const void *data, size_t len, struct rec *rec, struct err *err)
{
    struct connect_dec dec;
    connect_dec_init(&dec, max);
    int r = connect_dec_feed(&dec, data, len, on_msg, rec, err);
    if (r >= 0)
        r = connect_dec_finish(&dec, err);
    connect_dec_done(&dec);
    return r;
}

static void
test_truncated(void **state)
{
    struct rec rec = {0};
    struct err err = {0};
    (void)state;
    buf_init(&rec.log, BUF_UNLIMITED);
    /* inside the header */
    assert_int_equal(feed_all(64, "\0\0\0", 3, &rec, &err), -EPROTO);
    assert_int_equal(err.errnum, EPROTO);
    assert_non_null(strstr(err.msg, "3 of 5 bytes"));
    /* inside the payload */
    err_clear(&err);
    assert_int_equal(feed_all(64, "\0\0\0\0\x04{}", 7, &rec, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "7 of 9 bytes"));
    /* an empty body is no envelope at all, which is fine */
    assert_int_equal(feed_all(64, "", 0, &rec, NULL), 0);
    assert_int_equal(rec.calls, 0);
    buf_done(&rec.log);
}

/* At a boundary exactly where a whole number of envelopes went in: the
 * body timeout spares a client stream that waits there. */
static void
test_at_boundary(void **state)
{
    struct buf in;
    struct rec rec = {0};
    struct connect_dec dec;
    size_t ends[8], n = 0, pos = 0;
    (void)state;
    sample(&in);
    while (pos < in.len) {
        uint32_t len = (uint32_t)(uint8_t)in.data[pos + 1] << 24 |
                       (uint32_t)(uint8_t)in.data[pos + 2] << 16 |
                       (uint32_t)(uint8_t)in.data[pos + 3] << 8 | (uint8_t)in.data[pos + 4];
        pos += CONNECT_ENV_HEADER + len;
        ends[n++] = pos;
    }
    buf_init(&rec.log, BUF_UNLIMITED);
    connect_dec_init(&dec, 64);
    assert_true(connect_dec_at_boundary(&dec));
    for (size_t i = 0, e = 0; i < in.len; i++) {
        assert_int_equal(connect_dec_feed(&dec, in.data + i, 1, on_msg, &rec, NULL), 0);
        bool at_end = e < n && i + 1 == ends[e];
        if (at_end)
            e++;
        assert_int_equal(connect_dec_at_boundary(&dec), at_end);
    }
    connect_dec_done(&dec);
    buf_done(&rec.log);
    buf_done(&in);
}

static void
test_lengths(void **state)
{
    struct rec rec = {0};
    struct err err = {0};
    struct buf in;
    char payload[17];
    (void)state;
    memset(payload, 'x', sizeof(payload));
    buf_init(&rec.log, BUF_UNLIMITED);
    /* 4 GiB - 1 announced: refused from the header alone */
    assert_int_equal(feed_all(CONNECT_MSG_MAX, "\0\xff\xff\xff\xff", 5, &rec, &err), -EMSGSIZE);
    assert_int_equal(err.errnum, EMSGSIZE);
    assert_non_null(strstr(err.msg, "4294967295"));
    /* exactly the limit, and one byte more */
    buf_init(&in, BUF_UNLIMITED);
    add_env(&in, 0, payload, 16);
    assert_int_equal(feed_all(16, in.data, in.len, &rec, NULL), 0);
    assert_int_equal(rec.calls, 1);
    buf_reset(&in);
    add_env(&in, 0, payload, 17);
    assert_int_equal(feed_all(16, in.data, in.len, &rec, NULL), -EMSGSIZE);
    assert_int_equal(rec.calls, 1);
    buf_done(&in);
    buf_done(&rec.log);
}

static void
test_flags(void **state)
{
    static const uint8_t bad[] = {0x01, 0x03, 0x04, 0x80, 0xff};
    struct rec rec = {0};
    (void)state;
    buf_init(&rec.log, BUF_UNLIMITED);
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct err err = {0};
        uint8_t env[7] = {bad[i], 0, 0, 0, 2, '{', '}'};
        assert_int_equal(feed_all(64, env, sizeof(env), &rec, &err), -EPROTO);
        assert_int_equal(err.errnum, EPROTO);
        if (bad[i] & CONNECT_FLAG_COMPRESSED)
            assert_non_null(strstr(err.msg, "compressed"));
    }
    assert_int_equal(rec.calls, 0);
    buf_done(&rec.log);
}

static void
test_callback_stops(void **state)
{
    struct rec rec = {.stop_at = 2};
    struct connect_dec dec;
    struct buf in;
    (void)state;
    sample(&in);
    buf_init(&rec.log, BUF_UNLIMITED);
    connect_dec_init(&dec, 64);
    assert_int_equal(connect_dec_feed(&dec, in.data, in.len, on_msg, &rec, NULL), -ECANCELED);
    assert_int_equal(rec.calls, 2);
    /* spent: no more callbacks, the same error */
    assert_int_equal(connect_dec_feed(&dec, in.data, in.len, on_msg, &rec, NULL), -ECANCELED);
    assert_int_equal(connect_dec_finish(&dec, NULL), -ECANCELED);
    assert_int_equal(rec.calls, 2);
    connect_dec_done(&dec);
    buf_done(&rec.log);
    buf_done(&in);
}

static void
test_big_message(void **state)
{
    struct rec rec = {0};
    struct connect_dec dec;
    struct buf in;
    size_t n = 1024 * 1024;
    char *payload = malloc(n);
    (void)state;
    assert_non_null(payload);
    for (size_t i = 0; i < n; i++)
        payload[i] = (char)(i * 7);
    buf_init(&in, BUF_UNLIMITED);
    add_env(&in, 0, payload, n);
    add_env(&in, 0, "ab", 2);
    buf_init(&rec.log, BUF_UNLIMITED);
    connect_dec_init(&dec, CONNECT_MSG_MAX);
    for (size_t at = 0; at < in.len; at += 4093)
        assert_int_equal(
                connect_dec_feed(&dec, in.data + at, MIN(4093, in.len - at), on_msg, &rec, NULL),
                0);
    assert_int_equal(connect_dec_finish(&dec, NULL), 0);
    assert_int_equal(rec.calls, 2);
    assert_int_equal(rec.log.len, strlen("0:1048576:") + n + strlen("|0:2:ab|"));
    assert_memory_equal(rec.log.data + strlen("0:1048576:"), payload, n);
    /* the big buffer was not kept for the next message */
    assert_true(dec.msg.cap <= 64 * 1024);
    connect_dec_done(&dec);
    buf_done(&rec.log);
    buf_done(&in);
    free(payload);
}

static void
test_env_header(void **state)
{
    uint8_t h[CONNECT_ENV_HEADER];
    (void)state;
    connect_env_header(h, CONNECT_FLAG_END_STREAM, 0x01020304);
    assert_memory_equal(h, "\x02\x01\x02\x03\x04", 5);
    connect_env_header(h, 0, 0);
    assert_memory_equal(h, "\0\0\0\0\0", 5);
}

static void
test_end_stream_ok(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 64);
    assert_int_equal(buf_puts(&b, "pre"), 0);
    assert_int_equal(connect_end_stream_json(&b, NULL, "ignored"), 0);
    assert_int_equal(b.len, 3 + 7);
    assert_memory_equal(b.data, "pre\x02\0\0\0\x02{}", 10);
    assert_int_equal(b.data[b.len], '\0');
    buf_done(&b);
}

/* The payload of the end-stream envelope at the start of b, parsed. */
static json_t *
end_stream_payload(const struct buf *b)
{
    assert_true(b->len >= CONNECT_ENV_HEADER);
    assert_int_equal((uint8_t)b->data[0], CONNECT_FLAG_END_STREAM);
    size_t len = (size_t)(uint8_t)b->data[1] << 24 | (size_t)(uint8_t)b->data[2] << 16 |
                 (size_t)(uint8_t)b->data[3] << 8 | (uint8_t)b->data[4];
    assert_int_equal(len, b->len - CONNECT_ENV_HEADER);
    json_error_t jerr;
    json_t *j = json_loadb(b->data + CONNECT_ENV_HEADER, len, 0, &jerr);
    if (!j)
        fail_msg("invalid JSON: %s: %s", jerr.text, b->data + CONNECT_ENV_HEADER);
    return j;
}

static void
test_end_stream_error(void **state)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
            {"plain text", "plain text"},
            {"q\"b\\s/", "q\"b\\s/"},
            {"ctl\n\r\t\x01\x1f\x7f", "ctl\n\r\t\x01\x1f\x7f"},
            {"utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
             "utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
            {"bad \xff|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82|\xc3",
             "bad \xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
             "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
             "\xef\xbf\xbd"},
            {"", ""},
    };
    (void)state;
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct buf b;
        buf_init(&b, 4096);
        assert_int_equal(connect_end_stream_json(&b, "not_found", cases[i].in), 0);
        json_t *j = end_stream_payload(&b);
        const char *code = NULL, *msg = NULL;
        assert_int_equal(json_unpack(j, "{s:{s:s,s:s}}", "error", "code", &code, "message", &msg),
                         0);
        assert_string_equal(code, "not_found");
        assert_string_equal(msg, cases[i].want);
        json_decref(j);
        buf_done(&b);
    }
}

static void
test_end_stream_exact(void **state)
{
    static const char want[] =
            "{\"error\":{\"code\":\"c\\\"\",\"message\":\"a\\\\\\u000a\\u0001\"}}";
    struct buf b;
    (void)state;
    buf_init(&b, 4096);
    assert_int_equal(connect_end_stream_json(&b, "c\"", "a\\\n\x01"), 0);
    assert_int_equal(b.len, CONNECT_ENV_HEADER + sizeof(want) - 1);
    assert_string_equal(b.data + CONNECT_ENV_HEADER, want);
    buf_reset(&b);
    /* a NULL message is an empty one */
    assert_int_equal(connect_end_stream_json(&b, "internal", NULL), 0);
    assert_string_equal(b.data + CONNECT_ENV_HEADER,
                        "{\"error\":{\"code\":\"internal\",\"message\":\"\"}}");
    buf_done(&b);
}

static void
test_end_stream_limit(void **state)
{
    struct buf b;
    (void)state;
    /* fails at every limit short of the full size, leaving b as it was */
    for (size_t max = 3; max < 3 + CONNECT_ENV_HEADER + 48; max++) {
        buf_init(&b, max);
        assert_int_equal(buf_puts(&b, "pre"), 0);
        assert_int_equal(connect_end_stream_json(&b, "unknown", "message"), -EFBIG);
        assert_int_equal(b.len, 3);
        assert_string_equal(b.data, "pre");
        buf_done(&b);
    }
    buf_init(&b, 3 + CONNECT_ENV_HEADER + 48);
    assert_int_equal(buf_puts(&b, "pre"), 0);
    assert_int_equal(connect_end_stream_json(&b, "unknown", "message"), 0);
    buf_done(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_split),      cmocka_unit_test(test_byte_at_a_time),
            cmocka_unit_test(test_truncated),        cmocka_unit_test(test_at_boundary),
            cmocka_unit_test(test_lengths),          cmocka_unit_test(test_flags),
            cmocka_unit_test(test_callback_stops),   cmocka_unit_test(test_big_message),
            cmocka_unit_test(test_env_header),       cmocka_unit_test(test_end_stream_ok),
            cmocka_unit_test(test_end_stream_error), cmocka_unit_test(test_end_stream_exact),
            cmocka_unit_test(test_end_stream_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
