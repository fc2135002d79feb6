/*
 * fuzz-proto-config.c - proto_decode_config() on arbitrary packets (init's
 * side of the protocol). An accepted config has the supported version and
 * a known mode, counts (binds, cgroups, layers) within their limits, strings that lie inside the
 * packet, and encodes back to exactly the input bytes.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "jail/proto.h"

static bool
inside(const void *p, const uint8_t *data, size_t size)
{
    return (const uint8_t *)p >= data && (const uint8_t *)p < data + size;
}

static void
check_str(const char *s, const uint8_t *data, size_t size)
{
    CHECK(inside(s, data, size));
    size_t n = strlen(s);
    CHECK(inside(s + n, data, size)); /* the NUL is in the packet too */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char again[PROTO_MAX_MSG];
    struct proto_config c;
    struct proto_writer w;

    int r = proto_decode_config(data, size, &c);
    if (r < 0) {
        CHECK(r == -EBADMSG);
        return 0;
    }
    CHECK(r == 0);
    CHECK(c.version == PROTO_VERSION);
    CHECK(c.mode <= PROTO_MODE_NONE);
    CHECK(c.nbinds <= PROTO_MAX_BINDS);
    CHECK(c.ncgroups <= PROTO_MAX_CGROUPS);
    check_str(c.rootmnt, data, size);
    check_str(c.workspace, data, size);
    check_str(c.etc, data, size);
    check_str(c.hostname, data, size);
    if (c.bpf_len)
        CHECK(inside(c.bpf, data, size) && inside((const char *)c.bpf + c.bpf_len - 1, data, size));
    for (uint32_t i = 0; i < c.nbinds; i++) {
        check_str(c.binds[i].src, data, size);
        check_str(c.binds[i].dst, data, size);
    }
    for (uint32_t i = 0; i < c.ncgroups; i++)
        check_str(c.cgroups[i], data, size);
    CHECK(c.nlayers <= PROTO_MAX_LAYERS);
    for (uint32_t i = 0; i < c.nlayers; i++)
        check_str(c.layers[i], data, size);
    check_str(c.upper, data, size);
    check_str(c.sudo, data, size);

    proto_writer_init(&w, again, sizeof(again), PROTO_CONFIG);
    CHECK(proto_encode_config(&w, &c) == 0);
    CHECK(w.len == size);
    CHECK(memcmp(again, data, size) == 0);
    return 0;
}
