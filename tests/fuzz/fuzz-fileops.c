/*
 * fuzz-fileops.c - the abxd <-> abx-fileops decoders on arbitrary packets.
 *
 * The first byte picks the side and the descriptor count that came with
 * the packet; the rest is the packet. Helper side: fop_decode_request()
 * accepts only well-formed requests of a known type with the descriptor
 * count its type carries, every path within its limits, and encoding the
 * decoded request again gives exactly the input bytes. abxd side:
 * fop_decode_answer() and the entry iterators accept only what fills the C
 * structs within their limits (NUL-terminated strings that fit, types in
 * range), whatever a taken-over helper sends.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "sandbox/fileops-proto.h"

static char again[FOP_MSG_MAX];

static void
request(const uint8_t *data, size_t size, unsigned nfds)
{
    struct fop_request rq;
    int r = fop_decode_request(data, size, nfds, &rq);
    if (r < 0) {
        CHECK(r == -EBADMSG);
        return;
    }
    CHECK(nfds == fop_request_fds(rq.type));
    if (rq.a)
        CHECK(strlen(rq.a) >= 1 && strlen(rq.a) <= PATH_MAX_LEN);
    if (rq.b)
        CHECK(strlen(rq.b) >= 1 && strlen(rq.b) <= PATH_MAX_LEN);
    CHECK(rq.prune.n <= FILES_PRUNE_MAX);
    CHECK(rq.meta.n <= VFS_META_MAX);
    if (rq.type == FOP_V_WATCH_ADD)
        CHECK(rq.u && !(rq.u & ~(uint32_t)FOP_WATCH_MASK));
    long n = fop_encode_request(again, sizeof(again), &rq);
    CHECK(n > 0);
    CHECK((size_t)n == size && memcmp(again, data, size) == 0);
}

static void
answer(const uint8_t *data, size_t size, unsigned nfds)
{
    static struct vfs_entry e;
    struct fop_answer a;
    int r = fop_decode_answer(data, size, nfds, &a);
    if (r < 0) {
        CHECK(r == -EBADMSG);
        return;
    }
    CHECK(nfds == fop_answer_fds(a.type));
    if (a.type == FOP_R_ERR) {
        CHECK(a.errnum > 0 && a.errnum <= 4095);
        CHECK(strlen(a.msg) < ERR_MSG_MAX);
    }
    if (a.type == FOP_R_FSTAT || a.type == FOP_R_FSTAT_FD || a.type == FOP_R_CREATED) {
        CHECK(a.st.type <= FILES_OTHER && a.st.mode <= 07777);
        CHECK(strlen(a.st.version) == FILES_VERSION_LEN);
    }
    if (a.type == FOP_R_WD)
        CHECK(a.u >= 1 && a.u <= INT32_MAX);
    if (a.type == FOP_R_FENTRIES) {
        struct files_entry fe;
        while ((r = fop_next_fentry(&a, &fe)) == 1) {
            CHECK(fe.path[0] == '/' && strlen(fe.path) <= 2 * PATH_MAX_LEN);
            CHECK(!fe.target || fe.st.type == FILES_SYMLINK);
            CHECK(!fe.unread || fe.st.type == FILES_DIR);
        }
        CHECK(r == 0 || r == -EBADMSG);
    }
    if (a.type == FOP_R_VENTRIES || a.type == FOP_R_VENTRY) {
        while ((r = fop_next_ventry(&a, &e)) == 1) {
            CHECK(e.path[0] == '/' && strlen(e.path) <= PATH_MAX_LEN);
            CHECK(strlen(e.name) >= 1 && strlen(e.name) <= PATH_NAME_MAX);
            CHECK(strlen(e.perms) < VFS_PERMS_LEN && strlen(e.owner) < 32);
            CHECK(e.type <= VFS_DIR && e.mode <= 0777 && e.mtime_nsec < 1000000000u);
            CHECK(e.meta.n <= VFS_META_MAX && e.meta.used <= sizeof(e.meta.data));
            CHECK(e.has_target == (e.target[0] != '\0'));
        }
        CHECK(r == 0 || r == -EBADMSG);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned nfds = data[0] & 3;
    if (data[0] & 0x80)
        answer(data + 1, size - 1, nfds);
    else
        request(data + 1, size - 1, nfds);
    return 0;
}
