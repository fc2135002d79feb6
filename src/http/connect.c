/*
 * connect.c - Connect envelope decoder and end-stream encoder.
 *
 * The decoder collects the 5 header bytes first (they may arrive one at a
 * time), checks the flags and the length before taking any payload, so a
 * hostile length costs nothing, then either hands the payload straight out
 * of the caller's chunk (the common case: a whole envelope in one read) or
 * buffers it until it is complete. The JSON written by the encoder is built
 * by hand: this piece stays below the JSON library.
 */
#include "http/connect.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "util/cleanup.h"

/* Payload buffers larger than this are freed after each message rather than
 * kept for the next one, so a single big message does not pin memory. */
#define CONNECT_KEEP_BUF (64 * 1024)

void
connect_dec_init(struct connect_dec *dec, size_t max)
{
    memset(dec, 0, sizeof(*dec));
    dec->max = max;
    buf_init(&dec->msg, max);
}

void
connect_dec_done(struct connect_dec *dec)
{
    buf_done(&dec->msg);
    dec->hdr_len = 0;
    dec->need = 0;
}

static int
dec_fail(struct connect_dec *dec, int r)
{
    dec->failed = r;
    return r;
}

static int
dec_header(struct connect_dec *dec, struct err *err)
{
    uint8_t flags = dec->hdr[0];
    uint32_t len = (uint32_t)dec->hdr[1] << 24 | (uint32_t)dec->hdr[2] << 16 |
                   (uint32_t)dec->hdr[3] << 8 | dec->hdr[4];

    if (flags & CONNECT_FLAG_COMPRESSED)
        return err_set(err, EPROTO, "compressed Connect messages are not supported");
    if (flags & ~CONNECT_FLAG_END_STREAM)
        return err_set(err, EPROTO, "unknown Connect envelope flags 0x%02x", flags);
    if (len > dec->max)
        return err_set(err, EMSGSIZE,
                       "Connect message of %" PRIu32 " bytes exceeds the limit of %zu", len,
                       dec->max);
    dec->need = len;
    return 0;
}

/* The current envelope is complete: reset first, so the decoder is ready
 * for the next one whatever the callback does. */
static int
dec_deliver(struct connect_dec *dec, const uint8_t *payload, size_t len, connect_msg_fn cb,
            void *ud)
{
    uint8_t flags = dec->hdr[0];
    dec->hdr_len = 0;
    dec->need = 0;
    return cb(ud, flags, payload, len);
}

int
connect_dec_feed(struct connect_dec *dec, const void *data, size_t len, connect_msg_fn cb, void *ud,
                 struct err *err)
{
    const uint8_t *p = data, *end;
    int r;

    if (dec->failed)
        return err_set(err, -dec->failed, "Connect stream already failed");
    if (len == 0)
        return 0;
    end = p + len;

    while (p < end) {
        if (dec->hdr_len < CONNECT_ENV_HEADER) {
            size_t n = MIN(CONNECT_ENV_HEADER - dec->hdr_len, (size_t)(end - p));
            memcpy(dec->hdr + dec->hdr_len, p, n);
            dec->hdr_len += n;
            p += n;
            if (dec->hdr_len < CONNECT_ENV_HEADER)
                break;
            r = dec_header(dec, err);
            if (r < 0)
                return dec_fail(dec, r);
        }

        size_t n = MIN(dec->need - dec->msg.len, (size_t)(end - p));
        if (dec->msg.len == 0 && n == dec->need) {
            /* the whole payload is in this chunk: no copy */
            const uint8_t *payload = p;
            p += n;
            r = dec_deliver(dec, payload, n, cb, ud);
        } else {
            r = buf_put(&dec->msg, p, n);
            if (r < 0)
                return dec_fail(dec, err_set(err, -r, "cannot buffer Connect message"));
            p += n;
            if (dec->msg.len < dec->need)
                break;
            r = dec_deliver(dec, (const uint8_t *)dec->msg.data, dec->msg.len, cb, ud);
            if (dec->msg.cap > CONNECT_KEEP_BUF)
                buf_done(&dec->msg);
            else
                buf_reset(&dec->msg);
        }
        if (r < 0)
            return dec_fail(dec, r);
    }
    return 0;
}

bool
connect_dec_at_boundary(const struct connect_dec *dec)
{
    return dec->hdr_len == 0;
}

int
connect_dec_finish(struct connect_dec *dec, struct err *err)
{
    if (dec->failed)
        return err_set(err, -dec->failed, "Connect stream already failed");
    if (dec->hdr_len > 0) {
        size_t got = dec->hdr_len + dec->msg.len;
        size_t want = dec->hdr_len < CONNECT_ENV_HEADER ? CONNECT_ENV_HEADER
                                                        : CONNECT_ENV_HEADER + dec->need;
        return dec_fail(dec, err_set(err, EPROTO,
                                     "Connect body ended inside an envelope (%zu of %zu bytes)",
                                     got, want));
    }
    return 0;
}

void
connect_env_header(uint8_t out[CONNECT_ENV_HEADER], uint8_t flags, uint32_t len)
{
    out[0] = flags;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

/* Length of the valid UTF-8 sequence (RFC 3629: shortest form, no
 * surrogates, at most U+10FFFF) starting at s, or 0. s is NUL-terminated,
 * and NUL is never a continuation byte, so reads stop in time. */
static size_t
utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t n;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* Appends s as the inside of a JSON string. */
static int
json_escape(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    int r = 0;

    while (*p && r >= 0) {
        size_t n;
        if (*p < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            r = buf_put(b, e, sizeof(e));
            p++;
        } else if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            r = buf_put(b, e, sizeof(e));
            p++;
        } else if (*p < 0x80) {
            n = 1;
            while (p[n] >= 0x20 && p[n] < 0x80 && p[n] != '"' && p[n] != '\\')
                n++;
            r = buf_put(b, p, n);
            p += n;
        } else if ((n = utf8_seq_len(p)) > 0) {
            r = buf_put(b, p, n);
            p += n;
        } else {
            r = buf_puts(b, "\\ufffd");
            p++;
        }
    }
    return r;
}

int
connect_end_stream_json(struct buf *out, const char *code, const char *message)
{
    static const uint8_t zero[CONNECT_ENV_HEADER];
    size_t start = out->len;
    int r;

    r = buf_put(out, zero, sizeof(zero));
    if (r < 0)
        return r;
    if (!code)
        r = buf_puts(out, "{}");
    else {
        r = buf_puts(out, "{\"error\":{\"code\":\"");
        if (r >= 0)
            r = json_escape(out, code);
        if (r >= 0)
            r = buf_puts(out, "\",\"message\":\"");
        if (r >= 0)
            r = json_escape(out, message ? message : "");
        if (r >= 0)
            r = buf_puts(out, "\"}}");
    }
    size_t plen = out->len - start - CONNECT_ENV_HEADER;
    if (r >= 0 && plen > UINT32_MAX)
        r = -EMSGSIZE;
    if (r < 0) {
        out->len = start;
        out->data[start] = '\0';
        return r;
    }
    connect_env_header((uint8_t *)out->data + start, CONNECT_FLAG_END_STREAM, (uint32_t)plen);
    return 0;
}
