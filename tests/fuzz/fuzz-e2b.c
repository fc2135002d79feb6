/*
 * fuzz-e2b.c - the small parsers of what E2B clients and the port proxy
 * send, one target for four of them: the first byte picks which (low two
 * bits) and a buffer size (the rest), the remaining bytes are the input.
 *
 *   0 ports_match_host() (api/ports/ports.c): the Host header, then after a NUL
 *     the domain (default "abx.test"). Agrees with a matcher written here
 *     from the rule "<port>-<id>.<domain>[.][:digits]", port 1..65535 in at
 *     most 5 digits, id [a-z0-9]+ any case, shorter than the id buffer; a
 *     match fills exactly that buffer and no more.
 *   1 parse_rfc3339() (util/timeutil.c): 0 or -EINVAL, a time before the
 *     year 10000 (and a day of offsets); the canonical form format_rfc3339()
 *     writes reads back to the same milliseconds, and a canonical input
 *     formats back to itself.
 *   2 e2b_meta_filter_parse() (api/e2b/platform-list.c, with pct_decode()): 0
 *     or -EINVAL with a message; agrees with a decoder written here (split
 *     at '&', first '=', form-decode then percent-decode once more; "%00"
 *     and malformed escapes stay as they are); at most 32 pairs, all in buf.
 *   3 vfs_resolve() (sandbox/vfs.c), the E2B path rules: the path, then
 *     after a NUL the home (default "/home/user"). 0, -EINVAL or
 *     -ENAMETOOLONG; a result is absolute, normalized, within PATH_MAX_LEN
 *     and the buffer, resolves to itself again and, for an absolute path,
 *     does not depend on home.
 */
#include <ctype.h>
#include <errno.h>
#include <strings.h>

#include "api/e2b/e2b-internal.h"
#include "api/ports/ports.h"
#include "fuzz-common.h"
#include "sandbox/vfs.h"
#include "util/path.h"
#include "util/timeutil.h"

/* --- 0: Host --- */

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The rule, written without looking at ports_match_host(). */
static int
model_host(const char *host, const char *domain, size_t idsz, uint16_t *port, char *id)
{
    size_t hl = strlen(host), dl = strlen(domain);
    if (!dl || idsz < 2)
        return 0;
    const char *colon = strrchr(host, ':');
    if (colon) {
        for (const char *c = colon + 1; *c; c++)
            if (!is_digit(*c))
                return 0;
        hl = (size_t)(colon - host);
    }
    if (hl && host[hl - 1] == '.')
        hl--;
    /* label '.' domain */
    if (hl <= dl + 1 || strncasecmp(host + hl - dl, domain, dl) || host[hl - dl - 1] != '.')
        return 0;
    size_t ll = hl - dl - 1, i = 0;
    unsigned long p = 0;
    while (i < ll && is_digit(host[i]))
        p = p * 10 + (unsigned long)(host[i++] - '0');
    if (i == 0 || i > 5 || p == 0 || p > 65535 || i >= ll || host[i] != '-')
        return 0;
    size_t n = ll - i - 1;
    if (n == 0 || n >= idsz)
        return 0;
    for (size_t k = 0; k < n; k++) {
        char c = host[i + 1 + k];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || is_digit(c)))
            return 0;
        id[k] = c;
    }
    id[n] = '\0';
    *port = (uint16_t)p;
    return 1;
}

static void
host(const char *in, size_t size, size_t idsz)
{
    const char *domain = strlen(in) + 1 < size ? in + strlen(in) + 1 : "abx.test";
    char *id = malloc(idsz), want_id[128];
    uint16_t port = 0, want_port = 0;
    if (!id)
        abort();
    memset(id, 'X', idsz);
    int r = ports_match_host(in, domain, &port, id, idsz);
    int w = model_host(in, domain, idsz, &want_port, want_id);
    CHECK(r == w);
    if (r == 1) {
        CHECK(port == want_port && !strcmp(id, want_id));
        CHECK(strlen(id) >= 1 && strlen(id) < idsz);
    }
    free(id);
}

/* --- 1: RFC 3339 --- */

#define YEAR_10000_MS 253402300800000ull

/* Whether s is exactly what format_rfc3339() writes for a valid time. */
static bool
canonical_time(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (strlen(s) != sizeof(shape) - 1)
        return false;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i])
            return false;
    struct tm tm = {0};
    tm.tm_year = atoi(s) - 1900;
    tm.tm_mon = atoi(s + 5) - 1;
    tm.tm_mday = atoi(s + 8);
    tm.tm_hour = atoi(s + 11);
    tm.tm_min = atoi(s + 14);
    tm.tm_sec = atoi(s + 17);
    struct tm n = tm;
    time_t t = timegm(&n);
    /* timegm() normalizes: a valid date comes back unchanged */
    return t >= 0 && n.tm_year == tm.tm_year && n.tm_mon == tm.tm_mon && n.tm_mday == tm.tm_mday &&
           n.tm_hour == tm.tm_hour && n.tm_min == tm.tm_min && n.tm_sec == tm.tm_sec;
}

static void
rfc3339(const char *in, const uint8_t *data, size_t size)
{
    uint64_t ms = 12345, again;
    int r = parse_rfc3339(in, &ms);
    CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        CHECK(ms == 12345);
    } else {
        CHECK(ms < YEAR_10000_MS + 5 * 86400000ull); /* offsets up to 99:99 */
        CHECK(parse_rfc3339(in, &again) == 0 && again == ms);
    }
    char out[64];
    if (r == 0 && canonical_time(in)) {
        format_rfc3339(ms, out, sizeof(out));
        CHECK(!strcmp(out, in));
    }
    /* the input's bytes as a time: written, then read back */
    uint64_t x = 0;
    for (size_t i = 0; i < size && i < 8; i++)
        x = x << 8 | data[i];
    x %= YEAR_10000_MS;
    format_rfc3339(x, out, sizeof(out));
    CHECK(parse_rfc3339(out, &again) == 0 && again == x);
}

/* --- 2: ?metadata= --- */

/* One decoding pass, written another way than pct_decode(): "%XY" with
 * X and Y hex digits (isxdigit(), no sign or blank as strtol() allows) and
 * a value > 0 becomes that byte, '+' a space when form is set; anything
 * else stays. */
static void
model_pct(char *s, bool form)
{
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n; o++) {
        unsigned v = 0;
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2]) && sscanf(s + i + 1, "%2x", &v) == 1 && v > 0) {
            s[o] = (char)v;
            i += 3;
        } else {
            s[o] = form && s[i] == '+' ? ' ' : s[i];
            i++;
        }
    }
    s[o] = '\0';
}

static void
metadata(const char *in)
{
    static struct e2b_meta_filter m;
    static char copy[4096];
    struct err err = {0};
    memset(&m, 0xa5, sizeof(m));
    int r = e2b_meta_filter_parse(&m, in, &err);
    CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        CHECK(err.msg[0] != '\0');
        return;
    }
    CHECK(strlen(in) < sizeof(m.buf));
    CHECK(m.n <= 32);
    /* the model: split, then decode each side twice */
    strcpy(copy, in);
    size_t k = 0;
    char *save = NULL;
    for (char *pair = strtok_r(copy, "&", &save); pair; pair = strtok_r(NULL, "&", &save), k++) {
        char *eq = strchr(pair, '=');
        CHECK(eq && k < m.n);
        *eq = '\0';
        model_pct(pair, true);
        model_pct(pair, false);
        model_pct(eq + 1, true);
        model_pct(eq + 1, false);
        CHECK(m.keys[k] >= m.buf && m.keys[k] + strlen(m.keys[k]) < m.buf + sizeof(m.buf));
        CHECK(m.vals[k] >= m.buf && m.vals[k] + strlen(m.vals[k]) < m.buf + sizeof(m.buf));
        CHECK(!strcmp(m.keys[k], pair) && !strcmp(m.vals[k], eq + 1));
    }
    CHECK(k == m.n);
}

/* --- 3: E2B paths --- */

static bool
normalized(const char *p)
{
    if (p[0] != '/')
        return false;
    if (!strcmp(p, "/"))
        return true;
    for (const char *c = p; *c;) {
        c++; /* the '/' */
        const char *e = strchrnul(c, '/');
        size_t n = (size_t)(e - c);
        if (n == 0 || n > PATH_NAME_MAX || (n == 1 && c[0] == '.') ||
            (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        c = e;
    }
    return true;
}

static void
resolve(const char *in, size_t size, size_t outlen)
{
    const char *home = strlen(in) + 1 < size ? in + strlen(in) + 1 : "/home/user";
    char *out = malloc(outlen), again[PATH_MAX_LEN + 1], other[PATH_MAX_LEN + 1];
    struct err err = {0};
    if (!out)
        abort();
    int r = vfs_resolve(in, home, out, outlen, &err);
    CHECK(r == 0 || r == -EINVAL || r == -ENAMETOOLONG);
    if (r < 0) {
        CHECK(err.msg[0] != '\0');
        free(out);
        return;
    }
    CHECK(strlen(out) < outlen && strlen(out) <= PATH_MAX_LEN);
    CHECK(normalized(out));
    CHECK(vfs_resolve(out, home, again, sizeof(again), &err) == 0 && !strcmp(again, out));
    if (in[0] == '/') {
        CHECK(vfs_resolve(in, "/elsewhere", other, sizeof(other), &err) == 0);
        CHECK(!strcmp(other, out));
    }
    free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    char *in = malloc(size + 1);
    if (!in)
        abort();
    memcpy(in, data, size);
    in[size] = '\0';
    switch (sel & 3) {
    case 0:
        host(in, size, 1 + (sel >> 2)); /* 1..64 */
        break;
    case 1:
        rfc3339(in, data, size);
        break;
    case 2:
        metadata(in);
        break;
    default:
        /* a buffer from 1 byte to well past PATH_MAX_LEN */
        resolve(in, size, (sel >> 2) == 63 ? PATH_MAX_LEN + 1 : 1 + (size_t)(sel >> 2) * 70);
        break;
    }
    free(in);
    return 0;
}
