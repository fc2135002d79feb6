/*
 * schema.c - the schema subset of tool commands: checking a schema, and
 * validating one call's arguments against it.
 *
 * Both directions walk the schema with fixed nesting (schema, property,
 * items), so neither recursion nor work depends on anything but the sizes
 * the TOOL_SCHEMA_MAX_* limits bound. Messages are built in a local buffer
 * and cut at a character boundary into struct err; sdk/python/abx_tool.py
 * builds the same text, so keep the two in step (tests/python checks it).
 * This file does not call err_set(): it is compiled into libabxtool.a,
 * which must not carry util's symbols.
 */
#include "tools/schema.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ENUM_LIST_MAX 8 /* enum values a message lists before "..." */

/* jansson's iterators take non-const pointers; they do not modify. */
static json_t *
unconst(const json_t *v)
{
    return (json_t *)(uintptr_t)v;
}

/* A message under construction; longer than struct err's so it can be cut
 * at a character boundary. */
struct msg {
    char s[4 * ERR_MSG_MAX];
    size_t len;
};

static void
msg_addn(struct msg *m, const char *s, size_t n)
{
    size_t room = sizeof(m->s) - 1 - m->len;
    if (n > room)
        n = room;
    memcpy(m->s + m->len, s, n);
    m->len += n;
    m->s[m->len] = '\0';
}

static void
msg_add(struct msg *m, const char *s)
{
    msg_addn(m, s, strlen(s));
}

_printf_(2, 3) static void msg_addf(struct msg *m, const char *fmt, ...)
{
    char tmp[ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        msg_add(m, tmp);
}

/* Whether code point c is shown escaped: C0 and C1 controls, DEL, and the
 * invisible direction and line-separator characters a terminal or log
 * viewer would act on. */
static bool
cp_escaped(uint32_t c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x200e || c == 0x200f ||
           (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff ||
           (c >= 0xd800 && c <= 0xdfff);
}

/* Decodes one UTF-8 sequence of s[0..n); invalid bytes decode as themselves
 * (jansson strings are valid UTF-8, C strings from an author may not be). */
static size_t
utf8_next(const unsigned char *s, size_t n, uint32_t *ret)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;

    if (c < 0x80) {
        *ret = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        *ret = c;
        return 1;
    }
    if (len > n) {
        *ret = c;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *ret = c;
            return 1;
        }
        cp = cp << 6 | (s[i] & 0x3f);
    }
    *ret = cp;
    return len;
}

/* Appends s[0..n) with quote and backslash escaped and escaped code points
 * as \uXXXX, cut after TOOL_SCHEMA_QUOTE_MAX characters with "...". A quote
 * of 0 only escapes code points, without quotes or a cut (for messages of
 * jansson's, which are bounded and may quote input). */
static void
msg_quote(struct msg *m, const char *s, size_t n, char quote)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, chars = 0;

    if (quote)
        msg_addn(m, &quote, 1);
    while (i < n) {
        uint32_t c;
        size_t l = utf8_next(u + i, n - i, &c);
        if (quote && chars == TOOL_SCHEMA_QUOTE_MAX) {
            msg_add(m, "...");
            break;
        }
        if (quote && (c == (unsigned char)quote || c == '\\')) {
            char e[2] = {'\\', (char)c};
            msg_addn(m, e, 2);
        } else if (cp_escaped(c) || (l == 1 && c >= 0x80)) {
            msg_addf(m, "\\u%04x", (unsigned)c);
        } else {
            msg_addn(m, s + i, l);
        }
        i += l;
        chars++;
    }
    if (quote)
        msg_addn(m, &quote, 1);
}

static void
msg_name(struct msg *m, const char *name)
{
    msg_quote(m, name, strlen(name), '\'');
}

static void
msg_str(struct msg *m, const json_t *s)
{
    msg_quote(m, json_string_value(s), json_string_length(s), '"');
}

/* Appends a number as jansson encodes it: integers in decimal, reals with
 * 17 significant digits, always with a '.' or an exponent, and exponents
 * without '+' or leading zeros. */
static void
msg_number(struct msg *m, const json_t *v)
{
    char b[64];

    if (json_is_integer(v)) {
        msg_addf(m, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    int n = snprintf(b, sizeof(b) - 3, "%.17g", json_real_value(v));
    if (n <= 0 || (size_t)n >= sizeof(b) - 3)
        return;
    for (char *p = b; *p; p++)
        if (*p == ',')
            *p = '.';
    if (!strchr(b, '.') && !strchr(b, 'e'))
        memcpy(b + n, ".0", 3); /* room reserved above */
    char *e = strchr(b, 'e');
    if (e) {
        char *d = e + 1, *src = e + 1;
        if (*src == '-')
            *d++ = *src++;
        else if (*src == '+')
            src++;
        while (*src == '0' && src[1])
            src++;
        memmove(d, src, strlen(src) + 1);
    }
    msg_add(m, b);
}

/* Copies the message into err (unless err is NULL or already set), cut at
 * a character boundary to fit. Returns -EINVAL. */
static int
msg_fail(struct err *err, const struct msg *m)
{
    if (!err || err->msg[0])
        return -EINVAL;
    size_t n = m->len;
    if (n > ERR_MSG_MAX - 1) {
        n = ERR_MSG_MAX - 1;
        while (n > 0 && ((unsigned char)m->s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(err->msg, m->s, n);
    err->msg[n] = '\0';
    err->errnum = EINVAL;
    return -EINVAL;
}

_printf_(2, 3) static int fail(struct err *err, const char *fmt, ...)
{
    struct msg m = {.len = 0};
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(m.s, sizeof(m.s), fmt, ap);
    va_end(ap);
    m.len = n < 0 ? 0 : MIN((size_t)n, sizeof(m.s) - 1);
    return msg_fail(err, &m);
}

/* "property 'x'" or "property 'x' items" for schema messages. */
static void
msg_where(struct msg *m, const char *name, bool items)
{
    msg_add(m, "property ");
    msg_name(m, name);
    if (items)
        msg_add(m, " items");
    msg_add(m, ": ");
}

/* The value kinds messages name, with their article. */
static const char *
kind_of(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        break;
    }
    return "null";
}

static bool
str_is(const json_t *v, const char *s)
{
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

static bool
str_has_nul(const json_t *s)
{
    return strlen(json_string_value(s)) != json_string_length(s);
}

static size_t
utf8_chars(const json_t *s)
{
    const char *p = json_string_value(s);
    size_t n = json_string_length(s), chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)p[i] & 0xc0) != 0x80;
    return chars;
}

/* Exact three-way comparison of two JSON numbers (integers beyond 2^53
 * included, which a conversion to double would round). */
static int
num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    if (json_is_real(a) && json_is_real(b)) {
        double x = json_real_value(a), y = json_real_value(b);
        return (x > y) - (x < y);
    }
    if (json_is_real(a))
        return -num_cmp(b, a);
    /* a integer, b real */
    json_int_t x = json_integer_value(a);
    double y = json_real_value(b);
    if (y >= 9223372036854775808.0)
        return -1;
    if (y < -9223372036854775808.0)
        return 1;
    json_int_t t = (json_int_t)y; /* truncates toward zero, exact in range */
    if (x != t)
        return x < t ? -1 : 1;
    double frac = y - (double)t;
    return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
}

/*
 * Validation of one value.
 */

enum ptype {
    PT_STRING,
    PT_INTEGER,
    PT_NUMBER,
    PT_BOOLEAN,
    PT_ARRAY,
    _PT_MAX,
    _PT_INVALID = -EINVAL,
};

static const char *const ptype_names[_PT_MAX] = {
        [PT_STRING] = "string",   [PT_INTEGER] = "integer", [PT_NUMBER] = "number",
        [PT_BOOLEAN] = "boolean", [PT_ARRAY] = "array",
};

static const char *const ptype_kinds[_PT_MAX] = {
        [PT_STRING] = "a string",   [PT_INTEGER] = "an integer",        [PT_NUMBER] = "a number",
        [PT_BOOLEAN] = "a boolean", [PT_ARRAY] = "an array of strings",
};

static enum ptype
ptype_of(const json_t *prop)
{
    const json_t *t = json_object_get(prop, "type");
    for (int i = 0; i < _PT_MAX; i++)
        if (str_is(t, ptype_names[i]))
            return (enum ptype)i;
    return _PT_INVALID;
}

/* Starts a value message: 'name' or 'name'[i]. */
static void
msg_subject(struct msg *m, const char *name, long index)
{
    msg_name(m, name);
    if (index >= 0)
        msg_addf(m, "[%ld]", index);
}

static int
fail_length(struct err *err, const char *name, long index, const char *what, const json_t *bound,
            const char *unit)
{
    struct msg m = {.len = 0};
    json_int_t b = json_integer_value(bound);
    msg_subject(&m, name, index);
    msg_addf(&m, " must %s %s %" JSON_INTEGER_FORMAT " %s%s", strcmp(unit, "item") ? "be" : "have",
             what, b, unit, b == 1 ? "" : "s");
    if (!strcmp(unit, "character"))
        msg_add(&m, " long");
    return msg_fail(err, &m);
}

/* A string value against a string schema (a property or array items). */
static int
validate_string(const json_t *prop, const char *name, long index, const json_t *v, struct err *err)
{
    struct msg m = {.len = 0};
    const json_t *e, *b;

    if (!json_is_string(v)) {
        msg_subject(&m, name, index);
        msg_addf(&m, " must be a string, not %s", kind_of(v));
        return msg_fail(err, &m);
    }
    if (str_has_nul(v)) {
        msg_subject(&m, name, index);
        msg_add(&m, " must not contain NUL characters");
        return msg_fail(err, &m);
    }
    e = json_object_get(prop, "enum");
    if (e) {
        size_t i;
        json_t *c;
        json_array_foreach (e, i, c) {
            if (json_equal(c, unconst(v)))
                return 0;
        }
        msg_subject(&m, name, index);
        msg_add(&m, " must be one of ");
        json_array_foreach (e, i, c) {
            if (i == ENUM_LIST_MAX) {
                msg_add(&m, ", ...");
                break;
            }
            if (i > 0)
                msg_add(&m, ", ");
            msg_str(&m, c);
        }
        msg_add(&m, " (got ");
        msg_str(&m, v);
        msg_add(&m, ")");
        return msg_fail(err, &m);
    }
    b = json_object_get(prop, "minLength");
    if (b && utf8_chars(v) < (size_t)json_integer_value(b))
        return fail_length(err, name, index, "at least", b, "character");
    b = json_object_get(prop, "maxLength");
    if (b && utf8_chars(v) > (size_t)json_integer_value(b))
        return fail_length(err, name, index, "at most", b, "character");
    return 0;
}

static int
validate_value(const json_t *prop, const char *name, const json_t *v, struct err *err)
{
    struct msg m = {.len = 0};
    enum ptype t = ptype_of(prop);
    bool ok;

    switch (t) {
    case PT_STRING:
        return validate_string(prop, name, -1, v, err);
    case PT_INTEGER:
        ok = json_is_integer(v);
        break;
    case PT_NUMBER:
        ok = json_is_number(v);
        break;
    case PT_BOOLEAN:
        ok = json_is_boolean(v);
        break;
    case PT_ARRAY:
        ok = json_is_array(v);
        break;
    default:
        return fail(err, "property '%s' has no supported type", name);
    }
    if (!ok) {
        msg_name(&m, name);
        msg_addf(&m, " must be %s, not %s", ptype_kinds[t], kind_of(v));
        return msg_fail(err, &m);
    }

    if (t == PT_INTEGER || t == PT_NUMBER) {
        static const char *const keys[] = {"minimum", "maximum"};
        for (int i = 0; i < 2; i++) {
            const json_t *b = json_object_get(prop, keys[i]);
            if (!b || num_cmp(v, b) * (i == 0 ? -1 : 1) <= 0)
                continue;
            msg_name(&m, name);
            msg_add(&m, i == 0 ? " must be at least " : " must be at most ");
            msg_number(&m, b);
            msg_add(&m, " (got ");
            msg_number(&m, v);
            msg_add(&m, ")");
            return msg_fail(err, &m);
        }
    }

    if (t == PT_ARRAY) {
        const json_t *items = json_object_get(prop, "items");
        const json_t *b;
        size_t i;
        json_t *c;

        b = json_object_get(prop, "minItems");
        if (b && json_array_size(v) < (size_t)json_integer_value(b))
            return fail_length(err, name, -1, "at least", b, "item");
        b = json_object_get(prop, "maxItems");
        if (b && json_array_size(v) > (size_t)json_integer_value(b))
            return fail_length(err, name, -1, "at most", b, "item");
        json_array_foreach (v, i, c) {
            int r = validate_string(items, name, (long)MIN(i, (size_t)LONG_MAX), c, err);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

TOOL_SCHEMA_API int
tool_schema_validate(const json_t *schema, const json_t *args, struct err *err)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *req = json_object_get(schema, "required");
    bool closed = json_is_false(json_object_get(schema, "additionalProperties"));
    struct msg m = {.len = 0};
    const char *k;
    json_t *v;

    if (!json_is_object(args))
        return fail(err, "arguments must be a JSON object, not %s", kind_of(args));

    json_object_foreach (unconst(args), k, v) {
        if (closed && !json_object_get(props, k)) {
            size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
            msg_add(&m, "unknown argument ");
            msg_quote(&m, k, klen, '\'');
            return msg_fail(err, &m);
        }
    }

    json_object_foreach (unconst(props), k, v) {
        const json_t *a = json_object_get(args, k);
        if (!a) {
            size_t i;
            json_t *r;
            json_array_foreach (req, i, r) {
                if (str_is(r, k)) {
                    msg_name(&m, k);
                    msg_add(&m, " is required");
                    return msg_fail(err, &m);
                }
            }
            continue;
        }
        int r = validate_value(v, k, a, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/*
 * Checking a schema.
 */

static bool
name_ok(const char *s, size_t len)
{
    if (len == 0 || len > TOOL_SCHEMA_MAX_NAME || strlen(s) != len)
        return false;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static int
check_text(const json_t *v, const char *name, bool items, const char *key, struct err *err)
{
    struct msg m = {.len = 0};

    if (name)
        msg_where(&m, name, items);
    else
        msg_add(&m, "schema: ");
    if (!json_is_string(v))
        msg_addf(&m, "\"%s\" must be a string, not %s", key, kind_of(v));
    else if (json_string_length(v) > TOOL_SCHEMA_MAX_TEXT)
        msg_addf(&m, "\"%s\" is longer than %d bytes", key, TOOL_SCHEMA_MAX_TEXT);
    else if (str_has_nul(v))
        msg_addf(&m, "\"%s\" contains a NUL character", key);
    else
        return 0;
    return msg_fail(err, &m);
}

/* minLength, maxLength, minItems, maxItems: a non-negative integer. */
static int
check_count(const json_t *v, const char *name, bool items, const char *key, struct err *err)
{
    struct msg m = {.len = 0};

    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return 0;
    msg_where(&m, name, items);
    msg_addf(&m, "\"%s\" must be a non-negative integer", key);
    return msg_fail(err, &m);
}

/* min <= max for a pair of keywords both present. */
static int
check_order(const json_t *prop, const char *name, bool items, const char *lo, const char *hi,
            struct err *err)
{
    struct msg m = {.len = 0};
    const json_t *a = json_object_get(prop, lo), *b = json_object_get(prop, hi);

    if (!a || !b || num_cmp(a, b) <= 0)
        return 0;
    msg_where(&m, name, items);
    msg_addf(&m, "\"%s\" is greater than \"%s\"", lo, hi);
    return msg_fail(err, &m);
}

static int
check_enum(const json_t *e, const char *name, bool items, struct err *err)
{
    struct msg m = {.len = 0};
    size_t i;
    json_t *c;

    msg_where(&m, name, items);
    if (!json_is_array(e) || json_array_size(e) == 0 || json_array_size(e) > TOOL_SCHEMA_MAX_ENUM) {
        msg_addf(&m, "\"enum\" must be an array of 1 to %d strings", TOOL_SCHEMA_MAX_ENUM);
        return msg_fail(err, &m);
    }
    json_array_foreach (e, i, c) {
        int r = check_text(c, name, items, "enum", err);
        if (r < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(e, j), c)) {
                msg_add(&m, "\"enum\" lists ");
                msg_str(&m, c);
                msg_add(&m, " twice");
                return msg_fail(err, &m);
            }
    }
    return 0;
}

/* Which type a keyword applies to; -1 for every type. */
struct keyword {
    const char *name;
    int only;      /* enum ptype, or -1 */
    bool in_items; /* allowed in array items */
};

static const struct keyword keywords[] = {
        {"type", -1, true},
        {"description", -1, true},
        {"title", -1, true},
        {"default", -1, false},
        {"enum", PT_STRING, true},
        {"minLength", PT_STRING, true},
        {"maxLength", PT_STRING, true},
        {"minimum", PT_INTEGER, false}, /* and PT_NUMBER */
        {"maximum", PT_INTEGER, false}, /* and PT_NUMBER */
        {"items", PT_ARRAY, false},
        {"minItems", PT_ARRAY, false},
        {"maxItems", PT_ARRAY, false},
};

static int
check_property(const json_t *prop, const char *name, bool items, struct err *err)
{
    struct msg m = {.len = 0};
    enum ptype t;
    const char *k;
    json_t *v;
    int r;

    msg_where(&m, name, items);
    if (!json_is_object(prop)) {
        msg_addf(&m, "the schema must be an object, not %s", kind_of(prop));
        return msg_fail(err, &m);
    }
    t = ptype_of(prop);
    if (t < 0 || (items && t != PT_STRING)) {
        const json_t *tv = json_object_get(prop, "type");
        if (!tv)
            msg_add(&m, "\"type\" is required");
        else if (items)
            msg_add(&m, "\"type\" must be \"string\"");
        else
            msg_add(&m, "\"type\" must be one of \"string\", \"integer\", \"number\", "
                        "\"boolean\", \"array\"");
        if (tv && json_is_string(tv)) {
            msg_add(&m, " (got ");
            msg_str(&m, tv);
            msg_add(&m, ")");
        } else if (tv) {
            msg_addf(&m, " (got %s)", kind_of(tv));
        }
        return msg_fail(err, &m);
    }

    json_object_foreach (unconst(prop), k, v) {
        const struct keyword *kw = NULL;
        for (size_t i = 0; i < ELEMENTSOF(keywords); i++)
            if (!strcmp(keywords[i].name, k))
                kw = &keywords[i];
        if (!kw || (items && !kw->in_items)) {
            size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
            msg_add(&m, "unsupported keyword ");
            msg_quote(&m, k, klen, '"');
            return msg_fail(err, &m);
        }
        bool applies =
                kw->only < 0 || kw->only == (int)t || (kw->only == PT_INTEGER && t == PT_NUMBER);
        if (!applies) {
            msg_addf(&m, "\"%s\" does not apply to type \"%s\"", k, ptype_names[t]);
            return msg_fail(err, &m);
        }
        if (!strcmp(k, "description") || !strcmp(k, "title"))
            r = check_text(v, name, items, k, err);
        else if (!strcmp(k, "enum"))
            r = check_enum(v, name, items, err);
        else if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "minItems") ||
                 !strcmp(k, "maxItems"))
            r = check_count(v, name, items, k, err);
        else if (!strcmp(k, "minimum") || !strcmp(k, "maximum")) {
            r = 0;
            if (!json_is_number(v)) {
                msg_addf(&m, "\"%s\" must be a number, not %s", k, kind_of(v));
                return msg_fail(err, &m);
            }
        } else if (!strcmp(k, "items"))
            r = check_property(v, name, true, err);
        else
            r = 0; /* type: done above; default: below, once bounds are known */
        if (r < 0)
            return r;
    }

    if (t == PT_ARRAY && !json_object_get(prop, "items")) {
        msg_add(&m, "\"items\" is required for type \"array\"");
        return msg_fail(err, &m);
    }
    r = check_order(prop, name, items, "minimum", "maximum", err);
    if (r >= 0)
        r = check_order(prop, name, items, "minLength", "maxLength", err);
    if (r >= 0)
        r = check_order(prop, name, items, "minItems", "maxItems", err);
    if (r < 0)
        return r;

    v = json_object_get(prop, "default");
    if (v) {
        struct err inner = {0};
        if ((json_is_string(v) && json_string_length(v) > TOOL_SCHEMA_MAX_TEXT) ||
            (json_is_array(v) && json_array_size(v) > TOOL_SCHEMA_MAX_ENUM)) {
            msg_add(&m, "\"default\" is too large");
            return msg_fail(err, &m);
        }
        if (validate_value(prop, name, v, &inner) < 0) {
            msg_add(&m, "invalid \"default\": ");
            msg_add(&m, inner.msg);
            return msg_fail(err, &m);
        }
    }
    return 0;
}

TOOL_SCHEMA_API int
tool_schema_check(const json_t *schema, struct err *err)
{
    struct msg m = {.len = 0};
    const json_t *props, *req, *v;
    const char *k;
    json_t *c;
    int r;

    if (!json_is_object(schema))
        return fail(err, "schema: must be a JSON object, not %s", kind_of(schema));

    json_object_foreach (unconst(schema), k, c) {
        if (!strcmp(k, "type")) {
            if (!str_is(c, "object"))
                return fail(err, "schema: \"type\" must be \"object\"");
        } else if (!strcmp(k, "description") || !strcmp(k, "title") || !strcmp(k, "$schema")) {
            r = check_text(c, NULL, false, k, err);
            if (r < 0)
                return r;
        } else if (!strcmp(k, "additionalProperties")) {
            if (!json_is_false(c))
                return fail(err, "schema: \"additionalProperties\" must be false");
        } else if (strcmp(k, "properties") && strcmp(k, "required")) {
            size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
            msg_add(&m, "schema: unsupported keyword ");
            msg_quote(&m, k, klen, '"');
            return msg_fail(err, &m);
        }
    }
    if (!json_object_get(schema, "type"))
        return fail(err, "schema: \"type\" is required");

    props = json_object_get(schema, "properties");
    if (props) {
        if (!json_is_object(props))
            return fail(err, "schema: \"properties\" must be an object, not %s", kind_of(props));
        if (json_object_size(props) > TOOL_SCHEMA_MAX_PROPERTIES)
            return fail(err, "schema: more than %d properties", TOOL_SCHEMA_MAX_PROPERTIES);
        json_object_foreach (unconst(props), k, c) {
            size_t klen = json_object_iter_key_len(json_object_key_to_iter(k));
            if (!name_ok(k, klen)) {
                msg_add(&m, "schema: invalid property name ");
                msg_quote(&m, k, klen, '\'');
                msg_add(&m, " (expected [A-Za-z_][A-Za-z0-9_-]{0,63})");
                return msg_fail(err, &m);
            }
            r = check_property(c, k, false, err);
            if (r < 0)
                return r;
        }
    }

    req = json_object_get(schema, "required");
    if (req) {
        size_t i;
        if (!json_is_array(req))
            return fail(err, "schema: \"required\" must be an array, not %s", kind_of(req));
        json_array_foreach (req, i, v) {
            msg_add(&m, "schema: \"required\" ");
            if (!json_is_string(v)) {
                msg_addf(&m, "must list strings, not %s", kind_of(v));
                return msg_fail(err, &m);
            }
            if (str_has_nul(v) || !json_object_get(props, json_string_value(v))) {
                msg_add(&m, "names ");
                msg_str(&m, v);
                msg_add(&m, ", which is not a property");
                return msg_fail(err, &m);
            }
            for (size_t j = 0; j < i; j++)
                if (json_equal(json_array_get(req, j), unconst(v))) {
                    msg_add(&m, "lists ");
                    msg_str(&m, v);
                    msg_add(&m, " twice");
                    return msg_fail(err, &m);
                }
            m.len = 0;
            m.s[0] = '\0';
        }
    }
    return 0;
}
