/*
 * fuzz-sni.c - sni_tls_name() and sni_http_host() on arbitrary bytes. The
 * first byte picks the parser (low bit) and a cut point (high nibble).
 * Contract: the result is a name or one of the documented errors (with a
 * message); a name is normalised LDH (net_name_valid()) of at most
 * NET_NAME_MAX bytes; -EAGAIN only below the bound; and the prefix up to
 * the cut answers -EAGAIN or exactly what the whole input answers (the
 * same name), so waiting for more bytes never changes a verdict.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "net/net.h"
#include "net/sni.h"

static int
run(bool tls, const uint8_t *d, size_t n, char *name)
{
    struct err err = {0};
    int r = tls ? sni_tls_name(d, n, name, &err) : sni_http_host(d, n, name, &err);

    CHECK(r == 0 || r == -EAGAIN || r == -ENOENT || r == -EINVAL || r == -EBADMSG ||
          r == -EMSGSIZE);
    if (r < 0 && r != -EAGAIN)
        CHECK(err.msg[0] != '\0');
    if (r == -EAGAIN)
        CHECK(n < (tls ? SNI_HELLO_MAX : SNI_HEAD_MAX));
    if (r == 0)
        CHECK(strlen(name) <= NET_NAME_MAX && net_name_valid(name, 0));
    return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char whole[NET_NAME_MAX + 1], part[NET_NAME_MAX + 1];

    if (size < 1)
        return 0;
    bool tls = data[0] & 1;
    size_t cut = (size - 1) * (data[0] >> 4) / 15;
    data++, size--;
    int a = run(tls, data, size, whole);
    int b = run(tls, data, cut, part);
    CHECK(b == -EAGAIN || b == a);
    if (b == 0)
        CHECK(strcmp(whole, part) == 0);
    return 0;
}
