/*
 * test-proto.c - the parent <-> unprivileged side messages (priv/proto.h):
 * every verb, reply and event round trip, and the decoder refuses what a
 * hostile peer could send instead: truncated and oversized packets, a bad
 * magic, wrong descriptor counts, bad ids and names, host paths as layer
 * names, strings without their NUL or with one inside, unknown types,
 * counts past their bounds, seq rules, trailing bytes. The re-adoption
 * verbs (SET_RECORD, LIST, ADOPT and R_LIST's pages), KILL_HELPER and
 * SPAWN_LARGE with its argv/env block likewise: records and pages past
 * their bounds, lengths past the packet, argv in SPAWN_LARGE's body.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "priv/proto.h"

static char buf[PRIV_MSG_MAX + 64];
static struct priv_msg in, out;

static long
enc(const struct priv_msg *m)
{
    long n = priv_encode(buf, sizeof(buf), m);
    assert_true(n >= PRIV_HDR_SIZE);
    return n;
}

static int
dec(long n, unsigned nfds)
{
    if (priv_is_request((int)((struct priv_hdr *)buf)->type))
        return priv_decode_request(buf, (size_t)n, nfds, &out);
    return priv_decode_answer(buf, (size_t)n, nfds, &out);
}

/* Encodes m, decodes it, and checks every cut of it and every other
 * descriptor count is refused. */
static void
round_trip(const struct priv_msg *m)
{
    long n = enc(m);
    unsigned fds = priv_type_fds(m->type);
    assert_int_equal(dec(n, fds), 0);
    assert_int_equal(out.type, m->type);
    assert_int_equal(out.seq, m->seq);
    for (long k = 0; k < n; k++)
        assert_int_equal(dec(k, fds), -EBADMSG);
    for (unsigned f = 0; f <= PRIV_FDS_MAX + 1; f++)
        if (f != fds)
            assert_int_equal(dec(n, f), -EBADMSG);
    /* a byte more, with the header's length fixed up: still refused */
    struct priv_hdr h;
    memcpy(&h, buf, sizeof(h));
    h.len++;
    memcpy(buf, &h, sizeof(h));
    buf[n] = 0;
    assert_int_equal(dec(n + 1, fds), -EBADMSG);
    /* the header's nfds must say what came */
    h.len--;
    h.nfds = (uint16_t)(fds + 1);
    memcpy(buf, &h, sizeof(h));
    assert_int_equal(dec(n, fds + 1), -EBADMSG);
    /* a requests-only decoder takes no answer and the other way round */
    h.nfds = (uint16_t)fds;
    memcpy(buf, &h, sizeof(h));
    if (priv_is_request(m->type))
        assert_int_equal(priv_decode_answer(buf, (size_t)n, fds, &out), -EBADMSG);
    else
        assert_int_equal(priv_decode_request(buf, (size_t)n, fds, &out), -EBADMSG);
    assert_int_equal(dec(n, fds), 0);
}

static void
test_requests(void **state)
{
    (void)state;
    static const char *layers[] = {"base", "python-3"};
    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){.type = PRIV_HELLO, .seq = 1, .a = PRIV_VERSION};
    round_trip(&in);
    assert_int_equal(out.a, PRIV_VERSION);

    memset(&in, 0, sizeof(in));
    in.type = PRIV_CREATE;
    in.seq = 2;
    in.id = "sb1";
    in.limits = (struct jail_limits){1 << 30, 1500, 64, 5 << 20};
    in.layers[0] = layers[0];
    in.layers[1] = layers[1];
    in.nlayers = 2;
    in.upper = "build-x1";
    in.fs_disk_bytes = 77;
    round_trip(&in);
    assert_string_equal(out.id, "sb1");
    assert_int_equal(out.limits.memory_bytes, 1 << 30);
    assert_int_equal(out.limits.cpu_millis, 1500);
    assert_int_equal(out.limits.pids, 64);
    assert_int_equal(out.limits.disk_bytes, 5 << 20);
    assert_int_equal(out.nlayers, 2);
    assert_string_equal(out.layers[1], "python-3");
    assert_string_equal(out.upper, "build-x1");
    assert_int_equal(out.fs_disk_bytes, 77);
    in.upper = NULL;
    in.nlayers = 0;
    round_trip(&in);
    assert_null(out.upper);

    memset(&in, 0, sizeof(in));
    in.type = PRIV_SPAWN;
    in.seq = 3;
    in.id = "sb1";
    in.u64 = 0x1122334455667788ull;
    in.flag = 1;
    in.cwd = "/home/user";
    in.argv[0] = "/bin/sh";
    in.argv[1] = "-c";
    in.argv[2] = "";
    in.env[0] = "A=b";
    round_trip(&in);
    assert_int_equal(out.u64, 0x1122334455667788ull);
    assert_int_equal(out.flag, 1);
    assert_string_equal(out.argv[0], "/bin/sh");
    assert_string_equal(out.argv[2], "");
    assert_null(out.argv[3]);
    assert_string_equal(out.env[0], "A=b");
    assert_null(out.env[1]);

    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){.type = PRIV_SIGNAL, .seq = 4, .id = "a", .pid = 42, .a = 9, .flag = 1};
    round_trip(&in);
    assert_int_equal(out.pid, 42);
    assert_int_equal(out.a, 9);
    in = (struct priv_msg){.type = PRIV_SET_LIMITS, .seq = 5, .id = "a", .limits = {1, 2, 3, 4}};
    round_trip(&in);
    assert_int_equal(out.limits.disk_bytes, 4);
    in = (struct priv_msg){.type = PRIV_FREEZE, .seq = 6, .id = "a", .flag = 1};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_STATS, .seq = 7, .id = "a"};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_KILL, .seq = 8, .id = "a"};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_OPEN_HELPER, .seq = 9, .id = "a", .flag = 0};
    round_trip(&in);
    in = (struct priv_msg){
            .type = PRIV_OPEN_PTY, .seq = 10, .id = "a", .flag = 1, .a = 24, .b = 80};
    round_trip(&in);
    assert_int_equal(out.b, 80);
    in = (struct priv_msg){
            .type = PRIV_NETNS_SOCKET, .seq = 11, .id = "a", .a = AF_INET6, .b = SOCK_STREAM};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_IDMAP, .seq = 12, .id = "a"};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_AREA_CREATE, .seq = 13, .name = "build-a", .u64 = 9};
    round_trip(&in);
    assert_string_equal(out.name, "build-a");
    assert_int_equal(out.u64, 9);
    in = (struct priv_msg){.type = PRIV_AREA_USAGE, .seq = 14, .name = "build-a"};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_AREA_DESTROY, .seq = 15, .name = "build-a"};
    round_trip(&in);
    in = (struct priv_msg){
            .type = PRIV_LAYER_INSTALL, .seq = 16, .name = "build-a", .layer = "b0123"};
    round_trip(&in);
    assert_string_equal(out.name, "build-a");
    assert_string_equal(out.layer, "b0123");
}

static void
test_answers(void **state)
{
    (void)state;
    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){.type = PRIV_R_OK, .seq = 1};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_R_ERR, .seq = 2, .errnum = ENOENT, .text = "no sandbox"};
    round_trip(&in);
    assert_int_equal(out.errnum, ENOENT);
    assert_string_equal(out.text, "no sandbox");
    in = (struct priv_msg){.type = PRIV_R_HELLO, .seq = 3};
    in.hello = (struct priv_hello){PRIV_VERSION, JAIL_NS, 4096, true, false, 0xff, "cgroup v2"};
    round_trip(&in);
    assert_int_equal(out.hello.uid_slots, 4096);
    assert_true(out.hello.has_disk);
    assert_false(out.hello.oom_protect);
    assert_int_equal(out.hello.root_caps, 0xff);
    assert_string_equal(out.hello.missing, "cgroup v2");
    in = (struct priv_msg){.type = PRIV_R_STATS,
                           .seq = 4,
                           .stats = {1, 2, 3, 4, 5},
                           .disk_known = true,
                           .disk_bytes = 6};
    round_trip(&in);
    assert_int_equal(out.stats.oom_kills, 5);
    assert_int_equal(out.disk_bytes, 6);
    in = (struct priv_msg){.type = PRIV_R_HELPER, .seq = 5};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_R_PTY, .seq = 6};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_R_FD, .seq = 7};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_R_USAGE, .seq = 8, .u64 = 1234};
    round_trip(&in);
    assert_int_equal(out.u64, 1234);

    in = (struct priv_msg){.type = PRIV_EV_READY, .id = "sb1", .text = ""};
    in.ready = (struct priv_ready){{1, 2, 3, 4}, 1000, 1001, 65536, 77, "/home/user", "/root"};
    round_trip(&in);
    assert_int_equal(out.ready.timings.total_us, 4);
    assert_int_equal(out.ready.root_uid, 65536);
    assert_int_equal(out.ready.init_pid, 77);
    assert_string_equal(out.ready.home_root, "/root");
    in = (struct priv_msg){.type = PRIV_EV_READY, .id = "sb1", .errnum = EAGAIN, .text = "full"};
    round_trip(&in);
    assert_int_equal(out.errnum, EAGAIN);
    in = (struct priv_msg){.type = PRIV_EV_SPAWNED, .id = "sb1", .u64 = 5, .pid = 9, .text = ""};
    round_trip(&in);
    in = (struct priv_msg){
            .type = PRIV_EV_SPAWNED, .id = "sb1", .u64 = 5, .errnum = ENOENT, .text = "execve"};
    round_trip(&in);
    assert_string_equal(out.text, "execve");
    in = (struct priv_msg){.type = PRIV_EV_EXITED, .id = "sb1", .pid = 9, .status = 256};
    round_trip(&in);
    assert_int_equal(out.status, 256);
    in = (struct priv_msg){.type = PRIV_EV_GONE, .id = "sb1"};
    round_trip(&in);
    in = (struct priv_msg){.type = PRIV_EV_LAYER,
                           .layer = "b0123",
                           .errnum = EEXIST,
                           .text = "layer 'b0123' exists"};
    round_trip(&in);
    assert_string_equal(out.layer, "b0123");
    assert_int_equal(out.errnum, EEXIST);
    assert_null(out.id); /* no sandbox's */
}

/* The encoder refuses what the decoder would. */
static void
test_encoder_refuses(void **state)
{
    (void)state;
    static const char *const bad_ids[] = {"",    "A",    "a-b",
                                          "a/b", "../x", "0123456789abcdef0123456789abcdef0"};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(*bad_ids); i++) {
        memset(&in, 0, sizeof(in));
        in = (struct priv_msg){.type = PRIV_STATS, .seq = 1, .id = bad_ids[i]};
        assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    }
    static const char *const bad_names[] = {"", "../../etc", "/etc", "a.b", "A", "a b", "a/b"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(*bad_names); i++) {
        memset(&in, 0, sizeof(in));
        in = (struct priv_msg){.type = PRIV_CREATE, .seq = 1, .id = "a", .nlayers = 1};
        in.layers[0] = bad_names[i];
        assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
        in.nlayers = 0;
        in.upper = bad_names[i][0] ? bad_names[i] : "x/";
        assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
        in = (struct priv_msg){.type = PRIV_AREA_USAGE, .seq = 1, .name = bad_names[i]};
        assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    }
    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){.type = PRIV_STATS, .seq = 0, .id = "a"}; /* seq 0 */
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_EV_GONE, .seq = 3, .id = "a"}; /* events have none */
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    /* layer and area names: one entry of a directory, never a path */
    in = (struct priv_msg){
            .type = PRIV_LAYER_INSTALL, .seq = 1, .name = "build-a", .layer = "../etc"};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_LAYER_INSTALL, .seq = 1, .name = "a/b", .layer = "l"};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_LAYER_INSTALL, .seq = 1, .name = "build-a"};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_EV_LAYER, .layer = "l", .errnum = 5000, .text = ""};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_SIGNAL, .seq = 1, .id = "a", .pid = 0, .a = 9};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_SIGNAL, .seq = 1, .id = "a", .pid = 3, .a = 65};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){
            .type = PRIV_NETNS_SOCKET, .seq = 1, .id = "a", .a = AF_UNIX, .b = SOCK_STREAM};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_OPEN_PTY, .seq = 1, .id = "a", .a = 0, .b = 80};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_R_ERR, .seq = 1, .errnum = 0, .text = ""};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_R_ERR, .seq = 1, .errnum = 5, .text = "a\nb"};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = 99, .seq = 1};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    /* spawn: relative cwd, empty argv[0], bad env, too many, too large */
    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){.type = PRIV_SPAWN, .seq = 1, .id = "a", .cwd = "tmp"};
    in.argv[0] = "/bin/true";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.cwd = "/";
    in.argv[0] = "";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.argv[0] = "/bin/true";
    in.env[0] = "=x";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.env[0] = NULL;
    static char big[PRIV_BODY_MAX];
    memset(big, 'x', sizeof(big) - 1);
    in.argv[1] = big;
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EMSGSIZE);
    in.argv[1] = NULL;
    for (int i = 0; i < PRIV_ARGS_MAX; i++)
        in.argv[i] = "x";
    in.env[0] = "A=1";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
}

/* Hand-made packets a hostile peer could send. */
static size_t
raw(uint16_t type, uint16_t nfds, uint32_t seq, const void *body, size_t len)
{
    struct priv_hdr h = {
            .magic = PRIV_MAGIC, .type = type, .nfds = nfds, .len = (uint32_t)len, .seq = seq};
    memcpy(buf, &h, sizeof(h));
    memcpy(buf + sizeof(h), body, len);
    return sizeof(h) + len;
}

static size_t
put_s(char *p, const char *s, size_t n, bool nul)
{
    uint32_t l = (uint32_t)n;
    memcpy(p, &l, 4);
    memcpy(p + 4, s, n);
    p[4 + n] = nul ? '\0' : 'z';
    return 5 + n;
}

static void
test_decoder_refuses(void **state)
{
    (void)state;
    char body[256];
    size_t n;

    /* a good STATS first, then its variants */
    n = put_s(body, "ab1", 3, true);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), 0);
    /* unknown types, both directions */
    assert_int_equal(priv_decode_request(buf, raw(0, 0, 1, body, n), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_request(buf, raw(16, 0, 1, body, n), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_request(buf, raw(999, 0, 1, body, n), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_answer(buf, raw(108, 0, 1, body, n), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_answer(buf, raw(204, 0, 0, body, n), 0, &out), -EBADMSG);
    /* seq 0 on a request */
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 0, body, n), 0, &out), -EBADMSG);
    /* bad magic */
    raw(PRIV_STATS, 0, 1, body, n);
    buf[0] ^= 1;
    assert_int_equal(priv_decode_request(buf, sizeof(struct priv_hdr) + n, 0, &out), -EBADMSG);
    /* truncated header, oversized body */
    raw(PRIV_STATS, 0, 1, body, n);
    assert_int_equal(priv_decode_request(buf, 15, 0, &out), -EBADMSG);
    static char huge[PRIV_MSG_MAX + 1];
    struct priv_hdr h = {
            .magic = PRIV_MAGIC, .type = PRIV_STATS, .len = PRIV_BODY_MAX + 1, .seq = 1};
    memcpy(huge, &h, sizeof(h));
    assert_int_equal(priv_decode_request(huge, sizeof(huge), 0, &out), -EBADMSG);
    /* a string without its NUL, one with a NUL inside, one longer than the packet */
    n = put_s(body, "ab1", 3, false);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), -EBADMSG);
    n = put_s(body, "a\0b", 3, true);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), -EBADMSG);
    n = put_s(body, "ab1", 3, true);
    uint32_t l = 200;
    memcpy(body, &l, 4);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), -EBADMSG);
    /* bad ids */
    n = put_s(body, "AB", 2, true);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), -EBADMSG);
    n = put_s(body, "", 0, true);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_STATS, 0, 1, body, n), 0, &out), -EBADMSG);
    /* host paths as layer names */
    static const char *const paths[] = {"../../etc", "/etc", ".", "a/b"};
    for (size_t i = 0; i < 4; i++) {
        char b[256];
        size_t k = put_s(b, "sb", 2, true);
        memset(b + k, 0, 24); /* limits */
        k += 24;
        uint32_t one = 1;
        memcpy(b + k, &one, 4);
        k += 4;
        k += put_s(b + k, paths[i], strlen(paths[i]), true);
        k += put_s(b + k, "", 0, true);
        memset(b + k, 0, 8);
        k += 8;
        assert_int_equal(priv_decode_request(buf, raw(PRIV_CREATE, 0, 1, b, k), 0, &out), -EBADMSG);
    }
    /* a layer count past JAIL_MAX_LAYERS */
    {
        char b[256];
        size_t k = put_s(b, "sb", 2, true);
        memset(b + k, 0, 24);
        k += 24;
        uint32_t many = JAIL_MAX_LAYERS + 1;
        memcpy(b + k, &many, 4);
        k += 4;
        assert_int_equal(priv_decode_request(buf, raw(PRIV_CREATE, 0, 1, b, k), 0, &out), -EBADMSG);
    }
    /* a spawn whose argc claims more than comes, or is 0 */
    {
        char b[256];
        size_t k = put_s(b, "sb", 2, true);
        memset(b + k, 0, 12); /* token, root */
        k += 12;
        k += put_s(b + k, "/", 1, true);
        uint32_t argc = 0, envc = 0;
        memcpy(b + k, &argc, 4);
        memcpy(b + k + 4, &envc, 4);
        assert_int_equal(priv_decode_request(buf, raw(PRIV_SPAWN, 3, 1, b, k + 8), 3, &out),
                         -EBADMSG);
        argc = 5;
        memcpy(b + k, &argc, 4);
        size_t k2 = k + 8 + put_s(b + k + 8, "/bin/true", 9, true);
        assert_int_equal(priv_decode_request(buf, raw(PRIV_SPAWN, 3, 1, b, k2), 3, &out), -EBADMSG);
        argc = 1;
        memcpy(b + k, &argc, 4);
        assert_int_equal(priv_decode_request(buf, raw(PRIV_SPAWN, 3, 1, b, k2), 3, &out), 0);
        /* and with the wrong number of descriptors */
        assert_int_equal(priv_decode_request(buf, raw(PRIV_SPAWN, 2, 1, b, k2), 2, &out), -EBADMSG);
        assert_int_equal(priv_decode_request(buf, raw(PRIV_SPAWN, 3, 1, b, k2), 4, &out), -EBADMSG);
    }
    /* a flag that is not 0 or 1 */
    n = put_s(body, "ab1", 3, true);
    uint32_t two = 2;
    memcpy(body + n, &two, 4);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_FREEZE, 0, 1, body, n + 4), 0, &out),
                     -EBADMSG);
}

static void
test_readoption(void **state)
{
    (void)state;
    static char rec[PRIV_RECORD_MAX + 1];
    memset(rec, 'r', sizeof(rec));
    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){
            .type = PRIV_SET_RECORD, .seq = 1, .id = "sb1", .record = "k1\0x", .record_len = 4};
    round_trip(&in);
    assert_int_equal(out.record_len, 4);
    assert_memory_equal(out.record, "k1\0x", 4); /* bytes: a NUL inside is fine */
    in.record = NULL;
    in.record_len = 0;
    round_trip(&in);
    assert_null(out.record);
    in.record = rec;
    in.record_len = PRIV_RECORD_MAX;
    round_trip(&in);
    assert_int_equal(out.record_len, PRIV_RECORD_MAX);
    in.record_len = PRIV_RECORD_MAX + 1; /* past the bound */
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.record = NULL;
    in.record_len = 3;
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);

    in = (struct priv_msg){.type = PRIV_LIST, .seq = 2, .a = 7};
    round_trip(&in);
    assert_int_equal(out.a, 7);
    assert_null(out.id);
    in = (struct priv_msg){.type = PRIV_ADOPT, .seq = 3, .id = "sb1"};
    round_trip(&in);
    assert_string_equal(out.id, "sb1");
    assert_int_equal(priv_reply_type(PRIV_ADOPT), PRIV_R_LIST);
    assert_int_equal(priv_reply_type(PRIV_LIST), PRIV_R_LIST);
    in.id = "../x";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in = (struct priv_msg){.type = PRIV_KILL_HELPER, .seq = 4, .id = "sb1", .a = 12345};
    round_trip(&in);
    assert_int_equal(out.a, 12345);
    in = (struct priv_msg){.type = PRIV_R_HELPER, .seq = 5, .a = 99};
    round_trip(&in);
    assert_int_equal(out.a, 99);

    /* pages: empty, mixed, one with a record at the bound */
    memset(&in, 0, sizeof(in));
    in.type = PRIV_R_LIST;
    in.seq = 6;
    in.a = PRIV_LIST_END;
    round_trip(&in);
    assert_int_equal(out.nlist, 0);
    in.a = 3;
    in.nlist = 2;
    in.list[0] = (struct priv_entry){.id = "a1", .ready = false, .record = "x", .record_len = 1};
    in.list[1] = (struct priv_entry){
            .id = "b2",
            .ready = true,
            .facts = {{1, 2, 3, 4}, 1000, 1001, 65536, 77, "/home/user", "/root"},
    };
    round_trip(&in);
    assert_int_equal(out.nlist, 2);
    assert_false(out.list[0].ready);
    assert_memory_equal(out.list[0].record, "x", 1);
    assert_true(out.list[1].ready);
    assert_int_equal(out.list[1].facts.init_pid, 77);
    assert_string_equal(out.list[1].facts.home_root, "/root");
    assert_null(out.list[1].record);
    long n = priv_encode(buf, sizeof(buf), &in);
    assert_int_equal((size_t)n, PRIV_HDR_SIZE + 8 + priv_entry_size(&in.list[0]) +
                                        priv_entry_size(&in.list[1]));
    in.nlist = 1;
    in.list[0].record = rec;
    in.list[0].record_len = PRIV_RECORD_MAX;
    round_trip(&in);
    /* an entry with a bad id, facts without homes, a record past the bound */
    in.list[0].id = "A";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.list[0] = in.list[1];
    in.list[0].facts.home_user = "home";
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.list[0] = (struct priv_entry){.id = "a1", .record = rec, .record_len = PRIV_RECORD_MAX + 1};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    /* more entries than a page takes */
    in.nlist = PRIV_LIST_MAX + 1;
    for (int i = 0; i <= PRIV_LIST_MAX; i++)
        in.list[i < PRIV_LIST_MAX ? i : 0] = (struct priv_entry){.id = "a1"};
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
    in.nlist = PRIV_LIST_MAX;
    round_trip(&in);
    assert_int_equal(out.nlist, PRIV_LIST_MAX);
}

/* Hand-made re-adoption packets. */
static size_t raw(uint16_t type, uint16_t nfds, uint32_t seq, const void *body, size_t len);
static size_t put_s(char *p, const char *s, size_t n, bool nul);

static void
test_readoption_refused(void **state)
{
    (void)state;
    static char body[PRIV_BODY_MAX];
    size_t k;
    uint32_t v;

    /* SET_RECORD: one byte past the bound, a length past the packet */
    k = put_s(body, "sb1", 3, true);
    v = PRIV_RECORD_MAX + 1;
    memcpy(body + k, &v, 4);
    memset(body + k + 4, 'r', v);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_SET_RECORD, 0, 1, body, k + 4 + v), 0, &out),
                     -EBADMSG);
    v = PRIV_RECORD_MAX;
    memcpy(body + k, &v, 4);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_SET_RECORD, 0, 1, body, k + 4 + v), 0, &out),
                     0);
    assert_int_equal(
            priv_decode_request(buf, raw(PRIV_SET_RECORD, 0, 1, body, k + 4 + 10), 0, &out),
            -EBADMSG);
    /* LIST with an id, ADOPT without one */
    k = put_s(body, "sb1", 3, true);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_LIST, 0, 1, body, k), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_ADOPT, 0, 1, body, 0), 0, &out), -EBADMSG);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_ADOPT, 0, 1, body, k), 0, &out), 0);
    assert_int_equal(priv_decode_request(buf, raw(PRIV_ADOPT, 1, 1, body, k), 1, &out), -EBADMSG);
    /* R_LIST: a count past the page, one claiming more than comes */
    v = 0;
    memcpy(body, &v, 4);
    v = PRIV_LIST_MAX + 1;
    memcpy(body + 4, &v, 4);
    assert_int_equal(priv_decode_answer(buf, raw(PRIV_R_LIST, 0, 1, body, 8), 0, &out), -EBADMSG);
    v = 2;
    memcpy(body + 4, &v, 4);
    k = 8 + put_s(body + 8, "a1", 2, true);
    v = 0;
    memcpy(body + k, &v, 4);     /* not ready */
    memcpy(body + k + 4, &v, 4); /* no record */
    k += 8;
    assert_int_equal(priv_decode_answer(buf, raw(PRIV_R_LIST, 0, 1, body, k), 0, &out), -EBADMSG);
    v = 1;
    memcpy(body + 4, &v, 4);
    assert_int_equal(priv_decode_answer(buf, raw(PRIV_R_LIST, 0, 1, body, k), 0, &out), 0);
    v = 2;
    memcpy(body + k - 8, &v, 4); /* ready is 0 or 1 */
    assert_int_equal(priv_decode_answer(buf, raw(PRIV_R_LIST, 0, 1, body, k), 0, &out), -EBADMSG);
    /* an R_HELPER without its number */
    assert_int_equal(priv_decode_answer(buf, raw(PRIV_R_HELPER, 2, 1, body, 0), 2, &out), -EBADMSG);
}

static void
test_spawn_large(void **state)
{
    (void)state;
    static char block[PRIV_ARGS_BYTES_MAX + 64];
    static char big[64 * 1024];
    static struct priv_msg a;

    memset(&in, 0, sizeof(in));
    in = (struct priv_msg){
            .type = PRIV_SPAWN_LARGE, .seq = 1, .id = "sb1", .u64 = 5, .flag = 1, .cwd = "/"};
    round_trip(&in);
    assert_int_equal(out.u64, 5);
    assert_null(out.argv[0]);
    assert_int_equal(priv_type_fds(PRIV_SPAWN_LARGE), 4);
    in.argv[0] = "/bin/true"; /* argv goes in the memfd, never the body */
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);

    /* the block: round trip with an argument larger than a body */
    memset(&a, 0, sizeof(a));
    memset(big, 'x', sizeof(big) - 1);
    a.argv[0] = "/bin/echo";
    a.argv[1] = big;
    a.argv[2] = "";
    a.env[0] = "A=b";
    long n = priv_encode_args(block, sizeof(block), &a);
    assert_true(n > (long)sizeof(big));
    memset(&out, 0, sizeof(out));
    assert_int_equal(priv_decode_args(block, (size_t)n, &out), 0);
    assert_string_equal(out.argv[0], "/bin/echo");
    assert_int_equal(strlen(out.argv[1]), sizeof(big) - 1);
    assert_string_equal(out.argv[2], "");
    assert_null(out.argv[3]);
    assert_string_equal(out.env[0], "A=b");
    assert_null(out.env[1]);
    for (long k = 0; k < n; k += 997)
        assert_int_equal(priv_decode_args(block, (size_t)k, &out), -EBADMSG);
    assert_null(out.argv[0]); /* nothing half-decoded is left */
    block[n] = 0;
    assert_int_equal(priv_decode_args(block, (size_t)n + 1, &out), -EBADMSG); /* trailing */
    /* what the encoder refuses: no argv, a bad env, past the bound */
    a.argv[0] = "";
    assert_int_equal(priv_encode_args(block, sizeof(block), &a), -EINVAL);
    a.argv[0] = "/bin/echo";
    a.env[0] = "=b";
    assert_int_equal(priv_encode_args(block, sizeof(block), &a), -EINVAL);
    a.env[0] = NULL;
    for (int i = 1; i < 5; i++)
        a.argv[i] = big; /* 4 x 64 KiB > 256 KiB */
    assert_int_equal(priv_encode_args(block, sizeof(block), &a), -EMSGSIZE);
    /* what the decoder refuses: argc 0, a count past PRIV_ARGS_MAX, a string without NUL,
     * a bad env, a block over the bound */
    uint32_t v[2] = {0, 0};
    memcpy(block, v, 8);
    assert_int_equal(priv_decode_args(block, 8, &out), -EBADMSG);
    v[0] = 1;
    v[1] = PRIV_ARGS_MAX;
    memcpy(block, v, 8);
    size_t k = 8 + put_s(block + 8, "/x", 2, true);
    assert_int_equal(priv_decode_args(block, k, &out), -EBADMSG);
    v[1] = 0;
    memcpy(block, v, 8);
    assert_int_equal(priv_decode_args(block, k, &out), 0);
    k = 8 + put_s(block + 8, "/x", 2, false);
    assert_int_equal(priv_decode_args(block, k, &out), -EBADMSG);
    v[1] = 1;
    memcpy(block, v, 8);
    k = 8 + put_s(block + 8, "/x", 2, true);
    k += put_s(block + k, "noequals", 8, true);
    assert_int_equal(priv_decode_args(block, k, &out), -EBADMSG);
    v[1] = 0;
    memcpy(block, v, 8);
    uint32_t len = PRIV_ARGS_BYTES_MAX;
    memcpy(block + 8, &len, 4);
    memset(block + 12, 'y', len);
    block[12 + len] = 0;
    assert_int_equal(priv_decode_args(block, 13 + len, &out), -EBADMSG);
}

/* Which request gets which reply: SPAWN and SPAWN_LARGE none (their
 * EV_SPAWNED answers), every other request exactly one type, answers and
 * events none. */
static void
test_reply_types(void **state)
{
    (void)state;
    assert_int_equal(priv_reply_type(PRIV_SPAWN), 0);
    assert_int_equal(priv_reply_type(PRIV_SPAWN_LARGE), 0);
    assert_int_equal(priv_reply_type(PRIV_HELLO), PRIV_R_HELLO);
    assert_int_equal(priv_reply_type(PRIV_CREATE), PRIV_R_OK);
    assert_int_equal(priv_reply_type(PRIV_KILL), PRIV_R_OK);
    assert_int_equal(priv_reply_type(PRIV_STATS), PRIV_R_STATS);
    assert_int_equal(priv_reply_type(PRIV_OPEN_HELPER), PRIV_R_HELPER);
    assert_int_equal(priv_reply_type(PRIV_IDMAP), PRIV_R_FD);
    for (int t = PRIV_HELLO; t < _PRIV_REQUEST_MAX; t++) {
        enum priv_type want = priv_reply_type((enum priv_type)t);
        if (t == PRIV_SPAWN || t == PRIV_SPAWN_LARGE || t == PRIV_SET_RECORD)
            assert_int_equal(want, 0); /* answered by an event, or one-way */
        else
            assert_true(priv_is_reply((int)want));
    }
    assert_int_equal(priv_reply_type(PRIV_R_OK), 0);
    assert_int_equal(priv_reply_type(PRIV_EV_SPAWNED), 0);
    /* a SPAWN's answer, a refusal's as well, is an event: seq 0 */
    in = (struct priv_msg){
            .type = PRIV_EV_SPAWNED, .id = "sb1", .u64 = 9, .errnum = ENOENT, .text = "sandbox"};
    round_trip(&in);
    assert_int_equal(out.seq, 0);
    assert_int_equal(out.u64, 9);
    assert_int_equal(out.pid, 0);
    assert_string_equal(out.text, "sandbox");
    in.seq = 5;
    assert_int_equal(priv_encode(buf, sizeof(buf), &in), -EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_requests),        cmocka_unit_test(test_answers),
            cmocka_unit_test(test_encoder_refuses), cmocka_unit_test(test_decoder_refuses),
            cmocka_unit_test(test_readoption),      cmocka_unit_test(test_readoption_refused),
            cmocka_unit_test(test_spawn_large),     cmocka_unit_test(test_reply_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
