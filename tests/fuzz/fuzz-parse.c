/*
 * fuzz-parse.c - the strict parsers on arbitrary strings. Whatever a parser
 * accepts is canonical decimal (up to leading zeros) that prints back to
 * the same number; whatever it refuses leaves ret untouched; the parsers
 * agree with each other (u32 is u64 within range, i32 is u64 with an
 * optional '-', size is u64 with a power-of-1024 suffix).
 */
#include <errno.h>
#include <inttypes.h>
#include <strings.h>

#include "fuzz-common.h"
#include "util/parse.h"

static bool
all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* s without its leading zeros ("0" stays "0"). */
static const char *
strip_zeros(const char *s)
{
    while (s[0] == '0' && s[1])
        s++;
    return s;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    char tmp[64];

    uint64_t u = 42;
    int r = parse_u64(s, &u);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    /* junk is refused (-EINVAL, or -ERANGE when too many digits come
     * first); a string of digits is refused only when it overflows */
    if (all_digits(s))
        CHECK(r != -EINVAL);
    else
        CHECK(r != 0);
    if (r == 0) {
        (void)snprintf(tmp, sizeof(tmp), "%" PRIu64, u);
        CHECK(!strcmp(tmp, strip_zeros(s)));
    } else {
        CHECK(u == 42);
    }
    if (r == -ERANGE) {
        const char *sig = s;
        while (*sig == '0')
            sig++;
        CHECK(strspn(sig, "0123456789") >= 20);
    }

    uint32_t u32 = 42;
    int r32 = parse_u32(s, &u32);
    if (r == 0 && u <= UINT32_MAX)
        CHECK(r32 == 0 && u32 == u);
    else if (r == 0)
        CHECK(r32 == -ERANGE && u32 == 42);
    else
        CHECK(r32 == r && u32 == 42);

    int32_t i32 = 42;
    r = parse_i32(s, &i32);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        bool neg = s[0] == '-';
        CHECK(all_digits(s + neg));
        (void)snprintf(tmp, sizeof(tmp), "%" PRId32, i32);
        const char *digits = strip_zeros(s + neg);
        if (i32 == 0)
            CHECK(!strcmp(digits, "0"));
        else
            CHECK(!strcmp(tmp + (i32 < 0), digits) && (i32 < 0) == neg);
    } else {
        CHECK(i32 == 42);
    }

    uint64_t sz = 42;
    r = parse_size(s, &sz);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        static const char suffixes[] = "KkMmGgTt";
        size_t n = strlen(s);
        unsigned shift = 0;
        const char *suf = strchr(suffixes, s[n - 1]);
        if (s[n - 1] && suf)
            shift = 10 * (unsigned)(1 + (suf - suffixes) / 2);
        char num[64];
        CHECK(n - (shift ? 1 : 0) < sizeof(num));
        memcpy(num, s, n - (shift ? 1 : 0));
        num[n - (shift ? 1 : 0)] = '\0';
        uint64_t base;
        CHECK(parse_u64(num, &base) == 0);
        CHECK(shift == 0 || base <= (UINT64_MAX >> shift));
        CHECK(sz == base << shift);
    } else {
        CHECK(sz == 42);
    }

    char host[32];
    memcpy(host, "untouched", 10);
    uint16_t port = 4242;
    r = parse_listen(s, host, sizeof(host), &port);
    CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r == 0) {
        size_t hl = strlen(host);
        CHECK(hl > 0 && hl < sizeof(host));
        if (s[0] == '[')
            (void)snprintf(tmp, sizeof(tmp), "[%s]:", host);
        else
            (void)snprintf(tmp, sizeof(tmp), "%s:", host);
        CHECK(!strncmp(s, tmp, strlen(tmp)));
        const char *p = s + strlen(tmp);
        CHECK(all_digits(p));
        uint64_t pv;
        CHECK(parse_u64(p, &pv) == 0 && pv == port);
    } else {
        CHECK(port == 4242 && !strcmp(host, "untouched"));
    }

    bool b = true;
    static const char *const words[] = {"1", "true", "yes", "on", "0", "false", "no", "off"};
    bool known = false;
    for (size_t i = 0; i < 8; i++)
        known = known || !strcasecmp(s, words[i]);
    bool ok = parse_bool(s, &b);
    CHECK(ok == known);
    if (ok) {
        bool want = false;
        for (size_t i = 0; i < 4; i++)
            want = want || !strcasecmp(s, words[i]);
        CHECK(b == want);
    } else {
        CHECK(b == true);
    }

    /* strscpy agrees with strlen and always terminates */
    char small[8];
    long k = strscpy(small, s, sizeof(small));
    if (strlen(s) < sizeof(small))
        CHECK(k == (long)strlen(s) && !strcmp(small, s));
    else
        CHECK(k == -E2BIG && strlen(small) == sizeof(small) - 1 && !strncmp(small, s, 7));
    free(s);
    return 0;
}
