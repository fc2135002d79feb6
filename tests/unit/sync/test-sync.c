/*
 * test-sync.c - restore and mirror between a real directory (standing in
 * for a sandbox's workspace) and a real SQLite store; ignore rules.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/store.h"
#include "sync/sync.h"
#include "util/fd.h"
#include "util/rand.h"

struct fx {
    char dir[256], ws_dir[300], ws_dir2[300];
    struct store *s;
    struct sync_ignore ig;
    struct sync_state *st;
    struct sync_sandbox sb;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct err err = {0};
    char rnd[17], store_dir[300];
    assert_non_null(f);
    assert_int_equal(rand_hex(rnd, 8), 0);
    (void)snprintf(f->dir, sizeof(f->dir), "/tmp/abx-test-sync-%s", rnd);
    (void)snprintf(f->ws_dir, sizeof(f->ws_dir), "%s/ws", f->dir);
    (void)snprintf(f->ws_dir2, sizeof(f->ws_dir2), "%s/ws2", f->dir);
    (void)snprintf(store_dir, sizeof(store_dir), "%s/store", f->dir);
    assert_int_equal(mkdir_p(f->ws_dir, 0755), 0);
    assert_int_equal(mkdir_p(f->ws_dir2, 0755), 0);
    assert_int_equal(store_open(store_dir, f->dir, &f->s, &err), 0);
    struct store_ws w = {.id = "ws1"};
    assert_int_equal(store_ws_create(f->s, &w, &err), 0);
    assert_int_equal(sync_ignore_default(&f->ig), 0);
    f->ig.max_file_bytes = 1000;
    assert_int_equal(sync_state_new(&f->st), 0);
    f->sb.root_fd = open(f->ws_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    f->sb.uid = geteuid();
    f->sb.gid = getegid();
    assert_true(f->sb.root_fd >= 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    close(f->sb.root_fd);
    sync_state_free(f->st);
    sync_ignore_done(&f->ig);
    store_close(f->s);
    (void)rm_rf_at(AT_FDCWD, f->dir);
    free(f);
    return 0;
}

static void
wfile(const char *base, const char *rel, const char *data)
{
    char p[600];
    (void)snprintf(p, sizeof(p), "%s/%s", base, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    assert_int_equal(mkdir_p(p, 0755), 0);
    *slash = '/';
    assert_int_equal(write_file_at(AT_FDCWD, p, data, 0644), 0);
}

static char *
store_get(struct fx *f, const char *path)
{
    struct err err = {0};
    struct store_entry e;
    int fd;
    if (store_read(f->s, "ws1", path, &fd, &e, &err) < 0)
        return NULL;
    struct buf b;
    buf_init(&b, 1 << 20);
    char tmp[4096];
    ssize_t k;
    buf_reset(&b);
    while ((k = read(fd, tmp, sizeof(tmp))) > 0)
        assert_int_equal(buf_put(&b, tmp, (size_t)k), 0);
    close(fd);
    return buf_steal(&b);
}

static bool
store_has(struct fx *f, const char *path)
{
    struct err err = {0};
    struct store_entry e;
    return store_stat(f->s, "ws1", path, &e, &err) == 0;
}

static void
mirror(struct fx *f, struct sync_report *rep)
{
    struct err err = {0};
    int r = sync_mirror(f->s, "ws1", &f->sb, &f->ig, f->st, rep, &err);
    if (r < 0)
        fail_msg("mirror: %s", err.msg);
}

static void
test_mirror_pulls_changes(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    char p[600];

    wfile(f->ws_dir, "a/one.txt", "1");
    wfile(f->ws_dir, "a/b/two.txt", "22");
    (void)snprintf(p, sizeof(p), "%s/empty/dir", f->ws_dir);
    assert_int_equal(mkdir_p(p, 0755), 0);
    mirror(f, &rep);
    assert_int_equal(rep.files, 2);
    assert_true(store_has(f, "empty/dir"));
    char *got = store_get(f, "a/b/two.txt");
    assert_string_equal(got, "22");
    free(got);

    mirror(f, &rep); /* nothing changed */
    assert_int_equal(rep.files, 0);
    assert_int_equal(rep.deleted, 0);
    assert_true(rep.unchanged >= 5);

    /* A change hidden by resetting mtime is still seen. */
    (void)snprintf(p, sizeof(p), "%s/a/one.txt", f->ws_dir);
    struct stat st0;
    assert_int_equal(stat(p, &st0), 0);
    wfile(f->ws_dir, "a/one.txt", "X");
    struct timespec ts[2] = {st0.st_atim, st0.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    mirror(f, &rep);
    assert_int_equal(rep.files, 1);
    got = store_get(f, "a/one.txt");
    assert_string_equal(got, "X");
    free(got);

    /* Deletions: a file, then a directory tree. */
    assert_int_equal(unlink(p), 0);
    mirror(f, &rep);
    assert_int_equal(rep.deleted, 1);
    assert_false(store_has(f, "a/one.txt"));
    assert_true(store_has(f, "a")); /* its parent stays */
    (void)snprintf(p, sizeof(p), "%s/a", f->ws_dir);
    assert_int_equal(rm_rf_at(AT_FDCWD, p), 0);
    mirror(f, &rep);
    assert_false(store_has(f, "a"));
    assert_false(store_has(f, "a/b/two.txt"));

    /* A file becomes a directory. */
    wfile(f->ws_dir, "flip", "file");
    mirror(f, &rep);
    (void)snprintf(p, sizeof(p), "%s/flip", f->ws_dir);
    assert_int_equal(unlink(p), 0);
    wfile(f->ws_dir, "flip/inner", "now a dir");
    mirror(f, &rep);
    got = store_get(f, "flip/inner");
    assert_string_equal(got, "now a dir");
    free(got);
}

static void
test_ignore_rules(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    char big[2000];
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';

    assert_true(sync_ignored(&f->ig, "node_modules", true, 0));
    assert_true(sync_ignored(&f->ig, "x/node_modules/y/z.js", false, 1));
    assert_true(sync_ignored(&f->ig, "src/__pycache__/m.cpython-311.pyc", false, 1));
    assert_true(sync_ignored(&f->ig, "m.pyc", false, 1));
    assert_true(sync_ignored(&f->ig, ".git/config", false, 1));
    assert_false(sync_ignored(&f->ig, "node_modules.txt", false, 1)); /* a file, not the dir */
    assert_false(sync_ignored(&f->ig, "src/main.py", false, 1));
    assert_true(sync_ignored(&f->ig, "big.bin", false, 5000));

    wfile(f->ws_dir, "node_modules/pkg/index.js", "js");
    wfile(f->ws_dir, "node_modules/pkg/a.js", "js");
    wfile(f->ws_dir, "node_modules/other/b.js", "js");
    wfile(f->ws_dir, "src/m.pyc", "bytecode");
    wfile(f->ws_dir, "src/m.py", "source");
    wfile(f->ws_dir, "big.bin", big);
    mirror(f, &rep);
    /* node_modules itself, m.pyc, big.bin: an ignored directory is not
     * even read, so nothing below it is counted. */
    assert_int_equal(rep.ignored, 3);
    assert_false(store_has(f, "node_modules"));
    assert_false(store_has(f, "src/m.pyc"));
    assert_false(store_has(f, "big.bin"));
    assert_true(store_has(f, "src/m.py"));

    /* A file that grows past the cap stays in the store as it was. */
    wfile(f->ws_dir, "grows", "small");
    mirror(f, &rep);
    wfile(f->ws_dir, "grows", big);
    mirror(f, &rep);
    char *got = store_get(f, "grows");
    assert_string_equal(got, "small");
    free(got);

    /* A path mirrored before and ignored under new rules stays in the
     * store even though the walk no longer reports it. */
    struct err err = {0};
    wfile(f->ws_dir, "logs/today.log", "log");
    mirror(f, &rep);
    assert_true(store_has(f, "logs/today.log"));
    struct sync_ignore later = {.max_file_bytes = 1000};
    assert_int_equal(sync_ignore_parse(&later, "logs/", &err), 0);
    struct sync_report rep2;
    assert_int_equal(sync_mirror(f->s, "ws1", &f->sb, &later, f->st, &rep2, &err), 0);
    assert_int_equal(rep2.deleted, 0);
    assert_true(store_has(f, "logs/today.log"));
    sync_ignore_done(&later);

    struct sync_ignore mine = {.max_file_bytes = 0};
    assert_int_equal(sync_ignore_parse(&mine, "build/, *.o ,tmp*", &err), 0);
    assert_true(sync_ignored(&mine, "a/build/x", false, 1));
    assert_true(sync_ignored(&mine, "x.o", false, 1));
    assert_true(sync_ignored(&mine, "tmpfile", false, 1));
    assert_false(sync_ignored(&mine, "node_modules/x", false, 1));
    assert_int_equal(sync_ignore_parse(&mine, "a/b", &err), -EINVAL);
    sync_ignore_done(&mine);
}

static void
test_restore_roundtrip(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    struct err err = {0};
    char p[600];

    wfile(f->ws_dir, "r/x.txt", "xxx");
    wfile(f->ws_dir, "r/deep/y.txt", "yyyy");
    (void)snprintf(p, sizeof(p), "%s/r/empty", f->ws_dir);
    assert_int_equal(mkdir_p(p, 0755), 0);
    mirror(f, &rep);

    /* Restore into a second, empty directory. */
    struct sync_sandbox sb2 = {open(f->ws_dir2, O_PATH | O_DIRECTORY | O_CLOEXEC), geteuid(),
                               getegid()};
    struct sync_state *st2;
    assert_int_equal(sync_state_new(&st2), 0);
    assert_int_equal(sync_restore(f->s, "ws1", &sb2, &f->ig, st2, &rep, &err), 0);
    assert_int_equal(rep.files, 2);
    struct buf b;
    buf_init(&b, 4096);
    (void)snprintf(p, sizeof(p), "%s/r/deep/y.txt", f->ws_dir2);
    assert_int_equal(read_file_at(AT_FDCWD, p, 4096, &b), 0);
    assert_string_equal(b.data, "yyyy");
    buf_done(&b);
    struct stat sb;
    (void)snprintf(p, sizeof(p), "%s/r/empty", f->ws_dir2);
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    /* Mirroring right after a restore finds nothing to do. */
    assert_int_equal(sync_mirror(f->s, "ws1", &sb2, &f->ig, st2, &rep, &err), 0);
    assert_int_equal(rep.files, 0);
    assert_int_equal(rep.deleted, 0);
    sync_state_free(st2);
    close(sb2.root_fd);
}

static void
tamper_blob(struct fx *f, const char *hash, const char *data)
{
    char p[600];
    (void)snprintf(p, sizeof(p), "%s/store/blobs/%.2s/%s", f->dir, hash, hash);
    assert_int_equal(chmod(p, 0644), 0);
    if (data)
        assert_int_equal(write_file_at(AT_FDCWD, p, data, 0644), 0);
    else
        assert_int_equal(unlink(p), 0);
}

static void
test_restore_fails_loudly(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    struct err err = {0};
    struct store_entry e1, e2;
    char p[600];

    wfile(f->ws_dir, "ok.txt", "fine");
    wfile(f->ws_dir, "bad/corrupt.txt", "original");
    wfile(f->ws_dir, "gone.txt", "will vanish");
    mirror(f, &rep);
    assert_int_equal(store_stat(f->s, "ws1", "bad/corrupt.txt", &e1, &err), 0);
    assert_int_equal(store_stat(f->s, "ws1", "gone.txt", &e2, &err), 0);
    tamper_blob(f, e1.hash, "tampered");
    tamper_blob(f, e2.hash, NULL);

    struct sync_sandbox sb2 = {open(f->ws_dir2, O_PATH | O_DIRECTORY | O_CLOEXEC), geteuid(),
                               getegid()};
    struct sync_state *st2;
    assert_int_equal(sync_state_new(&st2), 0);
    int r = sync_restore(f->s, "ws1", &sb2, &f->ig, st2, &rep, &err);
    assert_int_equal(r, -EBADMSG);
    assert_non_null(strstr(err.msg, "bad/corrupt.txt"));
    assert_non_null(strstr(err.msg, "gone.txt"));
    assert_non_null(strstr(rep.bad_paths, "corrupt.txt"));
    /* The tampered bytes never reached the sandbox. */
    (void)snprintf(p, sizeof(p), "%s/bad/corrupt.txt", f->ws_dir2);
    assert_int_equal(access(p, F_OK), -1);
    sync_state_free(st2);
    close(sb2.root_fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_mirror_pulls_changes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_ignore_rules, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restore_roundtrip, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restore_fails_loudly, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
