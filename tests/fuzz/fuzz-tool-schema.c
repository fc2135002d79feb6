/*
 * fuzz-tool-schema.c - tool_schema_check() and tool_schema_validate() on
 * arbitrary JSON. The input is split at the first NUL byte: the part
 * before is a schema, the part after the arguments (without a NUL, the
 * input is both). Invariants: each function returns 0 or -EINVAL with a
 * message that is valid UTF-8, shorter than ERR_MSG_MAX and free of
 * control characters; validate is only called on schemas check accepted,
 * and a schema check accepted validates its own defaults.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "tools/schema.h"

static void
check_msg(int r, const struct err *e)
{
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0)
        return;
    CHECK(e->errnum == EINVAL && e->msg[0]);
    CHECK(strlen(e->msg) < ERR_MSG_MAX);
    for (const char *p = e->msg; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    json_t *s = json_string(e->msg);
    CHECK(s != NULL); /* valid UTF-8 */
    json_decref(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const uint8_t *a = nul ? nul + 1 : data;
    size_t alen = nul ? size - slen - 1 : size;
    int flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    struct err e = {0};

    if (size > 65536)
        return 0;
    json_t *schema = json_loadb((const char *)data, slen, flags, NULL);
    json_t *args = json_loadb((const char *)a, alen, flags, NULL);
    if (schema) {
        int r = tool_schema_check(schema, &e);
        check_msg(r, &e);
        if (r == 0) {
            /* defaults pass validation when they are the only arguments */
            json_t *defaults = json_object();
            const char *k;
            json_t *p;
            json_object_foreach (json_object_get(schema, "properties"), k, p) {
                json_t *d = json_object_get(p, "default");
                if (d)
                    json_object_set(defaults, k, d);
            }
            json_t *req = json_object_get(schema, "required");
            if (json_array_size(req) == 0) {
                err_clear(&e);
                CHECK(tool_schema_validate(schema, defaults, &e) == 0);
            }
            json_decref(defaults);
            if (args) {
                err_clear(&e);
                check_msg(tool_schema_validate(schema, args, &e), &e);
            }
        }
    }
    json_decref(schema);
    json_decref(args);
    return 0;
}
