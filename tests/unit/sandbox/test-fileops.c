/*
 * test-fileops.c - the file helper: its messages, the real abx-fileops
 * acting as an unprivileged user, and a hostile stand-in (fake-fileops)
 * lying in every way we could think of.
 *
 * The messages: round trips of every request and answer, every truncation
 * of each valid packet, wrong descriptor counts, and the limits each
 * decoder promises. The real helper (uid mode, as a test uid) must refuse
 * what that uid may not do although abxd - this test - is root: a 0600
 * root file, a 0700 root directory. The stand-in's lies (garbage, trailing
 * bytes, answers to other questions, a pipe for a file, descriptors where
 * none belong, terminal escapes in messages, dying, hanging, batches that
 * promise entries they do not hold) must each end in a clean error, with
 * the helper replaced on the next call and no descriptor leaked. Needs
 * root for the helper parts (skipped otherwise).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/jail.h"
#include "sandbox/fileops-helper.h"
#include "sandbox/fileops-proto.h"
#include "sandbox/fileops.h"
#include "util/fd.h"
#include "util/timeutil.h"

#define TUID 4000u /* the test's "sandbox user" */

static char buf[FOP_MSG_MAX];

/* --- messages --- */

static struct fop_request
req(enum fop_type t, const char *a, const char *b)
{
    struct fop_request rq;
    memset(&rq, 0, sizeof(rq));
    rq.type = t;
    rq.a = a;
    rq.b = b;
    return rq;
}

static void
roundtrip(const struct fop_request *in)
{
    struct fop_request out;
    long n = fop_encode_request(buf, sizeof(buf), in);
    assert_true(n > 0);
    assert_int_equal(fop_decode_request(buf, (size_t)n, fop_request_fds(in->type), &out), 0);
    assert_int_equal(out.type, in->type);
    if (in->a)
        assert_string_equal(out.a, in->a);
    if (in->b)
        assert_string_equal(out.b, in->b);
    assert_int_equal(out.u, in->u);
    assert_int_equal(out.max, in->max);
    assert_int_equal(out.prune.n, in->prune.n);
    for (size_t i = 0; i < in->prune.n; i++) {
        assert_string_equal(out.prune.patterns[i], in->prune.patterns[i]);
        assert_int_equal(out.prune.dir_only[i], in->prune.dir_only[i]);
        assert_int_equal(out.prune.glob[i], in->prune.glob[i]);
    }
    assert_int_equal(out.meta.n, in->meta.n);
    /* every truncation is refused, and so is one byte more */
    for (long k = 0; k < n; k++) {
        char t[FOP_MSG_MAX];
        memcpy(t, buf, (size_t)k);
        if (k >= 8) { /* with the header's length patched to match */
            uint32_t len = (uint32_t)k;
            memcpy(t + 4, &len, 4);
        }
        assert_int_equal(fop_decode_request(t, (size_t)k, fop_request_fds(in->type), &out),
                         -EBADMSG);
    }
    /* and the wrong number of descriptors */
    assert_int_equal(fop_decode_request(buf, (size_t)n, fop_request_fds(in->type) + 1, &out),
                     -EBADMSG);
}

static void
test_requests(void **state)
{
    (void)state;
    static const enum fop_type rel1[] = {FOP_F_STAT,   FOP_F_OPEN_READ, FOP_F_UPLOAD_BEGIN,
                                         FOP_F_DELETE, FOP_F_MKDIR,     FOP_F_RMDIR};
    for (size_t i = 0; i < ELEMENTSOF(rel1); i++) {
        struct fop_request rq = req(rel1[i], "a/b c\n\xff", NULL);
        roundtrip(&rq);
        /* workspace paths are relative, and never empty */
        static const char *const bad[] = {"/abs", ""};
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
            rq.a = bad[k];
            assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
            struct proto_writer w;
            proto_writer_init(&w, buf, sizeof(buf), rel1[i]);
            proto_put_str(&w, bad[k]);
            long n = proto_writer_finish(&w);
            struct fop_request out;
            assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
        }
    }
    static const enum fop_type abs1[] = {FOP_V_STAT,   FOP_V_OPEN_DIR,  FOP_V_MKDIR,
                                         FOP_V_REMOVE, FOP_V_OPEN_READ, FOP_V_UPLOAD_BEGIN};
    for (size_t i = 0; i < ELEMENTSOF(abs1); i++) {
        struct fop_request rq = req(abs1[i], "/home/user/x", NULL);
        roundtrip(&rq);
        rq.a = "home/user/x";
        assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
        struct proto_writer w;
        proto_writer_init(&w, buf, sizeof(buf), abs1[i]);
        proto_put_str(&w, "home/user/x");
        long n = proto_writer_finish(&w);
        struct fop_request out;
        assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    }
    struct fop_request rq = req(FOP_F_RENAME, "a", "b/c");
    rq.u = 1;
    roundtrip(&rq);
    rq.u = 2; /* overwrite is a yes or no */
    assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
    struct proto_writer w;
    proto_writer_init(&w, buf, sizeof(buf), FOP_F_RENAME);
    proto_put_str(&w, "a");
    proto_put_str(&w, "b/c");
    proto_put_u32(&w, 2);
    long n = proto_writer_finish(&w);
    struct fop_request out;
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);

    rq = req(FOP_F_UPLOAD_COMMIT, NULL, NULL);
    rq.u = 7;
    roundtrip(&rq);
    rq = req(FOP_V_RENAME, "/a", "/b");
    roundtrip(&rq);
    rq = req(FOP_V_LIST, "/", NULL);
    rq.u = 3;
    roundtrip(&rq);
    rq.u = VFS_MAX_DEPTH + 1;
    assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
    proto_writer_init(&w, buf, sizeof(buf), FOP_V_LIST);
    proto_put_str(&w, "/");
    proto_put_u32(&w, VFS_MAX_DEPTH + 1);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    rq = req(FOP_V_OPEN_BELOW, "sub/dir", NULL);
    roundtrip(&rq);
    rq = req(FOP_V_STAT_FD, "/f", NULL);
    roundtrip(&rq);
    rq = req(FOP_V_COPY_IN, "tpl/file", "/usr/local/x");
    roundtrip(&rq);
    rq = req(FOP_S_COPY_OUT, NULL, NULL);
    rq.max = 1ull << 40;
    roundtrip(&rq);
    rq = req(FOP_S_COPY_IN, NULL, NULL);
    roundtrip(&rq);

    rq = req(FOP_F_WALK, ".", NULL);
    rq.max = 500;
    rq.prune.n = 2;
    rq.prune.patterns[0] = "node_modules";
    rq.prune.dir_only[0] = true;
    rq.prune.patterns[1] = "*.pyc";
    rq.prune.glob[1] = true;
    rq.prune.max_file_bytes = 10 << 20;
    roundtrip(&rq);

    rq = req(FOP_V_SET_META, NULL, NULL);
    assert_int_equal(vfs_meta_add(&rq.meta, "k", "v"), 0);
    assert_int_equal(vfs_meta_add(&rq.meta, "key2", ""), 0);
    roundtrip(&rq);
}

static void
test_request_limits(void **state)
{
    (void)state;
    struct fop_request out;
    /* an unknown type, and an answer type sent as a request */
    struct proto_writer w;
    proto_writer_init(&w, buf, sizeof(buf), 77);
    long n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    proto_writer_init(&w, buf, sizeof(buf), FOP_R_OK);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    /* a string with a NUL inside */
    proto_writer_init(&w, buf, sizeof(buf), FOP_F_STAT);
    proto_put_bytes(&w, "a\0b", 4); /* length 4, bytes a NUL b NUL: no terminating */
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    /* a path past PATH_MAX_LEN */
    static char longp[PATH_MAX_LEN + 2];
    memset(longp, 'a', sizeof(longp) - 1);
    struct fop_request rq = req(FOP_F_STAT, longp, NULL);
    /* abxd never sends what the helper would refuse... */
    assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -ENAMETOOLONG);
    rq.a = "/abs";
    assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
    /* ...and the helper refuses it anyway */
    proto_writer_init(&w, buf, sizeof(buf), FOP_F_STAT);
    proto_put_str(&w, longp);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    /* more prune patterns than fit: refused at both ends */
    rq = req(FOP_F_WALK, ".", NULL);
    rq.prune.n = FILES_PRUNE_MAX + 1;
    assert_int_equal(fop_encode_request(buf, sizeof(buf), &rq), -EINVAL);
    proto_writer_init(&w, buf, sizeof(buf), FOP_F_WALK);
    proto_put_str(&w, ".");
    proto_put_u64(&w, 0);
    proto_put_u32(&w, FILES_PRUNE_MAX + 1);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 0, &out), -EBADMSG);
    /* metadata over vfs_meta_add()'s limits */
    proto_writer_init(&w, buf, sizeof(buf), FOP_V_SET_META);
    proto_put_u32(&w, 1);
    proto_put_str(&w, "");
    proto_put_str(&w, "v");
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_request(buf, (size_t)n, 1, &out), -EBADMSG);
    /* a greeting with a seccomp program that is not whole instructions */
    struct fop_hello h = {.version = FOP_VERSION, .bpf = "1234567", .bpf_len = 7};
    int k = fop_encode_hello(buf, sizeof(buf), &h);
    struct fop_hello hh;
    assert_true(k > 0);
    assert_int_equal(fop_decode_hello(buf, (size_t)k, 0, &hh), -EBADMSG);
    h.bpf_len = 8;
    h.bpf = "12345678";
    h.uid = 1000;
    k = fop_encode_hello(buf, sizeof(buf), &h);
    assert_int_equal(fop_decode_hello(buf, (size_t)k, 0, &hh), 0);
    assert_int_equal(hh.uid, 1000);
    assert_int_equal(fop_decode_hello(buf, (size_t)k, 1, &hh), -EBADMSG);
    h.version = FOP_VERSION + 1;
    k = fop_encode_hello(buf, sizeof(buf), &h);
    assert_int_equal(fop_decode_hello(buf, (size_t)k, 0, &hh), -EBADMSG);
}

static struct vfs_entry *
sample_ventry(void)
{
    static struct vfs_entry e;
    memset(&e, 0, sizeof(e));
    strcpy(e.name, "x\ny");
    strcpy(e.path, "/home/user/x\ny");
    e.type = VFS_FILE;
    e.size = 3;
    e.mode = 0644;
    strcpy(e.perms, "-rw-r--r--");
    strcpy(e.owner, "user");
    strcpy(e.group, "nogroup");
    e.mtime_sec = 1700000000;
    e.mtime_nsec = 5;
    assert_int_equal(vfs_meta_add(&e.meta, "a", "b"), 0);
    return &e;
}

static void
test_answers(void **state)
{
    (void)state;
    struct proto_writer w;
    struct fop_answer a;
    /* an entry batch: entries decode one by one; truncations fail */
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_FENTRIES);
    proto_put_u32(&w, 2);
    struct files_stat st = {FILES_SYMLINK, 3, 0777, 9, "00000000000000ff"};
    struct files_entry fe = {.path = "/a/link", .st = st, .target = "../t"};
    fop_put_fentry(&w, &fe);
    fe = (struct files_entry){.path = "/a/f\xff", .st = st};
    fe.st.type = FILES_FILE;
    fop_put_fentry(&w, &fe);
    st.type = FILES_FILE;
    long n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    struct files_entry got;
    assert_int_equal(fop_next_fentry(&a, &got), 1);
    assert_string_equal(got.path, "/a/link");
    assert_string_equal(got.target, "../t");
    assert_int_equal(got.st.type, FILES_SYMLINK);
    assert_int_equal(fop_next_fentry(&a, &got), 1);
    assert_string_equal(got.path, "/a/f\xff");
    assert_null(got.target);
    assert_int_equal(fop_next_fentry(&a, &got), 0);
    for (long k = 12; k < n; k++) {
        uint32_t len = (uint32_t)k;
        memcpy(buf + 4, &len, 4);
        int r = fop_decode_answer(buf, (size_t)k, 0, &a);
        if (r == 0)
            while ((r = fop_next_fentry(&a, &got)) == 1)
                ;
        if (r != -EBADMSG)
            fail_msg("a batch cut to %ld of %ld bytes decoded (%d)", k, n, r);
        len = (uint32_t)n;
        memcpy(buf + 4, &len, 4);
    }
    /* a target on something that is no symlink, unread on no directory */
    fe = (struct files_entry){.path = "/a", .st = st, .target = "t"};
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_FENTRIES);
    proto_put_u32(&w, 1);
    fop_put_fentry(&w, &fe);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_fentry(&a, &got), -EBADMSG);
    fe = (struct files_entry){.path = "/a", .st = st, .unread = true};
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_FENTRIES);
    proto_put_u32(&w, 1);
    fop_put_fentry(&w, &fe);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_fentry(&a, &got), -EBADMSG);
    /* a count no packet could hold */
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRIES);
    proto_put_u32(&w, 1u << 30);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), -EBADMSG);
    /* vfs entries: a good one, then each field broken */
    struct vfs_entry *e = sample_ventry(), out;
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRY);
    fop_put_ventry(&w, e);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_ventry(&a, &out), 1);
    assert_string_equal(out.path, e->path);
    assert_string_equal(out.owner, "user");
    assert_int_equal(out.meta.n, 1);
    struct vfs_entry bad = *e;
    strcpy(bad.perms, "-rw-r--r--!");
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRY);
    fop_put_ventry(&w, &bad);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_ventry(&a, &out), -EBADMSG);
    bad = *e;
    strcpy(bad.owner, "Root");
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRY);
    fop_put_ventry(&w, &bad);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_ventry(&a, &out), -EBADMSG);
    bad = *e;
    strcpy(bad.path, "relative");
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRY);
    fop_put_ventry(&w, &bad);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_ventry(&a, &out), -EBADMSG);
    bad = *e;
    bad.mtime_nsec = 1000000000u;
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_VENTRY);
    fop_put_ventry(&w, &bad);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), 0);
    assert_int_equal(fop_next_ventry(&a, &out), -EBADMSG);
    /* descriptor counts are fixed per answer type */
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_FD);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 1, &a), 0);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), -EBADMSG);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 2, &a), -EBADMSG);
    /* errors: errno in range, message under ERR_MSG_MAX */
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_ERR);
    proto_put_u32(&w, 0);
    proto_put_str(&w, "x");
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), -EBADMSG);
    char big[ERR_MSG_MAX + 1];
    memset(big, 'm', ERR_MSG_MAX);
    big[ERR_MSG_MAX] = '\0';
    fop_answer_init(&w, buf, sizeof(buf), FOP_R_ERR);
    proto_put_u32(&w, EIO);
    proto_put_str(&w, big);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), -EBADMSG);
    /* and a request type is no answer */
    fop_answer_init(&w, buf, sizeof(buf), FOP_F_STAT);
    n = proto_writer_finish(&w);
    assert_int_equal(fop_decode_answer(buf, (size_t)n, 0, &a), -EBADMSG);
}

/* --- helpers for real --- */

static char dir[128];
static int dirfd_ = -1, image = -1, fake = -1;

static int
open_image(const char *rel)
{
    char p[4096];
    const char *b = getenv("ABX_BUILD_ROOT");
    (void)snprintf(p, sizeof(p), "%s/%s", b ? b : "build", rel);
    return open(p, O_RDONLY | O_CLOEXEC);
}

static int
setup(void **state)
{
    (void)state;
    if (geteuid() != 0)
        return 0;
    image = open_image("src/abx-fileops");
    fake = open_image("tests/unit/sandbox/fake-fileops");
    assert_true(image >= 0 && fake >= 0);
    strcpy(dir, "/tmp/abx-fileops-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chown(dir, TUID, TUID), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    dirfd_ = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd_ >= 0);
    /* what only host root may touch, inside the user's own tree */
    assert_int_equal(write_file_at(dirfd_, "secret", "host only\n", 0600), 0);
    assert_int_equal(mkdirat(dirfd_, "rootdir", 0700), 0);
    assert_int_equal(write_file_at(dirfd_, "rootdir/inside", "x", 0644), 0);
    assert_int_equal(write_file_at(dirfd_, "mine", "hello", 0644), 0);
    assert_int_equal(fchownat(dirfd_, "mine", TUID, TUID, 0), 0);
    assert_int_equal(symlinkat("secret", dirfd_, "link-to-secret"), 0);
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    if (dirfd_ >= 0) {
        char parent[128], *slash;
        strcpy(parent, dir);
        slash = strrchr(parent, '/');
        *slash = '\0';
        int p = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void)rm_rf_at(p, slash + 1);
        close(p);
    }
    safe_close(dirfd_);
    safe_close(image);
    safe_close(fake);
    return 0;
}

static struct fileops *
remote(int img, uint32_t uid)
{
    struct fileops *f = NULL;
    struct err err = {0};
    struct fileops_remote c = {
            .image_fd = img,
            .userns_fd = -1,
            .ws_fd = dirfd_,
            .view_fd = dirfd_, /* the view's "/" may be any directory */
            .ns = false,
            .uid = uid,
            .gid = uid,
            .ids = {uid, uid, uid, uid, uid, 1},
            .label = "test",
    };
    assert_int_equal(fileops_new_remote(&c, &f, &err), 0);
    return f;
}

#define NEED_ROOT()                                                \
    do {                                                           \
        if (geteuid() != 0)                                        \
            skip(); /* helpers need root to become someone else */ \
    } while (0)

static int
count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void
test_real_helper(void **state)
{
    (void)state;
    NEED_ROOT();
    struct fileops *f = remote(image, TUID);
    struct err err = {0};
    struct files_stat st;
    int fd = -1;

    /* what the user may do */
    assert_int_equal(fileops_open_read(f, "mine", &fd, &st, &err), 0);
    char b[16] = {0};
    assert_int_equal(read(fd, b, sizeof(b)), 5);
    assert_string_equal(b, "hello");
    close(fd);
    assert_true(fileops_helper_pid(f) > 0);
    /* and what only root may: refused by the kernel, though we are root */
    err_clear(&err);
    assert_int_equal(fileops_open_read(f, "secret", &fd, &st, &err), -EACCES);
    assert_int_equal(fileops_open_read(f, "link-to-secret", &fd, &st, NULL), -EACCES);
    assert_int_equal(fileops_stat(f, "rootdir/inside", &st, NULL), -EACCES);
    /* the stat of a name in a readable directory is not secret */
    assert_int_equal(fileops_stat(f, "secret", &st, NULL), 0);

    /* an upload: a file of the user's, the size bound kept on our side */
    struct fileops_upload *up;
    bool created = false;
    assert_int_equal(fileops_upload_begin(f, "new/dir/file", 8, &up, &err), 0);
    assert_int_equal(fileops_upload_write(up, "12345678", 8, &err), 0);
    assert_int_equal(fileops_upload_write(up, "9", 1, NULL), -EFBIG);
    assert_int_equal(fileops_upload_commit(up, &st, &created, &err), 0);
    assert_true(created);
    struct stat sb;
    assert_int_equal(fstatat(dirfd_, "new/dir/file", &sb, 0), 0);
    assert_int_equal(sb.st_uid, TUID);
    assert_int_equal(sb.st_size, 8);
    /* an aborted one leaves nothing */
    assert_int_equal(fileops_upload_begin(f, "gone", 100, &up, &err), 0);
    assert_int_equal(fileops_upload_write(up, "x", 1, &err), 0);
    fileops_upload_abort(up);
    assert_int_equal(fstatat(dirfd_, "gone", &sb, 0), -1);
    /* the user cannot write into root's directory */
    assert_int_equal(fileops_upload_begin(f, "rootdir/x", 100, &up, NULL), -EACCES);

    /* a walk: root's 0700 directory is an entry, never entered */
    struct files_tree t;
    struct files_prune pr = {.n = 1, .patterns = {"new"}, .dir_only = {true}};
    struct files_walk_opts o = {.prune = &pr};
    err_clear(&err);
    assert_int_equal(fileops_tree_list(f, ".", &o, &t, &err), 0);
    bool saw_rootdir = false, saw_inside = false;
    for (size_t i = 0; i < t.n; i++) {
        if (!strcmp(t.v[i].path, "/rootdir"))
            assert_true(t.v[i].unread);
        saw_rootdir |= !strcmp(t.v[i].path, "/rootdir");
        saw_inside |= !strcmp(t.v[i].path, "/rootdir/inside");
        assert_true(strncmp(t.v[i].path, "/new", 4) != 0);
    }
    assert_true(saw_rootdir);
    assert_false(saw_inside);
    assert_int_equal(t.skipped, 1);
    files_tree_free(&t);

    /* mkdir, rename, delete, rmdir as the user */
    bool made = false;
    assert_int_equal(fileops_mkdir(f, "d1/d2", &made, NULL), 0);
    assert_true(made);
    assert_int_equal(fileops_rename(f, "d1", "d3", false, NULL), 0);
    assert_int_equal(fileops_rmdir(f, "d3", NULL), 0);
    assert_int_equal(fileops_delete(f, "new/dir/file", NULL), 0);
    assert_int_equal(fileops_delete(f, "secret", NULL), 0 - 0); /* the directory is the user's */
    fileops_shutdown(f);
    assert_int_equal(fileops_stat(f, "mine", &st, NULL), -ESRCH);
    fileops_unref(f);
    /* restore the planted secret for later tests */
    assert_int_equal(write_file_at(dirfd_, "secret", "host only\n", 0600), 0);
}

static void
test_real_helper_cannot_be_host_root(void **state)
{
    (void)state;
    NEED_ROOT();
    /* uid mode refuses to become uid 0 on the host: the start fails */
    struct fileops *f = remote(image, 0);
    struct err err = {0};
    struct files_stat st;
    assert_int_equal(fileops_stat(f, "mine", &st, &err), -EIO);
    assert_non_null(strstr(err.msg, "cannot start"));
    fileops_unref(f);
}

static void
lie(struct fileops *f, const char *what, int want, const char *msg)
{
    struct err err = {0};
    struct files_stat st;
    pid_t before = fileops_helper_pid(f);
    int r = fileops_stat(f, what, &st, &err);
    if (r != want)
        fail_msg("%s: %d (%s), wanted %d", what, r, err.msg, want);
    if (msg && !strstr(err.msg, msg))
        fail_msg("%s: message '%s' lacks '%s'", what, err.msg, msg);
    if (want == -EIO) /* the liar is gone */
        assert_true(before == 0 || fileops_helper_pid(f) != before);
}

static void
test_hostile_helper(void **state)
{
    (void)state;
    NEED_ROOT();
    int fds0 = count_fds();
    struct fileops *f = remote(fake, TUID);
    struct files_stat st;
    struct err err = {0};
    int fd = -1;

    assert_int_equal(fileops_stat(f, "ok", &st, NULL), 0);
    assert_string_equal(st.version, "0123456789abcdef");
    lie(f, "garbage", -EIO, "malformed");
    lie(f, "ok", 0, NULL); /* a new helper answers */
    lie(f, "trailing", -EIO, "malformed");
    lie(f, "badversion", -EIO, "malformed");
    lie(f, "other", -EIO, "another question");
    lie(f, "twofds", -EIO, "malformed");
    lie(f, "walk-in-stat", -EIO, "unasked");
    lie(f, "die", -EIO, "ended");
    /* a message is passed on with nothing a log or terminal would obey */
    lie(f, "escape", -EACCES, "forged?<3>line?[31m");
    /* a pipe where a regular file was promised */
    assert_int_equal(fileops_open_read(f, "pipe", &fd, &st, &err), -EIO);
    assert_non_null(strstr(err.msg, "wrong kind"));
    /* a batch that promises entries it does not hold */
    struct files_tree t;
    err_clear(&err);
    assert_int_equal(fileops_tree_list(f, "lying-batch", NULL, &t, &err), -EIO);
    /* a helper that does not answer: killed at the deadline */
    fileops_set_timeouts(f, 300, 300);
    uint64_t t0 = now_msec();
    lie(f, "hang", -ETIMEDOUT, "in time");
    assert_true(now_msec() - t0 < 5000);
    lie(f, "ok", 0, NULL);
    fileops_unref(f);
    assert_int_equal(count_fds(), fds0); /* nothing kept, nothing leaked */
    /* a helper that cannot become the user */
    f = remote(fake, 4242);
    err_clear(&err);
    assert_int_equal(fileops_stat(f, "ok", &st, &err), -EIO);
    assert_non_null(strstr(err.msg, "cannot start"));
    fileops_unref(f);
    assert_int_equal(count_fds(), fds0);
}

struct hang_ctx {
    struct fileops *f;
    int r;
    uint64_t ms;
};

static void *
hang_thread(void *ud)
{
    struct hang_ctx *c = ud;
    struct files_stat st;
    uint64_t t0 = now_msec();
    c->r = fileops_stat(c->f, "hang", &st, NULL);
    c->ms = now_msec() - t0;
    return NULL;
}

static void
test_shutdown_ends_a_call(void **state)
{
    (void)state;
    NEED_ROOT();
    struct hang_ctx c = {.f = remote(fake, TUID)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hang_thread, &c), 0);
    /* until the call is under way */
    for (int i = 0; i < 200 && !fileops_helper_pid(c.f); i++)
        usleep(10000);
    usleep(50000);
    fileops_shutdown(c.f);
    pthread_join(t, NULL);
    assert_int_equal(c.r, -ESRCH);
    assert_true(c.ms < 5000);
    fileops_unref(c.f);
}

static int
reenter(void *ud, const struct vfs_entry *e)
{
    struct files_stat st;
    (void)e;
    return fileops_stat(ud, "mine", &st, NULL);
}

static int
walk_reenter(const struct files_entry *e, void *ud)
{
    struct files_stat st;
    (void)e;
    return fileops_stat(ud, "mine", &st, NULL);
}

static void
test_no_reentry(void **state)
{
    (void)state;
    NEED_ROOT();
    struct fileops *f = remote(image, TUID);
    /* a listing's callback runs inside the call: it may not call again */
    assert_int_equal(fileops_vlist(f, "/", 1, reenter, f, NULL), -EDEADLK);
    /* a walk's runs after it: it may */
    assert_int_equal(fileops_walk(f, ".", walk_reenter, f, NULL), 0);
    fileops_unref(f);
}

/* A start hook standing in for the privileged parent: it starts the real
 * helper with fileops_helper_start() and keeps a pidfd of its own, as the
 * helper's parent would. */
struct starter {
    unsigned starts;
    bool as_root;
    int pidfd; /* ours, of the last helper started */
    bool fail;
};

static int
start_hook(void *ud, bool as_root, int *ret_sock, int *ret_pidfd, uint64_t *ret_token,
           struct err *err)
{
    struct starter *s = ud;
    pid_t pid;
    if (s->fail)
        return err_set(err, EPERM, "the starter says no");
    struct fileops_helper_spec spec = {
            .image_fd = image,
            .ws_fd = dirfd_,
            .view_fd = dirfd_,
            .userns_fd = -1,
            .uid = TUID,
            .gid = TUID,
            .ids = {TUID, TUID, TUID, TUID, TUID, 1},
            .label = "test",
    };
    int r = fileops_helper_start(&spec, ret_sock, ret_pidfd, &pid, err);
    if (r < 0)
        return r;
    safe_close(s->pidfd);
    s->pidfd = fcntl(*ret_pidfd, F_DUPFD_CLOEXEC, 3);
    assert_true(s->pidfd >= 0);
    s->starts++;
    s->as_root = as_root;
    *ret_token = s->starts;
    return 0;
}

static void
test_start_hook(void **state)
{
    (void)state;
    NEED_ROOT();
    int fds0 = count_fds();
    struct starter s = {.pidfd = -EBADF};
    struct fileops_remote c = {
            .image_fd = -1,
            .userns_fd = -1,
            .ws_fd = -1,
            .view_fd = -1,
            .as_root = false,
            .label = "test",
            .start = start_hook,
            .start_ud = &s,
            .has_view = true,
    };
    struct fileops *f = NULL;
    struct err err = {0};
    struct files_stat st;
    int fd = -1;
    assert_int_equal(fileops_new_remote(&c, &f, &err), 0);
    assert_int_equal(s.starts, 0); /* lazily, as always */
    assert_int_equal(fileops_open_read(f, "mine", &fd, &st, &err), 0);
    safe_close(fd);
    assert_int_equal(s.starts, 1);
    assert_false(s.as_root);
    assert_true(fileops_helper_pid(f) > 0);
    assert_int_equal(fileops_open_read(f, "secret", &fd, &st, NULL), -EACCES);
    struct vfs_entry e;
    assert_int_equal(fileops_vstat(f, "/mine", &e, &err), 0);
    /* the helper dies while idle: the next call asks for a new one */
    pid_t pid = fileops_helper_pid(f);
    assert_int_equal(kill(pid, SIGKILL), 0);
    siginfo_t si = {0};
    assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)s.pidfd, &si, WEXITED | __WALL), 0);
    assert_int_equal(si.si_pid, pid); /* the handle did not reap what it did not fork */
    assert_int_equal(fileops_stat(f, "mine", &st, &err), 0);
    assert_int_equal(s.starts, 2);
    /* the handle's own kill, through the pidfd; the reaping is ours */
    pid = fileops_helper_pid(f);
    fileops_shutdown(f);
    assert_int_equal(fileops_helper_pid(f), 0);
    memset(&si, 0, sizeof(si));
    assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)s.pidfd, &si, WEXITED | __WALL), 0);
    assert_int_equal(si.si_pid, pid);
    assert_int_equal(fileops_stat(f, "mine", &st, NULL), -ESRCH);
    /* no user namespace and no idmap hook: copies into the view are refused */
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    fileops_unref(f);
    c.ns = true;
    assert_int_equal(fileops_new_remote(&c, &f, &err), 0);
    assert_int_equal(fileops_vcopy_in(f, d, "mine", "/x", NULL), -EOPNOTSUPP);
    safe_close(d);
    /* a starter that fails: its error is the call's */
    s.fail = true;
    err_clear(&err);
    assert_int_equal(fileops_stat(f, "mine", &st, &err), -EPERM);
    assert_string_equal(err.msg, "the starter says no");
    fileops_unref(f);
    /* no view: the view's calls are refused before any helper */
    c.has_view = false;
    c.ns = false;
    assert_int_equal(fileops_new_remote(&c, &f, &err), 0);
    assert_int_equal(fileops_vstat(f, "/mine", &e, NULL), -EOPNOTSUPP);
    fileops_unref(f);
    safe_close(s.pidfd);
    assert_int_equal(count_fds(), fds0);
}

static void
test_direct(void **state)
{
    (void)state;
    char d[] = "/tmp/abx-fileops-direct-XXXXXX";
    assert_non_null(mkdtemp(d));
    int root = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct vfs_ids ids = {0};
    struct fileops *f = NULL;
    struct files_stat st;
    bool made;
    assert_int_equal(fileops_new_direct(root, -1, &ids, (uid_t)-1, (gid_t)-1, false, &f), 0);
    assert_int_equal(fileops_mkdir(f, "a", &made, NULL), 0);
    assert_true(made);
    assert_int_equal(fileops_stat(f, "a", &st, NULL), 0);
    assert_int_equal(st.type, FILES_DIR);
    struct vfs_entry e;
    assert_int_equal(fileops_vstat(f, "/a", &e, NULL), -EOPNOTSUPP);
    fileops_unref(f);
    int p = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    (void)rm_rf_at(p, d + 5);
    close(p);
    close(root);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_requests),
            cmocka_unit_test(test_request_limits),
            cmocka_unit_test(test_answers),
            cmocka_unit_test(test_direct),
            cmocka_unit_test(test_real_helper),
            cmocka_unit_test(test_real_helper_cannot_be_host_root),
            cmocka_unit_test(test_hostile_helper),
            cmocka_unit_test(test_shutdown_ends_a_call),
            cmocka_unit_test(test_no_reentry),
            cmocka_unit_test(test_start_hook),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
