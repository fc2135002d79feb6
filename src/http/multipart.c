/*
 * multipart.c - streaming multipart/form-data parser.
 *
 * The delimiter is "\r\n--" + boundary; the body is parsed as if it began
 * with "\r\n", so the first delimiter needs no special case. Content is
 * searched for the delimiter with a memchr() for CR and a byte compare
 * from there. A boundary cannot contain CR, so CR occurs in the delimiter
 * only at its start: a mismatch never hides the start of another match,
 * the search restarts at the mismatching byte, and every byte is looked at
 * a bounded number of times whatever runs of CR, LF or dashes arrive. A
 * partial match at the end of a chunk is held back; since it is a prefix of
 * the delimiter it needs no buffer, and if it turns out to be content it is
 * handed out from the delimiter string itself.
 */
#include "http/multipart.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

#define DELIM_PREFIX "\r\n--"
#define NONE         SIZE_MAX /* offset of an absent value */

enum mp_state {
    MP_PREAMBLE, /* looking for the first delimiter; bytes are ignored */
    MP_BODY,     /* in a part's content, looking for the next delimiter */
    MP_AFTER,    /* right after "--boundary": "--", padding or CRLF follows */
    MP_DASH,     /* after "--boundary-": the second dash */
    MP_PADDING,  /* transport padding (spaces, tabs) before CRLF */
    MP_LF,       /* CR after a delimiter: LF, then a part begins */
    MP_HEADERS,  /* a part's header lines */
    MP_EPILOGUE, /* after "--boundary--"; bytes are ignored */
};

struct multipart {
    struct multipart_cb cb;
    void *ud;
    char delim[sizeof(DELIM_PREFIX) + MULTIPART_BOUNDARY_MAX];
    size_t delim_len;
    size_t headers_max; /* bytes per part */
    unsigned parts_max;
    enum mp_state state;
    size_t match;                        /* bytes of delim matched and held back */
    unsigned parts;                      /* parts begun */
    size_t hdr_total;                    /* header bytes of the current part, CRLFs included */
    struct buf line;                     /* the header line being read */
    struct buf vals;                     /* the part's decoded values, each NUL-terminated */
    size_t name, filename, content_type; /* offsets into vals, or NONE */
    bool disposition;                    /* Content-Disposition seen */
    int failed;                          /* first error returned, 0 = none */
};

static bool
in_set(unsigned char c, const char *extra)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr(extra, c));
}

#define BCHARS "'()+_,-./:=? "   /* RFC 2046, besides letters and digits */
#define TCHARS "!#$%&'*+-.^_`|~" /* RFC 9110 token */

static bool
boundary_valid(const char *b, size_t n)
{
    if (n < 1 || n > MULTIPART_BOUNDARY_MAX || b[n - 1] == ' ')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!in_set((unsigned char)b[i], BCHARS))
            return false;
    return true;
}

static bool
name_is(const char *name, size_t n, const char *want)
{
    return n == strlen(want) && !strncasecmp(name, want, n);
}

/* Moves *s to the next "name=value" parameter, past blanks and a ';': 1
 * when there is one, 0 at the end (a trailing ';' is fine), -EPROTO on
 * anything else. */
static int
param_next(const char **s)
{
    const char *p = *s + strspn(*s, " \t");
    if (*p == ';')
        p += 1 + strspn(p + 1, " \t");
    else if (*p)
        return -EPROTO;
    *s = p;
    return *p != '\0';
}

/* Reads the parameter at *s: its name (length in *ret_nlen) and its value,
 * a token or a quoted string, appended to val. In quoted strings a
 * backslash escapes any character, or in form-data (whatwg) only a quote,
 * and there %22, %0D and %0A are decoded too. -EPROTO when malformed. */
static int
param(const char **s, size_t *ret_nlen, struct buf *val, bool whatwg)
{
    static const char *const pct[] = {"%22\"", "%0d\r", "%0a\n"};
    const char *p = *s;
    size_t n = 0;
    int r = 0;

    while (in_set((unsigned char)p[n], TCHARS))
        n++;
    *ret_nlen = n;
    p += n + strspn(p + n, " \t");
    if (n == 0 || *p != '=')
        return -EPROTO;
    p += 1 + strspn(p + 1, " \t");
    if (*p != '"') {
        n = strcspn(p, "; \t\"");
        *s = p + n;
        return n ? buf_put(val, p, n) : -EPROTO;
    }
    for (p++; *p && *p != '"' && r >= 0; p++) {
        char c = *p;
        if (c == '\\' && p[1] && (!whatwg || p[1] == '"'))
            c = *++p;
        else if (c == '%' && whatwg)
            for (size_t k = 0; k < ELEMENTSOF(pct); k++)
                if (!strncasecmp(p, pct[k], 3)) {
                    c = pct[k][3];
                    p += 2;
                    break;
                }
        r = buf_putc(val, c);
    }
    if (r < 0)
        return r;
    if (*p != '"')
        return -EPROTO;
    *s = p + 1;
    return 0;
}

int
multipart_boundary(const char *content_type, char *out, size_t outlen, struct err *err)
{
    _cleanup_buf_ struct buf val = {0};
    char boundary[MULTIPART_BOUNDARY_MAX + 1] = "";
    const char *s = content_type + strspn(content_type, " \t");
    size_t n = strcspn(s, "; \t");
    int r;

    buf_init(&val, strlen(s)); /* no value is longer than the header */
    if (!name_is(s, n, "multipart/form-data"))
        return err_set(err, EINVAL, "Content-Type is not multipart/form-data");
    s += n;
    while ((r = param_next(&s)) > 0) {
        const char *name = s;
        buf_reset(&val);
        r = param(&s, &n, &val, false);
        if (r < 0)
            break;
        if (!name_is(name, n, "boundary"))
            continue;
        if (boundary[0])
            return err_set(err, EINVAL, "Content-Type has two boundary parameters");
        if (!boundary_valid(val.data, val.len))
            return err_set(err, EINVAL, "multipart boundary must be 1 to %d of A-Z a-z 0-9 %s",
                           MULTIPART_BOUNDARY_MAX, BCHARS);
        memcpy(boundary, val.data, val.len + 1);
    }
    if (r < 0)
        return r == -EPROTO ? err_set(err, EINVAL, "malformed Content-Type parameters") : r;
    if (!boundary[0])
        return err_set(err, EINVAL, "multipart/form-data without a boundary");
    /* out is written only on success */
    if (outlen <= strlen(boundary))
        return err_set(err, ENOBUFS, "no room for the multipart boundary");
    memcpy(out, boundary, strlen(boundary) + 1);
    return 0;
}

int
multipart_new(const char *boundary, const struct multipart_cb *cb, void *ud, struct multipart **ret)
{
    size_t n = strnlen(boundary, MULTIPART_BOUNDARY_MAX + 1);
    struct multipart *mp;

    if (!boundary_valid(boundary, n))
        return -EINVAL;
    mp = calloc(1, sizeof(*mp));
    if (!mp)
        return -ENOMEM;
    if (cb)
        mp->cb = *cb;
    mp->ud = ud;
    memcpy(mp->delim, DELIM_PREFIX, strlen(DELIM_PREFIX));
    memcpy(mp->delim + strlen(DELIM_PREFIX), boundary, n);
    mp->delim_len = strlen(DELIM_PREFIX) + n;
    mp->state = MP_PREAMBLE;
    mp->match = 2; /* the CRLF the body is taken to begin with */
    buf_init(&mp->line, 0);
    buf_init(&mp->vals, 0);
    multipart_set_limits(mp, MULTIPART_HEADERS_MAX, MULTIPART_PARTS_MAX);
    *ret = mp;
    return 0;
}

struct multipart *
multipart_free(struct multipart *mp)
{
    if (!mp)
        return NULL;
    buf_done(&mp->line);
    buf_done(&mp->vals);
    free(mp);
    return NULL;
}

void
multipart_set_limits(struct multipart *mp, size_t headers_max, unsigned parts_max)
{
    mp->headers_max = headers_max;
    mp->parts_max = parts_max;
    /* Neither buffer can outgrow the header bytes it came from. */
    mp->line.max = headers_max;
    mp->vals.max = headers_max < SIZE_MAX - 3 ? headers_max + 3 : SIZE_MAX;
}

static int
emit(struct multipart *mp, const void *data, size_t n)
{
    if (mp->state != MP_BODY || n == 0 || !mp->cb.part_data)
        return 0;
    return mp->cb.part_data(mp->ud, data, n);
}

/* Looks for the delimiter in data[*pos..len), handing what precedes it to
 * part_data() in MP_BODY. Returns 1 when a delimiter ends at the new *pos,
 * 0 when the chunk is used up, or a callback's error. */
static int
scan(struct multipart *mp, const uint8_t *data, size_t len, size_t *pos)
{
    size_t i = *pos, run = i; /* data[run..) is content not yet handed out */
    size_t held = mp->match;  /* matched bytes from earlier chunks */
    int r;

    while (i < len) {
        if (mp->match == 0) {
            if (data[i] != '\r') {
                const uint8_t *cr = memchr(data + i, '\r', len - i);
                if (!cr) {
                    i = len;
                    break;
                }
                i = (size_t)(cr - data);
            }
            i++;
            mp->match = 1;
        } else if (data[i] == (uint8_t)mp->delim[mp->match]) {
            i++;
            if (++mp->match == mp->delim_len) {
                r = emit(mp, data + run, i - (mp->match - held) - run);
                mp->match = 0;
                *pos = i;
                return r < 0 ? r : 1;
            }
        } else {
            /* Not a delimiter: what was held back is content after all, and
             * the bytes matched in this chunk stay in the run. data[i] is
             * looked at again, as it may begin a delimiter. */
            if (held) {
                r = emit(mp, mp->delim, held);
                if (r < 0)
                    return r;
                held = 0;
            }
            mp->match = 0;
        }
    }
    r = emit(mp, data + run, len - (mp->match - held) - run);
    *pos = len;
    return r < 0 ? r : 0;
}

static int
parse_disposition(struct multipart *mp, const char *s, struct err *err)
{
    size_t n = strcspn(s, "; \t");
    int r;

    if (!name_is(s, n, "form-data"))
        return err_set(err, EPROTO, "multipart part is not form-data");
    s += n;
    while ((r = param_next(&s)) > 0) {
        const char *name = s;
        size_t off = mp->vals.len, *slot = NULL;
        r = param(&s, &n, &mp->vals, true);
        if (r >= 0)
            r = buf_putc(&mp->vals, '\0');
        if (r < 0)
            break;
        if (name_is(name, n, "name"))
            slot = &mp->name;
        else if (name_is(name, n, "filename"))
            slot = &mp->filename;
        if (!slot) {
            mp->vals.len = off; /* a parameter we do not use */
            mp->vals.data[off] = '\0';
        } else if (*slot != NONE)
            return err_set(err, EPROTO, "multipart Content-Disposition repeats '%.*s'", (int)n,
                           name);
        else
            *slot = off;
    }
    if (r == -EPROTO)
        return err_set(err, EPROTO, "malformed multipart Content-Disposition");
    if (r < 0)
        return err_set(err, -r, "cannot store multipart part header");
    return 0;
}

/* The line is in mp->line without its LF. */
static int
header_line(struct multipart *mp, struct err *err)
{
    char *l = mp->line.data;
    size_t len = mp->line.len;
    int r;

    if (len == 0 || l[len - 1] != '\r')
        return err_set(err, EPROTO, "multipart header line does not end in CRLF");
    l[--len] = '\0';
    if (len == 0) {
        const struct multipart_part p = {
                .name = mp->name == NONE ? NULL : mp->vals.data + mp->name,
                .filename = mp->filename == NONE ? NULL : mp->vals.data + mp->filename,
                .content_type = mp->content_type == NONE ? NULL : mp->vals.data + mp->content_type,
        };
        mp->state = MP_BODY;
        mp->match = 0;
        return mp->cb.part_begin ? mp->cb.part_begin(mp->ud, &p) : 0;
    }
    if (l[0] == ' ' || l[0] == '\t')
        return err_set(err, EPROTO, "folded multipart header lines are not supported");
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)l[i] < 0x20 && l[i] != '\t') || l[i] == 0x7f)
            return err_set(err, EPROTO, "control character in a multipart header");
    size_t n = 0;
    while (in_set((unsigned char)l[n], TCHARS))
        n++;
    if (n == 0 || l[n] != ':')
        return err_set(err, EPROTO, "malformed multipart header line");

    char *v = l + n + 1;
    v += strspn(v, " \t");
    size_t vlen = strlen(v);
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        v[--vlen] = '\0';

    if (name_is(l, n, "content-disposition")) {
        if (mp->disposition)
            return err_set(err, EPROTO, "multipart part has two Content-Disposition headers");
        mp->disposition = true;
        return parse_disposition(mp, v, err);
    }
    if (name_is(l, n, "content-type")) {
        if (mp->content_type != NONE)
            return err_set(err, EPROTO, "multipart part has two Content-Type headers");
        mp->content_type = mp->vals.len;
        r = buf_put(&mp->vals, v, vlen + 1);
        if (r < 0)
            return err_set(err, -r, "cannot store multipart part header");
    }
    return 0; /* other headers are ignored */
}

static int
headers(struct multipart *mp, const uint8_t *data, size_t len, size_t *pos, struct err *err)
{
    const uint8_t *p = data + *pos;
    const uint8_t *nl = memchr(p, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - p) + 1 : len - *pos;
    int r;

    if (n > mp->headers_max - mp->hdr_total)
        return err_set(err, EMSGSIZE, "multipart part headers exceed %zu bytes", mp->headers_max);
    mp->hdr_total += n;
    *pos += n;
    r = buf_put(&mp->line, p, nl ? n - 1 : n);
    if (r < 0)
        return err_set(err, -r, "cannot store multipart part header");
    if (!nl)
        return 0;
    r = header_line(mp, err);
    buf_reset(&mp->line);
    return r;
}

static int
part_start(struct multipart *mp, struct err *err)
{
    if (mp->parts >= mp->parts_max)
        return err_set(err, EMSGSIZE, "multipart body has more than %u parts", mp->parts_max);
    mp->parts++;
    mp->hdr_total = 0;
    buf_reset(&mp->line);
    buf_reset(&mp->vals);
    mp->name = mp->filename = mp->content_type = NONE;
    mp->disposition = false;
    mp->state = MP_HEADERS;
    return 0;
}

static int
step(struct multipart *mp, const uint8_t *data, size_t len, size_t *pos, struct err *err)
{
    int r;

    switch (mp->state) {
    case MP_PREAMBLE:
    case MP_BODY:
        r = scan(mp, data, len, pos);
        if (r <= 0)
            return r;
        r = mp->state == MP_BODY && mp->cb.part_end ? mp->cb.part_end(mp->ud) : 0;
        mp->state = MP_AFTER;
        return r;
    case MP_HEADERS:
        return headers(mp, data, len, pos, err);
    case MP_EPILOGUE:
        *pos = len;
        return 0;
    default:
        break;
    }

    uint8_t c = data[(*pos)++];
    if (mp->state == MP_AFTER && c == '-')
        mp->state = MP_DASH;
    else if (mp->state == MP_DASH && c == '-')
        mp->state = MP_EPILOGUE;
    else if ((mp->state == MP_AFTER || mp->state == MP_PADDING) && (c == ' ' || c == '\t'))
        mp->state = MP_PADDING;
    else if ((mp->state == MP_AFTER || mp->state == MP_PADDING) && c == '\r')
        mp->state = MP_LF;
    else if (mp->state == MP_LF && c == '\n')
        return part_start(mp, err);
    else
        return err_set(err, EPROTO, "multipart boundary followed by junk");
    return 0;
}

int
multipart_feed(struct multipart *mp, const void *data, size_t len, struct err *err)
{
    size_t pos = 0;

    if (mp->failed)
        return err_set(err, -mp->failed, "multipart body already failed");
    while (pos < len) {
        int r = step(mp, data, len, &pos, err);
        if (r < 0)
            return mp->failed = r;
    }
    return 0;
}

int
multipart_finish(struct multipart *mp, struct err *err)
{
    if (mp->failed)
        return err_set(err, -mp->failed, "multipart body already failed");
    if (mp->state == MP_EPILOGUE)
        return 0;
    return mp->failed = err_set(err, EPROTO, "multipart body ends %s",
                                mp->state == MP_PREAMBLE  ? "before its first boundary"
                                : mp->state == MP_HEADERS ? "inside part headers"
                                                          : "before its closing boundary");
}
