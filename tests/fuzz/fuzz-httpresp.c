/*
 * fuzz-httpresp.c - the port proxy's parser of upstream responses on
 * arbitrary bytes. The first input byte says whether the request was HEAD
 * and where the rest is cut into three pieces; fed in pieces or all at
 * once the parser gives the same status, body, result and leftover, never
 * hands out a body piece larger than the feed that carried it (nor more
 * body than input), only fails with -EPROTO or -EMSGSIZE (with a message),
 * and every head it accepts is well-formed: a three-digit status, token
 * field names and values without CR, LF or NUL.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "http/httpresp.h"
#include "util/buf.h"

struct sink {
    struct buf body;
    size_t fed;
};

static int
on_body(void *ud, const void *data, size_t n)
{
    struct sink *s = ud;
    CHECK(n > 0 && n <= s->fed);
    CHECK(buf_put(&s->body, data, n) == 0);
    return 0;
}

static void
check_head(const struct httpresp *p)
{
    unsigned st = httpresp_status(p);
    CHECK(st >= 100 && st <= 999 && (st >= 200 || st == 101));
    CHECK(httpresp_minor(p) <= 1);
    CHECK(!strpbrk(httpresp_reason(p), "\r\n"));
    size_t n = httpresp_header_count(p);
    CHECK(n <= HTTPRESP_HEADERS_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct httpresp_header *h = httpresp_header(p, i);
        CHECK(h->name[0] != '\0');
        CHECK(strspn(h->name, "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(h->name));
        CHECK(!strpbrk(h->value, "\r\n"));
        CHECK(h->value[0] != ' ' && h->value[0] != '\t');
    }
    CHECK(httpresp_header(p, n) == NULL);
}

struct outcome {
    int r;
    unsigned status;
    size_t rest;
};

static struct outcome
parse(const uint8_t *data, size_t size, bool head_req, const size_t *cuts, size_t ncuts,
      struct buf *body)
{
    struct httpresp *p = NULL;
    struct sink s = {.body = *body};
    struct err err = {0};
    struct outcome o = {0};
    size_t at = 0;
    int r = HTTPRESP_MORE;

    CHECK(httpresp_new(head_req, &p) == 0);
    for (size_t i = 0; i <= ncuts && r != HTTPRESP_DONE && r >= 0; i++) {
        size_t to = i < ncuts ? cuts[i] : size;
        while (at < to) {
            size_t used = 0;
            s.fed = to - at;
            r = httpresp_feed(p, data + at, to - at, on_body, &s, &used, &err);
            if (r < 0)
                break;
            CHECK(used <= to - at);
            at += used;
            if (r == HTTPRESP_HEAD) {
                check_head(p);
                o.status = httpresp_status(p);
                continue;
            }
            if (r == HTTPRESP_DONE) {
                o.rest = size - at;
                break;
            }
            CHECK(at == to);
        }
    }
    if (r == HTTPRESP_HEAD) {
        size_t used;
        s.fed = 0;
        r = httpresp_feed(p, "", 0, on_body, &s, &used, &err);
    }
    if (r >= 0 && r != HTTPRESP_DONE)
        r = httpresp_finish(p, &err);
    CHECK(r == 0 || r == HTTPRESP_DONE || r == -EPROTO || r == -EMSGSIZE);
    if (r < 0)
        CHECK(err.msg[0] != '\0');
    CHECK(s.body.len <= size);
    httpresp_free(p);
    *body = s.body;
    o.r = r == HTTPRESP_DONE ? 0 : r;
    return o;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf whole, pieces;

    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    bool head_req = sel & 1;
    size_t cuts[2];
    cuts[0] = size * ((sel >> 1) & 7) / 7;
    cuts[1] = cuts[0] + (size - cuts[0]) * (sel >> 4) / 15;

    buf_init(&whole, BUF_UNLIMITED);
    buf_init(&pieces, BUF_UNLIMITED);
    struct outcome a = parse(data, size, head_req, NULL, 0, &whole);
    struct outcome b = parse(data, size, head_req, cuts, 2, &pieces);
    CHECK(a.r == b.r);
    if (a.r == 0) {
        CHECK(a.status == b.status && a.rest == b.rest);
        CHECK(whole.len == pieces.len && memcmp(whole.data, pieces.data, whole.len) == 0);
    }
    buf_done(&whole);
    buf_done(&pieces);
    return 0;
}
