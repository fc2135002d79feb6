/*
 * utf8.c - strict UTF-8 validation, lossy conversion and escaping of byte
 * strings. Not a Unicode library: no normalization, no widths, no case.
 */
#include "util/utf8.h"

#include <stdint.h>
#include <string.h>

size_t
utf8_seq(const char *s, size_t left)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c, cp, min;
    size_t n;

    if (left == 0)
        return 0;
    c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

bool
utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

int
utf8_lossy(struct buf *b, const char *s, size_t n)
{
    size_t start = b->len;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        int r = k ? buf_put(b, s + i, k) : buf_puts(b, UTF8_REPLACEMENT);
        if (r < 0) {
            b->len = start;
            b->data[start] = '\0';
            return r;
        }
        i += k ? k : 1;
    }
    return 0;
}

size_t
utf8_escape(char *out, size_t outsz, const char *s, size_t n, size_t *ret_used)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_seq(s + i, n - i);
        char esc[4];
        size_t elen = 0;

        /* U+0080..U+009F are C2 80..C2 9F: terminals may act on them. */
        bool c1 = k == 2 && c == 0xC2 && (unsigned char)s[i + 1] < 0xA0;
        if (c == '\\') {
            esc[0] = '\\', esc[1] = '\\', elen = 2;
        } else if (c == '\n') {
            esc[0] = '\\', esc[1] = 'n', elen = 2;
        } else if (c == '\t') {
            esc[0] = '\\', esc[1] = 't', elen = 2;
        } else if (c == '\r') {
            esc[0] = '\\', esc[1] = 'r', elen = 2;
        } else if (k == 0 || c < 0x20 || c == 0x7F || c1) {
            /* One byte at a time: a C1 character shows as its two bytes. */
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15], elen = 4;
            k = 1;
        }
        if (elen) {
            if (o + elen >= outsz)
                break;
            memcpy(out + o, esc, elen);
            o += elen;
            i += k ? k : 1;
            continue;
        }
        if (o + k >= outsz)
            break;
        memcpy(out + o, s + i, k);
        o += k;
        i += k;
    }
    if (outsz)
        out[o] = '\0';
    if (ret_used)
        *ret_used = i;
    return o;
}
