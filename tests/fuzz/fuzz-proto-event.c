/*
 * fuzz-proto-event.c - proto_decode_event() on arbitrary packets, as abxd
 * receives them from a sandbox's init (which code in the sandbox may have
 * taken over). An accepted packet is one of the init->abxd types with
 * consistent fields, and encoding the decoded event again gives exactly the
 * input bytes: the decoder read every byte, and nothing else.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "jail/proto.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char again[PROTO_MAX_MSG];
    struct proto_event ev;
    struct proto_writer w;

    int r = proto_decode_event(data, size, &ev);
    CHECK(ev.step != NULL);
    if (r < 0) {
        CHECK(r == -EBADMSG);
        return 0;
    }
    CHECK(r == 0);
    CHECK(size >= sizeof(struct proto_hdr) && size <= PROTO_MAX_MSG);
    struct proto_hdr h;
    memcpy(&h, data, sizeof(h));
    CHECK(h.len == size);
    CHECK(h.type == ev.type); /* the type on the wire is exactly the decoded one */
    CHECK(ev.errnum <= 4095);
    proto_writer_init(&w, again, sizeof(again), h.type);
    switch (ev.type) {
    case PROTO_NEED_MAP:
        break;
    case PROTO_READY:
        proto_put_u64(&w, ev.usec);
        break;
    case PROTO_FAILED:
        proto_put_u32(&w, ev.errnum);
        proto_put_str(&w, ev.step);
        break;
    case PROTO_SPAWNED:
        CHECK((ev.pid > 0) != (ev.errnum != 0));
        CHECK(ev.pid >= 0);
        proto_put_u64(&w, ev.token);
        proto_put_u32(&w, (uint32_t)ev.pid);
        proto_put_u32(&w, ev.errnum);
        proto_put_str(&w, ev.step);
        break;
    case PROTO_EXITED:
        CHECK(ev.pid > 0);
        proto_put_u32(&w, (uint32_t)ev.pid);
        proto_put_u32(&w, (uint32_t)ev.status);
        break;
    default:
        fprintf(stderr, "unknown type %u accepted\n", ev.type);
        abort();
    }
    long n = proto_writer_finish(&w);
    CHECK(n == (long)size);
    CHECK(memcmp(again, data, size) == 0);
    return 0;
}
