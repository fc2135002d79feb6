/*
 * sni.c - the name in a TLS ClientHello's server_name and in an HTTP/1.x
 * Host field. A ClientHello spread over several records is put together
 * in a stack buffer of SNI_HELLO_MAX bytes; nothing is allocated.
 */
#include "net/sni.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

static uint32_t
get16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

/* A cursor over one handshake message. */
struct rd {
    const uint8_t *p;
    size_t len, at;
};

static bool
skip(struct rd *r, size_t n)
{
    if (n > r->len - r->at)
        return false;
    r->at += n;
    return true;
}

static bool
u8(struct rd *r, uint32_t *v)
{
    if (r->at + 1 > r->len)
        return false;
    *v = r->p[r->at++];
    return true;
}

static bool
u16(struct rd *r, uint32_t *v)
{
    if (r->at + 2 > r->len)
        return false;
    *v = get16(r->p + r->at);
    r->at += 2;
    return true;
}

/* The ClientHello's body (after the handshake header) up to the name. */
static int
hello_name(struct rd *r, char ret[static NET_NAME_MAX + 1], struct err *err)
{
    uint32_t v, n, total, type;
    const uint8_t *name = NULL;
    size_t name_len = 0, end;
    bool seen = false;

    if (!u16(r, &v) || (v >> 8) != 3 || (v & 0xff) < 1 || (v & 0xff) > 3)
        return err_set(err, EBADMSG, "ClientHello version is not TLS 1.0 to 1.2 (legacy field)");
    if (!skip(r, 32))
        return err_set(err, EBADMSG, "ClientHello is cut short in its random");
    if (!u8(r, &n) || n > 32 || !skip(r, n))
        return err_set(err, EBADMSG, "ClientHello session id is malformed");
    if (!u16(r, &n) || n < 2 || n % 2 || !skip(r, n))
        return err_set(err, EBADMSG, "ClientHello cipher suites are malformed");
    if (!u8(r, &n) || n < 1 || !skip(r, n))
        return err_set(err, EBADMSG, "ClientHello compression methods are malformed");
    if (r->at == r->len)
        return err_set(err, ENOENT, "ClientHello has no extensions, so no server name");
    if (!u16(r, &total) || total != r->len - r->at)
        return err_set(err, EBADMSG, "ClientHello extensions do not fill the message");
    while (r->at < r->len) {
        if (!u16(r, &type) || !u16(r, &n) || n > r->len - r->at)
            return err_set(err, EBADMSG, "ClientHello extension is cut short");
        end = r->at + n;
        if (type != 0) {
            r->at = end;
            continue;
        }
        if (seen)
            return err_set(err, EBADMSG, "ClientHello has two server_name extensions");
        seen = true;
        if (!u16(r, &total) || total + 2 != n || total == 0)
            return err_set(err, EBADMSG, "ClientHello server_name list is malformed");
        while (r->at < end) {
            if (!u8(r, &type) || !u16(r, &v) || v > end - r->at)
                return err_set(err, EBADMSG, "ClientHello server_name entry is cut short");
            if (type != 0)
                return err_set(err, EBADMSG, "ClientHello server_name type %u is not host_name",
                               type);
            if (name)
                return err_set(err, EINVAL, "ClientHello names several hosts");
            name = r->p + r->at;
            name_len = v;
            r->at += v;
        }
    }
    if (!seen)
        return err_set(err, ENOENT, "ClientHello has no server_name extension");
    if (memchr(name, '\0', name_len))
        return err_set(err, EINVAL, "ClientHello server name holds a NUL byte");
    return net_name_normalize((const char *)name, name_len, 0, ret, err);
}

int
sni_tls_name(const void *data, size_t len, char ret[static NET_NAME_MAX + 1], struct err *err)
{
    const uint8_t *d = data;
    uint8_t hs[SNI_HELLO_MAX];
    size_t hs_len = 0, at = 0, need = 0;

    if (len > 0 && d[0] != 22)
        return err_set(err, EBADMSG, "not a TLS handshake (first byte 0x%02x)", d[0]);
    while (!need || hs_len < need) {
        uint32_t rl;
        if (at + 5 > len)
            goto more;
        if (d[at] != 22)
            return err_set(err, EBADMSG, "TLS record of type %u inside the ClientHello", d[at]);
        if (d[at + 1] != 3 || d[at + 2] > 4)
            return err_set(err, EBADMSG, "TLS record version %u.%u is not 3.x", d[at + 1],
                           d[at + 2]);
        rl = get16(d + at + 3);
        if (rl == 0 || rl > SNI_RECORD_MAX)
            return err_set(err, EBADMSG, "TLS record of %u bytes", rl);
        if (at + 5 + rl > SNI_HELLO_MAX)
            return err_set(err, EMSGSIZE, "ClientHello is longer than %d bytes", SNI_HELLO_MAX);
        if (at + 5 + rl > len)
            goto more;
        memcpy(hs + hs_len, d + at + 5, rl);
        hs_len += rl;
        at += 5 + rl;
        if (!need && hs_len >= 4) {
            if (hs[0] != 1)
                return err_set(err, EBADMSG, "TLS handshake message %u is not a ClientHello",
                               hs[0]);
            need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
            /* Every record costs 5 bytes of header too: at least one more. */
            if (need + 5 > SNI_HELLO_MAX)
                return err_set(err, EMSGSIZE, "ClientHello of %zu bytes is longer than %d", need,
                               SNI_HELLO_MAX - 5);
        }
    }
    return hello_name(&(struct rd){.p = hs + 4, .len = need - 4}, ret, err);
more:
    if (len >= SNI_HELLO_MAX)
        return err_set(err, EMSGSIZE, "ClientHello is longer than %d bytes", SNI_HELLO_MAX);
    return -EAGAIN;
}

static bool
is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool
is_vchar_or_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

/* host[:port] (no userinfo, no IP literal) of len bytes, normalised. */
static int
authority_host(const char *s, size_t len, char ret[static NET_NAME_MAX + 1], struct err *err)
{
    const char *colon = memchr(s, ':', len);
    size_t hl = colon ? (size_t)(colon - s) : len;

    if (len > 0 && s[0] == '[')
        return err_set(err, EINVAL, "HTTP host is an IPv6 literal");
    if (memchr(s, '@', len))
        return err_set(err, EBADMSG, "HTTP host has userinfo");
    if (colon) {
        size_t pl = len - hl - 1;
        uint32_t port = 0;
        if (pl == 0 || pl > 5)
            return err_set(err, EBADMSG, "HTTP host has a bad port");
        for (size_t i = 0; i < pl; i++) {
            if (colon[1 + i] < '0' || colon[1 + i] > '9')
                return err_set(err, EBADMSG, "HTTP host has a bad port");
            port = port * 10 + (uint32_t)(colon[1 + i] - '0');
        }
        if (port > 65535)
            return err_set(err, EBADMSG, "HTTP host port %u is past 65535", port);
    }
    return net_name_normalize(s, hl, NET_NAME_FINAL_DOT, ret, err);
}

int
sni_http_host(const void *data, size_t len, char ret[static NET_NAME_MAX + 1], struct err *err)
{
    const char *s = data, *end, *line, *eol, *sp1, *sp2;
    char host[NET_NAME_MAX + 1], target_host[NET_NAME_MAX + 1];
    bool have_host = false, absolute = false;
    size_t i, fields = 0;
    int r;

    /* Fail at once on what is not HTTP (TLS, SSH) instead of waiting for a head. */
    for (i = 0; i < len && s[i] != ' '; i++)
        if (!is_tchar(s[i]))
            return err_set(err, EBADMSG, "not an HTTP request (byte 0x%02x in the method)",
                           (uint8_t)s[i]);
    if (i == 0 && len > 0)
        return err_set(err, EBADMSG, "not an HTTP request (no method)");
    end = memmem(s, MIN(len, (size_t)SNI_HEAD_MAX), "\r\n\r\n", 4);
    if (!end) {
        if (len >= SNI_HEAD_MAX)
            return err_set(err, EMSGSIZE, "HTTP request head is longer than %d bytes",
                           SNI_HEAD_MAX);
        return -EAGAIN;
    }
    end += 2; /* the last field's CRLF is part of the fields */
    /* end + 2 <= s + len, so c[1] is inside the input. */
    for (const char *c = s; c < end; c++)
        if ((*c == '\r' && c[1] != '\n') || (*c == '\n' && (c == s || c[-1] != '\r')))
            return err_set(err, EBADMSG, "HTTP request head has a bare CR or LF");

    /* The request line. */
    eol = memmem(s, (size_t)(end - s), "\r\n", 2);
    sp1 = memchr(s, ' ', (size_t)(eol - s));
    sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp2 == sp1 + 1)
        return err_set(err, EBADMSG, "HTTP request line is not 'METHOD target version'");
    if (eol - sp2 - 1 != 8 ||
        (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
        return err_set(err, EBADMSG, "HTTP request version is not HTTP/1.0 or HTTP/1.1");
    for (const char *c = sp1 + 1; c < sp2; c++)
        if ((uint8_t)*c <= 0x20 || *c == 0x7f)
            return err_set(err, EBADMSG, "HTTP request target has a control byte or blank");
    if (sp1 - s == 7 && memcmp(s, "CONNECT", 7) == 0)
        return err_set(err, EBADMSG, "HTTP CONNECT is not a request the proxy forwards");
    if (sp1[1] == '/' || (sp2 - sp1 == 2 && sp1[1] == '*')) {
        /* origin-form or asterisk-form */
    } else if (sp2 - sp1 - 1 > 7 && strncasecmp(sp1 + 1, "http://", 7) == 0) {
        const char *a = sp1 + 8, *ae = a;
        while (ae < sp2 && *ae != '/' && *ae != '?' && *ae != '#')
            ae++;
        r = authority_host(a, (size_t)(ae - a), target_host, err);
        if (r < 0)
            return r;
        absolute = true;
    } else {
        return err_set(err, EBADMSG, "HTTP request target is not origin- or absolute-form");
    }

    /* The fields. */
    for (line = eol + 2; line < end; line = eol + 2) {
        const char *colon, *v, *ve;
        eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (line[0] == ' ' || line[0] == '\t')
            return err_set(err, EBADMSG, "HTTP request head has an obs-fold line");
        if (++fields > SNI_HEADERS_MAX)
            return err_set(err, EBADMSG, "HTTP request head has more than %d fields",
                           SNI_HEADERS_MAX);
        colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon || colon == line)
            return err_set(err, EBADMSG, "HTTP request field is not 'name: value'");
        for (const char *c = line; c < colon; c++)
            if (!is_tchar(*c))
                return err_set(err, EBADMSG, "HTTP request field name is not a token");
        for (const char *c = colon + 1; c < eol; c++)
            if (!is_vchar_or_ws((uint8_t)*c))
                return err_set(err, EBADMSG, "HTTP request field value has a control byte");
        if (colon - line != 4 || strncasecmp(line, "host", 4) != 0)
            continue;
        if (have_host)
            return err_set(err, EBADMSG, "HTTP request has several Host fields");
        have_host = true;
        for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
            ;
        for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
            ;
        r = authority_host(v, (size_t)(ve - v), host, err);
        if (r < 0)
            return r;
    }
    if (!have_host) {
        if (memcmp(sp2 + 1, "HTTP/1.1", 8) == 0)
            return err_set(err, EBADMSG, "HTTP/1.1 request without Host");
        if (!absolute)
            return err_set(err, ENOENT, "HTTP/1.0 request names no host");
        memcpy(ret, target_host, strlen(target_host) + 1);
        return 0;
    }
    if (absolute && strcmp(host, target_host) != 0)
        return err_set(err, EBADMSG, "HTTP request target names '%s' but Host '%s'", target_host,
                       host);
    memcpy(ret, host, strlen(host) + 1);
    return 0;
}
