/*
 * httpresp.c - a byte-at-a-time state machine for the framing, and an
 * in-place parse of the head once its blank line has arrived.
 *
 * The head is collected whole (bounded) before it is looked at, so header
 * pointers stay valid and the checks need no incremental state. The body
 * states never buffer: data bytes are handed out straight from the input.
 */
#include "http/httpresp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"
#include "util/parse.h"

enum state {
    S_HEAD,
    S_LENGTH,
    S_CLOSE,
    S_CH_SIZE,
    S_CH_EXT,
    S_CH_SIZE_LF,
    S_CH_DATA,
    S_CH_DATA_CR,
    S_CH_DATA_LF,
    S_CH_TRAILER,
    S_DONE,
    S_FAILED,
};

struct httpresp {
    bool head_request;
    enum state st;
    int error;         /* S_FAILED: what every call returns */
    struct buf head;   /* the raw head, parsed in place */
    size_t line_bytes; /* bytes of the current head or trailer line, without its LF */
    char last;         /* the byte before, in head and trailer lines */
    unsigned status, minor;
    const char *reason;
    struct httpresp_header hdr[HTTPRESP_HEADERS_MAX];
    size_t nhdr;
    enum httpresp_body kind;
    uint64_t length;    /* Content-Length */
    uint64_t remaining; /* bytes of the body or the current chunk still to come */
    bool size_digits;   /* the chunk-size line has a digit */
    size_t trailer_bytes;
};

int
httpresp_new(bool head_request, struct httpresp **ret)
{
    struct httpresp *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->head_request = head_request;
    buf_init(&p->head, HTTPRESP_HEAD_MAX);
    *ret = p;
    return 0;
}

struct httpresp *
httpresp_free(struct httpresp *p)
{
    if (p) {
        buf_done(&p->head);
        free(p);
    }
    return NULL;
}

static int
fail(struct httpresp *p, int r, struct err *err, const char *msg)
{
    p->st = S_FAILED;
    p->error = r;
    if (msg)
        (void)err_set(err, -r, "%s", msg);
    return r;
}

/* --- the head --- */

static bool
is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Field values and reason phrases: HT, SP, VCHAR, obs-text. */
static bool
is_text(unsigned char c)
{
    return c == '\t' || (c >= ' ' && c != 0x7f);
}

static char *
trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    return s;
}

static int
parse_status(struct httpresp *p, char *line, char *end, struct err *err)
{
    size_t n = (size_t)(end - line);
    if (n < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
        line[8] != ' ')
        return fail(p, -EPROTO, err, "the status line is not 'HTTP/1.x <code> <reason>'");
    unsigned code = 0;
    for (int i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9')
            return fail(p, -EPROTO, err, "the status code is not three digits");
        code = code * 10 + (unsigned)(line[i] - '0');
    }
    if (code < 100)
        return fail(p, -EPROTO, err, "the status code is below 100");
    if (n > 12 && line[12] != ' ')
        return fail(p, -EPROTO, err, "the status code is not three digits");
    for (char *c = line + 12; c < end; c++)
        if (!is_text((unsigned char)*c))
            return fail(p, -EPROTO, err, "the reason phrase has a control character");
    p->minor = (unsigned)(line[7] - '0');
    p->status = code;
    p->reason = n > 13 ? trim(line + 13, end) : "";
    return 0;
}

static int
parse_field(struct httpresp *p, char *line, char *end, struct err *err)
{
    if (*line == ' ' || *line == '\t')
        return fail(p, -EPROTO, err, "a header field is folded over lines (obs-fold)");
    char *colon = line;
    while (colon < end && is_tchar((unsigned char)*colon))
        colon++;
    if (colon == line || colon == end || *colon != ':')
        return fail(p, -EPROTO, err, "a header field name is not a token followed by ':'");
    for (char *c = colon + 1; c < end; c++)
        if (!is_text((unsigned char)*c))
            return fail(p, -EPROTO, err, "a header field value has a control character");
    if (p->nhdr == HTTPRESP_HEADERS_MAX)
        return fail(p, -EMSGSIZE, err, "the response has too many header fields");
    *colon = '\0';
    p->hdr[p->nhdr].name = line;
    p->hdr[p->nhdr].value = trim(colon + 1, end);
    p->nhdr++;
    return 0;
}

/* Calls fn on each element of a comma-separated list (RFC 9110 5.6.1),
 * trimmed, skipping empty ones; stops at fn's first non-zero. */
static int
each_element(const char *v, int (*fn)(const char *s, size_t n, void *ud), void *ud)
{
    while (*v) {
        const char *e = strchr(v, ',');
        const char *stop = e ? e : v + strlen(v);
        const char *s = v;
        while (s < stop && (*s == ' ' || *s == '\t'))
            s++;
        const char *t = stop;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if (t > s) {
            int r = fn(s, (size_t)(t - s), ud);
            if (r)
                return r;
        }
        if (!e)
            break;
        v = e + 1;
    }
    return 0;
}

struct te_state {
    unsigned codings;
    bool chunked; /* the only coding is chunked */
};

static int
te_element(const char *s, size_t n, void *ud)
{
    struct te_state *t = ud;
    t->codings++;
    t->chunked = t->codings == 1 && n == 7 && !strncasecmp(s, "chunked", 7);
    return 0;
}

struct cl_state {
    bool seen;
    uint64_t v;
};

static int
cl_element(const char *s, size_t n, void *ud)
{
    struct cl_state *c = ud;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return -EPROTO;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (c->seen && c->v != v)
        return -EPROTO;
    c->seen = true;
    c->v = v;
    return 0;
}

/* Works out the body's framing (RFC 9112 6.3). */
static int
framing(struct httpresp *p, struct err *err)
{
    struct te_state te = {0};
    struct cl_state cl = {0};
    bool have_te = false, have_cl = false;

    for (size_t i = 0; i < p->nhdr; i++) {
        const struct httpresp_header *h = &p->hdr[i];
        if (!strcasecmp(h->name, "Transfer-Encoding")) {
            have_te = true;
            (void)each_element(h->value, te_element, &te);
        } else if (!strcasecmp(h->name, "Content-Length")) {
            have_cl = true;
            if (each_element(h->value, cl_element, &cl) < 0)
                return fail(p, -EPROTO, err, "Content-Length is malformed or conflicting");
        }
    }
    if (p->head_request || p->status < 200 || p->status == 204 || p->status == 304) {
        p->kind = HTTPRESP_BODY_NONE;
        p->st = S_DONE;
        return 0;
    }
    if (have_te) {
        if (!te.chunked)
            return fail(p, -EPROTO, err, "the only transfer coding supported is 'chunked'");
        p->kind = HTTPRESP_BODY_CHUNKED;
        p->st = S_CH_SIZE;
        p->size_digits = false;
        p->remaining = 0;
        p->line_bytes = 0;
        return 0;
    }
    if (have_cl) {
        if (!cl.seen)
            return fail(p, -EPROTO, err, "Content-Length is empty");
        p->kind = HTTPRESP_BODY_LENGTH;
        p->length = p->remaining = cl.v;
        p->st = cl.v ? S_LENGTH : S_DONE;
        return 0;
    }
    p->kind = HTTPRESP_BODY_CLOSE;
    p->st = S_CLOSE;
    return 0;
}

/* The head (ending in its blank line) is in p->head: parse it in place. */
static int
parse_head(struct httpresp *p, struct err *err)
{
    char *s = p->head.data, *end = s + p->head.len;
    bool first = true;
    int r;

    p->nhdr = 0;
    while (s < end) {
        char *lf = memchr(s, '\n', (size_t)(end - s));
        char *le = lf; /* never NULL: the head ends in its blank line */
        if (le > s && le[-1] == '\r')
            le--;
        if (memchr(s, '\r', (size_t)(le - s)) || memchr(s, '\0', (size_t)(le - s)))
            return fail(p, -EPROTO, err, "a bare CR or a NUL in the response head");
        if (le == s)
            break; /* the blank line */
        r = first ? parse_status(p, s, le, err) : parse_field(p, s, le, err);
        if (r < 0)
            return r;
        first = false;
        s = lf + 1;
    }
    if (first)
        return fail(p, -EPROTO, err, "the response has no status line");
    return framing(p, err);
}

/* Collects head bytes; 1 once the blank line is in, with *used set. */
static int
scan_head(struct httpresp *p, const char *in, size_t len, size_t *used, struct err *err)
{
    size_t room = HTTPRESP_HEAD_MAX - p->head.len;
    for (size_t i = 0; i < len; i++) {
        if (i >= room)
            return fail(p, -EMSGSIZE, err, "the response head is larger than 64 KiB");
        char c = in[i];
        if (c == '\n') {
            bool blank = p->line_bytes == 0 || (p->line_bytes == 1 && p->last == '\r');
            p->line_bytes = 0;
            p->last = c;
            if (blank) {
                if (buf_put(&p->head, in, i + 1) < 0)
                    return fail(p, -ENOMEM, err, "out of memory");
                *used = i + 1;
                return 1;
            }
            continue;
        }
        p->line_bytes++;
        p->last = c;
    }
    if (buf_put(&p->head, in, len) < 0)
        return fail(p, -ENOMEM, err, "out of memory");
    *used = len;
    return 0;
}

/* --- the body --- */

static int
emit(struct httpresp *p, httpresp_body_fn body, void *ud, const char *data, size_t n)
{
    if (!body || n == 0)
        return 0;
    int r = body(ud, data, n);
    if (r < 0) {
        p->st = S_FAILED;
        p->error = r;
    }
    return r;
}

/* The chunk-size line is over. */
static int
size_line_done(struct httpresp *p, struct err *err)
{
    if (!p->size_digits)
        return fail(p, -EPROTO, err, "a chunk size has no digits");
    p->line_bytes = 0;
    p->last = 0;
    if (p->remaining == 0) {
        p->st = S_CH_TRAILER;
        p->trailer_bytes = 0;
    } else {
        p->st = S_CH_DATA;
    }
    return 0;
}

static int
feed_body(struct httpresp *p, const char *in, size_t len, httpresp_body_fn body, void *ud,
          size_t *ret_used, struct err *err)
{
    size_t i = 0;
    int r;

    while (i < len) {
        char c = in[i];
        size_t n;
        int h;

        switch (p->st) {
        case S_LENGTH:
            n = (size_t)MIN(p->remaining, (uint64_t)(len - i));
            if ((r = emit(p, body, ud, in + i, n)) < 0)
                return r;
            i += n;
            p->remaining -= n;
            if (p->remaining == 0) {
                p->st = S_DONE;
                *ret_used = i;
                return HTTPRESP_DONE;
            }
            break;
        case S_CLOSE:
            if ((r = emit(p, body, ud, in + i, len - i)) < 0)
                return r;
            i = len;
            break;
        case S_CH_SIZE:
            if (++p->line_bytes > HTTPRESP_LINE_MAX)
                return fail(p, -EMSGSIZE, err, "a chunk-size line is too long");
            h = parse_hex_digit(c);
            if (h >= 0) {
                if (p->remaining > (UINT64_MAX >> 4))
                    return fail(p, -EPROTO, err, "a chunk size is too large");
                p->remaining = p->remaining << 4 | (uint64_t)h;
                p->size_digits = true;
            } else if (c == ';' || c == ' ' || c == '\t') {
                p->st = S_CH_EXT;
            } else if (c == '\r') {
                p->st = S_CH_SIZE_LF;
            } else if (c == '\n') {
                if ((r = size_line_done(p, err)) < 0)
                    return r;
            } else {
                return fail(p, -EPROTO, err, "a chunk size is not hexadecimal");
            }
            i++;
            break;
        case S_CH_EXT:
            if (++p->line_bytes > HTTPRESP_LINE_MAX)
                return fail(p, -EMSGSIZE, err, "a chunk-size line is too long");
            if (c == '\r')
                p->st = S_CH_SIZE_LF;
            else if (c == '\n') {
                if ((r = size_line_done(p, err)) < 0)
                    return r;
            } else if (!is_text((unsigned char)c))
                return fail(p, -EPROTO, err, "a chunk extension has a control character");
            i++;
            break;
        case S_CH_SIZE_LF:
            if (c != '\n')
                return fail(p, -EPROTO, err, "a bare CR in a chunk-size line");
            if ((r = size_line_done(p, err)) < 0)
                return r;
            i++;
            break;
        case S_CH_DATA:
            n = (size_t)MIN(p->remaining, (uint64_t)(len - i));
            if ((r = emit(p, body, ud, in + i, n)) < 0)
                return r;
            i += n;
            p->remaining -= n;
            if (p->remaining == 0)
                p->st = S_CH_DATA_CR;
            break;
        case S_CH_DATA_CR:
        case S_CH_DATA_LF:
            if (c == '\r' && p->st == S_CH_DATA_CR) {
                p->st = S_CH_DATA_LF;
            } else if (c == '\n') {
                p->st = S_CH_SIZE;
                p->size_digits = false;
                p->remaining = 0;
                p->line_bytes = 0;
            } else {
                return fail(p, -EPROTO, err, "a chunk is longer than its size says");
            }
            i++;
            break;
        case S_CH_TRAILER:
            if (++p->trailer_bytes > HTTPRESP_HEAD_MAX)
                return fail(p, -EMSGSIZE, err, "the trailer is larger than 64 KiB");
            if (p->last == '\r' && c != '\n')
                return fail(p, -EPROTO, err, "a bare CR in the trailer");
            if (c == '\n') {
                bool blank = p->line_bytes == 0 || (p->line_bytes == 1 && p->last == '\r');
                p->line_bytes = 0;
                p->last = c;
                if (blank) {
                    p->st = S_DONE;
                    *ret_used = i + 1;
                    return HTTPRESP_DONE;
                }
            } else {
                if (c != '\r' && !is_text((unsigned char)c))
                    return fail(p, -EPROTO, err, "the trailer has a control character");
                p->line_bytes++;
                p->last = c;
            }
            i++;
            break;
        default:
            /* S_HEAD, S_DONE and S_FAILED are handled by the caller. */
            return fail(p, -EINVAL, err, "internal: bad parser state");
        }
    }
    *ret_used = len;
    return HTTPRESP_MORE;
}

int
httpresp_feed(struct httpresp *p, const void *in, size_t len, httpresp_body_fn body, void *ud,
              size_t *ret_used, struct err *err)
{
    const char *s = in;
    size_t at = 0, used = 0;
    int r;

    *ret_used = 0;
    if (p->st == S_FAILED)
        return p->error;
    if (p->st == S_DONE)
        return HTTPRESP_DONE;
    while (p->st == S_HEAD) {
        r = scan_head(p, s + at, len - at, &used, err);
        if (r < 0)
            return r;
        at += used;
        if (r == 0) {
            *ret_used = at;
            return HTTPRESP_MORE;
        }
        r = parse_head(p, err);
        if (r < 0)
            return r;
        if (p->status >= 100 && p->status < 200 && p->status != 101) {
            /* Interim (100 Continue, 103 Early Hints): skip it. */
            buf_reset(&p->head);
            p->line_bytes = 0;
            p->last = 0;
            p->nhdr = 0;
            p->st = S_HEAD;
            continue;
        }
        *ret_used = at;
        return HTTPRESP_HEAD;
    }
    if (p->st == S_DONE)
        return HTTPRESP_DONE;
    return feed_body(p, s, len, body, ud, ret_used, err);
}

int
httpresp_finish(struct httpresp *p, struct err *err)
{
    switch (p->st) {
    case S_DONE:
        return 0;
    case S_CLOSE:
        p->st = S_DONE;
        return 0;
    case S_FAILED:
        return p->error;
    case S_HEAD:
        return fail(p, -EPROTO, err,
                    p->head.len ? "the connection closed in the middle of the response head"
                                : "the connection closed without a response");
    case S_LENGTH:
        return fail(p, -EPROTO, err, "the connection closed before the end of the body");
    default:
        return fail(p, -EPROTO, err, "the connection closed before the last chunk");
    }
}

unsigned
httpresp_status(const struct httpresp *p)
{
    return p->status;
}

unsigned
httpresp_minor(const struct httpresp *p)
{
    return p->minor;
}

const char *
httpresp_reason(const struct httpresp *p)
{
    return p->reason ? p->reason : "";
}

size_t
httpresp_header_count(const struct httpresp *p)
{
    return p->nhdr;
}

const struct httpresp_header *
httpresp_header(const struct httpresp *p, size_t i)
{
    return i < p->nhdr ? &p->hdr[i] : NULL;
}

const char *
httpresp_get(const struct httpresp *p, const char *name)
{
    for (size_t i = 0; i < p->nhdr; i++)
        if (!strcasecmp(p->hdr[i].name, name))
            return p->hdr[i].value;
    return NULL;
}

enum httpresp_body
httpresp_body_kind(const struct httpresp *p)
{
    return p->kind;
}

uint64_t
httpresp_content_length(const struct httpresp *p)
{
    return p->length;
}
