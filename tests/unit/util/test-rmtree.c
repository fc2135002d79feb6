/*
 * test-rmtree.c - rm_tree_at() on trees that fight back: 1,500 levels under
 * a 32-descriptor limit, the entry budget, a directory moved out of the
 * tree while it is being removed (the walk must never follow it there),
 * and an error that names the entry that really failed. fd.c is included
 * with unlinkat() routed through a hook, so the move happens at a chosen
 * moment instead of by luck. Everything runs chrooted in a tmpfs of a
 * private mount namespace: a walk that climbs out of its tree can only
 * empty that tmpfs. Needs root (mounts, chroot): skipped otherwise.
 */
#include <dirent.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

/* Every unlinkat() of fd.c goes through hook_unlinkat(). */
int hook_unlinkat(int dfd, const char *name, int flags);
#define unlinkat hook_unlinkat
#include "util/fd.c"
#undef unlinkat

static int procfd = -1;       /* /proc of the host, opened before the chroot */
static const char *hook_name; /* unlinking this name runs hook_fn first */
static void (*hook_fn)(void);

int
hook_unlinkat(int dfd, const char *name, int flags)
{
    if (hook_name && !strcmp(name, hook_name)) {
        hook_name = NULL;
        hook_fn();
    }
    return (int)syscall(SYS_unlinkat, dfd, name, flags);
}

static int
count_open_fds(void)
{
    int fd = openat(procfd, "self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    DIR *d = fdopendir(fd);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* minus the one counting */
}

static bool
exists(const char *p)
{
    struct stat st;
    return fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* mkdir base, then depth levels named "d" below it, each with a file "f". */
static void
make_chain(const char *base, int depth)
{
    assert_int_equal(mkdir(base, 0755), 0);
    int cur = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(cur >= 0);
    for (int i = 0; i < depth; i++) {
        assert_int_equal(write_file_at(cur, "f", "x", 0644), 0);
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    close(cur);
}

/* "base/d/d/.../d" with levels "d"s. */
static void
chain_path(char *out, size_t n, const char *base, int levels)
{
    size_t o = (size_t)snprintf(out, n, "%s", base);
    for (int i = 0; i < levels && o + 3 < n; i++)
        o += (size_t)snprintf(out + o, n - o, "/d");
}

static void
test_deep_few_fds(void **state)
{
    struct rm_tree t = {.max = 1000000};
    struct rlimit old, low;
    (void)state;

    make_chain("/deep", 1500);
    int before = count_open_fds();
    assert_true(before < 12);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 32;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int r = rm_tree_at(AT_FDCWD, "/deep", &t);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(r, 0);
    assert_false(exists("/deep"));
    /* 1,500 files and 1,500 directories; a level found again by ".." is
     * read again, which sees its emptied child once more. */
    assert_in_range(t.seen, 3000, 4500);
    assert_int_equal(count_open_fds(), before);
}

/* Even fewer descriptors than the window wants: the walk shrinks it. */
static void
test_deep_tight_fds(void **state)
{
    struct rlimit old, low;
    (void)state;

    make_chain("/tight", 300);
    int before = count_open_fds();
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)before + 4;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int r = rm_rf_at(AT_FDCWD, "/tight");
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(r, 0);
    assert_false(exists("/tight"));
}

static void
test_budget(void **state)
{
    struct rm_tree t = {.max = 50};
    char name[32];
    (void)state;

    assert_int_equal(mkdir("/wide", 0755), 0);
    for (int i = 0; i < 100; i++) {
        (void)snprintf(name, sizeof(name), "/wide/f%d", i);
        assert_int_equal(write_file_at(AT_FDCWD, name, "", 0644), 0);
    }
    assert_int_equal(rm_tree_at(AT_FDCWD, "/wide", &t), -E2BIG);
    assert_int_equal(t.seen, 51);
    t.max = 0;
    assert_int_equal(rm_tree_at(AT_FDCWD, "/wide", &t), 0);
    assert_false(exists("/wide"));
}

/* Moves level 20 of /top (out of the walk's window of open streams while
 * it works on level 40) to /outside/moved. */
static void
move_level_20(void)
{
    char p[256];
    chain_path(p, sizeof(p), "/top", 20);
    assert_int_equal(rename(p, "/outside/moved"), 0);
}

static void
test_moved_out_under_the_walk(void **state)
{
    struct rm_tree t = {0};
    (void)state;

    assert_int_equal(mkdir("/outside", 0755), 0);
    assert_int_equal(write_file_at(AT_FDCWD, "/outside/canary", "keep", 0644), 0);
    assert_int_equal(mkdir("/outside/dir", 0755), 0);
    assert_int_equal(write_file_at(AT_FDCWD, "/outside/dir/canary", "keep", 0644), 0);
    make_chain("/top", 40);
    char p[256];
    chain_path(p, sizeof(p), "/top", 40);
    (void)strncat(p, "/trigger", sizeof(p) - strlen(p) - 1);
    assert_int_equal(write_file_at(AT_FDCWD, p, "", 0644), 0);
    hook_name = "trigger";
    hook_fn = move_level_20;

    /* Climbing by ".." from the moved directory leads into /outside: the
     * walk must see that it is not where it came from and start over. */
    assert_int_equal(rm_tree_at(AT_FDCWD, "/top", &t), 0);
    assert_null(hook_name); /* the move happened */
    assert_false(exists("/top"));
    assert_true(exists("/outside/canary"));
    assert_true(exists("/outside/dir/canary"));
    assert_true(exists("/outside/moved")); /* emptied below, maybe, but never removed */
}

/* A mount point 300 levels down cannot be removed: the error says so and
 * names it, instead of blaming depth or symlinks. */
static void
test_true_cause(void **state)
{
    struct rm_tree t = {0};
    char p[1024];
    (void)state;

    make_chain("/busy", 300);
    chain_path(p, sizeof(p), "/busy", 300);
    (void)strncat(p, "/mnt", sizeof(p) - strlen(p) - 1);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(mount("tmpfs", p, "tmpfs", 0, NULL), 0);
    assert_int_equal(rm_tree_at(AT_FDCWD, "/busy", &t), -EBUSY);
    assert_string_equal(t.failed, "mnt");
    assert_int_equal(t.depth, 301); /* in the 300th level below /busy */
    assert_int_equal(umount2(p, MNT_DETACH), 0);
    assert_int_equal(rm_tree_at(AT_FDCWD, "/busy", &t), 0);
    assert_false(exists("/busy"));
}

/* An immutable-style refusal on a file surfaces as that file's EPERM, not
 * as the EISDIR/ENOTDIR dance of telling files from directories. */
static void
test_file_cause(void **state)
{
    struct rm_tree t = {0};
    (void)state;

    assert_int_equal(mkdir("/sticky", 01777), 0);
    assert_int_equal(chmod("/sticky", 01777), 0);
    assert_int_equal(write_file_at(AT_FDCWD, "/sticky/f", "", 0644), 0);
    assert_int_equal(chown("/sticky/f", 1, 1), 0);
    /* As another uid in a sticky directory, another's file is EPERM. */
    assert_int_equal(syscall(SYS_setresuid, -1, 2, -1), 0);
    int r = rm_tree_at(AT_FDCWD, "/sticky/f", &t);
    assert_int_equal(syscall(SYS_setresuid, -1, 0, -1), 0);
    assert_int_equal(r, -EPERM);
    assert_int_equal(rm_tree_at(AT_FDCWD, "/sticky", &t), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_deep_few_fds), cmocka_unit_test(test_deep_tight_fds),
            cmocka_unit_test(test_budget),       cmocka_unit_test(test_moved_out_under_the_walk),
            cmocka_unit_test(test_true_cause),   cmocka_unit_test(test_file_cause),
    };
    if (geteuid() != 0) {
        fprintf(stderr, "test-rmtree: needs root (mounts, chroot), skipping\n");
        return 77;
    }
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        fprintf(stderr, "test-rmtree: no private mount namespace (%s), skipping\n",
                strerror(errno));
        return 77;
    }
    procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* Over /tmp of this namespace only: nothing is left behind. /proc
     * inside it is for LeakSanitizer at exit. */
    if (procfd < 0 || mount("tmpfs", "/tmp", "tmpfs", 0, "mode=0755") < 0 || chroot("/tmp") < 0 ||
        chdir("/") < 0 || mkdir("/proc", 0555) < 0 || mount("proc", "/proc", "proc", 0, NULL) < 0) {
        fprintf(stderr, "test-rmtree: cannot set up the tmpfs root: %s\n", strerror(errno));
        return 1;
    }
    /* A walk that lost its way may loop forever: end it as a failure. */
    alarm(120);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
