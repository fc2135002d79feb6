/*
 * test-sni.c - the names a connection claims: two real ClientHellos
 * (captured from openssl s_client, below) at every cut and re-split into
 * records of every size, built ClientHellos with hostile lengths, several
 * or bad names, IP literals, missing server_name and the size bounds; and
 * HTTP/1.x request heads: Host with ports and case, every cut,
 * absolute-form agreeing and not, several Host fields, obs-fold, bare CR
 * and LF, HTTP/1.0 and 1.1 without Host, CONNECT, IP literals, control
 * bytes, ports past 65535, the field count and the head size.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "net/sni.h"

/*
 * Captured once with OpenSSL 3.0 on Debian 12: a Python socket listening on
 * 127.0.0.1 printed the first bytes `openssl s_client -connect
 * 127.0.0.1:PORT <args>` sent (its ClientHello record), as C bytes.
 */
/* openssl s_client -servername x.test: 312 bytes */
static const uint8_t hello_tls13[] = {
        0x16, 0x03, 0x01, 0x01, 0x33, 0x01, 0x00, 0x01, 0x2f, 0x03, 0x03, 0x62, 0x05, 0xdd, 0xee,
        0xe8, 0x42, 0x8a, 0x65, 0x36, 0xdc, 0xc5, 0xb0, 0x71, 0x4d, 0x33, 0x54, 0x64, 0xc9, 0x99,
        0xd0, 0x4e, 0xaf, 0x4e, 0x2d, 0x17, 0x4b, 0x00, 0xdc, 0x02, 0xdc, 0x72, 0xbe, 0x20, 0x3c,
        0x82, 0x07, 0x04, 0xc1, 0x2a, 0x7d, 0x5f, 0x9b, 0x6e, 0x53, 0x69, 0x36, 0x5b, 0x51, 0x1b,
        0xa1, 0xa5, 0x33, 0x36, 0x4d, 0x38, 0x0b, 0xf9, 0x78, 0x74, 0xa0, 0x7b, 0x4c, 0xae, 0x8b,
        0x4d, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f,
        0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0,
        0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
        0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00,
        0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xa8, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x09,
        0x00, 0x00, 0x06, 0x78, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
        0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
        0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23,
        0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00,
        0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
        0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03,
        0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
        0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01,
        0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x76, 0xa0, 0xb5, 0x84, 0x2c,
        0xe0, 0x1c, 0xdd, 0x4d, 0xd1, 0x50, 0xaf, 0x0c, 0xd8, 0xa8, 0xe1, 0x88, 0x56, 0xf9, 0x7f,
        0x6f, 0x50, 0xc9, 0xa6, 0x8f, 0x28, 0x60, 0x22, 0xac, 0x39, 0xbc, 0x4d,
};
/* openssl s_client -tls1_2 -servername Api.Example.COM -no_ticket: 208 bytes */
static const uint8_t hello_tls12[] = {
        0x16, 0x03, 0x01, 0x00, 0xcb, 0x01, 0x00, 0x00, 0xc7, 0x03, 0x03, 0x18, 0x59, 0x11, 0x58,
        0x3e, 0x6e, 0xf0, 0xbe, 0xa3, 0x74, 0x77, 0x25, 0xf7, 0xc8, 0x5e, 0xb3, 0x6d, 0xb3, 0xcb,
        0xe3, 0xab, 0x13, 0xc6, 0xc7, 0x0c, 0x5e, 0x98, 0x58, 0xcb, 0x53, 0xfc, 0x6e, 0x00, 0x00,
        0x38, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
        0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00,
        0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
        0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00,
        0x66, 0x00, 0x00, 0x00, 0x14, 0x00, 0x12, 0x00, 0x00, 0x0f, 0x41, 0x70, 0x69, 0x2e, 0x45,
        0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x43, 0x4f, 0x4d, 0x00, 0x0b, 0x00, 0x04, 0x03,
        0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e,
        0x00, 0x19, 0x00, 0x18, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00,
        0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09,
        0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06,
        0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02,
};

static int
tls(const void *d, size_t n, char *name)
{
    struct err err = {0};
    int r = sni_tls_name(d, n, name, &err);
    if (r < 0 && r != -EAGAIN)
        assert_true(err.msg[0] != '\0');
    return r;
}

static void
test_tls_captured(void **state)
{
    char name[NET_NAME_MAX + 1];
    const struct {
        const uint8_t *d;
        size_t n;
        const char *name;
    } cases[] = {
            {hello_tls13, sizeof(hello_tls13), "x.test"},
            {hello_tls12, sizeof(hello_tls12), "api.example.com"},
    };

    for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
        assert_int_equal(tls(cases[c].d, cases[c].n, name), 0);
        assert_string_equal(name, cases[c].name);
        /* Every cut: "more", never a verdict. */
        for (size_t i = 0; i < cases[c].n; i++)
            assert_int_equal(tls(cases[c].d, i, name), -EAGAIN);
        /* Re-split into records of k bytes each: the same name. */
        size_t body = cases[c].n - 5;
        for (size_t k = 1; k <= body; k += (k < 8 ? 1 : 37)) {
            uint8_t out[SNI_HELLO_MAX];
            size_t o = 0;
            for (size_t at = 0; at < body; at += k) {
                size_t l = body - at < k ? body - at : k;
                if (o + 5 + l > sizeof(out))
                    break;
                memcpy(out + o, cases[c].d, 3);
                out[o + 3] = (uint8_t)(l >> 8);
                out[o + 4] = (uint8_t)l;
                memcpy(out + o + 5, cases[c].d + 5 + at, l);
                o += 5 + l;
            }
            int r = tls(out, o, name);
            /* One-byte records of 300 bytes cost 1800 bytes: within the bound. */
            assert_int_equal(r, 0);
            assert_string_equal(name, cases[c].name);
        }
    }
}

/* A ClientHello record with the server_name extension data ext (ext_len
 * bytes; NULL: no server_name) and the body's version bytes. */
static size_t
build(uint8_t *out, const uint8_t *ext, size_t ext_len)
{
    uint8_t b[4096];
    size_t n = 0, exts;

    b[n++] = 0x03, b[n++] = 0x03;
    memset(b + n, 0xaa, 32), n += 32;
    b[n++] = 0;                                           /* session id */
    b[n++] = 0, b[n++] = 2, b[n++] = 0x13, b[n++] = 0x01; /* one suite */
    b[n++] = 1, b[n++] = 0;                               /* null compression */
    exts = n;
    n += 2;
    b[n++] = 0x00, b[n++] = 0x0a, b[n++] = 0, b[n++] = 2, b[n++] = 0, b[n++] = 0x1d;
    if (ext) {
        b[n++] = 0, b[n++] = 0, b[n++] = (uint8_t)(ext_len >> 8), b[n++] = (uint8_t)ext_len;
        memcpy(b + n, ext, ext_len), n += ext_len;
    }
    b[exts] = (uint8_t)((n - exts - 2) >> 8), b[exts + 1] = (uint8_t)(n - exts - 2);
    out[0] = 22, out[1] = 3, out[2] = 1;
    out[3] = (uint8_t)((n + 4) >> 8), out[4] = (uint8_t)(n + 4);
    out[5] = 1, out[6] = 0, out[7] = (uint8_t)(n >> 8), out[8] = (uint8_t)n;
    memcpy(out + 9, b, n);
    return n + 9;
}

/* server_name data with one host_name entry. */
static size_t
sn(uint8_t *e, const char *name)
{
    size_t l = strlen(name);
    e[0] = (uint8_t)((l + 3) >> 8), e[1] = (uint8_t)(l + 3);
    e[2] = 0, e[3] = (uint8_t)(l >> 8), e[4] = (uint8_t)l;
    memcpy(e + 5, name, l);
    return l + 5;
}

static void
test_tls_built(void **state)
{
    uint8_t m[SNI_HELLO_MAX + 64], e[600];
    char name[NET_NAME_MAX + 1];
    size_t n, el;

    el = sn(e, "Good.Test");
    n = build(m, e, el);
    assert_int_equal(tls(m, n, name), 0);
    assert_string_equal(name, "good.test");
    /* No server_name; no extensions at all. */
    n = build(m, NULL, 0);
    assert_int_equal(tls(m, n, name), -ENOENT);
    n = build(m, NULL, 0);
    m[3] = 0, m[4] = 4 + 41, m[7] = 0, m[8] = 41; /* cut before the extensions */
    assert_int_equal(tls(m, 5 + 4 + 41, name), -ENOENT);
    /* Names that are no host names. */
    const char *bad[] = {"198.51.100.4", "::1", "x.test.", "a_b.test", "a b.test", "", "-x.test"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        el = sn(e, bad[i]);
        n = build(m, e, el);
        int r = tls(m, n, name);
        assert_int_equal(r, -EINVAL);
    }
    el = sn(e, "a.test");
    e[7] = 0; /* a NUL byte in the name */
    n = build(m, e, el);
    assert_int_equal(tls(m, n, name), -EINVAL);
    /* Two names in one list; a name type other than host_name. */
    el = sn(e, "a.test");
    memcpy(e + el, e + 2, el - 2);
    el += el - 2;
    e[0] = 0, e[1] = (uint8_t)(el - 2);
    n = build(m, e, el);
    assert_int_equal(tls(m, n, name), -EINVAL);
    el = sn(e, "a.test");
    e[2] = 1;
    n = build(m, e, el);
    assert_int_equal(tls(m, n, name), -EBADMSG);
    /* Hostile lengths: list length, entry length, extension length, totals. */
    const size_t at_list = 9 + 2 + 32 + 1 + 4 + 2 + 2 + 6 + 4;
    el = sn(e, "a.test");
    n = build(m, e, el);
    struct {
        size_t off;
        uint8_t v;
        int r;
    } pokes[] = {
            {at_list + 1, 0xff, -EBADMSG},  /* server_name list longer than the extension */
            {at_list + 4, 0xff, -EBADMSG},  /* host_name longer than the list */
            {at_list - 1, 0xff, -EBADMSG},  /* extension longer than the extensions */
            {at_list - 12, 0xff, -EBADMSG}, /* extensions longer than the message */
            {9 + 2 + 32, 33, -EBADMSG},     /* session id of 33 bytes */
            {9 + 2 + 32 + 2, 3, -EBADMSG},  /* odd cipher suites length */
            {9 + 2 + 32 + 5, 0, -EBADMSG},  /* no compression method */
            {9, 2, -EBADMSG},               /* legacy version 2.3 */
            {10, 4, -EBADMSG},              /* legacy version 3.4 */
            {5, 2, -EBADMSG},               /* a ServerHello */
            {0, 23, -EBADMSG},              /* application data */
            {1, 2, -EBADMSG},               /* record version 2.x */
            {7, 0x40, -EMSGSIZE},           /* a handshake of 16 KiB + */
            {3, 0x40, -EBADMSG},            /* a record past 2^14 */
    };
    for (size_t i = 0; i < ELEMENTSOF(pokes); i++) {
        uint8_t c[sizeof(m)];
        memcpy(c, m, n);
        c[pokes[i].off] = pokes[i].v;
        if (pokes[i].r != tls(c, n, name))
            fail_msg("poke %zu: %d", i, tls(c, n, name));
    }
    /* A record of length 0; SSLv2; a second server_name extension. */
    uint8_t z[] = {22, 3, 1, 0, 0};
    assert_int_equal(tls(z, sizeof(z), name), -EBADMSG);
    uint8_t v2[] = {0x80, 0x2e, 0x01, 0x00, 0x02};
    assert_int_equal(tls(v2, sizeof(v2), name), -EBADMSG);
    el = sn(e, "a.test");
    memcpy(e + el, "\x00\x00", 2);
    e[el + 2] = 0, e[el + 3] = (uint8_t)el;
    memcpy(e + el + 4, e, el);
    n = build(m, e, el + 4 + el);
    assert_int_equal(tls(m, n, name), -EBADMSG);
    /* The bound: 16 KiB of records that do not finish a hello. */
    memset(m, 0, sizeof(m));
    for (n = 0; n + 5 + 1000 <= SNI_HELLO_MAX; n += 1005) {
        m[n] = 22, m[n + 1] = 3, m[n + 2] = 1, m[n + 3] = 1000 >> 8, m[n + 4] = 1000 & 0xff;
        if (n == 0)
            m[5] = 1, m[6] = 0x00, m[7] = 0x3f, m[8] = 0xf0;
    }
    assert_int_equal(tls(m, n, name), -EAGAIN);
    /* The next record would end past the bound. */
    m[n] = 22, m[n + 1] = 3, m[n + 2] = 1, m[n + 3] = 1000 >> 8, m[n + 4] = 1000 & 0xff;
    assert_int_equal(tls(m, n + 5, name), -EMSGSIZE);
    assert_int_equal(tls(m, SNI_HELLO_MAX, name), -EMSGSIZE);
    assert_int_equal(tls(m, 0, name), -EAGAIN);
}

static int
http(const char *s, char *name)
{
    struct err err = {0};
    int r = sni_http_host(s, strlen(s), name, &err);
    if (r < 0 && r != -EAGAIN)
        assert_true(err.msg[0] != '\0');
    return r;
}

static void
test_http(void **state)
{
    char name[NET_NAME_MAX + 1];
    const char *get = "GET /x?y HTTP/1.1\r\nUser-Agent: t\r\nHost:  Api.X.Test.:8080 \r\n"
                      "Accept: */*\r\n\r\nbody";

    assert_int_equal(http(get, name), 0);
    assert_string_equal(name, "api.x.test");
    for (size_t i = 0; i < strlen(get) - 4; i++) {
        struct err err = {0};
        assert_int_equal(sni_http_host(get, i, name, &err), -EAGAIN);
    }
    const struct {
        const char *req;
        int r;
        const char *name;
    } cases[] = {
            {"GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", 0, "a.test"},
            {"GET HTTP://A.test:80 HTTP/1.1\r\nHost: a.test:80\r\n\r\n", 0, "a.test"},
            {"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", 0, "a.test"},
            {"GET http://a.test/ HTTP/1.0\r\n\r\n", 0, "a.test"},
            {"GET http://b.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET https://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nhost: a.test\r\nHOST: b.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nX: y\r\n z\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nX: a\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.0\r\nX: a\r\n\r\n", -ENOENT, NULL},
            {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", -EBADMSG, NULL},
            {"GET a.test:80 HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: 198.51.100.4\r\n\r\n", -EINVAL, NULL},
            {"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", -EINVAL, NULL},
            {"GET / HTTP/1.1\r\nHost: u@a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: a.test:65536\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nHost: a_b.test\r\n\r\n", -EINVAL, NULL},
            {"GET / HTTP/1.1\r\nHost:\r\n\r\n", -EINVAL, NULL},
            {"GET / HTTP/1.1\r\nHost: a.test\x01\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\nBad Name: x\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1\r\n: x\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/2.0\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET  / HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET /\x7f HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"GET / HTTP/1.1 \r\nHost: a.test\r\n\r\n", -EBADMSG, NULL},
            {"\x16\x03\x01", -EBADMSG, NULL},
            {" GET / HTTP/1.1", -EBADMSG, NULL},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        int r = http(cases[i].req, name);
        if (r != cases[i].r)
            fail_msg("case %zu: %d, not %d", i, r, cases[i].r);
        if (r == 0)
            assert_string_equal(name, cases[i].name);
    }

    /* Bounds: the head's size and its field count. */
    static char big[SNI_HEAD_MAX + 64];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    assert_int_equal(http(big, name), -EMSGSIZE);
    big[SNI_HEAD_MAX - 1] = '\0';
    assert_int_equal(http(big, name), -EAGAIN);
    size_t n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: a.test\r\n");
    for (int i = 1; i < SNI_HEADERS_MAX; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X: %d\r\n", i);
    memcpy(big + n, "\r\n", 3);
    assert_int_equal(http(big, name), 0);
    memcpy(big + n, "Y: 1\r\n\r\n", 9);
    assert_int_equal(http(big, name), -EBADMSG);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_tls_captured),
            cmocka_unit_test(test_tls_built),
            cmocka_unit_test(test_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
