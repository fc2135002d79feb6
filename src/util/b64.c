/*
 * b64.c - strict base64 codec.
 */
#include "util/b64.h"

#include <errno.h>

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int
b64_encode(struct buf *b, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t outlen = b64_encoded_len(n);
    int r = buf_reserve(b, outlen);
    if (r < 0)
        return r;
    char *o = b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = '=';
    }
    b->len += outlen;
    b->data[b->len] = '\0';
    return 0;
}

static int
b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int
b64_decode(struct buf *out, const char *s, size_t len)
{
    size_t pad = 0;

    while (len > 0 && s[len - 1] == '=' && pad < 2) {
        len--;
        pad++;
    }
    if (pad && (len + pad) % 4 != 0)
        return -EINVAL;
    if (len % 4 == 1)
        return -EINVAL;
    int r = buf_reserve(out, len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0));
    if (r < 0)
        return r;
    uint8_t *o = (uint8_t *)out->data + out->len;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            out->data[out->len] = '\0';
            return -EINVAL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) { /* non-canonical: leftover bits must be zero */
        out->data[out->len] = '\0';
        return -EINVAL;
    }
    out->len += n;
    out->data[out->len] = '\0';
    return 0;
}
