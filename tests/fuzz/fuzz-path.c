/*
 * fuzz-path.c - path_normalize() on arbitrary bytes: never crashes, and
 * whatever it accepts is normalized (no "..", no empty or "." components,
 * no control characters) and stable under a second pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[PATH_MAX_LEN + 64];
    char out[PATH_MAX_LEN + 64], again[PATH_MAX_LEN + 64];

    if (size >= sizeof(in))
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    if (path_normalize(in, size, out, sizeof(out)) < 0)
        return 0;
    if (out[0] == '/' || strstr(out, "//"))
        abort();
    if (!path_is_root(out)) {
        for (const char *c = out; *c;) {
            const char *e = strchr(c, '/');
            size_t n = e ? (size_t)(e - c) : strlen(c);
            if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                abort();
            c += n + (e ? 1 : 0);
        }
    }
    for (const char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20)
            abort();
    if (path_normalize(out, strlen(out), again, sizeof(again)) < 0 || strcmp(out, again) != 0)
        abort();
    return 0;
}
