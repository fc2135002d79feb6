/*
 * test-store.c - the FileStore contract (store.h), one suite for both
 * backends: SQLite always, PostgreSQL when ABX_TEST_PG_URL names a server
 * (scripts/test.sh starts one; with ABX_TEST_PG_REQUIRED=1 its absence is
 * a failure, not a skip).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "store/store-internal.h"
#include "store/store.h"
#include "util/fd.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/timeutil.h"

struct fixture {
    char dir[256];
    char where[512];
    struct store *s;
    char ws[32];
};

static const char *backend = "sqlite"; /* set by main() per run */

static int
mkfile(const void *data, size_t n)
{
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, data, n), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

static int
put(struct store *s, const char *ws, const char *path, const char *data, const char *if_match,
    struct store_entry *e)
{
    struct err err = {0};
    int fd = mkfile(data, strlen(data));
    int r = store_write(s, ws, path, fd, 0644, 0, if_match, e, &err);
    close(fd);
    return r;
}

static char *
get(struct store *s, const char *ws, const char *path)
{
    struct err err = {0};
    struct store_entry e;
    int fd = -1;
    if (store_read(s, ws, path, &fd, &e, &err) < 0)
        return NULL;
    struct buf b;
    buf_init(&b, 64 << 20);
    char tmp[65536];
    ssize_t k;
    while ((k = read(fd, tmp, sizeof(tmp))) > 0)
        assert_int_equal(buf_put(&b, tmp, (size_t)k), 0);
    close(fd);
    return buf_steal(&b);
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct err err = {0};
    char rnd[17];
    assert_non_null(f);
    assert_int_equal(rand_hex(rnd, 8), 0);
    (void)snprintf(f->dir, sizeof(f->dir), "/tmp/abx-test-store-%s", rnd);
    assert_int_equal(mkdir_p(f->dir, 0700), 0);
    if (!strcmp(backend, "postgres")) {
        const char *url = getenv("ABX_TEST_PG_URL");
        (void)snprintf(f->where, sizeof(f->where), "%s", url);
    } else {
        (void)snprintf(f->where, sizeof(f->where), "%s/store", f->dir);
    }
    int r = store_open(f->where, f->dir, &f->s, &err);
    if (r < 0)
        fail_msg("store_open(%s): %s", f->where, err.msg);
    /* A fresh workspace per test keeps tests apart on a shared database. */
    assert_int_equal(rand_id(rnd, 12), 0);
    (void)snprintf(f->ws, sizeof(f->ws), "t-%s", rnd);
    struct store_ws w = {.memory_bytes = 128 << 20};
    (void)snprintf(w.id, sizeof(w.id), "%s", f->ws);
    r = store_ws_create(f->s, &w, &err);
    if (r < 0)
        fail_msg("ws_create: %s", err.msg);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    (void)store_ws_delete(f->s, f->ws, &err);
    store_close(f->s);
    (void)rm_rf_at(AT_FDCWD, f->dir);
    free(f);
    return 0;
}

static void
test_workspaces(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_ws w;

    assert_int_equal(store_ws_get(f->s, f->ws, &w, &err), 0);
    assert_string_equal(w.id, f->ws);
    assert_string_equal(w.template_name, "base");
    assert_int_equal(w.memory_bytes, 128 << 20);
    struct store_ws dup = {0};
    (void)snprintf(dup.id, sizeof(dup.id), "%s", f->ws);
    assert_int_equal(store_ws_create(f->s, &dup, &err), -EEXIST);
    err_clear(&err);
    struct store_ws bad = {.id = "Bad Id"};
    assert_int_equal(store_ws_create(f->s, &bad, &err), -EINVAL);
    assert_int_equal(store_ws_get(f->s, "no-such-ws", &w, &err), -ENOENT);
    struct store_entry e;
    assert_int_equal(put(f->s, "no-such-ws", "a", "x", NULL, &e), -ENOENT);
    assert_int_equal(store_ws_delete(f->s, "no-such-ws", &err), -ENOENT);
}

static int
count_ws(const struct store_ws *w, void *ud)
{
    (void)w;
    (*(int *)ud)++;
    return 0;
}

static void
test_ws_list_and_delete(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    int before = 0, after = 0;
    assert_int_equal(store_ws_list(f->s, count_ws, &before, &err), 0);
    assert_true(before >= 1);
    struct store_entry e;
    assert_int_equal(put(f->s, f->ws, "keep/this", "data", NULL, &e), 0);
    assert_int_equal(store_ws_delete(f->s, f->ws, &err), 0);
    assert_int_equal(store_ws_list(f->s, count_ws, &after, &err), 0);
    assert_int_equal(after, before - 1);
    assert_int_equal(store_stat(f->s, f->ws, "keep", &e, &err), -ENOENT);
    /* re-create so teardown finds it */
    struct store_ws w = {0};
    (void)snprintf(w.id, sizeof(w.id), "%s", f->ws);
    assert_int_equal(store_ws_create(f->s, &w, &err), 0);
    assert_int_equal(store_stat(f->s, f->ws, "keep", &e, &err), -ENOENT);
}

static void
test_write_read(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e, st;

    assert_int_equal(put(f->s, f->ws, "a/b/c.txt", "hello", NULL, &e), 0);
    /* sha256("hello") */
    assert_string_equal(e.hash, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert_int_equal(e.size, 5);
    char *got = get(f->s, f->ws, "a/b/c.txt");
    assert_string_equal(got, "hello");
    free(got);
    assert_int_equal(store_stat(f->s, f->ws, "a", &st, &err), 0);
    assert_int_equal(st.type, STORE_DIR);
    assert_int_equal(store_stat(f->s, f->ws, "a/b", &st, &err), 0);
    assert_int_equal(st.type, STORE_DIR);
    assert_int_equal(store_stat(f->s, f->ws, "a/b/c.txt", &st, &err), 0);
    assert_int_equal(st.type, STORE_FILE);
    assert_string_equal(st.hash, e.hash);
    assert_int_equal(put(f->s, f->ws, "a/b/c.txt", "bye", NULL, &e), 0);
    got = get(f->s, f->ws, "a/b/c.txt");
    assert_string_equal(got, "bye");
    free(got);
    assert_int_equal(put(f->s, f->ws, "empty", "", NULL, &e), 0);
    assert_int_equal(e.size, 0);
    got = get(f->s, f->ws, "empty");
    assert_string_equal(got, "");
    free(got);
    int fd;
    assert_int_equal(store_read(f->s, f->ws, "nope", &fd, &st, &err), -ENOENT);
    assert_int_equal(store_read(f->s, f->ws, "a", &fd, &st, &err), -EISDIR);
    assert_int_equal(store_read(f->s, f->ws, "../x", &fd, &st, &err), -EINVAL);
    assert_int_equal(store_read(f->s, f->ws, "/abs", &fd, &st, &err), -EINVAL);
}

static void
test_honest_directories(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    bool created;

    assert_int_equal(store_mkdir(f->s, f->ws, "empty/deep", &created, &err), 0);
    assert_true(created);
    assert_int_equal(store_mkdir(f->s, f->ws, "empty/deep", &created, &err), 0);
    assert_false(created);
    assert_int_equal(store_stat(f->s, f->ws, "empty/deep", &e, &err), 0);
    assert_int_equal(e.type, STORE_DIR);

    assert_int_equal(put(f->s, f->ws, "d/file", "x", NULL, &e), 0);
    assert_int_equal(store_delete(f->s, f->ws, "d/file", NULL, &err), 0);
    assert_int_equal(store_stat(f->s, f->ws, "d", &e, &err), 0);
    assert_int_equal(e.type, STORE_DIR);
    assert_int_equal(store_stat(f->s, f->ws, "d/file", &e, &err), -ENOENT);
    assert_int_equal(store_delete(f->s, f->ws, "d", NULL, &err), -EISDIR);
    assert_int_equal(store_delete(f->s, f->ws, "missing", NULL, &err), -ENOENT);

    assert_int_equal(put(f->s, f->ws, "t/a/1", "1", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "t/a/2", "2", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "t/b", "3", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "t.x", "sibling", NULL, &e), 0);
    assert_int_equal(store_rmdir(f->s, f->ws, "t", &err), 0);
    assert_int_equal(store_stat(f->s, f->ws, "t", &e, &err), -ENOENT);
    assert_int_equal(store_stat(f->s, f->ws, "t/a/1", &e, &err), -ENOENT);
    assert_int_equal(store_stat(f->s, f->ws, "t.x", &e, &err), 0); /* a prefix, not a child */
    assert_int_equal(store_rmdir(f->s, f->ws, ".", &err), -EINVAL);
    assert_int_equal(store_rmdir(f->s, f->ws, "t.x", &err), -ENOTDIR);

    assert_int_equal(put(f->s, f->ws, "empty", "x", NULL, &e), -EISDIR);
    assert_int_equal(put(f->s, f->ws, "t.x/below", "x", NULL, &e), -ENOTDIR);
    assert_int_equal(store_mkdir(f->s, f->ws, "t.x", &created, &err), -ENOTDIR);
    assert_int_equal(store_mkdir(f->s, f->ws, "t.x/sub", &created, &err), -ENOTDIR);
}

struct names {
    char buf[4096];
};

static int
collect(const struct store_entry *e, void *ud)
{
    struct names *n = ud;
    size_t l = strlen(n->buf);
    (void)snprintf(n->buf + l, sizeof(n->buf) - l, "%s%s:%c", l ? " " : "", e->path,
                   e->type == STORE_DIR ? 'd' : 'f');
    return 0;
}

static void
test_list_and_walk(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct names n = {""};
    bool created;

    assert_int_equal(put(f->s, f->ws, "w/b/x", "1", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "w/a", "2", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "w/a.b", "3", NULL, &e), 0);
    assert_int_equal(store_mkdir(f->s, f->ws, "w/c", &created, &err), 0);
    assert_int_equal(put(f->s, f->ws, "w0", "4", NULL, &e), 0);
    assert_int_equal(store_list(f->s, f->ws, "w", collect, &n, &err), 0);
    assert_string_equal(n.buf, "w/a:f w/a.b:f w/b:d w/c:d");
    n.buf[0] = '\0';
    assert_int_equal(store_walk(f->s, f->ws, "w", collect, &n, &err), 0);
    assert_string_equal(n.buf, "w/a:f w/a.b:f w/b:d w/b/x:f w/c:d");
    n.buf[0] = '\0';
    assert_int_equal(store_walk(f->s, f->ws, ".", collect, &n, &err), 0);
    assert_string_equal(n.buf, "w:d w/a:f w/a.b:f w/b:d w/b/x:f w/c:d w0:f");
    n.buf[0] = '\0';
    assert_int_equal(store_list(f->s, f->ws, ".", collect, &n, &err), 0);
    assert_string_equal(n.buf, "w:d w0:f");
    assert_int_equal(store_list(f->s, f->ws, "w0", collect, &n, &err), -ENOTDIR);
    assert_int_equal(store_walk(f->s, f->ws, "none", collect, &n, &err), -ENOENT);
}

static void
test_if_match(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e1, e2;

    assert_int_equal(put(f->s, f->ws, "cas", "v1", "", &e1), 0);
    assert_int_equal(put(f->s, f->ws, "cas", "again", "", &e2), -ESTALE);
    assert_int_equal(put(f->s, f->ws, "cas", "v2", "0000", &e2), -ESTALE);
    char *got = get(f->s, f->ws, "cas");
    assert_string_equal(got, "v1"); /* a failed precondition changes nothing */
    free(got);
    assert_int_equal(put(f->s, f->ws, "cas", "v2", e1.hash, &e2), 0);
    assert_int_equal(put(f->s, f->ws, "cas", "v3", e1.hash, &e2), -ESTALE);
    assert_int_equal(put(f->s, f->ws, "never", "x", e1.hash, &e2), -ESTALE);
    assert_int_equal(store_delete(f->s, f->ws, "cas", e1.hash, &err), -ESTALE);
    assert_int_equal(put(f->s, f->ws, "cas", "v2", NULL, &e2), 0);
    assert_int_equal(store_delete(f->s, f->ws, "cas", e2.hash, &err), 0);
}

static void
test_rename(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct names n = {""};

    assert_int_equal(put(f->s, f->ws, "src/sub/f1", "1", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "src/f2", "2", NULL, &e), 0);
    assert_int_equal(store_rename(f->s, f->ws, "src", "dst/moved", false, &err), 0);
    assert_int_equal(store_walk(f->s, f->ws, "dst", collect, &n, &err), 0);
    assert_string_equal(n.buf, "dst/moved:d dst/moved/f2:f dst/moved/sub:d dst/moved/sub/f1:f");
    assert_int_equal(store_stat(f->s, f->ws, "src", &e, &err), -ENOENT);
    char *got = get(f->s, f->ws, "dst/moved/sub/f1");
    assert_string_equal(got, "1");
    free(got);
    n.buf[0] = '\0';
    assert_int_equal(store_list(f->s, f->ws, "dst/moved/sub", collect, &n, &err), 0);
    assert_string_equal(n.buf, "dst/moved/sub/f1:f"); /* parents were rewritten too */

    assert_int_equal(put(f->s, f->ws, "a", "A", NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "b", "B", NULL, &e), 0);
    assert_int_equal(store_rename(f->s, f->ws, "a", "b", false, &err), -EEXIST);
    assert_int_equal(store_rename(f->s, f->ws, "a", "b", true, &err), 0);
    got = get(f->s, f->ws, "b");
    assert_string_equal(got, "A");
    free(got);
    assert_int_equal(store_rename(f->s, f->ws, "b", "dst", true, &err), -EEXIST);
    assert_int_equal(store_rename(f->s, f->ws, "dst", "dst/inside", false, &err), -EINVAL);
    assert_int_equal(store_rename(f->s, f->ws, "ghost", "x", false, &err), -ENOENT);
}

static void
test_usage_and_dedup(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e1, e2;
    struct store_usage u;

    assert_int_equal(put(f->s, f->ws, "u/one", "same bytes", NULL, &e1), 0);
    assert_int_equal(put(f->s, f->ws, "u/two", "same bytes", NULL, &e2), 0);
    assert_string_equal(e1.hash, e2.hash);
    assert_int_equal(store_usage(f->s, f->ws, &u, &err), 0);
    assert_int_equal(u.files, 2);
    assert_int_equal(u.bytes, 20);
    assert_int_equal(u.dirs, 1);
}

static void
test_limits_and_abort(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_writer *w;

    assert_int_equal(put(f->s, f->ws, "lim", "old", NULL, &e), 0);
    int fd = mkfile("0123456789", 10);
    assert_int_equal(store_write(f->s, f->ws, "lim", fd, 0644, 5, NULL, &e, &err), -EFBIG);
    close(fd);
    char *got = get(f->s, f->ws, "lim");
    assert_string_equal(got, "old");
    free(got);

    assert_int_equal(store_writer_begin(f->s, 0, &w, &err), 0);
    assert_int_equal(store_writer_write(w, "partial", 7, &err), 0);
    store_writer_abort(w);
    assert_int_equal(store_stat(f->s, f->ws, "partial", &e, &err), -ENOENT);

    /* a commit that fails its precondition leaves the old content */
    assert_int_equal(store_writer_begin(f->s, 0, &w, &err), 0);
    assert_int_equal(store_writer_write(w, "new", 3, &err), 0);
    assert_int_equal(store_writer_commit(f->s, w, f->ws, "lim", 0644, "bogus", &e, &err), -ESTALE);
    got = get(f->s, f->ws, "lim");
    assert_string_equal(got, "old");
    free(got);
}

static void
test_large_streamed(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_writer *w;
    const size_t chunk = 1 << 20;
    char *b = malloc(chunk);
    assert_non_null(b);

    assert_int_equal(store_writer_begin(f->s, 0, &w, &err), 0);
    for (int i = 0; i < 24; i++) {
        memset(b, 'a' + i, chunk);
        assert_int_equal(store_writer_write(w, b, chunk, &err), 0);
    }
    assert_int_equal(store_writer_commit(f->s, w, f->ws, "big.bin", 0600, NULL, &e, &err), 0);
    assert_int_equal(e.size, 24u << 20);
    assert_int_equal(e.mode, 0600);
    int fd;
    assert_int_equal(store_read(f->s, f->ws, "big.bin", &fd, &e, &err), 0);
    for (int i = 0; i < 24; i++) {
        assert_int_equal(read_full(fd, b, chunk), (ssize_t)chunk);
        for (size_t k = 0; k < chunk; k += 4096)
            assert_int_equal(b[k], 'a' + i);
    }
    assert_int_equal(read(fd, b, 1), 0);
    close(fd);
    free(b);
}

static void
test_gc(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_gc_stats st;
    struct store_check_report rep;
    char unique[64];

    (void)snprintf(unique, sizeof(unique), "garbage for %s", f->ws);
    assert_int_equal(put(f->s, f->ws, "g/tmp", unique, NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "g/kept", "kept content", NULL, &e), 0);
    assert_int_equal(store_delete(f->s, f->ws, "g/tmp", NULL, &err), 0);
    assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    assert_true(st.blobs_deleted >= 1);
    char *got = get(f->s, f->ws, "g/kept");
    assert_string_equal(got, "kept content");
    free(got);
    /* A run gives the lease up when it ends: the next collector need not
     * wait for it to expire. */
    assert_int_equal(store_gc(f->s, "other-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    /* While a holder has it, another cannot collect; the holder can. */
    bool held = false;
    assert_int_equal(store_lease_take(f->s, "test-holder", 60000, &held, &err), 0);
    assert_true(held);
    assert_int_equal(store_gc(f->s, "other-holder", 60000, &st, &err), 0);
    assert_false(st.held_lease);
    assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    assert_int_equal(store_gc(f->s, "other-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    /* An expired lease is free; store_gc_release() frees one at once. */
    assert_int_equal(store_lease_take(f->s, "test-holder", 1, &held, &err), 0);
    assert_true(held);
    usleep(5000); /* the 1 ms lease expires */
    assert_int_equal(store_gc(f->s, "other-holder", 1, &st, &err), 0);
    assert_true(st.held_lease);
    assert_int_equal(store_lease_take(f->s, "test-holder", 60000, &held, &err), 0);
    assert_true(held);
    assert_int_equal(store_gc_release(f->s, "other-holder", &err), 0); /* not its to give */
    assert_int_equal(store_gc(f->s, "other-holder", 60000, &st, &err), 0);
    assert_false(st.held_lease);
    assert_int_equal(store_gc_release(f->s, "test-holder", &err), 0);
    assert_int_equal(store_gc(f->s, "other-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    /* Writing the same content again after its blob was collected works. */
    assert_int_equal(put(f->s, f->ws, "g/again", unique, NULL, &e), 0);
    got = get(f->s, f->ws, "g/again");
    assert_string_equal(got, unique);
    free(got);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs, 0);
    assert_int_equal(rep.corrupt_blobs, 0);
    assert_int_equal(rep.orphan_entries, 0);
}

struct handle_job {
    struct fixture *f;
    int k;
    int result; /* 0 ok, else the step that failed */
    char msg[ERR_MSG_MAX];
};

/* One handle per thread, as abxd's store workers have. */
static void *
handle_job_run(void *ud)
{
    struct handle_job *j = ud;
    struct store *s2;
    struct store_entry e;
    struct err e2 = {0};
    if (store_open(j->f->where, j->f->dir, &s2, &e2) < 0) {
        j->result = 10;
        (void)snprintf(j->msg, sizeof(j->msg), "%s", e2.msg);
        return NULL;
    }
    for (int i = 0; i < 20 && !j->result; i++) {
        char path[64], data[64];
        (void)snprintf(path, sizeof(path), "c/k%d/f%d", j->k, i);
        (void)snprintf(data, sizeof(data), "kid %d file %d", j->k, i);
        if (put(s2, j->f->ws, path, data, NULL, &e) < 0)
            j->result = 11;
        else if (put(s2, j->f->ws, "c/shared", data, NULL, &e) < 0)
            j->result = 12;
    }
    store_close(s2);
    return NULL;
}

static void
test_concurrent_handles(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_usage u;
    struct handle_job jobs[3];
    pthread_t th[3];

    for (int k = 0; k < 3; k++) {
        jobs[k] = (struct handle_job){.f = f, .k = k};
        assert_int_equal(pthread_create(&th[k], NULL, handle_job_run, &jobs[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        assert_int_equal(pthread_join(th[k], NULL), 0);
        if (jobs[k].result)
            fail_msg("handle %d: step %d: %s", k, jobs[k].result, jobs[k].msg);
    }
    assert_int_equal(store_usage(f->s, f->ws, &u, &err), 0);
    assert_int_equal(u.files, 61);
    char *got = get(f->s, f->ws, "c/k2/f19");
    assert_string_equal(got, "kid 2 file 19");
    free(got);
}

static void
test_crash_after_ack(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    /* A child acknowledges a write and dies at once, without closing
     * anything: the write must be there for the next opener. A SQLite
     * store belongs to one process at a time: ours lets go first. */
    bool sqlite = strcmp(backend, "postgres") != 0;
    if (sqlite) {
        store_close(f->s);
        f->s = NULL;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *s2;
        struct err e2 = {0};
        if (store_open(f->where, f->dir, &s2, &e2) < 0)
            _exit(10);
        if (put(s2, f->ws, "crash/acked", "durable", NULL, &e) < 0)
            _exit(11);
        kill(getpid(), SIGKILL);
        _exit(12);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    struct store *s3;
    assert_int_equal(store_open(f->where, f->dir, &s3, &err), 0);
    char *got = get(s3, f->ws, "crash/acked");
    assert_non_null(got);
    assert_string_equal(got, "durable");
    free(got);
    if (sqlite)
        f->s = s3; /* the kernel dropped the dead child's lock */
    else
        store_close(s3);
}

/* --- tests that matter most for a shared database, valid for both --- */

#define CHUNK (1 << 20) /* the PostgreSQL backend's chunk size */

/* Runs one statement with text parameters on the backend's database behind
 * the store's back, to damage it on purpose. */
static void
raw_sql(struct fixture *f, const char *sql_sqlite, const char *sql_pg, int n,
        const char *const *params)
{
    if (!strcmp(backend, "postgres")) {
        PGconn *c = PQconnectdb(f->where);
        assert_int_equal(PQstatus(c), CONNECTION_OK);
        PGresult *res = PQexecParams(c, sql_pg, n, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
            fail_msg("%s: %s", sql_pg, PQerrorMessage(c));
        PQclear(res);
        PQfinish(c);
        return;
    }
    char path[600];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    (void)snprintf(path, sizeof(path), "%s/store.db", f->where);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    (void)sqlite3_busy_timeout(db, 10000);
    assert_int_equal(sqlite3_prepare_v2(db, sql_sqlite, -1, &st, NULL), SQLITE_OK);
    for (int i = 0; i < n; i++)
        assert_int_equal(sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Inverts the first byte of a blob's content (doing it twice restores it). */
static void
flip_first_byte(struct fixture *f, const char *hash)
{
    if (!strcmp(backend, "postgres")) {
        const char *params[] = {hash};
        raw_sql(f, NULL,
                "UPDATE blob_chunks SET data = set_byte(data, 0, 255 - get_byte(data, 0))"
                " WHERE hash = $1 AND seq = 0",
                1, params);
        return;
    }
    char path[700];
    unsigned char c;
    (void)snprintf(path, sizeof(path), "%s/blobs/%.2s/%s", f->where, hash, hash);
    assert_int_equal(chmod(path, 0644), 0);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &c, 1, 0), 1);
    c = (unsigned char)(255 - c);
    assert_int_equal(pwrite(fd, &c, 1, 0), 1);
    close(fd);
    assert_int_equal(chmod(path, 0444), 0);
}

static void
test_check_finds_damage(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e, x;
    struct store_check_report rep;
    char unique[64];
    bool created;

    (void)snprintf(unique, sizeof(unique), "to be damaged in %s", f->ws);
    assert_int_equal(put(f->s, f->ws, "dmg/file", unique, NULL, &e), 0);
    assert_int_equal(put(f->s, f->ws, "o/p/q", "x", NULL, &x), 0);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.corrupt_blobs + rep.missing_blobs + rep.orphan_entries, 0);
    assert_true(rep.files >= 2 && rep.blobs >= 2);

    flip_first_byte(f, e.hash);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.corrupt_blobs, 1);
    char prefix[17];
    (void)snprintf(prefix, sizeof(prefix), "%.16s", e.hash);
    assert_non_null(strstr(rep.first_problem, prefix));
    flip_first_byte(f, e.hash); /* repaired */
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.corrupt_blobs, 0);
    char *got = get(f->s, f->ws, "dmg/file");
    assert_string_equal(got, unique);
    free(got);

    /* A directory row lost behind the store's back orphans its child. */
    const char *params[] = {f->ws, "o/p"};
    raw_sql(f, "DELETE FROM entries WHERE ws = ?1 AND path = ?2",
            "DELETE FROM entries WHERE ws = $1 AND path = $2", 2, params);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.orphan_entries, 1);
    assert_non_null(strstr(rep.first_problem, "o/p/q"));
    assert_int_equal(store_mkdir(f->s, f->ws, "o/p", &created, &err), 0);
    assert_true(created);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.orphan_entries, 0);
}

/* Content whose every chunk differs, so a chunk out of place shows. */
static void
fill_pattern(unsigned char *b, size_t n, uint32_t seed)
{
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (unsigned char)x;
    }
}

static void
test_chunk_boundaries(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    const size_t sizes[] = {1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7};
    unsigned char *want = malloc(2 * CHUNK + 7), *got = malloc(2 * CHUNK + 8);
    assert_non_null(want);
    assert_non_null(got);

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        char path[32];
        (void)snprintf(path, sizeof(path), "sizes/%zu", sizes[k]);
        fill_pattern(want, sizes[k], (uint32_t)(k * 7919 + 17));
        int fd = mkfile(want, sizes[k]);
        assert_int_equal(store_write(f->s, f->ws, path, fd, 0644, 0, NULL, &e, &err), 0);
        close(fd);
        assert_int_equal(e.size, sizes[k]);
        assert_int_equal(store_read(f->s, f->ws, path, &fd, &e, &err), 0);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
        assert_int_equal(read_full(fd, got, sizes[k] + 1), (ssize_t)sizes[k]);
        close(fd);
        assert_memory_equal(got, want, sizes[k]);
    }
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.corrupt_blobs + rep.missing_blobs, 0);
    free(want);
    free(got);
}

/* Paths are byte strings: stored as given (UTF-8 or not) and sorted by
 * byte, whatever the database's encoding and collation. */
static void
test_byte_paths(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct names n = {""};
    const char *paths[] = {"b/\xff\xfe", "b/z", "b/\xc3\xa9t\xc3\xa9", "b/A", "b/a-b", "b/a/c"};

    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        assert_int_equal(put(f->s, f->ws, paths[i], paths[i], NULL, &e), 0);
    assert_int_equal(store_list(f->s, f->ws, "b", collect, &n, &err), 0);
    assert_string_equal(n.buf, "b/A:f b/a:d b/a-b:f b/z:f b/\xc3\xa9t\xc3\xa9:f b/\xff\xfe:f");
    n.buf[0] = '\0';
    assert_int_equal(store_walk(f->s, f->ws, "b", collect, &n, &err), 0);
    assert_string_equal(n.buf,
                        "b/A:f b/a:d b/a-b:f b/a/c:f b/z:f b/\xc3\xa9t\xc3\xa9:f b/\xff\xfe:f");
    char *got = get(f->s, f->ws, "b/\xff\xfe");
    assert_string_equal(got, "b/\xff\xfe");
    free(got);
    assert_int_equal(store_rename(f->s, f->ws, "b", "\xfe\xff", false, &err), 0);
    got = get(f->s, f->ws, "\xfe\xff/\xc3\xa9t\xc3\xa9");
    assert_string_equal(got, "b/\xc3\xa9t\xc3\xa9");
    free(got);
    n.buf[0] = '\0';
    assert_int_equal(store_list(f->s, f->ws, "\xfe\xff/a", collect, &n, &err), 0);
    assert_string_equal(n.buf, "\xfe\xff/a/c:f");
}

/* Every name the kernel allows (any byte but NUL and '/') is a name the
 * store keeps: control characters, escapes, bytes that are not UTF-8,
 * names that look like JSON or paths, 255 bytes. Listed byte-exact and in
 * byte order, read back, and renamed with a directory whose name has
 * multi-byte characters (the old prefix is cut as bytes, not characters). */
struct path_list {
    char *v[64];
    size_t n;
};

static int
collect_paths(const struct store_entry *e, void *ud)
{
    struct path_list *l = ud;
    assert_true(l->n < 64);
    l->v[l->n] = strdup(e->path);
    assert_non_null(l->v[l->n]);
    l->n++;
    return 0;
}

static void
path_list_clear(struct path_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
test_any_byte_names(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct path_list l = {0};
    bool created;
    char long_name[4 + PATH_NAME_MAX + 1];
    const char *names[] = {
            "a\nb",
            "\t",
            "\x1b[31mred",
            "\xff",
            "\xc3(",
            "\xed\xa0\x80",
            "caf\xc3\xa9",
            "a\\b",
            "...",
            "{\"path\":1}",
            "\x01",
            "\x7f",
            "x\n<3>abxd: forged line\x1b[31m",
            " ",
            long_name,
    };
    size_t nn = sizeof(names) / sizeof(names[0]);
    char *want[sizeof(names) / sizeof(names[0])];

    memset(long_name, 0, sizeof(long_name));
    memset(long_name, '\xfe', PATH_NAME_MAX);
    for (size_t i = 0; i < nn; i++) {
        char p[300];
        (void)snprintf(p, sizeof(p), "d\xc3\xa9/%s", names[i]);
        int r = put(f->s, f->ws, p, names[i], NULL, &e);
        if (r != 0)
            fail_msg("put(%zu) = %d", i, r);
        assert_string_equal(e.path, p);
        want[i] = strdup(p);
    }
    qsort(want, nn, sizeof(*want), cmp_str);
    assert_int_equal(store_walk(f->s, f->ws, "d\xc3\xa9", collect_paths, &l, &err), 0);
    assert_int_equal(l.n, nn);
    for (size_t i = 0; i < nn; i++)
        assert_string_equal(l.v[i], want[i]); /* exact bytes, byte order */
    path_list_clear(&l);
    assert_int_equal(store_list(f->s, f->ws, "d\xc3\xa9", collect_paths, &l, &err), 0);
    assert_int_equal(l.n, nn);
    path_list_clear(&l);

    /* A directory whose name has a newline. */
    assert_int_equal(store_mkdir(f->s, f->ws, "d\xc3\xa9/dir\n/sub\x1b", &created, &err), 0);
    assert_true(created);
    assert_int_equal(store_stat(f->s, f->ws, "d\xc3\xa9/dir\n", &e, &err), 0);
    assert_int_equal(e.type, STORE_DIR);

    /* Rename the tree: every path keeps its bytes below the new prefix. */
    assert_int_equal(store_rename(f->s, f->ws, "d\xc3\xa9", "\xc3\xa9t\xc3\xa9\n", false, &err), 0);
    for (size_t i = 0; i < nn; i++) {
        char p[300];
        (void)snprintf(p, sizeof(p), "\xc3\xa9t\xc3\xa9\n/%s", names[i]);
        char *got = get(f->s, f->ws, p);
        if (!got)
            fail_msg("after rename: no '%s'", p);
        assert_string_equal(got, names[i]);
        free(got);
    }
    assert_int_equal(store_stat(f->s, f->ws, "\xc3\xa9t\xc3\xa9\n/dir\n/sub\x1b", &e, &err), 0);
    assert_int_equal(store_walk(f->s, f->ws, "\xc3\xa9t\xc3\xa9\n", collect_paths, &l, &err), 0);
    assert_int_equal(l.n, nn + 2);
    for (size_t i = 0; i < l.n; i++)
        assert_memory_equal(l.v[i], "\xc3\xa9t\xc3\xa9\n/", 7);
    path_list_clear(&l);
    assert_int_equal(store_stat(f->s, f->ws, "d\xc3\xa9", &e, &err), -ENOENT);
    for (size_t i = 0; i < nn; i++)
        free(want[i]);

    /* And deletes, by the exact name. */
    assert_int_equal(store_delete(f->s, f->ws, "\xc3\xa9t\xc3\xa9\n/\xff", NULL, &err), 0);
    assert_int_equal(store_stat(f->s, f->ws, "\xc3\xa9t\xc3\xa9\n/\xff", &e, &err), -ENOENT);
    assert_int_equal(store_stat(f->s, f->ws, "\xc3\xa9t\xc3\xa9\n/\xc3(", &e, &err), 0);
}

static int
check_order(const struct store_entry *e, void *ud)
{
    struct {
        char last[4097];
        int n;
    } *o = ud;
    if (o->n > 0 && strcmp(o->last, e->path) >= 0)
        return -EDOM; /* out of order or repeated */
    (void)snprintf(o->last, sizeof(o->last), "%s", e->path);
    o->n++;
    return 0;
}

/* Paths up to the 4095-byte limit. PostgreSQL's indexes hold at most about
 * 2700 bytes of a key after compression: there a long path that does not
 * compress fails cleanly with -ENAMETOOLONG (docs/store.md). */
static void
test_long_paths(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    char deep[4096], wide[4096];
    size_t n = 0;

    /* "node_modules/" over and over: long, but compresses well. */
    while (n + 13 < 4000) {
        memcpy(deep + n, "node_modules/", 13);
        n += 13;
    }
    memcpy(deep + n, "index.js", 9);
    assert_int_equal(put(f->s, f->ws, deep, "deep", NULL, &e), 0);
    char *got = get(f->s, f->ws, deep);
    assert_string_equal(got, "deep");
    free(got);

    /* 4000 bytes of components that do not compress. */
    unsigned char r[2000];
    fill_pattern(r, sizeof(r), 99);
    for (size_t i = 0; i < sizeof(r); i++) {
        wide[2 * i] = "0123456789abcdef"[r[i] >> 4];
        wide[2 * i + 1] = (i % 40 == 39) ? '/' : "0123456789abcdef"[r[i] & 15];
    }
    wide[3999] = 'x';
    wide[4000] = '\0';
    int rc = put(f->s, f->ws, wide, "wide", NULL, &e);
    if (!strcmp(backend, "postgres")) {
        assert_int_equal(rc, -ENAMETOOLONG);
        char top[41];
        (void)snprintf(top, sizeof(top), "%.39s", wide);
        assert_int_equal(store_stat(f->s, f->ws, top, &e, &err), -ENOENT); /* all or nothing */
    } else {
        assert_int_equal(rc, 0);
        got = get(f->s, f->ws, wide);
        assert_string_equal(got, "wide");
        free(got);
    }
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs + rep.corrupt_blobs + rep.orphan_entries, 0);
}

/* Listings longer than a page come out whole and in order. */
static void
test_many_entries(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    bool created;
    struct {
        char last[4097];
        int n;
    } o = {"", 0};

    for (int i = 0; i < 600; i++) {
        char path[32];
        (void)snprintf(path, sizeof(path), "many/d%03d", (i * 37) % 600);
        assert_int_equal(store_mkdir(f->s, f->ws, path, &created, &err), 0);
        assert_true(created);
    }
    assert_int_equal(put(f->s, f->ws, "many/d300/f", "x", NULL, &e), 0);
    assert_int_equal(store_list(f->s, f->ws, "many", check_order, &o, &err), 0);
    assert_int_equal(o.n, 600);
    assert_string_equal(o.last, "many/d599");
    o.n = 0;
    assert_int_equal(store_walk(f->s, f->ws, "many", check_order, &o, &err), 0);
    assert_int_equal(o.n, 601);
    o.n = 0;
    assert_int_equal(store_walk(f->s, f->ws, ".", check_order, &o, &err), 0);
    assert_int_equal(o.n, 602);
    /* A callback's error stops the listing and comes back. */
    o.n = 1;
    (void)snprintf(o.last, sizeof(o.last), "~");
    assert_int_equal(store_list(f->s, f->ws, "many", check_order, &o, &err), -EDOM);
}

/* A writer keeps writing content X while another handle deletes X's last
 * reference, writes it again and collects garbage, over and over: GC must
 * never take the blob from under a write, and every write must land whole. */
struct race_writer {
    struct fixture *f;
    const unsigned char *x;
    size_t size;
    int result;
    char msg[ERR_MSG_MAX];
    atomic_bool done;
};

static void *
race_writer_run(void *ud)
{
    struct race_writer *w = ud;
    struct store *s2;
    struct err e2 = {0};
    if (store_open(w->f->where, w->f->dir, &s2, &e2) < 0) {
        w->result = 10;
        goto out;
    }
    for (int i = 0; i < 150 && !w->result; i++) {
        int fd = mkfile(w->x, w->size), rfd = -1;
        struct store_entry we, re;
        err_clear(&e2);
        if (store_write(s2, w->f->ws, "race/child", fd, 0644, 0, NULL, &we, &e2) < 0)
            w->result = 11;
        close(fd);
        if (w->result)
            break;
        if (store_read(s2, w->f->ws, "race/child", &rfd, &re, &e2) < 0) {
            w->result = 12;
            break;
        }
        unsigned char *b = malloc(w->size + 1);
        if (!b || read_full(rfd, b, w->size + 1) != (ssize_t)w->size ||
            memcmp(b, w->x, w->size) != 0)
            w->result = 13;
        free(b);
        close(rfd);
        if (!w->result && store_delete(s2, w->f->ws, "race/child", NULL, &e2) < 0)
            w->result = 14;
    }
    store_close(s2);
out:
    if (w->result)
        (void)snprintf(w->msg, sizeof(w->msg), "%s", e2.msg);
    atomic_store(&w->done, true);
    return NULL;
}

static void
test_gc_races_writer(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_gc_stats st;
    struct store_check_report rep;
    const size_t size = 64 * 1024;
    unsigned char *x = malloc(size);
    uint64_t deleted_later = 0;
    int rounds = 0;
    pthread_t th;

    assert_non_null(x);
    fill_pattern(x, size, 4242);
    (void)snprintf((char *)x, 80, "race content for %s", f->ws);
    struct race_writer w = {.f = f, .x = x, .size = size};
    assert_int_equal(pthread_create(&th, NULL, race_writer_run, &w), 0);
    while (!atomic_load(&w.done)) {
        int fd = mkfile(x, size);
        assert_int_equal(store_write(f->s, f->ws, "race/parent", fd, 0644, 0, NULL, &e, &err), 0);
        close(fd);
        assert_int_equal(store_delete(f->s, f->ws, "race/parent", NULL, &err), 0);
        assert_int_equal(store_gc(f->s, "test-holder", 1, &st, &err), 0);
        /* The first round may collect other tests' garbage; after it, only
         * X is ever garbage. */
        if (rounds++ > 0 && st.held_lease)
            deleted_later += st.blobs_deleted;
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    if (w.result)
        fail_msg("writer: step %d: %s", w.result, w.msg);
    assert_true(rounds > 1);
    assert_true(deleted_later > 0); /* X was collected while the writer wrote */
    int fd = mkfile(x, size);
    assert_int_equal(store_write(f->s, f->ws, "race/final", fd, 0644, 0, NULL, &e, &err), 0);
    close(fd);
    assert_int_equal(store_gc(f->s, "test-holder", 1, &st, &err), 0);
    char *got = get(f->s, f->ws, "race/final");
    assert_non_null(got);
    assert_memory_equal(got, x, size);
    free(got);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs, 0);
    assert_int_equal(rep.corrupt_blobs, 0);
    assert_int_equal(rep.orphan_entries, 0);
    free(x);
}

/* Runs "<prefix><quoted identifier><suffix>" on the PostgreSQL server
 * (identifiers cannot be parameters); skips the test when not allowed. */
static void
pg_ident_sql(struct fixture *f, const char *prefix, const char *ident, const char *suffix)
{
    char sql[256];
    PGconn *c = PQconnectdb(f->where);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    char *id = PQescapeIdentifier(c, ident, strlen(ident));
    assert_non_null(id);
    (void)snprintf(sql, sizeof(sql), "%s%s%s", prefix, id, suffix);
    PQfreemem(id);
    PGresult *res = PQexec(c, sql);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (state && !strcmp(state, "42501")) {
        fprintf(stderr, "skipped: '%s' is not allowed on this server\n", sql);
        PQclear(res);
        PQfinish(c);
        skip();
    }
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    PQfinish(c);
}

/* Several handles opening a store that does not exist yet all succeed
 * (PostgreSQL: a fresh database, so they race to create the schema). Each
 * on its own thread, as abxd's store workers open theirs. */
struct first_open {
    const char *where, *tmp;
    int k;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    bool *go;
    int result;
    char msg[ERR_MSG_MAX];
};

static void *
first_open_run(void *ud)
{
    struct first_open *o = ud;
    struct store *s2;
    struct err e2 = {0};
    struct store_ws w = {0};

    pthread_mutex_lock(o->mu);
    while (!*o->go) /* everyone starts at once */
        pthread_cond_wait(o->cv, o->mu);
    pthread_mutex_unlock(o->mu);
    if (store_open(o->where, o->tmp, &s2, &e2) < 0) {
        o->result = 10;
        goto out;
    }
    (void)snprintf(w.id, sizeof(w.id), "first-%d", o->k);
    if (store_ws_create(s2, &w, &e2) < 0)
        o->result = 11;
    store_close(s2);
out:
    if (o->result)
        (void)snprintf(o->msg, sizeof(o->msg), "%s", e2.msg);
    return NULL;
}

static void
test_concurrent_first_open(void **state)
{
    struct fixture *f = *state;
    char where[600], db[40], rnd[13];
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    bool go = false;
    struct first_open kids[6];
    pthread_t th[6];
    bool pg = !strcmp(backend, "postgres");

    /* SQLite: racing openers of a new store get "PRAGMA journal_mode = WAL:
     * database is locked" (SQLite does not call the busy handler for that
     * pragma); store-sqlite.c retries it. */
    assert_int_equal(rand_id(rnd, 12), 0);
    (void)snprintf(db, sizeof(db), "abx_t_%s", rnd);
    if (pg) {
        /* postgres://host/abx?x -> postgres://host/<db>?x */
        const char *host = strstr(f->where, "://");
        assert_non_null(host);
        const char *slash = strchr(host + 3, '/');
        assert_non_null(slash);
        const char *query = strchr(slash, '?');
        pg_ident_sql(f, "CREATE DATABASE ", db, "");
        (void)snprintf(where, sizeof(where), "%.*s/%s%s", (int)(slash - f->where), f->where, db,
                       query ? query : "");
    } else {
        (void)snprintf(where, sizeof(where), "%s/fresh", f->dir);
    }
    for (int k = 0; k < 6; k++) {
        kids[k] = (struct first_open){where, f->dir, k, &mu, &cv, &go, 0, ""};
        assert_int_equal(pthread_create(&th[k], NULL, first_open_run, &kids[k]), 0);
    }
    pthread_mutex_lock(&mu);
    go = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    int failed = 0;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(pthread_join(th[k], NULL), 0);
        if (kids[k].result) {
            fprintf(stderr, "kid %d: step %d: %s\n", k, kids[k].result, kids[k].msg);
            failed++;
        }
    }
    struct store *s3;
    struct err err = {0};
    int n = 0;
    if (failed == 0 && store_open(where, f->dir, &s3, &err) == 0) {
        assert_int_equal(store_ws_list(s3, count_ws, &n, &err), 0);
        store_close(s3);
    }
    if (pg)
        pg_ident_sql(f, "DROP DATABASE ", db, " WITH (FORCE)");
    assert_int_equal(failed, 0);
    assert_int_equal(n, 6);
}

static PGconn *
pg_raw(struct fixture *f)
{
    PGconn *c = PQconnectdb(f->where);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    return c;
}

static void
pg_ok(PGconn *c, const char *sql, int n, const char *const *params)
{
    PGresult *res = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
}

/* Waits until a store connection waits for a row lock. */
static void
pg_wait_for_lock_wait(PGconn *c)
{
    for (int i = 0; i < 1000; i++) {
        PGresult *res = PQexec(c, "SELECT count(*) FROM pg_stat_activity"
                                  " WHERE application_name = 'abxd' AND wait_event_type = 'Lock'"
                                  " AND datname = current_database()");
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        bool waiting = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
        PQclear(res);
        if (waiting)
            return;
        usleep(5000);
    }
    fail_msg("the store never waited for the lock");
}

/* Makes content whose blob exists but nothing references or pins. */
static void
make_garbage(struct fixture *f, const char *content, struct store_entry *e)
{
    struct err err = {0};
    assert_int_equal(put(f->s, f->ws, "lock/tmp", content, NULL, e), 0);
    assert_int_equal(store_delete(f->s, f->ws, "lock/tmp", NULL, &err), 0);
}

static int
wait_child(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* A writer's transaction locked a garbage blob and is referencing it; a
 * collector that comes now must wait, then keep the blob and not fail. */
static void
test_gc_waits_for_writer(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    char content[80];

    if (strcmp(backend, "postgres") != 0)
        skip(); /* SQLite's single writer lock rules this interleaving out */
    (void)snprintf(content, sizeof(content), "locked by a writer in %s", f->ws);
    make_garbage(f, content, &e);
    /* The writer: lock the blob row, write the entry, do not commit yet. */
    PGconn *w = pg_raw(f);
    char size[32];
    (void)snprintf(size, sizeof(size), "%zu", strlen(content));
    const char *params[] = {e.hash, f->ws, size};
    pg_ok(w, "BEGIN", 0, NULL);
    pg_ok(w, "SELECT 1 FROM blobs WHERE hash = $1 FOR KEY SHARE", 1, params);
    pg_ok(w,
          "INSERT INTO entries (ws, path, parent, name, type, hash, size, mode, mtime_ms)"
          " VALUES ($2, 'lock/held', 'lock', 'held', 1, $1, $3::bigint, 420, 0)",
          3, params);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *s2;
        struct store_gc_stats st;
        struct err e2 = {0};
        if (store_open(f->where, f->dir, &s2, &e2) < 0)
            _exit(10);
        int r = store_gc(s2, "test-holder", 1, &st, &e2);
        if (r < 0)
            fprintf(stderr, "gc: %s\n", e2.msg);
        store_close(s2);
        _exit(r < 0 ? 11 : 0);
    }
    PGconn *watch = pg_raw(f);
    pg_wait_for_lock_wait(watch); /* the collector is stuck on the writer */
    PQfinish(watch);
    pg_ok(w, "COMMIT", 0, NULL);
    PQfinish(w);
    assert_int_equal(wait_child(pid), 0);
    char *got = get(f->s, f->ws, "lock/held");
    assert_non_null(got);
    assert_string_equal(got, content);
    free(got);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs + rep.corrupt_blobs + rep.orphan_entries, 0);
}

/* A collector deleted a garbage blob (not committed yet) just as a write
 * of the same content found it present: the write waits, finds it gone,
 * and stores it again instead of failing or pointing at nothing. */
static void
test_writer_outlives_gc(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    char content[80];

    if (strcmp(backend, "postgres") != 0)
        skip(); /* SQLite's single writer lock rules this interleaving out */
    (void)snprintf(content, sizeof(content), "collected under a writer in %s", f->ws);
    make_garbage(f, content, &e);
    /* The collector: delete the blob row, do not commit yet. Its snapshot
     * predates the writer's pin, so it ignores the pin. */
    PGconn *gc = pg_raw(f);
    const char *params[] = {e.hash};
    pg_ok(gc, "BEGIN", 0, NULL);
    pg_ok(gc, "DELETE FROM blobs WHERE hash = $1", 1, params);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *s2;
        struct store_entry we;
        struct err e2 = {0};
        if (store_open(f->where, f->dir, &s2, &e2) < 0)
            _exit(10);
        int r = put(s2, f->ws, "lock/rewritten", content, NULL, &we);
        store_close(s2);
        _exit(r < 0 ? 11 : 0);
    }
    PGconn *watch = pg_raw(f);
    pg_wait_for_lock_wait(watch); /* the writer is stuck on the collector */
    PQfinish(watch);
    pg_ok(gc, "COMMIT", 0, NULL);
    PQfinish(gc);
    assert_int_equal(wait_child(pid), 0);
    char *got = get(f->s, f->ws, "lock/rewritten");
    assert_non_null(got);
    assert_string_equal(got, content);
    free(got);
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs + rep.corrupt_blobs + rep.orphan_entries, 0);
}

/* Terminates the server side of every open store connection, as a server
 * restart or a dropped network would, and waits until they are gone. */
static void
kill_store_connections(struct fixture *f)
{
    PGconn *c = PQconnectdb(f->where);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *res = PQexec(c, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid)"
                              " FROM pg_stat_activity WHERE application_name = 'abxd'"
                              " AND datname = current_database() AND pid <> pg_backend_pid()) t");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_not_equal(PQgetvalue(res, 0, 0), "0");
    PQclear(res);
    for (int i = 0; i < 500; i++) {
        res = PQexec(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'abxd'"
                        " AND datname = current_database()");
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        bool gone = !strcmp(PQgetvalue(res, 0, 0), "0");
        PQclear(res);
        if (gone)
            break;
        usleep(10000);
    }
    PQfinish(c);
}

/* A store whose connection died (server restart, network) reconnects on
 * its next use instead of failing from then on. */
static void
test_reconnect(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_gc_stats st;
    bool created;

    if (strcmp(backend, "postgres") != 0)
        skip(); /* SQLite has no connection to lose */
    assert_int_equal(put(f->s, f->ws, "rc/a", "one", NULL, &e), 0);
    kill_store_connections(f);
    assert_int_equal(store_stat(f->s, f->ws, "rc/a", &e, &err), 0); /* a read first */
    kill_store_connections(f);
    assert_int_equal(put(f->s, f->ws, "rc/b", "two", NULL, &e), 0); /* a write first */
    kill_store_connections(f);
    assert_int_equal(store_mkdir(f->s, f->ws, "rc/c", &created, &err), 0); /* a transaction */
    kill_store_connections(f);
    assert_int_equal(store_gc(f->s, "test-holder", 1, &st, &err), 0);
    char *got = get(f->s, f->ws, "rc/b");
    assert_string_equal(got, "two");
    free(got);
}

/* --- the store belongs to one process (SQLite) --- */

/* Tries to open where in a child process; returns the child's errno (0 =
 * opened) and its message in msg. */
static int
open_in_child(struct fixture *f, char *msg, size_t n)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *s2;
        struct err e2 = {0};
        close(p[0]);
        int r = store_open(f->where, f->dir, &s2, &e2);
        if (r == 0)
            store_close(s2);
        (void)write_full(p[1], e2.msg, strlen(e2.msg));
        _exit(-r);
    }
    close(p[1]);
    ssize_t k = read_full(p[0], msg, n - 1);
    msg[k > 0 ? k : 0] = '\0';
    close(p[0]);
    return wait_child(pid);
}

static void
test_store_lock(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store *s2, *s3;
    struct store_entry e;
    char msg[ERR_MSG_MAX], want[64];

    if (!strcmp(backend, "postgres"))
        skip(); /* shared by design */
    /* Many handles in one process share the store ... */
    assert_int_equal(store_open(f->where, f->dir, &s2, &err), 0);
    assert_int_equal(put(s2, f->ws, "lock/one", "1", NULL, &e), 0);
    /* ... another process is refused, and told who has it ... */
    assert_int_equal(open_in_child(f, msg, sizeof(msg)), EBUSY);
    assert_non_null(strstr(msg, f->where));
    (void)snprintf(want, sizeof(want), "(pid %ld)", (long)getpid());
    assert_non_null(strstr(msg, want));
    /* ... also while only one of our handles is left ... */
    store_close(f->s);
    f->s = NULL;
    assert_int_equal(open_in_child(f, msg, sizeof(msg)), EBUSY);
    /* ... and gets it once the last one is closed. */
    store_close(s2);
    assert_int_equal(open_in_child(f, msg, sizeof(msg)), 0);
    assert_int_equal(store_open(f->where, f->dir, &s3, &err), 0);
    f->s = s3;
    char *got = get(f->s, f->ws, "lock/one");
    assert_string_equal(got, "1");
    free(got);
}

/* --- the orphan sweep (SQLite) --- */

static void
blob_path(struct fixture *f, const char *name, char *out, size_t n)
{
    (void)snprintf(out, n, "%s/blobs/%.2s/%s", f->where, name, name);
}

static void
hash_of(const void *data, size_t n, char hash[STORE_HASH_LEN + 1])
{
    int fd = mkfile(data, n);
    assert_int_equal(store_hash_fd(fd, hash, NULL), 0);
    close(fd);
}

/* Puts a file named name into blobs/ behind the store's back, as a crash
 * between placing a blob and committing its row leaves one, changed
 * age_ms ago. */
static void
plant_blob_file(struct fixture *f, const char *name, const void *data, size_t n, uint64_t age_ms)
{
    char path[700], dir[700];
    (void)snprintf(dir, sizeof(dir), "%s/blobs/%.2s", f->where, name);
    (void)mkdir(dir, 0755);
    blob_path(f, name, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, data, n), 0);
    uint64_t t = wall_msec() - age_ms;
    struct timespec ts[2] = {{(time_t)(t / 1000), (long)(t % 1000) * 1000000},
                             {(time_t)(t / 1000), (long)(t % 1000) * 1000000}};
    assert_int_equal(futimens(fd, ts), 0);
    close(fd);
}

static bool
blob_file_exists(struct fixture *f, const char *name)
{
    char path[700];
    blob_path(f, name, path, sizeof(path));
    return access(path, F_OK) == 0;
}

#define TWO_HOURS_MS (2 * 3600 * 1000ull)

/* Every sweep on a handle sees the whole directory, not only the first. */
static void
test_orphan_sweep_repeats(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_gc_stats st;
    struct store_entry e;
    char a[STORE_HASH_LEN + 1], b[STORE_HASH_LEN + 1], young[STORE_HASH_LEN + 1];
    char used[STORE_HASH_LEN + 1], tmp[STORE_HASH_LEN + 5], ca[80], cb[80], cy[80];

    if (!strcmp(backend, "postgres"))
        skip(); /* no blob files */
    (void)snprintf(ca, sizeof(ca), "orphan a of %s", f->ws);
    (void)snprintf(cb, sizeof(cb), "orphan b of %s", f->ws);
    (void)snprintf(cy, sizeof(cy), "young orphan of %s", f->ws);
    hash_of(ca, strlen(ca), a);
    hash_of(cb, strlen(cb), b);
    hash_of(cy, strlen(cy), young);
    assert_int_equal(put(f->s, f->ws, "sweep/used", "in use, and old", NULL, &e), 0);
    memcpy(used, e.hash, sizeof(used));

    plant_blob_file(f, a, ca, strlen(ca), TWO_HOURS_MS);
    plant_blob_file(f, young, cy, strlen(cy), 0);
    plant_blob_file(f, used, "in use, and old", 15, TWO_HOURS_MS); /* ages the live blob */
    assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    assert_false(blob_file_exists(f, a));
    assert_true(blob_file_exists(f, young)); /* a write may still be on its way */
    assert_true(blob_file_exists(f, used));

    /* The second sweep on the same handle finds the next orphan, and a
     * writer's temporary left by a crash. */
    plant_blob_file(f, b, cb, strlen(cb), TWO_HOURS_MS);
    (void)snprintf(tmp, sizeof(tmp), "%s.tmp", b);
    plant_blob_file(f, tmp, cb, strlen(cb), 0);
    assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
    assert_true(st.held_lease);
    assert_false(blob_file_exists(f, b));
    assert_false(blob_file_exists(f, tmp));
    assert_true(blob_file_exists(f, young));
    char *got = get(f->s, f->ws, "sweep/used");
    assert_string_equal(got, "in use, and old");
    free(got);
}

/* A file named like the blob but without a row holds bytes nobody
 * checked: a write of that content puts its own bytes in place. */
static void
test_writer_replaces_orphan(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    char content[80], h[STORE_HASH_LEN + 1], tmp[STORE_HASH_LEN + 5];

    if (!strcmp(backend, "postgres"))
        skip(); /* no blob files */
    (void)snprintf(content, sizeof(content), "the real content for %s", f->ws);
    hash_of(content, strlen(content), h);
    /* What a crash may leave: a damaged file under the name, and a
     * temporary of an earlier writer. */
    plant_blob_file(f, h, "garbage of the same length....", 30, TWO_HOURS_MS);
    (void)snprintf(tmp, sizeof(tmp), "%s.tmp", h);
    plant_blob_file(f, tmp, "older temporary", 15, 0);
    assert_int_equal(put(f->s, f->ws, "adopt/x", content, NULL, &e), 0);
    assert_string_equal(e.hash, h);
    char *got = get(f->s, f->ws, "adopt/x");
    assert_non_null(got);
    assert_string_equal(got, content);
    free(got);
    assert_false(blob_file_exists(f, tmp));
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs + rep.corrupt_blobs + rep.orphan_entries, 0);
}

/*
 * The race of issue 10 item 1, played deterministically: the orphan sweep
 * has decided an old orphan has no row and is about to unlink it when a
 * writer of the same content finds no row and stores the blob. The binary
 * is linked with --wrap=linkat,--wrap=unlinkat (meson.build): the store's
 * calls come through here, and an armed trap pauses the sweep at its
 * unlinkat() of the orphan until the writer's linkat() of that name (or a
 * second), then the writer until the sweep is over (or a second).
 */
int __real_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags);
int __real_unlinkat(int dirfd, const char *path, int flags);
int __wrap_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags);
int __wrap_unlinkat(int dirfd, const char *path, int flags);

enum trap_state { TRAP_OFF, TRAP_ARMED, TRAP_GC_PAUSED, TRAP_WRITER_IN, TRAP_GC_DONE };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum trap_state state;
    char name[STORE_HASH_LEN + 1];
} trap = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, TRAP_OFF, ""};

static void
trap_set(enum trap_state s)
{
    pthread_mutex_lock(&trap.mu);
    trap.state = s;
    pthread_cond_broadcast(&trap.cv);
    pthread_mutex_unlock(&trap.mu);
}

/* Moves the trap from one state to the next if path is its name. */
static bool
trap_take(const char *path, enum trap_state from, enum trap_state to)
{
    bool hit;
    pthread_mutex_lock(&trap.mu);
    hit = trap.state == from && path && !strcmp(path, trap.name);
    if (hit) {
        trap.state = to;
        pthread_cond_broadcast(&trap.cv);
    }
    pthread_mutex_unlock(&trap.mu);
    return hit;
}

static bool
trap_wait(enum trap_state want, int ms)
{
    struct timespec dl;
    bool ok;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&trap.mu);
    while (trap.state < want && pthread_cond_timedwait(&trap.cv, &trap.mu, &dl) == 0) {
    }
    ok = trap.state >= want;
    pthread_mutex_unlock(&trap.mu);
    return ok;
}

int
__wrap_unlinkat(int dirfd, const char *path, int flags)
{
    if (trap_take(path, TRAP_ARMED, TRAP_GC_PAUSED))
        (void)trap_wait(TRAP_WRITER_IN, 1000);
    return __real_unlinkat(dirfd, path, flags);
}

int
__wrap_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
    int r = __real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
    int e = errno;
    if (trap_take(newpath, TRAP_GC_PAUSED, TRAP_WRITER_IN))
        (void)trap_wait(TRAP_GC_DONE, 1000);
    errno = e;
    return r;
}

struct gc_job {
    struct store *s;
    int r;
    struct store_gc_stats st;
    char msg[ERR_MSG_MAX];
};

static void *
gc_job_run(void *ud)
{
    struct gc_job *g = ud;
    struct err e2 = {0};
    g->r = store_gc(g->s, "test-holder", 60000, &g->st, &e2);
    (void)snprintf(g->msg, sizeof(g->msg), "%s", e2.msg);
    trap_set(TRAP_GC_DONE);
    return NULL;
}

static void
test_gc_sweep_vs_identical_write(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    struct store *s2;
    char content[80], h[STORE_HASH_LEN + 1];
    pthread_t th;

    if (!strcmp(backend, "postgres"))
        skip(); /* no blob files; test_gc_waits_for_writer and test_writer_outlives_gc */
    (void)snprintf(content, sizeof(content), "left behind by a crash in %s", f->ws);
    hash_of(content, strlen(content), h);
    plant_blob_file(f, h, content, strlen(content), TWO_HOURS_MS);
    assert_int_equal(store_open(f->where, f->dir, &s2, &err), 0);
    memcpy(trap.name, h, sizeof(trap.name));
    trap_set(TRAP_ARMED);
    struct gc_job g = {.s = f->s};
    assert_int_equal(pthread_create(&th, NULL, gc_job_run, &g), 0);
    bool paused = trap_wait(TRAP_GC_PAUSED, 10000);
    int r = put(s2, f->ws, "orphan/x", content, NULL, &e); /* acknowledged ... */
    assert_int_equal(pthread_join(th, NULL), 0);
    trap_set(TRAP_OFF);
    assert_true(paused); /* the sweep went for the orphan */
    assert_int_equal(g.r, 0);
    assert_true(g.st.held_lease);
    assert_int_equal(r, 0);
    char *got = get(s2, f->ws, "orphan/x"); /* ... so it must be there */
    if (!got)
        fail_msg("an acknowledged write of content the sweep deleted is lost");
    assert_string_equal(got, content);
    free(got);
    assert_int_equal(store_check(s2, &rep, &err), 0);
    assert_int_equal(rep.missing_blobs + rep.corrupt_blobs + rep.orphan_entries, 0);
    store_close(s2);
}

/*
 * The same race, undirected: contents that a crash left behind (SQLite:
 * blob files without rows, two hours old; both: unreferenced blobs) are
 * written again by four threads in the order GC walks them, while GC runs
 * over and over. Every acknowledged write must read back, and the store
 * must check clean.
 */
#define RACE_CONTENTS 32
#define RACE_WRITERS  4

struct ident_writer {
    struct fixture *f;
    int k;
    char (*contents)[96];
    int order[RACE_CONTENTS];
    int acked;
    int result;
    char msg[ERR_MSG_MAX];
    atomic_bool done;
};

static void *
ident_writer_run(void *ud)
{
    struct ident_writer *w = ud;
    struct store *s2;
    struct err e2 = {0};
    if (store_open(w->f->where, w->f->dir, &s2, &e2) < 0) {
        w->result = 10;
        goto out;
    }
    for (int i = 0; i < RACE_CONTENTS && !w->result; i++) {
        int c = w->order[i];
        char path[64];
        struct store_entry e;
        (void)snprintf(path, sizeof(path), "ident/w%d/%d", w->k, c);
        err_clear(&e2);
        int fd = mkfile(w->contents[c], strlen(w->contents[c]));
        int r = store_write(s2, w->f->ws, path, fd, 0644, 0, NULL, &e, &e2);
        close(fd);
        if (r < 0) {
            w->result = 11;
            break;
        }
        w->acked++;
        /* Deleting it makes the content garbage again for GC to race on
         * (unless another writer holds it), and writing it again races. */
        if (i % 4 == 1 && (store_delete(s2, w->f->ws, path, NULL, &e2) < 0 ||
                           put(s2, w->f->ws, path, w->contents[c], NULL, &e) < 0))
            w->result = 12;
    }
    store_close(s2);
out:
    if (w->result)
        (void)snprintf(w->msg, sizeof(w->msg), "%s", e2.msg);
    atomic_store(&w->done, true);
    return NULL;
}

static int
cmp_hash_idx(const void *a, const void *b, void *ud)
{
    char(*hashes)[STORE_HASH_LEN + 1] = ud;
    return strcmp(hashes[*(const int *)a], hashes[*(const int *)b]);
}

static void
test_gc_races_identical_writers(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    struct store_check_report rep;
    struct store_gc_stats st;
    static char contents[RACE_CONTENTS][96];
    static char hashes[RACE_CONTENTS][STORE_HASH_LEN + 1];
    struct ident_writer w[RACE_WRITERS];
    pthread_t th[RACE_WRITERS];
    int order[RACE_CONTENTS], runs = 0;
    bool sqlite = strcmp(backend, "postgres") != 0;

    for (int i = 0; i < RACE_CONTENTS; i++) {
        (void)snprintf(contents[i], sizeof(contents[i]), "identical content %d of %s", i, f->ws);
        hash_of(contents[i], strlen(contents[i]), hashes[i]);
        order[i] = i;
        if (sqlite && i % 2 == 0) {
            plant_blob_file(f, hashes[i], contents[i], strlen(contents[i]), TWO_HOURS_MS);
        } else {
            char path[64];
            (void)snprintf(path, sizeof(path), "ident/garbage%d", i);
            assert_int_equal(put(f->s, f->ws, path, contents[i], NULL, &e), 0);
            assert_int_equal(store_delete(f->s, f->ws, path, NULL, &err), 0);
        }
    }
    /* GC walks blobs by hash (PostgreSQL, and SQLite's rows) or by
     * directory, which also starts with the hash. */
    qsort_r(order, RACE_CONTENTS, sizeof(order[0]), cmp_hash_idx, hashes);
    for (int k = 0; k < RACE_WRITERS; k++) {
        w[k] = (struct ident_writer){.f = f, .k = k, .contents = contents};
        memcpy(w[k].order, order, sizeof(order));
        assert_int_equal(pthread_create(&th[k], NULL, ident_writer_run, &w[k]), 0);
    }
    /* GC as often as it can without starving the writers (SQLite's busy
     * handler backs off), and not forever. */
    bool busy = true;
    while (busy && runs < 1000) {
        assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
        runs++;
        usleep(2000);
        busy = false;
        for (int k = 0; k < RACE_WRITERS; k++)
            busy |= !atomic_load(&w[k].done);
    }
    for (int k = 0; k < RACE_WRITERS; k++) {
        assert_int_equal(pthread_join(th[k], NULL), 0);
        if (w[k].result)
            fail_msg("writer %d: step %d: %s", k, w[k].result, w[k].msg);
        assert_int_equal(w[k].acked, RACE_CONTENTS);
    }
    assert_int_equal(store_gc(f->s, "test-holder", 60000, &st, &err), 0);
    int lost = 0;
    for (int k = 0; k < RACE_WRITERS; k++)
        for (int c = 0; c < RACE_CONTENTS; c++) {
            char path[64];
            (void)snprintf(path, sizeof(path), "ident/w%d/%d", k, c);
            char *got = get(f->s, f->ws, path);
            if (!got || strcmp(got, contents[c]) != 0)
                lost++;
            free(got);
        }
    assert_int_equal(store_check(f->s, &rep, &err), 0);
    if (lost || rep.missing_blobs || rep.corrupt_blobs)
        fail_msg("%d acknowledged writes lost, %llu missing blobs (%s) after %d GC runs", lost,
                 (unsigned long long)rep.missing_blobs, rep.first_problem, runs);
    assert_int_equal(rep.orphan_entries, 0);
    assert_true(runs > 1);
}

/* --- the lease's holders --- */

/* Sets the lease row behind the store's back. */
static void
plant_lease(struct fixture *f, const char *holder, uint64_t expires_ms)
{
    char exp[32];
    (void)snprintf(exp, sizeof(exp), "%llu", (unsigned long long)expires_ms);
    const char *params[] = {holder, exp};
    raw_sql(f, "INSERT OR REPLACE INTO gc_lease (id, holder, expires_ms) VALUES (1, ?1, ?2)",
            "INSERT INTO gc_lease (id, holder, expires_ms) VALUES (1, $1, $2::bigint)"
            " ON CONFLICT (id) DO UPDATE SET holder = excluded.holder,"
            " expires_ms = excluded.expires_ms",
            2, params);
}

/* A child process's holder name; the child waits for a byte on *ret_go
 * (or its closing) before it exits. */
static pid_t
child_holder(char *name, size_t n, int *ret_go)
{
    int p[2], go[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char b[STORE_HOLDER_MAX + 1], c;
        close(p[0]);
        close(go[1]);
        if (store_holder_name("abxd", b, sizeof(b)) < 0)
            _exit(1);
        (void)write_full(p[1], b, strlen(b));
        close(p[1]);
        _exit(read(go[0], &c, 1) < 0 ? 2 : 0);
    }
    close(p[1]);
    close(go[0]);
    ssize_t k = read_full(p[0], name, n - 1);
    assert_true(k > 0);
    name[k] = '\0';
    close(p[0]);
    *ret_go = go[1];
    return pid;
}

static void
test_lease_holders(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_gc_stats st;
    char me[STORE_HOLDER_MAX + 1], kid[STORE_HOLDER_MAX + 1], other[STORE_HOLDER_MAX + 64];
    char host[65] = "", boot[40];
    uint64_t later = wall_msec() + 10 * 60 * 1000;
    int go;

    assert_int_equal(store_holder_name("abxd", me, sizeof(me)), 0);
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    /* "abxd-<host>-<pid>-<start>-<boot>" */
    char head[128];
    (void)snprintf(head, sizeof(head), "abxd-%s-%ld-", host, (long)getpid());
    assert_int_equal(strncmp(me, head, strlen(head)), 0);
    const char *tail = strrchr(me, '-');
    assert_int_equal(strlen(tail + 1), 32);
    (void)snprintf(boot, sizeof(boot), "%s", tail + 1);
    assert_false(store_holder_dead(me));
    assert_int_equal(store_holder_name("abxd", me, 20), -ENAMETOOLONG);
    assert_int_equal(store_holder_name("abxd", me, sizeof(me)), 0);

    /* A live process of this host keeps its lease. */
    pid_t pid = child_holder(kid, sizeof(kid), &go);
    assert_false(store_holder_dead(kid));
    plant_lease(f, kid, later);
    assert_int_equal(store_gc(f->s, me, 60000, &st, &err), 0);
    assert_false(st.held_lease);
    /* Once it is gone, the lease is ours at once; a corpse nobody has
     * reaped yet (a zombie) is gone too. */
    close(go);
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    assert_true(store_holder_dead(kid));
    assert_int_equal(wait_child(pid), 0);
    assert_true(store_holder_dead(kid));
    assert_int_equal(store_gc(f->s, me, 60000, &st, &err), 0);
    assert_true(st.held_lease);

    /* A pid that lives but started at another time was reused. */
    (void)snprintf(other, sizeof(other), "abxd-%s-%ld-1-%s", host, (long)getpid(), boot);
    assert_true(store_holder_dead(other));
    plant_lease(f, other, later);
    assert_int_equal(store_gc(f->s, me, 60000, &st, &err), 0);
    assert_true(st.held_lease);
    /* Another boot of this host: everything of the old one is gone. */
    (void)snprintf(other, sizeof(other), "%.*s%s", (int)(tail + 1 - me), me,
                   "0123456789abcdef0123456789abcdef");
    assert_true(store_holder_dead(other) ==
                (strcmp(boot, "0123456789abcdef0123456789abcdef") != 0));
    /* Other hosts, and names of another form, are never taken for dead. */
    const char *alive[] = {
            "test-holder",
            "abxd-some-other-host-1-1-0123456789abcdef0123456789abcdef",
            "abxd--1-1-x",
            "",
    };
    for (size_t i = 0; i < sizeof(alive) / sizeof(alive[0]); i++)
        assert_false(store_holder_dead(alive[i]));
    (void)snprintf(other, sizeof(other), "abxd-x%s-999999999-1-%s", host, boot);
    assert_false(store_holder_dead(other)); /* a longer host name ending in ours */
    plant_lease(f, "abxd-some-other-host-1-1-0123456789abcdef0123456789abcdef", later);
    assert_int_equal(store_gc(f->s, me, 60000, &st, &err), 0);
    assert_false(st.held_lease);
    plant_lease(f, "", 0);
}

/* --- damaged content is never handed out whole --- */

/* Reads path through store_verify; returns what store_verify_end() said
 * (or store_read()'s error). */
static int
verified_read(struct store *s, const char *ws, const char *path)
{
    struct err err = {0};
    struct store_entry e;
    struct store_verify v;
    char b[65536];
    int fd = -1, r = store_read(s, ws, path, &fd, &e, &err);
    if (r < 0)
        return r;
    assert_int_equal(store_verify_begin(&v, &e), 0);
    ssize_t k;
    while ((k = read(fd, b, sizeof(b))) > 0)
        store_verify_update(&v, b, (size_t)k);
    close(fd);
    r = store_verify_end(&v, &err);
    store_verify_done(&v);
    return r;
}

/* Cuts the last byte off a blob's content. */
static void
truncate_blob(struct fixture *f, const char *hash, uint64_t size)
{
    if (!strcmp(backend, "postgres")) {
        char seq[32];
        (void)snprintf(seq, sizeof(seq), "%llu", (unsigned long long)((size - 1) / CHUNK));
        const char *params[] = {hash, seq};
        raw_sql(f, NULL,
                "UPDATE blob_chunks SET data = substring(data FROM 1 FOR length(data) - 1)"
                " WHERE hash = $1 AND seq = $2::integer",
                2, params);
        return;
    }
    char path[700];
    blob_path(f, hash, path, sizeof(path));
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(truncate(path, (off_t)size - 1), 0);
}

static void
test_damaged_reads(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_entry e;
    const size_t size = CHUNK + 4096;
    unsigned char *x = malloc(size);
    int fd;

    assert_non_null(x);
    fill_pattern(x, size, 777);
    (void)snprintf((char *)x, 80, "damaged later in %s", f->ws);
    fd = mkfile(x, size);
    assert_int_equal(store_write(f->s, f->ws, "rot/x", fd, 0644, 0, NULL, &e, &err), 0);
    close(fd);
    assert_int_equal(verified_read(f->s, f->ws, "rot/x"), 0);

    /* A flipped byte: PostgreSQL refuses the read, SQLite's verifier
     * refuses the content. Both count it. */
    uint64_t before = store_damaged_reads();
    flip_first_byte(f, e.hash);
    assert_int_equal(verified_read(f->s, f->ws, "rot/x"), -EBADMSG);
    assert_int_equal(store_damaged_reads(), before + 1);
    flip_first_byte(f, e.hash);
    assert_int_equal(verified_read(f->s, f->ws, "rot/x"), 0);
    assert_int_equal(store_damaged_reads(), before + 1);

    /* A cut-off blob: refused before anything is read. */
    truncate_blob(f, e.hash, size);
    fd = -1;
    err_clear(&err);
    assert_int_equal(store_read(f->s, f->ws, "rot/x", &fd, &e, &err), -EBADMSG);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err.msg, "damaged"));
    assert_int_equal(store_damaged_reads(), before + 2);

    /* The verifier on its own: too few bytes, too many, wrong ones. */
    struct store_verify v;
    const char *data = "abc";
    struct store_entry ab = {.size = 3};
    hash_of(data, 3, ab.hash);
    assert_int_equal(store_verify_begin(&v, &ab), 0);
    store_verify_update(&v, data, 2);
    assert_int_equal(store_verify_end(&v, NULL), -EBADMSG);
    store_verify_done(&v);
    assert_int_equal(store_verify_begin(&v, &ab), 0);
    store_verify_update(&v, "abcd", 4);
    assert_int_equal(store_verify_end(&v, NULL), -EBADMSG);
    assert_int_equal(store_verify_begin(&v, &ab), 0);
    store_verify_update(&v, "abd", 3);
    assert_int_equal(store_verify_end(&v, NULL), -EBADMSG);
    assert_int_equal(store_verify_begin(&v, &ab), 0);
    store_verify_update(&v, "a", 1);
    store_verify_update(&v, "bc", 2);
    assert_int_equal(store_verify_end(&v, NULL), 0);
    store_verify_done(&v); /* twice is fine */
    assert_int_equal(store_damaged_reads(), before + 5);
    free(x);
}

/* A workspace's disk bound is kept; stores made before it existed get the
 * column (0) when opened, SQLite and PostgreSQL alike. */
static void
test_ws_disk_bytes(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_ws w = {.disk_bytes = 16 << 20}, got;
    char rnd[13];

    assert_int_equal(rand_id(rnd, 12), 0);
    (void)snprintf(w.id, sizeof(w.id), "d-%s", rnd);
    assert_int_equal(store_ws_create(f->s, &w, &err), 0);
    assert_int_equal(store_ws_get(f->s, w.id, &got, &err), 0);
    assert_int_equal(got.disk_bytes, 16 << 20);
    assert_int_equal(store_ws_get(f->s, f->ws, &got, &err), 0);
    assert_int_equal(got.disk_bytes, 0);
    assert_int_equal(store_ws_delete(f->s, w.id, &err), 0);

    /* The schema as it was: no disk_bytes column, one workspace. */
    store_close(f->s);
    f->s = NULL;
    if (!strcmp(backend, "postgres")) {
        PGconn *c = PQconnectdb(f->where);
        assert_int_equal(PQstatus(c), CONNECTION_OK);
        PGresult *res = PQexec(c, "ALTER TABLE workspaces DROP COLUMN disk_bytes");
        assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
        PQclear(res);
        PQfinish(c);
    } else {
        char db[600];
        sqlite3 *q = NULL;
        (void)snprintf(db, sizeof(db), "%s/store.db", f->where);
        assert_int_equal(sqlite3_open(db, &q), SQLITE_OK);
        assert_int_equal(sqlite3_exec(q,
                                      "ALTER TABLE workspaces RENAME TO w_old;"
                                      "CREATE TABLE workspaces (id TEXT PRIMARY KEY,"
                                      " created_ms INTEGER NOT NULL, template TEXT NOT NULL,"
                                      " cpu_millis INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
                                      " pids INTEGER NOT NULL);"
                                      "INSERT INTO workspaces SELECT id, created_ms, template,"
                                      " cpu_millis, memory_bytes, pids FROM w_old;"
                                      "DROP TABLE w_old;",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(q);
    }
    assert_int_equal(store_open(f->where, f->dir, &f->s, &err), 0);
    assert_int_equal(store_ws_get(f->s, f->ws, &got, &err), 0);
    assert_int_equal(got.memory_bytes, 128 << 20);
    assert_int_equal(got.disk_bytes, 0);
    assert_int_equal(store_ws_create(f->s, &w, &err), 0);
    assert_int_equal(store_ws_get(f->s, w.id, &got, &err), 0);
    assert_int_equal(got.disk_bytes, 16 << 20);
    assert_int_equal(store_ws_delete(f->s, w.id, &err), 0);
}

/* A write that would take the file system below the floor is refused,
 * when it begins, when its size is announced and while it streams. */
static void
test_floor(void **state)
{
    struct fixture *f = *state;
    struct err err = {0};
    struct store_writer *w = NULL;
    struct statvfs sv;
    static char mib[1 << 20];

    store_set_floor(f->s, UINT64_C(1) << 60);
    assert_int_equal(put(f->s, f->ws, "fl/a", "x", NULL, NULL), -ENOSPC);
    assert_int_equal(store_writer_begin(f->s, 0, &w, &err), -ENOSPC);
    assert_non_null(strstr(err.msg, "reserve"));
    err_clear(&err);

    /* Just above what is free: begins, but not for 64 MiB more, and not
     * for long. (The disk is shared: others may free space meanwhile, and
     * then the writer rightly goes on further; unit tests run side by
     * side, so an attempt that went past the bound is tried again, up to 5
     * times. One that never stops fails every time.) */
    uint64_t written = UINT64_MAX;
    for (int attempt = 0; attempt < 5 && written > STORE_FLOOR_CHECK_BYTES + (1 << 20); attempt++) {
        assert_int_equal(statvfs(f->dir, &sv), 0);
        uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
        store_set_floor(f->s, avail - (1 << 20));
        assert_int_equal(store_writer_begin(f->s, 0, &w, &err), 0);
        assert_int_equal(store_writer_expect(w, 64 << 20, &err), -ENOSPC);
        err_clear(&err);
        int r = 0;
        for (int i = 0; i < 64 && r == 0; i++)
            r = store_writer_write(w, mib, sizeof(mib), &err);
        assert_int_equal(r, -ENOSPC);
        written = store_writer_size(w);
        store_writer_abort(w);
        err_clear(&err);
    }
    assert_true(written <= STORE_FLOOR_CHECK_BYTES + (1 << 20));

    store_set_floor(f->s, 0);
    assert_int_equal(put(f->s, f->ws, "fl/a", "x", NULL, NULL), 0);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_workspaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_list_and_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_honest_directories, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_and_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_if_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_and_dedup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits_and_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_streamed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_handles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_after_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_finds_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunk_boundaries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_byte_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_any_byte_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_races_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_waits_for_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_outlives_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_first_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orphan_sweep_repeats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_replaces_orphan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_sweep_vs_identical_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_races_identical_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_holders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_disk_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floor, setup, teardown),
};

/* No argument: both backends, one after the other; "sqlite" or "postgres":
 * that one only (meson runs the two as separate tests, side by side). */
int
main(int argc, char **argv)
{
    int failed = 0;
    const char *only = argc > 1 ? argv[1] : NULL;

    if (only && strcmp(only, "sqlite") && strcmp(only, "postgres")) {
        fprintf(stderr, "usage: %s [sqlite|postgres]\n", argv[0]);
        return 2;
    }
    if (!only || !strcmp(only, "sqlite")) {
        backend = "sqlite";
        failed = cmocka_run_group_tests_name("store-sqlite", tests, NULL, NULL);
    }
    if (only && !strcmp(only, "sqlite"))
        return failed ? 1 : 0;
    if (getenv("ABX_TEST_PG_URL") && *getenv("ABX_TEST_PG_URL")) {
        backend = "postgres";
        failed += cmocka_run_group_tests_name("store-postgres", tests, NULL, NULL);
    } else if (getenv("ABX_TEST_PG_REQUIRED") && !strcmp(getenv("ABX_TEST_PG_REQUIRED"), "1")) {
        fprintf(stderr, "ABX_TEST_PG_URL is not set but ABX_TEST_PG_REQUIRED=1\n");
        failed++;
    } else {
        fprintf(stderr, "store-postgres: skipped (no ABX_TEST_PG_URL)\n");
        if (only)
            return 77; /* meson counts it as skipped */
    }
    return failed ? 1 : 0;
}
