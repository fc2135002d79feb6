/*
 * test-tree.c - the shared layer of the store (tree.c, and store.c's
 * transaction runner) against an in-memory backend (fake-backend.c): what
 * each operation checks and in what order, which primitives it calls in
 * which transaction, what a failure leaves behind. The contract itself,
 * against the real backends, is test-store.c's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake-backend.h"
#include "store/store-internal.h"
#include "util/fd.h"

#define WS "w1"

static int
setup(void **state)
{
    struct fake *f = fake_new(false);
    fake_add_ws(f, WS);
    *state = f;
    return 0;
}

static int
setup_upload(void **state)
{
    struct fake *f = fake_new(true);
    fake_add_ws(f, WS);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fake_free(*state);
    return 0;
}

static struct store *
S(struct fake *f)
{
    return &f->base;
}

/* Writes data to path through the staging writer, as callers do. */
static int
write_str(struct fake *f, const char *path, const char *data, const char *if_match,
          struct store_entry *e, struct err *err)
{
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, data, strlen(data)), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    int r = store_write(S(f), WS, path, fd, 0, 0, if_match, e, err);
    close(fd);
    return r;
}

static void
hash_str(const char *data, char hash[STORE_HASH_LEN + 1])
{
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_int_equal(write_full(fd, data, strlen(data)), 0);
    assert_int_equal(store_hash_fd(fd, hash, NULL), 0);
    close(fd);
}

/* --- If-Match --- */

static void
test_if_match(void **state)
{
    (void)state;
    struct store_entry file = {.type = STORE_FILE, .hash = "abcd"};
    struct store_entry dir = {.type = STORE_DIR};
    struct err err = {0};

    /* None: anything goes. */
    assert_int_equal(store_check_if_match("p", &file, true, NULL, &err), 0);
    assert_int_equal(store_check_if_match("p", NULL, false, NULL, &err), 0);
    /* "": only when there is nothing. */
    assert_int_equal(store_check_if_match("p", NULL, false, "", &err), 0);
    assert_int_equal(store_check_if_match("p", &file, true, "", &err), -ESTALE);
    assert_string_equal(err.msg, "'/p' exists (expected none)");
    err_clear(&err);
    assert_int_equal(store_check_if_match("p", &dir, true, "", &err), -ESTALE);
    err_clear(&err);
    /* A version: that file, at that version. */
    assert_int_equal(store_check_if_match("p", &file, true, "abcd", &err), 0);
    assert_int_equal(store_check_if_match("p", NULL, false, "abcd", &err), -ESTALE);
    assert_string_equal(err.msg, "'/p' does not exist (expected version abcd...)");
    err_clear(&err);
    assert_int_equal(store_check_if_match("p", &file, true, "abce", &err), -ESTALE);
    assert_string_equal(err.msg, "'/p' changed: it is at version abcd..., not abce...");
    err_clear(&err);
    /* A directory has no version a client could hold. */
    assert_int_equal(store_check_if_match("p", &dir, true, "", &err), -ESTALE);
    err_clear(&err);
    assert_int_equal(store_check_if_match("p", &dir, true, "abcd", &err), -ESTALE);
    err_clear(&err);
    /* Not even one whose row says it has that hash. */
    struct store_entry odd = {.type = STORE_DIR, .hash = "abcd"};
    assert_int_equal(store_check_if_match("p", &odd, true, "abcd", &err), -ESTALE);
}

/* --- writes --- */

static void
test_write_steps(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_entry e;
    char h[STORE_HASH_LEN + 1];

    hash_str("hello", h);
    assert_int_equal(write_str(f, "a/b/c", "hello", NULL, &e, &err), 0);
    /* The pin first, outside the transaction; in it the workspace (as the
     * tree's only writer), the target, the ancestors looked up from the
     * parent upwards and made from the top down, the blob, the entry, and
     * the pin dropped with the commit. */
    assert_string_equal(f->log, "pin begin ws_check+lock get:a/b/c get:a/b get:a mkdir:a "
                                "mkdir:a/b hold put:a/b/c unpin commit ");
    assert_string_equal(e.path, "a/b/c");
    assert_int_equal(e.type, STORE_FILE);
    assert_int_equal(e.size, 5);
    assert_int_equal(e.mode, 0644); /* 0 is the default */
    assert_string_equal(e.hash, h);
    assert_int_equal(fake_find(f, WS, "a/b")->type, STORE_DIR);
    assert_int_equal(f->st.npins, 0);

    /* With the parent there, one lookup on the way up. */
    fake_log_clear(f);
    assert_int_equal(write_str(f, "a/b/d", "x", NULL, &e, &err), 0);
    assert_string_equal(f->log,
                        "pin begin ws_check+lock get:a/b/d get:a/b hold put:a/b/d unpin commit ");
    /* A top-level file has no ancestor to look for. */
    fake_log_clear(f);
    assert_int_equal(write_str(f, "top", "x", NULL, &e, &err), 0);
    assert_string_equal(f->log, "pin begin ws_check+lock get:top hold put:top unpin commit ");
}

static void
test_write_refused(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_entry e;

    fake_add(f, WS, "f", STORE_FILE, "0000");
    fake_add(f, WS, "d", STORE_DIR, NULL);
    int before = f->st.n;

    /* A file on the way: rolled back, the pin dropped afterwards. */
    fake_log_clear(f);
    assert_int_equal(write_str(f, "f/x/y", "x", NULL, &e, &err), -ENOTDIR);
    assert_string_equal(err.msg, "'/f' is a file, not a directory");
    assert_string_equal(f->log, "pin begin ws_check+lock get:f/x/y get:f/x get:f rollback unpin ");
    assert_int_equal(f->st.n, before);
    assert_int_equal(f->st.npins, 0);

    err_clear(&err);
    assert_int_equal(write_str(f, "d", "x", NULL, &e, &err), -EISDIR);
    assert_string_equal(err.msg, "'/d' is a directory");
    err_clear(&err);
    assert_int_equal(write_str(f, "f", "x", "1111", &e, &err), -ESTALE);
    assert_string_equal(err.msg, "'/f' changed: it is at version 0000..., not 1111...");
    err_clear(&err);
    assert_int_equal(write_str(f, "f", "x", "", &e, &err), -ESTALE);
    err_clear(&err);
    /* The workspace before anything else. */
    fake_log_clear(f);
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_int_equal(store_write(S(f), "nope", "f", fd, 0, 0, NULL, &e, &err), -ENOENT);
    close(fd);
    assert_string_equal(err.msg, "no workspace 'nope'");
    assert_string_equal(f->log, "pin begin ws_check+lock rollback unpin ");
    assert_int_equal(f->st.n, before);
    assert_int_equal(f->st.npins, 0);
    assert_int_equal(f->st.nblobs, 0);
}

static void
test_write_fails_late(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_entry e;

    /* Every step after the pin undoes everything when it fails. */
    const char *steps[] = {"begin", "ws_check+lock", "get",   "mkdir",
                           "hold",  "put",           "unpin", "commit"};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        f->fail_op = steps[i];
        f->fail_errno = EIO;
        f->fail_times = 1;
        err_clear(&err);
        fake_log_clear(f);
        assert_int_equal(write_str(f, "n/x", "x", NULL, &e, &err), -EIO);
        assert_string_not_equal(err.msg, "");
        assert_null(fake_find(f, WS, "n"));
        assert_int_equal(f->st.nblobs, 0);
        /* The failed unpin inside the transaction is retried after it. */
        assert_int_equal(f->st.npins, 0);
        assert_false(f->in_tx);
    }
    /* A pin that cannot be taken: nothing else happens. */
    f->fail_op = "pin";
    f->fail_times = 1;
    fake_log_clear(f);
    assert_int_equal(write_str(f, "n/x", "x", NULL, &e, &err), -EIO);
    assert_string_equal(f->log, "pin ");
}

/* A backend that stores new content first does it outside the tree's
 * transaction, after checking what it can, and only for new content. */
static void
test_write_upload_first(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_entry e;

    assert_int_equal(write_str(f, "u/x", "new", NULL, &e, &err), 0);
    assert_string_equal(f->log, "pin known ws_check get:u/x begin upload commit "
                                "begin ws_check+lock get:u/x get:u mkdir:u hold put:u/x unpin "
                                "commit ");
    /* Known content: no upload. */
    fake_log_clear(f);
    assert_int_equal(write_str(f, "u/y", "new", NULL, &e, &err), 0);
    assert_string_equal(f->log, "pin known begin ws_check+lock get:u/y get:u hold put:u/y unpin "
                                "commit ");
    /* A precondition that fails: no upload for nothing. */
    fake_log_clear(f);
    assert_int_equal(write_str(f, "u/x", "newer", "", &e, &err), -ESTALE);
    assert_string_equal(f->log, "pin known ws_check get:u/x unpin ");
    assert_int_equal(f->st.nblobs, 1);
    assert_int_equal(f->st.npins, 0);
}

/* --- the tree --- */

static void
test_mkdir(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    bool created = true;

    assert_int_equal(store_mkdir(S(f), WS, ".", &created, &err), 0);
    assert_false(created);
    assert_string_equal(f->log, "ws_check "); /* the root exists with its workspace */
    assert_int_equal(store_mkdir(S(f), WS, "a/b/c", &created, &err), 0);
    assert_true(created);
    assert_int_equal(fake_find(f, WS, "a")->type, STORE_DIR);
    assert_int_equal(fake_find(f, WS, "a/b/c")->mode, 0755);
    fake_log_clear(f);
    assert_int_equal(store_mkdir(S(f), WS, "a/b/c", &created, &err), 0);
    assert_false(created);
    assert_string_equal(f->log, "begin ws_check+lock get:a/b/c commit ");
    assert_int_equal(store_mkdir(S(f), WS, "a/b/d", &created, &err), 0);
    assert_true(created);

    fake_add(f, WS, "a/file", STORE_FILE, "0000");
    assert_int_equal(store_mkdir(S(f), WS, "a/file/x", &created, &err), -ENOTDIR);
    assert_string_equal(err.msg, "'/a/file' is a file, not a directory");
    err_clear(&err);
    assert_int_equal(store_mkdir(S(f), WS, "a/file", &created, &err), -ENOTDIR);
    err_clear(&err);
    assert_int_equal(store_mkdir(S(f), "nope", "x", &created, &err), -ENOENT);
    assert_string_equal(err.msg, "no workspace 'nope'");
    err_clear(&err);
    assert_int_equal(store_mkdir(S(f), WS, "/x", &created, &err), -EINVAL);
    assert_int_equal(store_mkdir(S(f), WS, "a/../b", &created, &err), -EINVAL);
}

static void
test_delete_and_rmdir(void **state)
{
    struct fake *f = *state;
    struct err err = {0};

    fake_add(f, WS, "d", STORE_DIR, NULL);
    fake_add(f, WS, "d/f", STORE_FILE, "0000");
    fake_add(f, WS, "d/e", STORE_DIR, NULL);
    fake_add(f, WS, "d/e/g", STORE_FILE, "1111");

    assert_int_equal(store_delete(S(f), WS, "d", NULL, &err), -EISDIR);
    assert_string_equal(err.msg, "'/d' is a directory: use rmdir");
    err_clear(&err);
    assert_int_equal(store_delete(S(f), WS, "d/nope", NULL, &err), -ENOENT);
    assert_string_equal(err.msg, "no such file: '/d/nope'");
    err_clear(&err);
    /* The precondition is looked at before whether there is a file. */
    assert_int_equal(store_delete(S(f), WS, "d/nope", "0000", &err), -ESTALE);
    err_clear(&err);
    assert_int_equal(store_delete(S(f), WS, "d/f", "1111", &err), -ESTALE);
    err_clear(&err);
    fake_log_clear(f);
    assert_int_equal(store_delete(S(f), WS, "d/f", "0000", &err), 0);
    assert_string_equal(f->log, "begin ws_check+lock get:d/f del:d/f commit ");
    assert_non_null(fake_find(f, WS, "d")); /* the parent stays */

    assert_int_equal(store_rmdir(S(f), WS, ".", &err), -EINVAL);
    assert_string_equal(err.msg, "the workspace root cannot be removed");
    err_clear(&err);
    assert_int_equal(store_rmdir(S(f), WS, "d/e/g", &err), -ENOTDIR);
    assert_string_equal(err.msg, "'/d/e/g' is not a directory");
    err_clear(&err);
    assert_int_equal(store_rmdir(S(f), WS, "x", &err), -ENOENT);
    assert_string_equal(err.msg, "no such directory: '/x'");
    err_clear(&err);
    assert_int_equal(store_rmdir(S(f), WS, "d", &err), 0);
    assert_int_equal(f->st.n, 0);
}

static void
test_rename(void **state)
{
    struct fake *f = *state;
    struct err err = {0};

    fake_add(f, WS, "d", STORE_DIR, NULL);
    fake_add(f, WS, "d/f", STORE_FILE, "0000");
    fake_add(f, WS, "g", STORE_FILE, "1111");

    /* Refused before any transaction. */
    assert_int_equal(store_rename(S(f), WS, "d", "d/x", false, &err), -EINVAL);
    assert_string_equal(err.msg, "cannot move '/d' into itself");
    assert_string_equal(f->log, "");
    assert_int_equal(store_rename(S(f), WS, "d", "d", false, &err), 0);
    assert_string_equal(f->log, "");
    err_clear(&err);

    assert_int_equal(store_rename(S(f), WS, "x", "y", false, &err), -ENOENT);
    assert_string_equal(err.msg, "no such file or directory: '/x'");
    err_clear(&err);
    assert_int_equal(store_rename(S(f), WS, "g", "d/f", false, &err), -EEXIST);
    assert_string_equal(err.msg, "'/d/f' already exists");
    err_clear(&err);
    assert_int_equal(store_rename(S(f), WS, "d", "g", true, &err), -EEXIST);
    assert_string_equal(err.msg, "'/g' exists and only a file may replace a file");
    err_clear(&err);

    /* A file over a file, with overwrite. */
    fake_log_clear(f);
    assert_int_equal(store_rename(S(f), WS, "g", "d/f", true, &err), 0);
    assert_string_equal(f->log,
                        "begin ws_check+lock get:g get:d/f deltree:d/f get:d move:g commit ");
    assert_string_equal(fake_find(f, WS, "d/f")->hash, "1111");
    /* A directory to a new place: its ancestors made, then it and what
     * is below it moved. */
    fake_log_clear(f);
    assert_int_equal(store_rename(S(f), WS, "d", "n/m/d", false, &err), 0);
    assert_string_equal(f->log, "begin ws_check+lock get:d get:n/m/d get:n/m get:n mkdir:n "
                                "mkdir:n/m move:d movebelow:d commit ");
    assert_non_null(fake_find(f, WS, "n/m/d/f"));
    assert_null(fake_find(f, WS, "d"));
}

static int
collect_path(const struct store_entry *e, void *ud)
{
    char *out = ud;
    size_t n = strlen(out);
    (void)snprintf(out + n, 256 - n, "%s ", e->path);
    return 0;
}

static void
test_reads(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_entry e;
    char seen[256] = "";
    int fd = -1;

    fake_add(f, WS, "d", STORE_DIR, NULL);
    fake_add(f, WS, "d/f", STORE_FILE, "0000");
    fake_add(f, WS, "d/e", STORE_DIR, NULL);
    fake_add(f, WS, "d/e/g", STORE_FILE, "1111");

    /* One read transaction for the entry and its content. */
    assert_int_equal(store_read(S(f), WS, "d/f", &fd, &e, &err), 0);
    assert_string_equal(f->log, "begin-read ws_check get:d/f read commit ");
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(store_read(S(f), WS, "d", &fd, &e, &err), -EISDIR);
    assert_string_equal(err.msg, "'/d' is a directory");
    err_clear(&err);
    assert_int_equal(store_read(S(f), WS, "x", &fd, &e, &err), -ENOENT);
    assert_string_equal(err.msg, "no such file: '/x'");
    err_clear(&err);
    /* A read that fails hands out no descriptor. */
    f->fail_op = "commit";
    f->fail_errno = EIO;
    f->fail_times = 1;
    fd = -1;
    assert_int_equal(store_read(S(f), WS, "d/f", &fd, &e, &err), -EIO);
    assert_int_equal(fd, -1);
    err_clear(&err);

    assert_int_equal(store_stat(S(f), WS, "x", &e, &err), -ENOENT);
    assert_string_equal(err.msg, "no such file or directory: '/x'");
    err_clear(&err);
    assert_int_equal(store_stat(S(f), WS, ".", &e, &err), 0);
    assert_int_equal(e.type, STORE_DIR);
    assert_string_equal(e.path, ".");

    /* Listings run outside transactions, so their callbacks may use the
     * store. */
    fake_log_clear(f);
    assert_int_equal(store_list(S(f), WS, "d", collect_path, seen, &err), 0);
    assert_string_equal(f->log, "ws_check get:d children:d ");
    assert_string_equal(seen, "d/e d/f ");
    seen[0] = '\0';
    assert_int_equal(store_walk(S(f), WS, ".", collect_path, seen, &err), 0);
    assert_string_equal(seen, "d d/e d/e/g d/f ");
    assert_int_equal(store_walk(S(f), WS, "d/f", collect_path, seen, &err), -ENOTDIR);
    assert_string_equal(err.msg, "'/d/f' is not a directory");
    err_clear(&err);
    assert_int_equal(store_list(S(f), WS, "x", collect_path, seen, &err), -ENOENT);
    assert_string_equal(err.msg, "no such directory: '/x'");
}

static void
test_workspaces(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    struct store_ws w = {.id = WS};
    struct store_usage u;

    /* The message is the shared layer's, whatever the backend said. */
    assert_int_equal(store_ws_create(S(f), &w, &err), -EEXIST);
    assert_string_equal(err.msg, "workspace 'w1' already exists");
    err_clear(&err);
    assert_int_equal(store_ws_get(S(f), "nope", &w, &err), -ENOENT);
    assert_string_equal(err.msg, "no workspace 'nope'");
    err_clear(&err);
    assert_int_equal(store_ws_delete(S(f), "nope", &err), -ENOENT);
    assert_string_equal(err.msg, "no workspace 'nope'");
    err_clear(&err);
    assert_int_equal(store_usage(S(f), "nope", &u, &err), -ENOENT);
    err_clear(&err);
    fake_add(f, WS, "a", STORE_FILE, "0000");
    assert_int_equal(store_usage(S(f), WS, &u, &err), 0);
    assert_int_equal(u.files, 1);
    fake_log_clear(f);
    assert_int_equal(store_ws_delete(S(f), WS, &err), 0);
    assert_string_equal(f->log, "begin ws_delete:w1 commit ");
    assert_int_equal(f->st.n, 0);
    struct store_ws bad = {.id = "Bad"};
    assert_int_equal(store_ws_create(S(f), &bad, &err), -EINVAL);
}

/* --- the transaction runner --- */

static int
busy_fn(struct store *s, void *ctx, struct err *err)
{
    int *calls = ctx;
    (void)s;
    (*calls)++;
    return err_set(err, EBUSY, "busy, attempt %d", *calls);
}

static int
second_time_fn(struct store *s, void *ctx, struct err *err)
{
    int *calls = ctx;
    (void)s;
    return ++*calls < 2 ? err_set(err, EBUSY, "busy") : 7;
}

static void
test_tx_runner(void **state)
{
    struct fake *f = *state;
    struct err err = {0};
    int calls = 0;

    /* Not retryable: one attempt, rolled back. */
    assert_int_equal(store_tx_run(S(f), STORE_TX_WRITE, busy_fn, &calls, &err), -EBUSY);
    assert_int_equal(calls, 1);
    assert_string_equal(f->log, "begin rollback ");
    assert_string_equal(err.msg, "busy, attempt 1");
    /* Retryable: STORE_TX_ATTEMPTS attempts; err says what the last said. */
    f->retry = true;
    calls = 0;
    err_clear(&err);
    assert_int_equal(store_tx_run(S(f), STORE_TX_WRITE, busy_fn, &calls, &err), -EBUSY);
    assert_int_equal(calls, STORE_TX_ATTEMPTS);
    char want[32];
    (void)snprintf(want, sizeof(want), "busy, attempt %d", STORE_TX_ATTEMPTS);
    assert_string_equal(err.msg, want);
    /* A later attempt that works: its result, and err untouched. */
    calls = 0;
    err_clear(&err);
    fake_log_clear(f);
    assert_int_equal(store_tx_run(S(f), STORE_TX_WRITE, second_time_fn, &calls, &err), 7);
    assert_string_equal(f->log, "begin rollback begin commit ");
    assert_string_equal(err.msg, "");
    /* A commit that fails is a failure, rolled back. */
    f->retry = false;
    f->fail_op = "commit";
    f->fail_errno = EIO;
    f->fail_times = 1;
    calls = 1;
    fake_log_clear(f);
    assert_int_equal(store_tx_run(S(f), STORE_TX_READ, second_time_fn, &calls, &err), -EIO);
    assert_string_equal(f->log, "begin-read commit rollback ");
    assert_string_equal(err.msg, "fake: commit failed");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_if_match),
            cmocka_unit_test_setup_teardown(test_write_steps, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_refused, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_fails_late, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_upload_first, setup_upload, teardown),
            cmocka_unit_test_setup_teardown(test_mkdir, setup, teardown),
            cmocka_unit_test_setup_teardown(test_delete_and_rmdir, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reads, setup, teardown),
            cmocka_unit_test_setup_teardown(test_workspaces, setup, teardown),
            cmocka_unit_test_setup_teardown(test_tx_runner, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
