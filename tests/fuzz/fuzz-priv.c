/*
 * fuzz-priv.c - the privileged parent's message decoder (priv/proto.h) on
 * arbitrary packets.
 *
 * The first byte picks the side (bit 7: the unprivileged side's decoder of
 * answers and events) and the descriptor count that came with the packet
 * (low 3 bits); the rest is the packet. Whatever is accepted has a known
 * type of that direction, the descriptor count its type carries, ids and
 * names in their alphabet and bounds, records and pages within theirs, and
 * encodes again to exactly the input. Bit 6 instead feeds the rest to the
 * decoder of SPAWN_LARGE's argv/env block, which must encode back the same.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "priv/proto.h"

static char again[PRIV_ARGS_BYTES_MAX];
static struct priv_msg m;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool answers = data[0] & 0x80, args = data[0] & 0x40;
    unsigned nfds = data[0] & 7;
    data++;
    size--;
    if (args) {
        memset(&m, 0, sizeof(m));
        if (priv_decode_args(data, size, &m) < 0)
            return 0;
        CHECK(m.argv[0] && m.argv[0][0]);
        long n = priv_encode_args(again, sizeof(again), &m);
        CHECK(n > 0);
        CHECK((size_t)n == size && memcmp(again, data, size) == 0);
        return 0;
    }
    int r = answers ? priv_decode_answer(data, size, nfds, &m)
                    : priv_decode_request(data, size, nfds, &m);
    if (r < 0) {
        CHECK(r == -EBADMSG);
        return 0;
    }
    CHECK(answers ? priv_is_reply(m.type) || priv_is_event(m.type) : priv_is_request(m.type));
    CHECK(nfds == priv_type_fds(m.type));
    if (m.id)
        CHECK(priv_id_ok(m.id));
    if (m.name)
        CHECK(priv_name_ok(m.name));
    CHECK(m.nlayers <= JAIL_MAX_LAYERS);
    for (uint32_t i = 0; i < m.nlayers; i++)
        CHECK(priv_name_ok(m.layers[i]));
    if (m.upper)
        CHECK(priv_name_ok(m.upper));
    CHECK(m.record_len <= PRIV_RECORD_MAX && m.nlist <= PRIV_LIST_MAX);
    for (uint32_t i = 0; i < m.nlist; i++)
        CHECK(priv_id_ok(m.list[i].id) && m.list[i].record_len <= PRIV_RECORD_MAX);
    long n = priv_encode(again, sizeof(again), &m);
    CHECK(n > 0);
    CHECK((size_t)n == size && memcmp(again, data, size) == 0);
    return 0;
}
