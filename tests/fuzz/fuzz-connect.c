/*
 * fuzz-connect.c - the Connect envelope decoder on arbitrary bodies, and
 * the end-stream encoder on arbitrary strings. The first input byte picks
 * where the rest is cut into three pieces; fed in pieces or all at once the
 * decoder gives the same envelopes and the same result. Every envelope has
 * a known flag and a payload within the limit, and when the body is
 * accepted the envelopes, encoded again, are exactly the input. The
 * end-stream envelope of any code and message is valid JSON with the
 * length its header says.
 */
#include <errno.h>

#include <jansson.h>

#include "fuzz-common.h"
#include "http/connect.h"
#include "util/cleanup.h"

#define MSG_MAX 256 /* small, so that the limit is reached */

static int
on_msg(void *ud, uint8_t flags, const uint8_t *payload, size_t len)
{
    struct buf *log = ud;
    uint8_t h[CONNECT_ENV_HEADER];
    CHECK(flags == CONNECT_FLAG_DATA || flags == CONNECT_FLAG_END_STREAM);
    CHECK(len <= MSG_MAX);
    CHECK(payload != NULL);
    connect_env_header(h, flags, (uint32_t)len);
    CHECK(buf_put(log, h, sizeof(h)) == 0);
    CHECK(buf_put(log, payload, len) == 0);
    return 0;
}

static int
decode(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, struct buf *log)
{
    struct connect_dec dec;
    struct err err = {0};
    size_t at = 0;
    int r = 0;

    connect_dec_init(&dec, MSG_MAX);
    for (size_t i = 0; i <= ncuts && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : size;
        r = connect_dec_feed(&dec, data + at, to - at, on_msg, log, &err);
        at = to;
    }
    if (r >= 0)
        r = connect_dec_finish(&dec, &err);
    connect_dec_done(&dec);
    CHECK(r == 0 || r == -EPROTO || r == -EMSGSIZE);
    CHECK(r == 0 || (err.errnum == -r && err.msg[0]));
    return r;
}

/* The input up to its first NUL is the code, what follows the message;
 * odd sizes leave the code out. */
static void
check_end_stream(const uint8_t *data, size_t size)
{
    size_t clen = strnlen((const char *)data, size);
    char *code = fuzz_string(data, clen);
    char *msg = fuzz_string(data + MIN(clen + 1, size), size - MIN(clen + 1, size));
    bool with_code = size % 2 == 0;
    struct buf b;
    json_error_t jerr;

    buf_init(&b, BUF_UNLIMITED);
    CHECK(connect_end_stream_json(&b, with_code ? code : NULL, msg) == 0);
    CHECK(b.len >= CONNECT_ENV_HEADER && (uint8_t)b.data[0] == CONNECT_FLAG_END_STREAM);
    size_t len = (size_t)(uint8_t)b.data[1] << 24 | (size_t)(uint8_t)b.data[2] << 16 |
                 (size_t)(uint8_t)b.data[3] << 8 | (uint8_t)b.data[4];
    CHECK(len == b.len - CONNECT_ENV_HEADER);
    json_t *j = json_loadb(b.data + CONNECT_ENV_HEADER, len, 0, &jerr);
    CHECK(j != NULL && json_is_object(j));
    if (with_code) {
        const char *c = NULL, *m = NULL;
        CHECK(json_unpack(j, "{s:{s:s,s:s}}", "error", "code", &c, "message", &m) == 0);
        CHECK(json_object_size(j) == 1);
        /* valid UTF-8 (what jansson takes as a string) comes back unchanged */
        json_t *t = json_string(msg);
        if (t)
            CHECK(strcmp(m, msg) == 0);
        json_decref(t);
        t = json_string(code);
        if (t)
            CHECK(strcmp(c, code) == 0);
        json_decref(t);
    } else {
        CHECK(json_object_size(j) == 0);
    }
    json_decref(j);
    buf_done(&b);
    free(msg);
    free(code);
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
    /* what was delivered is a prefix of the input, all of it on success */
    CHECK(whole.len <= size && memcmp(whole.data, data, whole.len) == 0);
    if (r == 0)
        CHECK(whole.len == size);
    buf_done(&whole);
    buf_done(&pieces);

    check_end_stream(data, size);
    return 0;
}
