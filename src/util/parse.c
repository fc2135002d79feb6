/*
 * parse.c - strict parsers (no sign, no blanks, no overflow, no junk).
 */
#include "util/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int
parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int
parse_u32(const char *s, uint32_t *ret)
{
    uint64_t v;
    int r = parse_u64(s, &v);
    if (r < 0)
        return r;
    if (v > UINT32_MAX)
        return -ERANGE;
    *ret = (uint32_t)v;
    return 0;
}

int
parse_i32(const char *s, int32_t *ret)
{
    bool neg = s && *s == '-';
    uint64_t v;
    int r = parse_u64(neg ? s + 1 : s, &v);
    if (r < 0)
        return r;
    if (v > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
        return -ERANGE;
    *ret = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return 0;
}

int
parse_size(const char *s, uint64_t *ret)
{
    char num[32];
    size_t n;
    unsigned shift = 0;

    if (!s || !*s)
        return -EINVAL;
    n = strlen(s);
    switch (s[n - 1]) {
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
    case 'm':
        shift = 20;
        break;
    case 'G':
    case 'g':
        shift = 30;
        break;
    case 'T':
    case 't':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift)
        n--;
    if (n == 0 || n >= sizeof(num))
        return -EINVAL;
    memcpy(num, s, n);
    num[n] = '\0';
    uint64_t v;
    int r = parse_u64(num, &v);
    if (r < 0)
        return r;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *ret = v << shift;
    return 0;
}

int
parse_listen(const char *s, char *ret_host, size_t hostsz, uint16_t *ret_port)
{
    const char *colon;
    const char *host = s;
    size_t hostlen;

    if (!s || !*s)
        return -EINVAL;
    if (*s == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return -EINVAL;
        host = s + 1;
        hostlen = (size_t)(end - host);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -EINVAL;
        hostlen = (size_t)(colon - s);
    }
    if (hostlen == 0 || hostlen >= hostsz)
        return -EINVAL;
    uint32_t port;
    int r = parse_u32(colon + 1, &port);
    if (r < 0)
        return r;
    if (port > 65535)
        return -ERANGE;
    memcpy(ret_host, host, hostlen);
    ret_host[hostlen] = '\0';
    *ret_port = (uint16_t)port;
    return 0;
}

int
parse_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool
parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};

    if (!s)
        return false;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcasecmp(s, yes[i])) {
            *ret = true;
            return true;
        }
        if (!strcasecmp(s, no[i])) {
            *ret = false;
            return true;
        }
    }
    return false;
}

long
strscpy(char *dst, const char *src, size_t n)
{
    size_t len = strlen(src);

    if (n == 0)
        return -E2BIG;
    if (len >= n) {
        memcpy(dst, src, n - 1);
        dst[n - 1] = '\0';
        return -E2BIG;
    }
    memcpy(dst, src, len + 1);
    return (long)len;
}

bool
startswith(const char *s, const char *prefix, const char **ret_rest)
{
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0)
        return false;
    if (ret_rest)
        *ret_rest = s + n;
    return true;
}
