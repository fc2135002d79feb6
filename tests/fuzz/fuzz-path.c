/*
 * fuzz-path.c - path_normalize() on arbitrary bytes: never crashes, and
 * whatever it accepts is normalized (no "..", no empty or "." components,
 * components and the whole within their limits, every byte the input's),
 * stable under a second pass, and split by path_split() into a parent and
 * a name that join back into it.
 */
#include <errno.h>
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
            if (n == 0 || n > PATH_NAME_MAX || (n == 1 && c[0] == '.') ||
                (n == 2 && c[0] == '.' && c[1] == '.'))
                abort();
            c += n + (e ? 1 : 0);
        }
    }
    /* Only separators and "." components go: each byte out is one in
     * (the root's "." aside). */
    for (const char *c = out; *c && !path_is_root(out); c++)
        if (!memchr(in, *c, size))
            abort();
    if (strlen(out) > PATH_MAX_LEN)
        abort();
    if (path_normalize(out, strlen(out), again, sizeof(again)) < 0 || strcmp(out, again) != 0)
        abort();
    if (path_is_root(out)) {
        if (path_split(out, again, again, sizeof(again)) != -EINVAL)
            abort();
        return 0;
    }
    char parent[PATH_MAX_LEN + 64], name[PATH_MAX_LEN + 64];
    if (path_split(out, parent, name, sizeof(parent)) != 0)
        abort();
    if (strchr(name, '/') || strlen(name) == 0 || strlen(name) > PATH_NAME_MAX)
        abort();
    if (path_is_root(parent)) {
        if (strcmp(name, out) != 0)
            abort();
    } else {
        size_t pl = strlen(parent);
        if (strncmp(out, parent, pl) != 0 || out[pl] != '/' || strcmp(out + pl + 1, name) != 0)
            abort();
    }
    return 0;
}
