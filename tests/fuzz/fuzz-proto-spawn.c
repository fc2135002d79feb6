/*
 * fuzz-proto-spawn.c - the spawn request as init reads it: the header,
 * proto_decode_spawn(), then argc + envc strings and proto_reader_done().
 * An accepted request has 1 <= argc and argc + envc <= PROTO_MAX_ARGS,
 * strings inside the packet, and encodes back to exactly the input bytes.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "jail/proto.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *argv[PROTO_MAX_ARGS + 1], *env[PROTO_MAX_ARGS + 1];
    static char again[PROTO_MAX_MSG];
    struct proto_reader r;
    struct proto_spawn s;
    struct proto_writer w;

    int type = proto_reader_init(&r, data, size);
    if (type < 0) {
        CHECK(type == -EBADMSG);
        return 0;
    }
    if (type != PROTO_SPAWN)
        return 0;
    if (proto_decode_spawn(&r, &s) < 0)
        return 0;
    CHECK(s.argc >= 1 && s.argc <= PROTO_MAX_ARGS);
    CHECK(s.envc <= PROTO_MAX_ARGS && s.argc + s.envc <= PROTO_MAX_ARGS);
    CHECK(s.cwd != NULL);
    for (uint32_t i = 0; i < s.argc; i++)
        argv[i] = proto_get_str(&r, NULL);
    for (uint32_t i = 0; i < s.envc; i++)
        env[i] = proto_get_str(&r, NULL);
    argv[s.argc] = NULL;
    env[s.envc] = NULL;
    if (proto_reader_done(&r) < 0)
        return 0;
    for (uint32_t i = 0; i < s.argc; i++)
        CHECK((const uint8_t *)argv[i] >= data && (const uint8_t *)argv[i] < data + size);
    for (uint32_t i = 0; i < s.envc; i++)
        CHECK((const uint8_t *)env[i] >= data && (const uint8_t *)env[i] < data + size);

    proto_writer_init(&w, again, sizeof(again), (uint32_t)type);
    CHECK(proto_encode_spawn(&w, s.token, s.uid, s.gid, s.flags, s.cwd, argv, env) == 0);
    CHECK(w.len == size);
    CHECK(memcmp(again, data, size) == 0);
    return 0;
}
