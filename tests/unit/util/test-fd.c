/*
 * test-fd.c - descriptor helpers and trusted-tree utilities: rm_rf_at() on a
 * 3000-level tree under a 32-descriptor limit, never following symlinks out
 * of the tree; small-file helpers (limits, O_NOFOLLOW), mkdir_p(),
 * copy_file_at(), fd_copy_sparse() on a 10 GiB sparse file, read_full()/write_full().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fd.h"

static char top[256];
static int topfd = -1;

static int
setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-fd-XXXXXX", tmp) >= (int)sizeof(top) ||
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
    topfd = -1;
    return rm_rf_at(AT_FDCWD, top) == 0 ? 0 : -1;
}

static bool
exists_at(int dirfd, const char *p)
{
    struct stat st;
    return fstatat(dirfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int
count_entries(int dirfd, const char *p)
{
    int fd = openat(dirfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    DIR *d = fdopendir(fd);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static int
count_open_fds(void)
{
    return count_entries(AT_FDCWD, "/proc/self/fd") - 1; /* minus the one counting */
}

/* Builds a chain of depth directories named name below dirfd/base, with a
 * file in every 100th level. */
static void
make_chain(int dirfd, const char *base, int depth)
{
    assert_int_equal(mkdirat(dirfd, base, 0755), 0);
    int cur = openat(dirfd, base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(cur >= 0);
    for (int i = 0; i < depth; i++) {
        if (i % 100 == 0)
            assert_int_equal(write_file_at(cur, "f", "x", 0644), 0);
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    close(cur);
}

static void
test_rm_rf_deep_with_few_fds(void **state)
{
    struct rlimit old, low;
    (void)state;

    make_chain(topfd, "deep", 3000);
    int fds_before = count_open_fds();

    /* at most 32 descriptors: walking 3000 levels while holding one
     * descriptor per level would fail with EMFILE */
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 32;
    assert_true(fds_before < 24);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int r = rm_rf_at(topfd, "deep");
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(r, 0);
    assert_false(exists_at(topfd, "deep"));
    assert_int_equal(count_open_fds(), fds_before); /* and none leaked */
}

static void
test_rm_rf_wide(void **state)
{
    char name[32];
    (void)state;

    /* many siblings at several levels, with empty and non-empty dirs */
    assert_int_equal(mkdirat(topfd, "wide", 0755), 0);
    int w = openat(topfd, "wide", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(w >= 0);
    for (int i = 0; i < 50; i++) {
        (void)snprintf(name, sizeof(name), "dir%d", i);
        assert_int_equal(mkdirat(w, name, 0755), 0);
        int d = openat(w, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(d >= 0);
        for (int k = 0; k < i % 7; k++) {
            (void)snprintf(name, sizeof(name), "f%d", k);
            assert_int_equal(write_file_at(d, name, "data", 0600), 0);
            (void)snprintf(name, sizeof(name), "sub%d", k);
            assert_int_equal(mkdirat(d, name, 0700), 0);
        }
        /* an empty directory with mode 0: removing it needs only its
         * parent's permissions */
        assert_int_equal(mkdirat(d, "locked", 0), 0);
        close(d);
        (void)snprintf(name, sizeof(name), "file%d", i);
        assert_int_equal(write_file_at(w, name, "x", 0644), 0);
    }
    assert_int_equal(mkfifoat(w, "fifo", 0644), 0);
    close(w);
    assert_int_equal(rm_rf_at(topfd, "wide"), 0);
    assert_false(exists_at(topfd, "wide"));
}

static void
test_rm_rf_never_follows_symlinks(void **state)
{
    char target[300];
    (void)state;

    /* outside/ holds what must survive */
    assert_int_equal(mkdirat(topfd, "outside", 0755), 0);
    assert_int_equal(mkdirat(topfd, "outside/dir", 0755), 0);
    assert_int_equal(write_file_at(topfd, "outside/keep", "keep", 0644), 0);
    assert_int_equal(write_file_at(topfd, "outside/dir/keep", "keep", 0644), 0);

    assert_int_equal(mkdirat(topfd, "tree", 0755), 0);
    assert_int_equal(mkdirat(topfd, "tree/a", 0755), 0);
    assert_int_equal(mkdirat(topfd, "tree/a/b", 0755), 0);
    (void)snprintf(target, sizeof(target), "%s/outside", top);
    assert_int_equal(symlinkat(target, topfd, "tree/abs"), 0);
    assert_int_equal(symlinkat(target, topfd, "tree/a/b/abs"), 0);
    assert_int_equal(symlinkat("../../../outside/dir", topfd, "tree/a/b/rel"), 0);
    assert_int_equal(symlinkat("../outside/keep", topfd, "tree/file-link"), 0);
    assert_int_equal(symlinkat("..", topfd, "tree/a/up"), 0);
    assert_int_equal(symlinkat("/", topfd, "tree/a/root"), 0);
    assert_int_equal(symlinkat("loop", topfd, "tree/loop"), 0);

    assert_int_equal(rm_rf_at(topfd, "tree"), 0);
    assert_false(exists_at(topfd, "tree"));
    assert_true(exists_at(topfd, "outside/keep"));
    assert_true(exists_at(topfd, "outside/dir/keep"));
    assert_int_equal(count_entries(topfd, "outside"), 2);
    assert_int_equal(count_entries(topfd, "outside/dir"), 1);

    /* the top name itself being a symlink to a directory: only the link goes */
    assert_int_equal(symlinkat(target, topfd, "link-to-outside"), 0);
    assert_int_equal(rm_rf_at(topfd, "link-to-outside"), 0);
    assert_false(exists_at(topfd, "link-to-outside"));
    assert_int_equal(count_entries(topfd, "outside"), 2);
}

static void
test_rm_rf_simple_cases(void **state)
{
    (void)state;
    assert_int_equal(rm_rf_at(topfd, "missing"), 0);
    assert_int_equal(write_file_at(topfd, "file", "x", 0644), 0);
    assert_int_equal(rm_rf_at(topfd, "file"), 0);
    assert_false(exists_at(topfd, "file"));
    assert_int_equal(mkdirat(topfd, "empty", 0755), 0);
    assert_int_equal(rm_rf_at(topfd, "empty"), 0);
    assert_false(exists_at(topfd, "empty"));
    assert_int_equal(rm_rf_at(topfd, "missing/deeper"), 0); /* -ENOENT is 0 */
    assert_int_equal(write_file_at(topfd, "file", "x", 0644), 0);
    assert_int_equal(rm_rf_at(topfd, "file/x"), -ENOTDIR);
    assert_int_equal(rm_rf_at(-1, "x"), -EBADF);
}

static void
test_dir_names(void **state)
{
    (void)state;
    char **v = NULL;
    size_t n = 99;
    assert_int_equal(fd_dir_names(topfd, 10, &v, &n), 0);
    assert_int_equal(n, 0);
    fd_names_free(v, n);
    static const char *const names[] = {"b", "a", "C", "a.b", "\xc3\xa9"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(write_file_at(topfd, names[i], "", 0644), 0);
    assert_int_equal(symlinkat("/nowhere", topfd, "z"), 0);
    /* an O_PATH descriptor lists too, and its offset is not used */
    int pfd = openat(topfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(pfd >= 0);
    assert_int_equal(fd_dir_names(pfd, 6, &v, &n), 0);
    assert_int_equal(n, 6);
    static const char *const sorted[] = {"C", "a", "a.b", "b", "z", "\xc3\xa9"};
    for (size_t i = 0; i < 6; i++)
        assert_string_equal(v[i], sorted[i]);
    fd_names_free(v, n);
    assert_int_equal(fd_dir_names(pfd, 5, &v, &n), -E2BIG);
    assert_int_equal(fd_dir_names(topfd, 6, &v, &n), 0); /* again: same answer */
    assert_int_equal(n, 6);
    fd_names_free(v, n);
    assert_int_equal(write_file_at(topfd, "f", "", 0644), 0);
    int ffd = openat(topfd, "f", O_RDONLY | O_CLOEXEC);
    assert_int_equal(fd_dir_names(ffd, 10, &v, &n), -ENOTDIR);
    close(ffd);
    close(pfd);
}

/* --- small files --- */

static void
test_write_and_read_file(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "old contents replaced"), 0);
    assert_int_equal(write_file_at(topfd, "f", "hello\n", 0640), 0);
    struct stat st;
    assert_int_equal(fstatat(topfd, "f", &st, 0), 0);
    assert_int_equal(st.st_mode & 0777, 0640);            /* umask 022, set in main */
    assert_int_equal(read_file_at(topfd, "f", 6, &b), 0); /* exactly max */
    assert_string_equal(b.data, "hello\n");
    assert_int_equal(read_file_at(topfd, "f", 5, &b), -EFBIG);
    /* truncates on rewrite */
    assert_int_equal(write_file_at(topfd, "f", "hi", 0640), 0);
    assert_int_equal(read_file_at(topfd, "f", 100, &b), 0);
    assert_string_equal(b.data, "hi");
    assert_int_equal(write_file_at(topfd, "f", "", 0640), 0);
    assert_int_equal(read_file_at(topfd, "f", 0, &b), 0);
    assert_int_equal(b.len, 0);

    /* larger than one read */
    char *big = malloc(100001);
    assert_non_null(big);
    memset(big, 'q', 100000);
    big[100000] = '\0';
    assert_int_equal(write_file_at(topfd, "big", big, 0644), 0);
    assert_int_equal(read_file_at(topfd, "big", 100000, &b), 0);
    assert_int_equal(b.len, 100000);
    assert_memory_equal(b.data, big, 100000);
    assert_int_equal(read_file_at(topfd, "big", 99999, &b), -EFBIG);
    free(big);
    /* the buffer's own limit applies too */
    struct buf small;
    buf_init(&small, 3);
    assert_int_equal(read_file_at(topfd, "f", 100, &small), 0);
    assert_int_equal(write_file_at(topfd, "f", "toolong", 0640), 0);
    assert_int_equal(read_file_at(topfd, "f", 100, &small), -EFBIG);
    buf_done(&small);

    /* symlinks are not followed, either way */
    assert_int_equal(write_file_at(topfd, "target", "target", 0644), 0);
    assert_int_equal(symlinkat("target", topfd, "link"), 0);
    assert_int_equal(write_file_at(topfd, "link", "evil", 0644), -ELOOP);
    assert_int_equal(write_existing_at(topfd, "link", "evil"), -ELOOP);
    assert_int_equal(read_file_at(topfd, "link", 100, &b), -ELOOP);
    assert_int_equal(read_file_at(topfd, "target", 100, &b), 0);
    assert_string_equal(b.data, "target");

    assert_int_equal(read_file_at(topfd, "missing", 100, &b), -ENOENT);
    assert_int_equal(write_existing_at(topfd, "missing", "x"), -ENOENT);
    assert_false(exists_at(topfd, "missing"));
    assert_int_equal(write_existing_at(topfd, "target", "new"), 0);
    assert_int_equal(read_file_at(topfd, "target", 100, &b), 0);
    assert_string_equal(b.data, "newget"); /* no truncation: cgroupfs semantics */
    buf_done(&b);
}

static void
test_mkdir_p(void **state)
{
    char p[512];
    struct stat st;
    (void)state;

    (void)snprintf(p, sizeof(p), "%s/m/n/o", top);
    assert_int_equal(mkdir_p(p, 0755), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(mkdir_p(p, 0755), 0); /* existing is fine */
    (void)snprintf(p, sizeof(p), "%s/m//n///o2/", top);
    assert_int_equal(mkdir_p(p, 0755), 0);
    assert_true(exists_at(topfd, "m/n/o2"));

    assert_int_equal(write_file_at(topfd, "m/file", "x", 0644), 0);
    (void)snprintf(p, sizeof(p), "%s/m/file", top);
    assert_int_equal(mkdir_p(p, 0755), -ENOTDIR);
    (void)snprintf(p, sizeof(p), "%s/m/file/sub", top);
    assert_int_equal(mkdir_p(p, 0755), -ENOTDIR);
    assert_int_equal(mkdir_p("", 0755), -EINVAL);
    char *huge = malloc(PATH_MAX + 10);
    assert_non_null(huge);
    memset(huge, 'a', PATH_MAX + 9);
    huge[PATH_MAX + 9] = '\0';
    assert_int_equal(mkdir_p(huge, 0755), -EINVAL);
    free(huge);
}

/* A 10 GiB file with three 64 KiB data extents (start, middle, end). */
static const off_t sparse_at[] = {0, 5ll << 30, (10ll << 30) - 65536};

static void
make_sparse(int dirfd, const char *name)
{
    char data[65536];
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 10ll << 30), 0);
    for (size_t i = 0; i < (sizeof(sparse_at) / sizeof(sparse_at[0])); i++) {
        memset(data, 'a' + (int)i, sizeof(data));
        assert_int_equal(pwrite(fd, data, sizeof(data), sparse_at[i]), (ssize_t)sizeof(data));
    }
    close(fd);
}

/* Same length, same bytes where the data is, holes elsewhere. */
static void
same_sparse(int dirfd, const char *name)
{
    char data[65536], want[65536];
    struct stat st;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 10ll << 30);
    assert_true(st.st_blocks * 512 < 4 << 20); /* stayed sparse */
    for (size_t i = 0; i < (sizeof(sparse_at) / sizeof(sparse_at[0])); i++) {
        memset(want, 'a' + (int)i, sizeof(want));
        assert_int_equal(pread(fd, data, sizeof(data), sparse_at[i]), (ssize_t)sizeof(data));
        assert_memory_equal(data, want, sizeof(data));
        /* and zeros (a hole) right after it, unless at the end */
        if (sparse_at[i] + 65536 < st.st_size) {
            memset(want, 0, sizeof(want));
            assert_int_equal(pread(fd, data, 4096, sparse_at[i] + 65536), 4096);
            assert_memory_equal(data, want, 4096);
        }
    }
    close(fd);
}

static void
test_copy_sparse(void **state)
{
    char buf[65536];
    uint64_t data = 0, budget;
    (void)state;

    make_sparse(topfd, "sparse");
    int in = openat(topfd, "sparse", O_RDONLY | O_CLOEXEC);
    int out = openat(topfd, "copy", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(in >= 0 && out >= 0);
    budget = 1 << 20;
    assert_int_equal(fd_copy_sparse(in, out, 10ull << 30, buf, sizeof(buf), &budget, &data), 0);
    assert_int_equal(data, 3 * 65536);
    assert_int_equal(budget, (1 << 20) - 3 * 65536);
    close(out);
    same_sparse(topfd, "copy");
    /* the budget counts data only, and stops at it */
    out = openat(topfd, "copy2", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    budget = 2 * 65536;
    assert_int_equal(fd_copy_sparse(in, out, 10ull << 30, buf, sizeof(buf), &budget, &data),
                     -EFBIG);
    close(out);
    close(in);
    /* copy_file_at keeps holes too */
    assert_int_equal(copy_file_at(topfd, "sparse", topfd, "copy3", 0644), 0);
    same_sparse(topfd, "copy3");
}

static void
test_copy_file_at(void **state)
{
    struct buf b;
    struct stat st;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(write_file_at(topfd, "src", "payload", 0600), 0);
    assert_int_equal(write_file_at(topfd, "dst", "old", 0644), 0);
    assert_int_equal(fstatat(topfd, "dst", &st, 0), 0);
    ino_t old_ino = st.st_ino;
    assert_int_equal(copy_file_at(topfd, "src", topfd, "dst", 0604), 0);
    assert_int_equal(read_file_at(topfd, "dst", 100, &b), 0);
    assert_string_equal(b.data, "payload");
    assert_int_equal(fstatat(topfd, "dst", &st, 0), 0);
    assert_int_equal(st.st_mode & 0777, 0604); /* exact, whatever the umask */
    assert_true(st.st_ino != old_ino);         /* replaced by rename, not rewritten */

    /* non-regular sources are refused and leave nothing behind */
    assert_int_equal(mkdirat(topfd, "dir", 0755), 0);
    assert_int_equal(copy_file_at(topfd, "dir", topfd, "dst2", 0644), -EINVAL);
    assert_int_equal(copy_file_at(topfd, "missing", topfd, "dst2", 0644), -ENOENT);
    assert_false(exists_at(topfd, "dst2"));
    /* a destination that cannot be replaced: the temporary is removed */
    assert_int_equal(mkdirat(topfd, "dir/sub", 0755), 0);
    assert_true(copy_file_at(topfd, "src", topfd, "dir", 0644) < 0);
    int n = count_entries(topfd, ".");
    assert_int_equal(n, 3); /* src dst dir: no .tmp-* left */
    buf_done(&b);
}

static void
test_read_write_full_and_flags(void **state)
{
    int p[2];
    char in[100000], out[100000];
    (void)state;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(fd_set_nonblock(p[0], true), 0);
    assert_true(fcntl(p[0], F_GETFL) & O_NONBLOCK);
    assert_int_equal(fd_set_nonblock(p[0], true), 0);
    assert_int_equal(fd_set_nonblock(p[0], false), 0);
    assert_false(fcntl(p[0], F_GETFL) & O_NONBLOCK);
    assert_int_equal(fd_set_cloexec(p[0], false), 0);
    assert_false(fcntl(p[0], F_GETFD) & FD_CLOEXEC);
    assert_int_equal(fd_set_cloexec(p[0], true), 0);
    assert_true(fcntl(p[0], F_GETFD) & FD_CLOEXEC);
    assert_int_equal(fd_set_nonblock(-1, true), -EBADF);
    assert_int_equal(fd_set_cloexec(-1, true), -EBADF);

    /* short writes and reads are completed; EOF gives a short count */
    assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 4096, 1);
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (char)(i * 31 + 7);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        _exit(write_full(p[1], in, sizeof(in)) == 0 ? 0 : 1);
    }
    close(p[1]);
    assert_int_equal(read_full(p[0], out, 50000), 50000);
    assert_int_equal(read_full(p[0], out + 50000, sizeof(out)), 50000);
    assert_memory_equal(in, out, sizeof(in));
    assert_int_equal(read_full(p[0], out, 10), 0);
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    assert_int_equal(read_full(-1, out, 1), -EBADF);
    assert_int_equal(write_full(-1, in, 1), -EBADF);
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(write_full(p[1], in, 1), -EPIPE);
    close(p[1]);
}

int
main(void)
{
    umask(022);
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_rm_rf_deep_with_few_fds, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rm_rf_wide, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rm_rf_never_follows_symlinks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rm_rf_simple_cases, setup, teardown),
            cmocka_unit_test_setup_teardown(test_dir_names, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_and_read_file, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
            cmocka_unit_test_setup_teardown(test_copy_file_at, setup, teardown),
            cmocka_unit_test_setup_teardown(test_copy_sparse, setup, teardown),
            cmocka_unit_test_setup_teardown(test_read_write_full_and_flags, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
