/*
 * fuzz-json.c - json_parse() on arbitrary bytes, then json_check_object()
 * and every getter on whatever it accepted. Invariants: a failure is
 * -EINVAL with a message; an accepted value is an object or array no
 * deeper than JSON_MAX_DEPTH whose compact dump parses back to an equal
 * value; a getter returns 0 (absent), 1 (present, with a value that meets
 * its bounds) or -EINVAL with a message, and writes ret only when it
 * returns 1.
 */
#include <errno.h>
#include <math.h>

#include "fuzz-common.h"
#include "util/json.h"

static int
depth_of(json_t *v)
{
    int d = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach (v, k, c) {
            int x = depth_of(c);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach (v, i, c) {
            int x = depth_of(c);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    return 0;
}

/* json_equal(), except that reals may differ in the last digits when the
 * check tagged json-real is switched off. */
static bool
same_value(json_t *a, json_t *b, bool exact_reals)
{
    if (exact_reals)
        return json_equal(a, b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_real(a)) {
        double x = json_real_value(a), y = json_real_value(b);
        return fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y));
    }
    if (json_is_object(a)) {
        const char *k;
        json_t *c;
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach (a, k, c) {
            json_t *d = json_object_get(b, k);
            if (!d || !same_value(c, d, false))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_value(json_array_get(a, i), json_array_get(b, i), false))
                return false;
        return true;
    }
    return json_equal(a, b);
}

static void
check_getter(int r, const struct err *e)
{
    CHECK(r == 0 || r == 1 || r == -EINVAL);
    CHECK((r == -EINVAL) == (e->msg[0] != '\0'));
    if (r == -EINVAL)
        CHECK(e->errnum == EINVAL);
}

static void
getters(json_t *obj, const char *key)
{
    struct err e;
    static const bool req[] = {false, true};

    for (int q = 0; q < 2; q++) {
        json_t *v = json_object_get(obj, key);
        bool present = v && !json_is_null(v);

        const char *s = NULL;
        err_clear(&e);
        int r = json_get_str(obj, key, req[q], &s, &e);
        check_getter(r, &e);
        CHECK((r == 0) == (!present && !req[q]));
        CHECK((r == 1) == (s != NULL));
        if (r == 1)
            CHECK(json_is_string(v) && strlen(s) == json_string_length(v));

        uint64_t u = 7;
        err_clear(&e);
        r = json_get_u64(obj, key, req[q], 1000, &u, &e);
        check_getter(r, &e);
        if (r == 1)
            CHECK(json_is_integer(v) && u <= 1000 && (json_int_t)u == json_integer_value(v));
        else
            CHECK(u == 7);

        double d = -1;
        err_clear(&e);
        r = json_get_num(obj, key, req[q], -10.5, 1e9, &d, &e);
        check_getter(r, &e);
        if (r == 1)
            CHECK(json_is_number(v) && isfinite(d) && d >= -10.5 && d <= 1e9);
        else
            CHECK(d == -1);

        bool b = false;
        err_clear(&e);
        r = json_get_bool(obj, key, req[q], &b, &e);
        check_getter(r, &e);
        if (r == 1)
            CHECK(json_is_boolean(v) && b == json_is_true(v));

        json_t *m = NULL;
        err_clear(&e);
        r = json_get_str_map(obj, key, 4, 64, &m, &e);
        check_getter(r, &e);
        CHECK((r == 1) == (m != NULL));
        if (r == 1) {
            const char *k;
            json_t *c;
            size_t total = 0;
            CHECK(m == v && json_object_size(m) <= 4);
            json_object_foreach (m, k, c) {
                CHECK(json_is_string(c));
                CHECK(strlen(json_string_value(c)) == json_string_length(c));
                total += strlen(k) + json_string_length(c) + 2;
            }
            CHECK(total <= 64);
        }

        json_t *a = NULL;
        err_clear(&e);
        r = json_get_str_array(obj, key, req[q], 1, 4, 64, &a, &e);
        check_getter(r, &e);
        CHECK((r == 1) == (a != NULL));
        if (r == 1) {
            size_t i, total = 0;
            json_t *c;
            CHECK(a == v && json_array_size(a) >= 1 && json_array_size(a) <= 4);
            json_array_foreach (a, i, c) {
                CHECK(json_is_string(c));
                total += json_string_length(c) + 1;
            }
            CHECK(total <= 64);
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const allowed[] = {"argv", "env", "cwd", "timeout_ms", "stdin", NULL};
    json_t *v = NULL;
    struct err e = {0};

    int r = json_parse((const char *)data, size, &v, &e);
    if (r < 0) {
        CHECK(r == -EINVAL);
        CHECK(e.errnum == EINVAL && e.msg[0]);
        CHECK(v == NULL);
        return 0;
    }
    CHECK(r == 0 && v);
    CHECK(json_is_object(v) || json_is_array(v));
    CHECK(depth_of(v) <= JSON_MAX_DEPTH);

    /* the compact encoding parses back to the same value; tag json-real:
     * reals exactly (17 significant digits), not just approximately */
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    CHECK(json_dump_buf(v, &b) == 0);
    json_t *again = NULL;
    CHECK(json_parse(b.data, b.len, &again, NULL) == 0);
    CHECK(same_value(v, again, true));
    json_decref(again);
    buf_done(&b);

    err_clear(&e);
    r = json_check_object(v, allowed, &e);
    CHECK(r == 0 || (r == -EINVAL && e.msg[0]));
    if (r == 0) {
        CHECK(json_is_object(v));
        const char *k;
        json_t *c;
        json_object_foreach (v, k, c) {
            bool ok = false;
            for (const char *const *a = allowed; *a; a++)
                ok = ok || !strcmp(*a, k);
            CHECK(ok);
        }
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach (v, k, c) {
            getters(v, k);
        }
        getters(v, "absent-key");
    }
    json_decref(v);
    return 0;
}
