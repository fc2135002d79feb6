/*
 * json.c - strict request decoding helpers over jansson.
 */
#include "util/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/b64.h"
#include "util/utf8.h"

static int
json_depth_ok(json_t *v, int depth)
{
    if (depth > JSON_MAX_DEPTH)
        return 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach (v, k, c) {
            if (!json_depth_ok(c, depth + 1))
                return 0;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach (v, i, c) {
            if (!json_depth_ok(c, depth + 1))
                return 0;
        }
    }
    return 1;
}

static json_malloc_t inner_malloc;
static json_free_t inner_free;
static _Thread_local bool alloc_failed;

static void *
flagging_malloc(size_t n)
{
    void *p = inner_malloc(n);
    if (!p)
        alloc_failed = true;
    return p;
}

int
json_parse(const char *data, size_t len, json_t **ret, struct err *err)
{
    json_error_t je;

    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    if (m != flagging_malloc) {
        inner_malloc = m;
        inner_free = f;
        json_set_alloc_funcs(flagging_malloc, f);
    }

    if (len == 0)
        return err_set(err, EINVAL, "request body is empty; expected a JSON object");
    /* jansson's own recursion limit is 2048 levels; ours is far lower. A quick
     * pre-scan bounds the nesting before jansson recurses at all. */
    int depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char c = data[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '[' || c == '{') {
            if (++depth > JSON_MAX_DEPTH)
                return err_set(err, EINVAL, "invalid JSON: nested deeper than %d levels",
                               JSON_MAX_DEPTH);
        } else if (c == ']' || c == '}')
            depth--;
    }
    alloc_failed = false;
    json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (alloc_failed) {
        json_decref(v);
        return err_set(err, ENOMEM, "out of memory parsing JSON");
    }
    if (!v)
        return err_set(err, EINVAL, "invalid JSON at line %d column %d: %s", je.line, je.column,
                       je.text);
    if (!json_depth_ok(v, 0)) {
        json_decref(v);
        return err_set(err, EINVAL, "invalid JSON: nested deeper than %d levels", JSON_MAX_DEPTH);
    }
    *ret = v;
    return 0;
}

int
json_check_object(json_t *v, const char *const *allowed, struct err *err)
{
    const char *k;
    json_t *c;

    if (!json_is_object(v))
        return err_set(err, EINVAL, "request body must be a JSON object");
    json_object_foreach (v, k, c) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (!strcmp(*a, k)) {
                ok = true;
                break;
            }
        if (!ok)
            return err_set(err, EINVAL, "unknown field '%.64s'", k);
    }
    return 0;
}

static json_t *
field(json_t *obj, const char *key, bool required, int *r, struct err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *r = required ? err_set(err, EINVAL, "'%s' is required", key) : 0;
        return NULL;
    }
    *r = 1;
    return v;
}

int
json_get_str(json_t *obj, const char *key, bool required, const char **ret, struct err *err)
{
    int r;
    json_t *v = field(obj, key, required, &r, err);
    if (!v)
        return r;
    if (!json_is_string(v))
        return err_set(err, EINVAL, "'%s' must be a string", key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return err_set(err, EINVAL, "'%s' must not contain NUL characters", key);
    *ret = json_string_value(v);
    return 1;
}

int
json_get_u64(json_t *obj, const char *key, bool required, uint64_t max, uint64_t *ret,
             struct err *err)
{
    int r;
    json_t *v = field(obj, key, required, &r, err);
    if (!v)
        return r;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return err_set(err, EINVAL, "'%s' must be a non-negative integer", key);
    if ((uint64_t)json_integer_value(v) > max)
        return err_set(err, EINVAL, "'%s' must be at most %llu", key, (unsigned long long)max);
    *ret = (uint64_t)json_integer_value(v);
    return 1;
}

int
json_get_num(json_t *obj, const char *key, bool required, double min, double max, double *ret,
             struct err *err)
{
    int r;
    json_t *v = field(obj, key, required, &r, err);
    if (!v)
        return r;
    if (!json_is_number(v))
        return err_set(err, EINVAL, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < min || d > max)
        return err_set(err, EINVAL, "'%s' must be between %g and %g", key, min, max);
    *ret = d;
    return 1;
}

int
json_get_bool(json_t *obj, const char *key, bool required, bool *ret, struct err *err)
{
    int r;
    json_t *v = field(obj, key, required, &r, err);
    if (!v)
        return r;
    if (!json_is_boolean(v))
        return err_set(err, EINVAL, "'%s' must be true or false", key);
    *ret = json_is_true(v);
    return 1;
}

int
json_get_str_map(json_t *obj, const char *key, size_t max_entries, size_t max_bytes, json_t **ret,
                 struct err *err)
{
    int r;
    json_t *v = field(obj, key, false, &r, err);
    if (!v)
        return r;
    if (!json_is_object(v))
        return err_set(err, EINVAL, "'%s' must be an object of strings", key);
    if (json_object_size(v) > max_entries)
        return err_set(err, EINVAL, "'%s' has more than %zu entries", key, max_entries);
    size_t total = 0;
    const char *k;
    json_t *c;
    json_object_foreach (v, k, c) {
        if (!json_is_string(c))
            return err_set(err, EINVAL, "'%s.%.64s' must be a string", key, k);
        if (strlen(json_string_value(c)) != json_string_length(c))
            return err_set(err, EINVAL, "'%s.%.64s' must not contain NUL characters", key, k);
        total += strlen(k) + json_string_length(c) + 2;
    }
    if (total > max_bytes)
        return err_set(err, EINVAL, "'%s' is larger than %zu bytes", key, max_bytes);
    *ret = v;
    return 1;
}

int
json_get_str_array(json_t *obj, const char *key, bool required, size_t min_len, size_t max_len,
                   size_t max_bytes, json_t **ret, struct err *err)
{
    int r;
    json_t *v = field(obj, key, required, &r, err);
    if (!v)
        return r;
    if (!json_is_array(v))
        return err_set(err, EINVAL, "'%s' must be an array of strings", key);
    size_t n = json_array_size(v);
    if (n < min_len)
        return err_set(err, EINVAL, "'%s' must have at least %zu element%s", key, min_len,
                       min_len == 1 ? "" : "s");
    if (n > max_len)
        return err_set(err, EINVAL, "'%s' has more than %zu elements", key, max_len);
    size_t total = 0, i;
    json_t *c;
    json_array_foreach (v, i, c) {
        if (!json_is_string(c))
            return err_set(err, EINVAL, "'%s[%zu]' must be a string", key, i);
        if (strlen(json_string_value(c)) != json_string_length(c))
            return err_set(err, EINVAL, "'%s[%zu]' must not contain NUL characters", key, i);
        total += json_string_length(c) + 1;
    }
    if (total > max_bytes)
        return err_set(err, EINVAL, "'%s' is larger than %zu bytes", key, max_bytes);
    *ret = v;
    return 1;
}

static int
dump_cb(const char *data, size_t size, void *ud)
{
    return buf_put(ud, data, size) < 0 ? -1 : 0;
}

int
json_dump_buf(json_t *v, struct buf *b)
{
    if (json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) < 0)
        return -ENOMEM;
    return 0;
}

int
json_set(json_t *obj, const char *key, json_t *v)
{
    if (!v)
        return -ENOMEM;
    return json_object_set_new(obj, key, v) < 0 ? -ENOMEM : 0;
}

json_t *
json_string_lossy(const char *s)
{
    size_t n = strlen(s);
    if (utf8_valid(s, n))
        return json_stringn(s, n);
    _cleanup_buf_ struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    if (utf8_lossy(&b, s, n) < 0)
        return NULL;
    return json_stringn(b.data, b.len);
}

/* "<key>_b64" in out; -ENAMETOOLONG for a key we would not name so. */
static int
b64_key(const char *key, char *out, size_t outsz)
{
    int k = snprintf(out, outsz, "%s" JSON_NAME_B64_SUFFIX, key);
    return k < 0 || (size_t)k >= outsz ? -ENAMETOOLONG : 0;
}

int
json_set_name(json_t *obj, const char *key, const char *s)
{
    char k64[JSON_NAME_KEY_MAX + sizeof(JSON_NAME_B64_SUFFIX)];
    size_t n = strlen(s);
    int r;

    if (utf8_valid(s, n))
        return json_set(obj, key, json_stringn(s, n));
    if ((r = b64_key(key, k64, sizeof(k64))) < 0)
        return r;
    _cleanup_buf_ struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    if ((r = json_set(obj, key, json_string_lossy(s))) < 0 || (r = b64_encode(&b, s, n)) < 0)
        return r;
    return json_set(obj, k64, json_stringn(b.data, b.len));
}

int
json_get_name(json_t *obj, const char *key, bool required, struct buf *out, struct err *err)
{
    char k64[JSON_NAME_KEY_MAX + sizeof(JSON_NAME_B64_SUFFIX)];
    const char *s = NULL;
    int r;

    if ((r = b64_key(key, k64, sizeof(k64))) < 0)
        return err_set(err, EINVAL, "'%.64s' cannot carry a name", key);
    buf_reset(out);
    r = json_get_str(obj, k64, false, &s, err);
    if (r < 0)
        return r;
    if (r > 0) {
        /* The exact bytes win; "key" beside them is only their display form. */
        r = b64_decode(out, s, strlen(s));
        if (r == -EFBIG)
            return err_set(err, ENAMETOOLONG, "'%s' is longer than %zu bytes", k64, out->max);
        if (r < 0)
            return err_set(err, r == -ENOMEM ? ENOMEM : EINVAL, "'%s' must be standard base64",
                           k64);
        if (memchr(out->data, '\0', out->len))
            return err_set(err, EINVAL, "'%s' must not contain NUL bytes", k64);
        return 1;
    }
    r = json_get_str(obj, key, required, &s, err);
    if (r <= 0)
        return r;
    r = buf_puts(out, s);
    if (r == -EFBIG)
        return err_set(err, ENAMETOOLONG, "'%s' is longer than %zu bytes", key, out->max);
    if (r < 0)
        return err_set(err, -r, "out of memory");
    return 1;
}
