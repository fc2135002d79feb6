/*
 * test-schema.c - tool_schema_check() and tool_schema_validate(): the
 * subset accepted and everything outside it refused with a message naming
 * the keyword and property; argument types (bool is not an integer, 1.0 is
 * not an integer), enums, bounds (exact beyond 2^53), NUL, quoting of
 * hostile values, message length, and the limits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tools/schema.h"

static json_t *
parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, je.text);
    return v;
}

static void
want_check(const char *schema, const char *msg)
{
    json_t *s = parse(schema);
    struct err e = {0};
    int r = tool_schema_check(s, &e);
    if (!msg) {
        if (r != 0)
            fail_msg("%s: unexpected failure: %s", schema, e.msg);
    } else {
        assert_int_equal(r, -EINVAL);
        assert_int_equal(e.errnum, EINVAL);
        if (!strstr(e.msg, msg))
            fail_msg("%s: message '%s' lacks '%s'", schema, e.msg, msg);
    }
    json_decref(s);
}

static void
test_check_accepts(void **state)
{
    (void)state;
    want_check("{\"type\":\"object\"}", NULL);
    want_check("{\"type\":\"object\",\"properties\":{}}", NULL);
    want_check("{\"$schema\":\"x\",\"title\":\"t\",\"description\":\"d\",\"type\":\"object\","
               "\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\",\"y\"],"
               "\"default\":\"x\",\"title\":\"A\",\"description\":\"d\"},"
               "\"n\":{\"type\":\"integer\",\"minimum\":0.5,\"maximum\":10,\"default\":1},"
               "\"f\":{\"type\":\"number\",\"minimum\":-1e300,\"default\":-0.0},"
               "\"b\":{\"type\":\"boolean\",\"default\":true},"
               "\"s\":{\"type\":\"string\",\"minLength\":0,\"maxLength\":3},"
               "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"p\"],"
               "\"minLength\":1},\"minItems\":1,\"maxItems\":2,\"default\":[\"p\"]}},"
               "\"required\":[\"s\"],\"additionalProperties\":false}",
               NULL);
    /* pydantic's shape for a model without fields */
    want_check("{\"properties\":{},\"title\":\"M\",\"type\":\"object\"}", NULL);
}

static void
test_check_refuses(void **state)
{
    static const struct {
        const char *schema, *msg;
    } cases[] = {
            {"[]", "must be a JSON object, not an array"},
            {"{}", "\"type\" is required"},
            {"{\"type\":\"array\"}", "\"type\" must be \"object\""},
            {"{\"type\":\"object\",\"$ref\":\"#/x\"}", "unsupported keyword \"$ref\""},
            {"{\"type\":\"object\",\"oneOf\":[]}", "unsupported keyword \"oneOf\""},
            {"{\"type\":\"object\",\"additionalProperties\":true}", "must be false"},
            {"{\"type\":\"object\",\"additionalProperties\":{}}", "must be false"},
            {"{\"type\":\"object\",\"properties\":[]}", "\"properties\" must be an object"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\"}}}",
             "property 'a': \"type\" must be one of"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"string\",\"null\"]}}}",
             "(got an array)"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{}}}",
             "property 'a': \"type\" is required"},
            {"{\"type\":\"object\",\"properties\":{\"a\":1}}", "must be an object, not an integer"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"$ref\":\"x\"}}}",
             "property 'a': unsupported keyword \"$ref\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"oneOf\":[]}}}",
             "unsupported keyword \"oneOf\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"enum\":[\"1\"]}}}",
             "\"enum\" does not apply to type \"integer\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minimum\":1}}}",
             "\"minimum\" does not apply"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[]}}}",
             "\"enum\" must be an array of 1 to"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[1]}}}",
             "\"enum\" must be a string"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\",\"x\"]}}}",
             "lists \"x\" twice"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":-1}}}",
             "non-negative integer"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":1.0}}}",
             "non-negative integer"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2,"
             "\"maxLength\":1}}}",
             "\"minLength\" is greater than \"maxLength\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\",\"minimum\":\"1\"}}}",
             "\"minimum\" must be a number"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}}}",
             "\"items\" is required"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":"
             "{\"type\":\"integer\"}}}}",
             "property 'a' items: \"type\" must be \"string\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":"
             "{\"type\":\"string\",\"default\":\"x\"}}}}",
             "items: unsupported keyword \"default\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":"
             "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}",
             "items: \"type\" must be \"string\""},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"default\":\"1\"}}}",
             "invalid \"default\": 'a' must be an integer, not a string"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"default\":true}}}",
             "not a boolean"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"maximum\":3,"
             "\"default\":4}}}",
             "'a' must be at most 3 (got 4)"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\"],"
             "\"default\":\"y\"}}}",
             "must be one of \"x\" (got \"y\")"},
            {"{\"type\":\"object\",\"properties\":{\"a b\":{\"type\":\"string\"}}}",
             "invalid property name 'a b'"},
            {"{\"type\":\"object\",\"properties\":{\"1a\":{\"type\":\"string\"}}}",
             "invalid property name"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":\"a\"}",
             "\"required\" must be an array"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
             "names \"b\", which is not a property"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
             "\"required\":[\"a\",\"a\"]}",
             "lists \"a\" twice"},
            {"{\"type\":\"object\",\"required\":[\"a\"]}", "which is not a property"},
            {"{\"type\":\"object\",\"description\":5}", "\"description\" must be a string"},
            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
             "\"description\":[]}}}",
             "property 'a': \"description\" must be a string, not an array"},
    };
    (void)state;
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        want_check(cases[i].schema, cases[i].msg);
}

static void
test_check_limits(void **state)
{
    json_t *s = json_pack("{s:s,s:{}}", "type", "object", "properties");
    json_t *props = json_object_get(s, "properties");
    struct err e = {0};
    char name[80];
    (void)state;

    for (int i = 0; i < TOOL_SCHEMA_MAX_PROPERTIES; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        json_object_set_new(props, name, json_pack("{s:s}", "type", "string"));
    }
    assert_int_equal(tool_schema_check(s, NULL), 0);
    json_object_set_new(props, "one_more", json_pack("{s:s}", "type", "string"));
    assert_int_equal(tool_schema_check(s, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "more than 128 properties"));
    json_decref(s);

    /* names: 64 bytes accepted, 65 refused, NUL inside refused */
    memset(name, 'n', 65);
    name[64] = '\0';
    s = json_pack("{s:s,s:{s:{s:s}}}", "type", "object", "properties", name, "type", "string");
    assert_int_equal(tool_schema_check(s, NULL), 0);
    json_decref(s);
    name[64] = 'n';
    name[65] = '\0';
    s = json_pack("{s:s,s:{s:{s:s}}}", "type", "object", "properties", name, "type", "string");
    assert_int_equal(tool_schema_check(s, NULL), -EINVAL);
    json_decref(s);
    s = json_pack("{s:s,s:{s:{s:s}}}", "type", "object", "properties", "a", "type", "string");
    json_object_setn_new(json_object_get(s, "properties"), "b\0c", 3,
                         json_pack("{s:s}", "type", "string"));
    err_clear(&e);
    assert_int_equal(tool_schema_check(s, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'b\\u0000c'"));
    json_decref(s);

    /* texts: TOOL_SCHEMA_MAX_TEXT bytes accepted, one more refused */
    char *big = malloc(TOOL_SCHEMA_MAX_TEXT + 2);
    memset(big, 'x', TOOL_SCHEMA_MAX_TEXT + 1);
    big[TOOL_SCHEMA_MAX_TEXT] = '\0';
    s = json_pack("{s:s,s:s}", "type", "object", "description", big);
    assert_int_equal(tool_schema_check(s, NULL), 0);
    json_decref(s);
    big[TOOL_SCHEMA_MAX_TEXT] = 'x';
    big[TOOL_SCHEMA_MAX_TEXT + 1] = '\0';
    s = json_pack("{s:s,s:s}", "type", "object", "description", big);
    err_clear(&e);
    assert_int_equal(tool_schema_check(s, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "longer than 8192 bytes"));
    json_decref(s);
    free(big);

    /* enum: 256 values accepted, 257 refused */
    json_t *en = json_array();
    for (int i = 0; i < TOOL_SCHEMA_MAX_ENUM; i++) {
        snprintf(name, sizeof(name), "v%d", i);
        json_array_append_new(en, json_string(name));
    }
    s = json_pack("{s:s,s:{s:{s:s,s:O}}}", "type", "object", "properties", "a", "type", "string",
                  "enum", en);
    assert_int_equal(tool_schema_check(s, NULL), 0);
    json_decref(s);
    json_array_append_new(en, json_string("last"));
    s = json_pack("{s:s,s:{s:{s:s,s:O}}}", "type", "object", "properties", "a", "type", "string",
                  "enum", en);
    assert_int_equal(tool_schema_check(s, NULL), -EINVAL);
    json_decref(s);
    json_decref(en);
}

static const char *const schema_text =
        "{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":5},"
        "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},"
        "\"big\":{\"type\":\"integer\",\"maximum\":9007199254740992.0},"
        "\"ratio\":{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2},"
        "\"mode\":{\"type\":\"string\",\"enum\":[\"mean\",\"max\"]},"
        "\"on\":{\"type\":\"boolean\"},"
        "\"cols\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"a\",\"b\"]},"
        "\"minItems\":1,\"maxItems\":2}"
        "},\"required\":[\"path\"],\"additionalProperties\":false}";

static void
want_valid(json_t *schema, const char *args, const char *msg)
{
    json_t *a = parse(args);
    struct err e = {0};
    int r = tool_schema_validate(schema, a, &e);
    if (!msg) {
        if (r != 0)
            fail_msg("%s: unexpected failure: %s", args, e.msg);
    } else {
        assert_int_equal(r, -EINVAL);
        if (strcmp(e.msg, msg))
            fail_msg("%s: message '%s', expected '%s'", args, e.msg, msg);
    }
    json_decref(a);
}

static void
test_validate(void **state)
{
    static const struct {
        const char *args, *msg;
    } cases[] = {
            {"{\"path\":\"x\"}", NULL},
            {"{\"path\":\"x\",\"limit\":1,\"ratio\":1,\"mode\":\"max\",\"on\":false,"
             "\"cols\":[\"a\",\"b\"]}",
             NULL},
            {"{\"path\":\"x\",\"ratio\":0.5}", NULL},
            {"{\"path\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"}", NULL}, /* 5 characters */
            {"[]", "arguments must be a JSON object, not an array"},
            {"\"x\"", "arguments must be a JSON object, not a string"},
            {"null", "arguments must be a JSON object, not null"},
            {"{}", "'path' is required"},
            {"{\"path\":\"x\",\"colum\":1}", "unknown argument 'colum'"},
            {"{\"colum\":1}", "unknown argument 'colum'"}, /* before required */
            {"{\"path\":1}", "'path' must be a string, not an integer"},
            {"{\"path\":null}", "'path' must be a string, not null"},
            {"{\"path\":\"\"}", "'path' must be at least 1 character long"},
            {"{\"path\":\"abcdef\"}", "'path' must be at most 5 characters long"},
            {"{\"path\":\"x\",\"limit\":\"5\"}", "'limit' must be an integer, not a string"},
            {"{\"path\":\"x\",\"limit\":true}", "'limit' must be an integer, not a boolean"},
            {"{\"path\":\"x\",\"limit\":5.0}", "'limit' must be an integer, not a decimal number"},
            {"{\"path\":\"x\",\"limit\":0}", "'limit' must be at least 1 (got 0)"},
            {"{\"path\":\"x\",\"limit\":-0}", "'limit' must be at least 1 (got 0)"},
            {"{\"path\":\"x\",\"limit\":101}", "'limit' must be at most 100 (got 101)"},
            {"{\"path\":\"x\",\"limit\":-9223372036854775808}",
             "'limit' must be at least 1 (got -9223372036854775808)"},
            {"{\"path\":\"x\",\"big\":9007199254740992}", NULL},
            {"{\"path\":\"x\",\"big\":9007199254740993}",
             "'big' must be at most 9007199254740992.0 (got 9007199254740993)"},
            {"{\"path\":\"x\",\"ratio\":0.49}",
             "'ratio' must be at least 0.5 (got 0.48999999999999999)"},
            {"{\"path\":\"x\",\"ratio\":3}", "'ratio' must be at most 2 (got 3)"},
            {"{\"path\":\"x\",\"ratio\":1e300}",
             "'ratio' must be at most 2 (got 1.0000000000000001e300)"},
            {"{\"path\":\"x\",\"ratio\":\"1\"}", "'ratio' must be a number, not a string"},
            {"{\"path\":\"x\",\"on\":1}", "'on' must be a boolean, not an integer"},
            {"{\"path\":\"x\",\"on\":\"true\"}", "'on' must be a boolean, not a string"},
            {"{\"path\":\"x\",\"mode\":\"avg\"}",
             "'mode' must be one of \"mean\", \"max\" (got \"avg\")"},
            {"{\"path\":\"x\",\"mode\":\"a\\u001b[31m\\\"\\u0085\\u202e\"}",
             "'mode' must be one of \"mean\", \"max\" (got \"a\\u001b[31m\\\"\\u0085\\u202e\")"},
            {"{\"path\":\"x\",\"cols\":[]}", "'cols' must have at least 1 item"},
            {"{\"path\":\"x\",\"cols\":[\"a\",\"a\",\"a\"]}", "'cols' must have at most 2 items"},
            {"{\"path\":\"x\",\"cols\":\"a\"}", "'cols' must be an array of strings, not a string"},
            {"{\"path\":\"x\",\"cols\":[\"a\",{}]}", "'cols'[1] must be a string, not an object"},
            {"{\"path\":\"x\",\"cols\":[\"c\"]}",
             "'cols'[0] must be one of \"a\", \"b\" (got \"c\")"},
            {"{\"path\":\"x\",\"\\u0007\\n\":1}", "unknown argument '\\u0007\\u000a'"},
    };
    json_t *schema = parse(schema_text);
    (void)state;

    assert_int_equal(tool_schema_check(schema, NULL), 0);
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        want_valid(schema, cases[i].args, cases[i].msg);
    json_decref(schema);
}

static void
test_validate_hostile(void **state)
{
    json_t *schema = parse(schema_text);
    struct err e = {0};
    (void)state;

    /* NUL inside a string (jansson makes them only on request) */
    json_t *a = json_pack("{s:s#}", "path", "a\0b", (int)3);
    assert_int_equal(tool_schema_validate(schema, a, &e), -EINVAL);
    assert_string_equal(e.msg, "'path' must not contain NUL characters");
    json_decref(a);

    /* a huge value is quoted cut to TOOL_SCHEMA_QUOTE_MAX characters */
    size_t n = 1 << 20;
    char *huge = malloc(n + 1);
    memset(huge, 'z', n);
    huge[n] = '\0';
    a = json_pack("{s:s,s:s}", "path", "x", "mode", huge);
    err_clear(&e);
    assert_int_equal(tool_schema_validate(schema, a, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "(got \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...\")"));
    json_decref(a);

    /* a huge unknown key made of multi-byte characters: the message is cut
     * at a character boundary and stays valid UTF-8 */
    for (size_t i = 0; i + 3 <= n; i += 3)
        memcpy(huge + i, "\xe2\x82\xac", 3);
    huge[n - n % 3] = '\0';
    a = json_object();
    json_object_set_new(a, huge, json_true());
    err_clear(&e);
    assert_int_equal(tool_schema_validate(schema, a, &e), -EINVAL);
    assert_true(strlen(e.msg) < ERR_MSG_MAX);
    json_t *ok = json_string(e.msg);
    assert_non_null(ok); /* valid UTF-8 */
    json_decref(ok);
    json_decref(a);
    free(huge);

    /* first writer wins; NULL err is fine */
    a = parse("{}");
    err_clear(&e);
    assert_int_equal(tool_schema_validate(schema, a, NULL), -EINVAL);
    assert_int_equal(tool_schema_validate(schema, a, &e), -EINVAL);
    assert_string_equal(e.msg, "'path' is required");
    json_decref(a);
    a = parse("[]");
    assert_int_equal(tool_schema_validate(schema, a, &e), -EINVAL);
    assert_string_equal(e.msg, "'path' is required");
    json_decref(a);
    json_decref(schema);

    /* an open schema (no additionalProperties) lets unknown keys through */
    schema = parse("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}");
    want_valid(schema, "{\"b\":{\"deep\":[1,2,3]}}", NULL);
    want_valid(schema, "{\"a\":1}", "'a' must be a string, not an integer");
    json_decref(schema);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_check_accepts),    cmocka_unit_test(test_check_refuses),
            cmocka_unit_test(test_check_limits),     cmocka_unit_test(test_validate),
            cmocka_unit_test(test_validate_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
