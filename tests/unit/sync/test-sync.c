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
    struct sync_sandbox sb; /* direct file work on ws_dir */
    int root_fd;
};

/* The sandbox side as the unit tests have it: file work in this process. */
static struct sync_sandbox
direct(int root)
{
    struct vfs_ids ids = {0};
    struct sync_sandbox sb = {NULL};
    assert_int_equal(fileops_new_direct(root, -1, &ids, geteuid(), getegid(), false, &sb.fo), 0);
    return sb;
}

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
    f->root_fd = open(f->ws_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->root_fd >= 0);
    f->sb = direct(f->root_fd);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    fileops_unref(f->sb.fo);
    close(f->root_fd);
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

/* A sandbox taken over from another process: its versions unknown, the
 * state seeded from the store. The first mirror copies what the sandbox
 * has, deletes what it no longer has, and leaves ignored paths alone. */
static void
test_seeded_state(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    struct err err = {0};
    char p[600];

    wfile(f->ws_dir, "keep.txt", "old");
    wfile(f->ws_dir, "gone.txt", "g");
    wfile(f->ws_dir, "d/gone2.txt", "g2");
    wfile(f->ws_dir, "same.txt", "same");
    mirror(f, &rep);
    assert_int_equal(rep.files, 4);
    /* what the store holds of an ignored path stays (a rule added later) */
    f->ig.max_file_bytes = 0;
    wfile(f->ws_dir, "node_modules/x.js", "x");
    (void)snprintf(p, sizeof(p), "%s/node_modules/x.js", f->ws_dir);
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(store_write(f->s, "ws1", "node_modules/x.js", fd, 0644, 0, NULL, NULL, &err),
                     0);

    /* the crash: changes nobody mirrored, then another process */
    wfile(f->ws_dir, "keep.txt", "new");
    wfile(f->ws_dir, "made.txt", "m");
    (void)snprintf(p, sizeof(p), "%s/gone.txt", f->ws_dir);
    assert_int_equal(unlink(p), 0);
    (void)snprintf(p, sizeof(p), "%s/d", f->ws_dir);
    assert_int_equal(rm_rf_at(AT_FDCWD, p), 0);
    (void)snprintf(p, sizeof(p), "%s/node_modules", f->ws_dir);
    assert_int_equal(rm_rf_at(AT_FDCWD, p), 0);
    sync_state_free(f->st);
    assert_int_equal(sync_state_new(&f->st), 0);
    assert_int_equal(sync_state_seed(f->s, "ws1", &f->ig, f->st, &err), 0);

    mirror(f, &rep);
    assert_int_equal(rep.files, 3);   /* keep, same (unknown: read again), made */
    assert_int_equal(rep.deleted, 3); /* gone.txt, d/gone2.txt, d */
    char *got = store_get(f, "keep.txt");
    assert_string_equal(got, "new");
    free(got);
    assert_true(store_has(f, "made.txt") && store_has(f, "same.txt"));
    assert_false(store_has(f, "gone.txt") || store_has(f, "d/gone2.txt") || store_has(f, "d"));
    assert_true(store_has(f, "node_modules/x.js"));
    mirror(f, &rep); /* and from now on it knows */
    assert_int_equal(rep.files, 0);
    assert_int_equal(rep.deleted, 0);
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
    int root2 = open(f->ws_dir2, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct sync_sandbox sb2 = direct(root2);
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
    fileops_unref(sb2.fo);
    close(root2);
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

    int root2 = open(f->ws_dir2, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct sync_sandbox sb2 = direct(root2);
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
    fileops_unref(sb2.fo);
    close(root2);
}

/* Names with any byte but NUL and '/' are mirrored byte-exact and restored
 * byte-exact. */
static const char *const odd_names[] = {
        "a\nb",
        "tab\there",
        "\x1b[31mred",
        "\xff",
        "\xc3(",
        "\xed\xa0\x80",
        "caf\xc3\xa9",
        "a\\b",
        "...",
        "{\"p\":1}",
        "\x01",
        "\x7f",
        "x\n<3>abxd: forged line\x1b[31m",
};
#define N_ODD (sizeof(odd_names) / sizeof(odd_names[0]))

static void
test_any_byte_names(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    struct err err = {0};
    char p[600];

    for (size_t i = 0; i < N_ODD; i++) {
        (void)snprintf(p, sizeof(p), "odd/%s", odd_names[i]);
        wfile(f->ws_dir, p, odd_names[i]);
    }
    (void)snprintf(p, sizeof(p), "%s/odd/dir\n", f->ws_dir);
    assert_int_equal(mkdir_p(p, 0755), 0);
    mirror(f, &rep);
    assert_int_equal(rep.skipped, 0);
    assert_int_equal(rep.files, N_ODD);
    for (size_t i = 0; i < N_ODD; i++) {
        (void)snprintf(p, sizeof(p), "odd/%s", odd_names[i]);
        char *got = store_get(f, p);
        if (!got)
            fail_msg("not stored: name %zu", i);
        assert_string_equal(got, odd_names[i]);
        free(got);
    }
    assert_true(store_has(f, "odd/dir\n"));

    /* Restore: the same bytes come back as names. */
    int root2 = open(f->ws_dir2, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct sync_sandbox sb2 = direct(root2);
    struct sync_state *st2;
    assert_int_equal(sync_state_new(&st2), 0);
    assert_int_equal(sync_restore(f->s, "ws1", &sb2, &f->ig, st2, &rep, &err), 0);
    assert_int_equal(rep.files, N_ODD);
    (void)snprintf(p, sizeof(p), "%s/odd", f->ws_dir2);
    DIR *d = opendir(p);
    assert_non_null(d);
    size_t seen = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "dir\n"))
            continue;
        bool known = false;
        for (size_t i = 0; i < N_ODD; i++)
            known |= !strcmp(de->d_name, odd_names[i]);
        if (!known)
            fail_msg("restored an unknown name");
        seen++;
    }
    closedir(d);
    assert_int_equal(seen, N_ODD);
    (void)snprintf(p, sizeof(p), "%s/odd/dir\n", f->ws_dir2);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    sync_state_free(st2);
    fileops_unref(sb2.fo);
    close(root2);
}

/* Makes levels directories named name below dir (relative to the
 * workspace root) with *at() calls, since the whole path may be longer than
 * the kernel takes in one call; leaves a file "f" in the deepest one. */
static void
deep_tree(struct fx *f, const char *dir, const char *name, int levels)
{
    int cur = openat(f->root_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0 && errno == ENOENT) {
        assert_int_equal(mkdirat(f->root_fd, dir, 0755), 0);
        cur = openat(f->root_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    assert_true(cur >= 0);
    for (int i = 0; i < levels; i++) {
        assert_int_equal(mkdirat(cur, name, 0755), 0);
        int next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    assert_int_equal(write_file_at(cur, "f", "deep", 0644), 0);
    close(cur);
}

static bool
skips_name(const struct sync_report *rep, const char *prefix, int error)
{
    for (size_t i = 0; i < rep->n_skips; i++)
        if (!strncmp(rep->skips[i].path, prefix, strlen(prefix)) && rep->skips[i].error == error)
            return true;
    return false;
}

/* What the store cannot hold - a path past PATH_MAX_LEN bytes, directories
 * past the walk's depth - is skipped and reported; everything else is
 * saved, and a file written afterwards is saved by the next mirror. */
static void
test_unstorable_entries_skipped(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    char name[201];

    memset(name, 'n', 200);
    name[200] = '\0';
    deep_tree(f, "long", name, 25); /* 25 * 201 bytes: past 4095 at level 21 */
    deep_tree(f, "deep", "d", 300); /* 300 levels */
    wfile(f->ws_dir, "ok.txt", "fine");
    mirror(f, &rep);
    assert_true(rep.skipped >= 2);
    assert_int_equal(rep.fresh_skips, rep.skipped);
    assert_true(skips_name(&rep, "long/nnn", ENAMETOOLONG));
    assert_true(skips_name(&rep, "deep/d/d/d", ELOOP));
    for (size_t i = 0; i < rep.n_skips; i++) {
        assert_true(rep.skips[i].fresh);
        assert_true(strlen(rep.skips[i].path) <= SYNC_SKIP_PATH_MAX);
        assert_non_null(sync_skip_reason(rep.skips[i].error));
    }
    assert_true(store_has(f, "ok.txt"));
    /* The levels that fit are there. */
    char p[4200];
    size_t n = (size_t)snprintf(p, sizeof(p), "long");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(p + n, sizeof(p) - n, "/%s", name);
    assert_true(n <= 4095);
    assert_true(store_has(f, p));
    n = (size_t)snprintf(p, sizeof(p), "deep");
    for (int i = 0; i < 255; i++)
        n += (size_t)snprintf(p + n, sizeof(p) - n, "/d");
    assert_true(store_has(f, p));

    /* The next mirror still saves what is new, and says what it still
     * skips without trying it again. */
    wfile(f->ws_dir, "later.txt", "later");
    mirror(f, &rep);
    assert_true(store_has(f, "later.txt"));
    assert_true(rep.skipped >= 2);
    assert_int_equal(rep.fresh_skips, 0);
    assert_int_equal(rep.files, 1);
    assert_int_equal(rep.deleted, 0);

    /* Gone from the sandbox: no longer reported, nothing deleted. */
    assert_int_equal(rm_rf_at(f->root_fd, "long"), 0);
    assert_int_equal(rm_rf_at(f->root_fd, "deep"), 0);
    mirror(f, &rep);
    assert_int_equal(rep.skipped, 0);
    assert_false(store_has(f, "long"));
}

/* All skips are counted, the first SYNC_SKIP_LIST_MAX named. */
static void
test_skip_list_bounded(void **state)
{
    struct fx *f = *state;
    struct sync_report rep;
    char name[201], top[16];

    memset(name, 'm', 200);
    name[200] = '\0';
    for (int i = 0; i < SYNC_SKIP_LIST_MAX + 3; i++) {
        (void)snprintf(top, sizeof(top), "t%02d", i);
        deep_tree(f, top, name, 21); /* 4 + 21 * 201 bytes: the 21st level is past 4095 */
    }
    mirror(f, &rep);
    assert_int_equal(rep.skipped, SYNC_SKIP_LIST_MAX + 3);
    assert_int_equal(rep.fresh_skips, SYNC_SKIP_LIST_MAX + 3);
    assert_int_equal(rep.n_skips, SYNC_SKIP_LIST_MAX);
    for (size_t i = 0; i < rep.n_skips; i++) {
        assert_int_equal(rep.skips[i].error, ENAMETOOLONG);
        assert_true(rep.skips[i].cut); /* 4100-odd bytes, kept: SYNC_SKIP_PATH_MAX */
        assert_int_equal(strlen(rep.skips[i].path), SYNC_SKIP_PATH_MAX);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_mirror_pulls_changes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_seeded_state, setup, teardown),
            cmocka_unit_test_setup_teardown(test_ignore_rules, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restore_roundtrip, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restore_fails_loudly, setup, teardown),
            cmocka_unit_test_setup_teardown(test_any_byte_names, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unstorable_entries_skipped, setup, teardown),
            cmocka_unit_test_setup_teardown(test_skip_list_bounded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
