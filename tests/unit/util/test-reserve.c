/*
 * test-reserve.c - the ballast file: created whole (allocated, not sparse)
 * when there is room, kept, replaced when its size is not the configured
 * one or it is not a complete reserve, removed at size 0; and on a small
 * tmpfs of its own (root, in a private mount namespace of a child) released
 * below the low-water mark, not re-created until the high-water mark, then
 * re-created; a leftover half-allocated temporary is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fd.h"
#include "util/reserve.h"

#define MiB (1024ull * 1024ull)

static char top[256];
static int topfd = -1;

static int
setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-reserve-XXXXXX", tmp) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return topfd < 0 ? -1 : 0;
}

static int
teardown(void **state)
{
    (void)state;
    close(topfd);
    return rm_rf_at(AT_FDCWD, top) == 0 ? 0 : -1;
}

/* The reserve's size and allocated bytes, or -1 when there is none. */
static int64_t
reserve_size(int dirfd, int64_t *allocated)
{
    struct stat st;
    if (fstatat(dirfd, RESERVE_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (allocated)
        *allocated = (int64_t)st.st_blocks * 512;
    return S_ISREG(st.st_mode) ? st.st_size : -2;
}

static void
test_create_keep_replace(void **state)
{
    struct reserve_state st;
    struct err e = {0};
    int64_t alloc = 0;
    (void)state;

    /* size 0: nothing */
    assert_int_equal(reserve_check(topfd, 0, &st, &e), RESERVE_UNCHANGED);
    assert_false(st.present);
    assert_int_equal(reserve_size(topfd, NULL), -1);

    /* room enough (the test's temporary directory): created, allocated */
    assert_int_equal(reserve_check(topfd, 2 * MiB, &st, &e), RESERVE_CREATED);
    assert_false(err_isset(&e));
    assert_true(st.present);
    assert_int_equal(st.low_bytes, 2 * MiB / RESERVE_LOW_DIV);
    assert_int_equal(st.high_bytes, 2 * MiB * RESERVE_HIGH_MUL);
    assert_true(st.free_bytes >= st.high_bytes); /* as found, before creating */
    assert_int_equal(reserve_size(topfd, &alloc), (int64_t)(2 * MiB));
    assert_true(alloc >= (int64_t)(2 * MiB));
    struct stat a, b;
    assert_int_equal(fstatat(topfd, RESERVE_NAME, &a, 0), 0);
    assert_int_equal(a.st_mode & 07777, 0600);

    /* kept while there is room: the same file */
    assert_int_equal(reserve_check(topfd, 2 * MiB, &st, NULL), RESERVE_UNCHANGED);
    assert_true(st.present);
    assert_int_equal(fstatat(topfd, RESERVE_NAME, &b, 0), 0);
    assert_int_equal(a.st_ino, b.st_ino);

    /* another configured size: replaced */
    assert_int_equal(reserve_check(topfd, 1 * MiB, &st, NULL), RESERVE_CREATED);
    assert_int_equal(reserve_size(topfd, NULL), (int64_t)MiB);

    /* a sparse file of the right size is no reserve: replaced */
    assert_int_equal(unlinkat(topfd, RESERVE_NAME, 0), 0);
    int fd = openat(topfd, RESERVE_NAME, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)MiB), 0);
    close(fd);
    assert_int_equal(reserve_check(topfd, MiB, &st, NULL), RESERVE_CREATED);
    assert_int_equal(reserve_size(topfd, &alloc), (int64_t)MiB);
    assert_true(alloc >= (int64_t)MiB);

    /* a symlink at the name is removed, never followed */
    assert_int_equal(unlinkat(topfd, RESERVE_NAME, 0), 0);
    assert_int_equal(write_file_at(topfd, "victim", "keep me", 0644), 0);
    assert_int_equal(symlinkat("victim", topfd, RESERVE_NAME), 0);
    assert_int_equal(reserve_check(topfd, MiB, &st, NULL), RESERVE_CREATED);
    assert_int_equal(reserve_size(topfd, NULL), (int64_t)MiB);
    struct buf v;
    buf_init(&v, 64);
    assert_int_equal(read_file_at(topfd, "victim", 64, &v), 0);
    assert_string_equal(v.data, "keep me");
    buf_done(&v);

    /* a temporary a crash left is removed */
    assert_int_equal(write_file_at(topfd, RESERVE_TMP_NAME, "half", 0600), 0);
    assert_int_equal(reserve_check(topfd, MiB, &st, NULL), RESERVE_UNCHANGED);
    assert_int_equal(faccessat(topfd, RESERVE_TMP_NAME, F_OK, AT_SYMLINK_NOFOLLOW), -1);

    /* size 0 again: the reserve goes */
    assert_int_equal(reserve_check(topfd, 0, &st, NULL), RESERVE_RELEASED);
    assert_false(st.present);
    assert_int_equal(reserve_size(topfd, NULL), -1);

    /* a directory at the name is an error, not something to delete */
    assert_int_equal(mkdirat(topfd, RESERVE_NAME, 0700), 0);
    err_clear(&e);
    assert_true(reserve_check(topfd, MiB, &st, &e) < 0);
    assert_true(err_isset(&e));
    assert_int_equal(unlinkat(topfd, RESERVE_NAME, AT_REMOVEDIR), 0);
}

/* In the child: a failed check exits with its line. */
#define CHECK(c)                                                    \
    do {                                                            \
        if (!(c)) {                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
            _exit(1);                                               \
        }                                                           \
    } while (0)

/* Writes filler until at most left bytes are free on fd's file system. */
static void
fill_to(int dirfd, int fd, uint64_t left)
{
    static char chunk[65536];
    for (;;) {
        struct statvfs v;
        CHECK(fstatvfs(dirfd, &v) == 0);
        uint64_t free_bytes = (uint64_t)v.f_bfree * v.f_frsize; /* as reserve.c sees it as root */
        if (free_bytes <= left)
            return;
        uint64_t want = free_bytes - left;
        size_t n = want < sizeof(chunk) ? (size_t)want : sizeof(chunk);
        if (write(fd, chunk, n) <= 0)
            return;
    }
}

static void
test_low_and_high_water(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char fs[300];
        struct reserve_state st;
        (void)snprintf(fs, sizeof(fs), "%s/fs", top);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mkdir(fs, 0700) < 0 || mount("tmpfs", fs, "tmpfs", 0, "size=16m") < 0)
            _exit(77);
        int d = open(fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(d >= 0);
        const uint64_t size = 4 * MiB; /* low 1 MiB, high 8 MiB */

        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_CREATED);
        CHECK(st.present && st.free_bytes <= 16 * MiB && st.free_bytes >= st.high_bytes);

        /* fill to the last byte: released, and the room is there again */
        int f = openat(d, "filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        CHECK(f >= 0);
        fill_to(d, f, 0);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_RELEASED);
        CHECK(!st.present && st.free_bytes < st.low_bytes);
        CHECK(reserve_size(d, NULL) == -1);
        struct statvfs v;
        CHECK(fstatvfs(d, &v) == 0 && (uint64_t)v.f_bfree * v.f_frsize >= size);

        /* some room used again, more than low but less than high: neither
         * released again (nothing to release) nor created */
        fill_to(d, f, 2 * MiB);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_UNCHANGED);
        CHECK(!st.present);
        CHECK(ftruncate(f, 0) == 0);
        fill_to(d, f, 8 * MiB - 64 * 1024);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_UNCHANGED);
        CHECK(!st.present && st.free_bytes < st.high_bytes);

        /* free space back above high: created again, and a created reserve
         * leaves more than the low-water mark, so the next check keeps it */
        CHECK(ftruncate(f, 0) == 0);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_CREATED);
        CHECK(st.present && st.free_bytes >= st.high_bytes);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_UNCHANGED);
        CHECK(st.present);

        /* between low and high with the reserve there: kept */
        fill_to(d, f, 2 * MiB);
        CHECK(reserve_check(d, size, &st, NULL) == RESERVE_UNCHANGED);
        CHECK(st.present);

        /* a reserve bigger than the whole file system is never made, and
         * trying is not an error */
        CHECK(ftruncate(f, 0) == 0);
        CHECK(reserve_check(d, 0, &st, NULL) == RESERVE_RELEASED);
        CHECK(reserve_check(d, 64 * MiB, &st, NULL) == RESERVE_UNCHANGED);
        CHECK(!st.present && reserve_size(d, NULL) == -1);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        skip(); /* no mount namespace or tmpfs here */
        return;
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_create_keep_replace, setup, teardown),
            cmocka_unit_test_setup_teardown(test_low_and_high_water, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
