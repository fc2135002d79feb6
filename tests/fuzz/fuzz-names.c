/*
 * fuzz-names.c - names are bytes: the one place they meet JSON and logs.
 * For arbitrary bytes: utf8_valid() agrees with jansson; utf8_lossy() is
 * always valid UTF-8; utf8_escape() never emits a control byte, a C1
 * character or invalid UTF-8, never writes past its buffer and never cuts
 * an escape; and a name (the bytes up to the first NUL) set with
 * json_set_name(), dumped, parsed and read back with json_get_name() is
 * the same bytes, with "<key>_b64" present exactly when it is not UTF-8.
 */
#include <errno.h>

#include <jansson.h>

#include "fuzz-common.h"
#include "util/json.h"
#include "util/utf8.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char out[4 * 512 + 1];

    if (size > 512)
        return 0;

    json_t *j = json_stringn(s, size);
    CHECK(utf8_valid(s, size) == (j != NULL));
    json_decref(j);

    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    CHECK(utf8_lossy(&b, s, size) == 0);
    CHECK(utf8_valid(b.data, b.len));
    buf_done(&b);

    /* Every output size: whole escapes only, nothing past the end. */
    size_t outsz = 1 + (size ? (uint8_t)s[0] : 0) % sizeof(out);
    for (int pass = 0; pass < 2; pass++, outsz = sizeof(out)) {
        size_t used = 0;
        size_t k = utf8_escape(out, outsz, s, size, &used);
        CHECK(k < outsz && out[k] == '\0' && used <= size);
        CHECK(utf8_valid(out, k));
        for (size_t i = 0; i < k; i++) {
            unsigned char c = (unsigned char)out[i];
            CHECK(c >= 0x20 && c != 0x7f);
            CHECK(!(c == 0xc2 && i + 1 < k && (unsigned char)out[i + 1] < 0xa0));
        }
        if (outsz == sizeof(out))
            CHECK(used == size);
    }

    /* The name round trip. */
    size_t n = strnlen(s, size);
    char *name = strndup(s, n);
    if (!name)
        return 0;
    json_t *o = json_object();
    CHECK(o && json_set_name(o, "path", name) == 0);
    CHECK(json_is_string(json_object_get(o, "path")));
    CHECK((json_object_get(o, "path_b64") == NULL) == utf8_valid(name, n));
    char *text = json_dumps(o, JSON_COMPACT);
    CHECK(text);
    json_t *back = NULL;
    struct err err = {0};
    CHECK(json_parse(text, strlen(text), &back, &err) == 0);
    buf_init(&b, 4096);
    CHECK(json_get_name(back, "path", true, &b, &err) == 1);
    CHECK(b.len == n && memcmp(b.data, name, n) == 0);
    buf_done(&b);
    json_decref(back);
    free(text);
    json_decref(o);
    free(name);
    return 0;
}
