/*
 * test-resolve.c - the resolver (util/path.h) in every mode against a real
 * tree of hostile symlinks: absolute and relative ones leading out, one
 * that goes in and then out, loops, dangling ones, magic links of a procfs
 * mounted inside, a mount point, and directories swapped for symlinks
 * between calls and - by a second thread - during them. Whatever succeeds
 * must be inside the root (checked by the kernel's own name of the
 * descriptor), every escape of PATH_BENEATH fails with -EXDEV or -ELOOP,
 * and nothing outside is ever created or opened. Also: path_parent(),
 * path_open_parent(), path_mkdirat() in both modes with owners and exact
 * modes, the fallback walk and -ENOSYS without openat2 (a seccomp filter in
 * a child), and the errno -> message table word for word.
 *
 * Needs root for chown, mounts and a private mount namespace; the parts
 * that need them skip without.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "util/err.h"
#include "util/fd.h"
#include "util/path.h"

static char top[PATH_MAX];      /* the test's directory */
static char rootpath[PATH_MAX]; /* top/root, as the kernel names it */
static int root = -1, outfd = -1;
static bool private_ns;          /* mounts made here vanish with us */
static bool have_proc, have_mnt; /* procfs at root/proc, a tmpfs at root/mnt */

static void
mk(int dirfd, const char *p)
{
    if (mkdirat(dirfd, p, 0755) < 0)
        fail_msg("mkdir %s: %m", p);
}

static void
ln(const char *target, const char *p)
{
    if (symlinkat(target, root, p) < 0)
        fail_msg("symlink %s: %m", p);
}

/* Names below outside, recursively: "what is there" to compare. */
static size_t
count_tree(int dfd)
{
    char **names = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(fd_dir_names(dfd, 1000, &names, &n), 0);
    total = n;
    for (size_t i = 0; i < n; i++) {
        int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            total += count_tree(sub);
            close(sub);
        }
    }
    fd_names_free(names, n);
    return total;
}

static size_t outside_entries;

/* outside holds exactly what setup put there, the secret unchanged. */
static void
outside_untouched(void)
{
    char buf[64];
    struct stat st;
    assert_int_equal(count_tree(outfd), outside_entries);
    int fd = openat(outfd, "secret", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    assert_int_equal(n, 7);
    assert_memory_equal(buf, "secret\n", 7);
    assert_int_equal(fstatat(outfd, "secret", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
}

/* Whether fd is the root or below it, by the kernel's name for it. */
static bool
inside(int fd)
{
    char p[64], got[PATH_MAX];
    (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, got, sizeof(got) - 1);
    if (n < 0)
        return false;
    got[n] = '\0';
    size_t rl = strlen(rootpath);
    return strncmp(got, rootpath, rl) == 0 && (got[rl] == '\0' || got[rl] == '/');
}

static char failures[16384];
static size_t nfailures;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
note(const char *fmt, ...)
{
    size_t n = strlen(failures);
    va_list ap;
    va_start(ap, fmt);
    if (n + 2 < sizeof(failures)) {
        failures[n++] = '\n';
        (void)vsnprintf(failures + n, sizeof(failures) - n, fmt, ap);
    }
    va_end(ap);
    nfailures++;
}

static void
report(void)
{
    if (nfailures)
        fail_msg("%zu case(s) failed:%s", nfailures, failures);
}

static int
setup(void **state)
{
    char p[PATH_MAX + 64];
    (void)state;

    failures[0] = '\0';
    nfailures = 0;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-resolve-XXXXXX", tmp) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    int t = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(t >= 0);
    mk(t, "outside");
    mk(t, "outside/dir");
    mk(t, "root");
    outfd = openat(t, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    root = openat(t, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(t);
    assert_true(outfd >= 0 && root >= 0);
    assert_int_equal(write_file_at(outfd, "secret", "secret\n", 0600), 0);
    assert_int_equal(fchmodat(outfd, "secret", 0600, 0), 0);
    assert_true(realpath(top, p) != NULL);
    assert_true(strlen(p) + 6 < sizeof(rootpath));
    (void)snprintf(rootpath, sizeof(rootpath), "%s/root", p);

    mk(root, "a");
    mk(root, "a/b");
    assert_int_equal(write_file_at(root, "a/b/c.txt", "inside\n", 0644), 0);
    assert_int_equal(write_file_at(root, "a/file", "file\n", 0644), 0);
    mk(root, "etc");
    mk(root, "sw");
    mk(root, "proc");
    mk(root, "mnt");
    (void)snprintf(p, sizeof(p), "%s/outside", top);
    ln(p, "abs");
    ln(p, "sw.alt");
    (void)snprintf(p, sizeof(p), "%s/outside/secret", top);
    ln(p, "absfile");
    ln("/", "slash");
    ln("/etc", "absin");
    ln("../outside", "rel");
    ln("../outside/secret", "relfile");
    ln("a/../../outside", "reldeep");
    ln("../..", "up2");
    ln("..", "up1");
    ln("a/b", "in");
    ln("a/b/c.txt", "infile");
    ln("loop2", "loop1");
    ln("loop1", "loop2");
    ln("self", "self");
    ln("nonexistent", "dangling");
    ln("../outside/nonexistent", "danglingout");
    ln("/proc/self/root", "magic");
    ln("proc/self/cwd", "magicrel");
    ln("../../rel", "a/b/hop");
    ln("../../../../../../../../../../../../../../../../../../../../etc", "deepup");
    have_proc = have_mnt = false;
    if (private_ns) {
        (void)snprintf(p, sizeof(p), "%s/proc", rootpath);
        have_proc = mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0;
        (void)snprintf(p, sizeof(p), "%s/mnt", rootpath);
        have_mnt = mount("tmpfs", p, "tmpfs", 0, "size=1m") == 0;
        if (have_mnt)
            assert_int_equal(write_file_at(root, "mnt/x", "mnt\n", 0644), 0);
    }
    outside_entries = count_tree(outfd);
    return 0;
}

static int
teardown(void **state)
{
    char p[PATH_MAX + 16];
    (void)state;
    if (have_proc) {
        (void)snprintf(p, sizeof(p), "%s/proc", rootpath);
        (void)umount2(p, MNT_DETACH);
    }
    if (have_mnt) {
        (void)snprintf(p, sizeof(p), "%s/mnt", rootpath);
        (void)umount2(p, MNT_DETACH);
    }
    safe_close(root);
    safe_close(outfd);
    root = outfd = -1;
    (void)rm_rf_at(AT_FDCWD, top);
    return 0;
}

/* --- path text --- */

static void
test_parent(void **state)
{
    static const struct {
        const char *in;
        int r;
        const char *parent, *name;
    } cases[] = {
            {"a", 0, ".", "a"},           {"a/b", 0, "a", "b"},
            {"a/b/c", 0, "a/b", "c"},     {"/a", 0, "/", "a"},
            {"/a/b", 0, "/a", "b"},       {"/a/b/c", 0, "/a/b", "c"},
            {"...", 0, ".", "..."},       {"a/.x", 0, "a", ".x"},
            {"", -EINVAL, NULL, NULL},    {".", -EINVAL, NULL, NULL},
            {"/", -EINVAL, NULL, NULL},   {"a/", -EINVAL, NULL, NULL},
            {"/a/", -EINVAL, NULL, NULL}, {"a/.", -EINVAL, NULL, NULL},
            {"..", -EINVAL, NULL, NULL},  {"/a/..", -EINVAL, NULL, NULL},
    };
    char parent[PATH_MAX_LEN + 1], name[PATH_NAME_MAX + 1];
    (void)state;
    failures[0] = '\0';
    nfailures = 0;

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        int r = path_parent(cases[i].in, parent, sizeof(parent), name);
        if (r != cases[i].r) {
            note("path_parent(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
            continue;
        }
        if (r == 0 && (strcmp(parent, cases[i].parent) || strcmp(name, cases[i].name)))
            note("path_parent(\"%s\") = \"%s\" + \"%s\", want \"%s\" + \"%s\"", cases[i].in, parent,
                 name, cases[i].parent, cases[i].name);
    }
    report();

    /* a name of PATH_NAME_MAX bytes fits, one more does not; a parent that
     * does not fit the buffer */
    char in[PATH_NAME_MAX + 8];
    memset(in, 'n', sizeof(in));
    in[0] = '/';
    in[PATH_NAME_MAX + 1] = '\0';
    assert_int_equal(path_parent(in, parent, sizeof(parent), name), 0);
    assert_int_equal(strlen(name), PATH_NAME_MAX);
    in[PATH_NAME_MAX + 1] = 'n';
    in[PATH_NAME_MAX + 2] = '\0';
    assert_int_equal(path_parent(in, parent, sizeof(parent), name), -ENAMETOOLONG);
    assert_int_equal(path_parent("abcdef/x", parent, 6, name), -ENAMETOOLONG);
    assert_int_equal(path_parent("abcde/x", parent, 6, name), 0);
    assert_string_equal(parent, "abcde");
    assert_int_equal(path_parent("x", parent, 2, name), 0);
    assert_int_equal(path_parent("x", parent, 1, name), -ENAMETOOLONG);
}

/* --- opening --- */

/* What every mode must do with a path: for PATH_BENEATH refuse it as an
 * escape; for PATH_IN_ROOT anything goes as long as it stays inside. */
static const char *const escapes[] = {
        "abs",
        "abs/secret",
        "abs/dir",
        "absfile",
        "rel",
        "rel/secret",
        "relfile",
        "reldeep",
        "reldeep/secret",
        "up1",
        "up2",
        "up2/outside",
        "slash",
        "slash/etc",
        "danglingout",
        "in/hop",
        "in/hop/secret",
        "deepup",
        "..",
        "../outside",
        "../outside/secret",
        "a/../../outside/secret",
        "/etc",
        "/",
        "a/b/../../..",
        "magic",
        "magic/etc",
        "sw.alt/secret",
};

/* Paths that stay inside (some through symlinks inside). */
static const char *const insiders[] = {
        ".", "a", "a/b", "a/b/c.txt", "a/file", "in", "infile", "in/c.txt", "etc", "sw",
};

static const char *const loops[] = {"loop1", "loop2", "self", "loop1/x"};

static void
check_open(const char *path, int flags, unsigned how, bool escape)
{
    int fd = path_openat(root, path, flags, 0, how);
    if (fd >= 0) {
        bool in = inside(fd);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        close(fd);
        if (!in)
            note("path_openat(\"%s\", %#x, how %#x) opened something outside", path,
                 (unsigned)flags, how);
        /* PATH_BENEATH: an O_PATH|O_NOFOLLOW fd of a final link is the
         * link itself, inside; anything else was an escape followed. */
        else if (escape && (how & PATH_BENEATH) &&
                 !((flags & O_PATH) && (flags & O_NOFOLLOW) && S_ISLNK(st.st_mode)))
            note("path_openat(\"%s\", %#x, how %#x) succeeded", path, (unsigned)flags, how);
        return;
    }
    if (escape && (how & PATH_BENEATH) && fd != -EXDEV && fd != -ELOOP)
        note("path_openat(\"%s\", %#x, how %#x) = %d, want -EXDEV or -ELOOP", path, (unsigned)flags,
             how, fd);
}

static const unsigned hows[] = {
        PATH_BENEATH, PATH_BENEATH | PATH_NO_XDEV, PATH_BENEATH | PATH_NO_SYMLINKS, PATH_WORKSPACE,
        PATH_IN_ROOT, PATH_IN_ROOT | PATH_NO_XDEV, PATH_IN_ROOT | PATH_NO_SYMLINKS,
};
static const int flag_sets[] = {
        O_PATH, O_PATH | O_NOFOLLOW, O_RDONLY, O_RDONLY | O_DIRECTORY, O_PATH | O_DIRECTORY,
};

static void
test_open_every_mode(void **state)
{
    (void)state;
    for (size_t h = 0; h < ELEMENTSOF(hows); h++)
        for (size_t f = 0; f < ELEMENTSOF(flag_sets); f++) {
            for (size_t i = 0; i < ELEMENTSOF(escapes); i++)
                check_open(escapes[i], flag_sets[f], hows[h], true);
            for (size_t i = 0; i < ELEMENTSOF(loops); i++) {
                int fd = path_openat(root, loops[i], flag_sets[f] & ~O_NOFOLLOW, 0, hows[h]);
                if (fd != -ELOOP)
                    note("path_openat(\"%s\", how %#x) = %d, want -ELOOP", loops[i], hows[h], fd);
                if (fd >= 0)
                    close(fd);
            }
        }
    /* writing, creating: nothing appears outside */
    for (size_t h = 0; h < ELEMENTSOF(hows); h++) {
        static const char *const news[] = {"abs/new",   "rel/new",     "reldeep/new",
                                           "up2/new",   "danglingout", "in/hop/new",
                                           "slash/new", "sw.alt/new",  "abs/dir/new"};
        for (size_t i = 0; i < ELEMENTSOF(news); i++) {
            int fd = path_openat(root, news[i], O_WRONLY | O_CREAT, 0644, hows[h]);
            if (fd >= 0) {
                if (!inside(fd))
                    note("path_openat(\"%s\", O_CREAT, how %#x) created outside", news[i], hows[h]);
                close(fd);
            }
        }
    }
    outside_untouched();
    report();
}

static void
test_open_inside(void **state)
{
    (void)state;
    for (size_t h = 0; h < ELEMENTSOF(hows); h++)
        for (size_t i = 0; i < ELEMENTSOF(insiders); i++) {
            int fd = path_openat(root, insiders[i], O_PATH, 0, hows[h]);
            bool through_link = !strncmp(insiders[i], "in", 2);
            if ((hows[h] & PATH_NO_SYMLINKS) && through_link) {
                if (fd != -ELOOP)
                    note("path_openat(\"%s\", how %#x) = %d, want -ELOOP", insiders[i], hows[h],
                         fd);
            } else if (fd < 0) {
                note("path_openat(\"%s\", how %#x) = %d, want an fd", insiders[i], hows[h], fd);
            } else if (!inside(fd)) {
                note("path_openat(\"%s\", how %#x): not inside", insiders[i], hows[h]);
            }
            if (fd >= 0)
                close(fd);
        }
    report();

    /* In the root, "/" and ".." are the root itself and absolute links
     * land inside it; beneath, both are ways out. */
    struct stat a, b;
    assert_int_equal(fstat(root, &a), 0);
    static const char *const is_root[] = {"/",   "..",       "../..",       "slash",
                                          "up2", "/a/../..", "a/b/../../.."};
    for (size_t i = 0; i < ELEMENTSOF(is_root); i++) {
        int fd = path_openat(root, is_root[i], O_RDONLY | O_DIRECTORY, 0, PATH_IN_ROOT);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &b), 0);
        assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
        close(fd);
        assert_int_equal(path_openat(root, is_root[i], O_RDONLY | O_DIRECTORY, 0, PATH_BENEATH),
                         -EXDEV);
    }
    int fd = path_openat(root, "absin", O_RDONLY | O_DIRECTORY, 0, PATH_IN_ROOT);
    assert_true(fd >= 0 && inside(fd));
    struct stat e;
    assert_int_equal(fstatat(root, "etc", &e, 0), 0);
    assert_int_equal(fstat(fd, &b), 0);
    assert_true(e.st_ino == b.st_ino);
    close(fd);
    /* the outside's names mean nothing in the root: "rel" is root/outside */
    assert_int_equal(path_openat(root, "rel/secret", O_RDONLY, 0, PATH_IN_ROOT), -ENOENT);
    assert_int_equal(path_openat(root, "abs", O_RDONLY, 0, PATH_IN_ROOT), -ENOENT);
    assert_int_equal(path_openat(root, "rel", O_RDONLY, 0, PATH_BENEATH), -EXDEV);

    /* a bad how */
    assert_int_equal(path_openat(root, "a", O_PATH, 0, 0), -EINVAL);
    assert_int_equal(path_openat(root, "a", O_PATH, 0, PATH_BENEATH | PATH_IN_ROOT), -EINVAL);
    assert_int_equal(path_openat(root, "a", O_PATH, 0, PATH_NO_XDEV), -EINVAL);
    assert_int_equal(path_openat(root, "a", O_PATH, 0, PATH_BENEATH | (1u << 20)), -EINVAL);
    /* descriptors are close-on-exec */
    fd = path_openat(root, "a", O_PATH, 0, PATH_IN_ROOT);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
}

static void
test_open_magic_and_mounts(void **state)
{
    (void)state;
    if (!have_proc || !have_mnt)
        skip();
    /* Magic links are refused in every mode, even reached through a link
     * that stays inside; their own O_PATH|O_NOFOLLOW fd is the link. */
    for (size_t h = 0; h < ELEMENTSOF(hows); h++) {
        static const char *const magics[] = {"proc/self/root", "proc/self/cwd",
                                             "magicrel",       "proc/self/root/etc",
                                             "proc/1/root",    "proc/self/fd/0"};
        for (size_t i = 0; i < ELEMENTSOF(magics); i++) {
            int fd = path_openat(root, magics[i], O_RDONLY, 0, hows[h]);
            if (fd >= 0) {
                note("path_openat(\"%s\", how %#x) followed a magic link", magics[i], hows[h]);
                close(fd);
            } else if (fd != -ELOOP && fd != -EXDEV && fd != -EACCES) {
                /* -EACCES: proc/1 may be someone we cannot trace */
                note("path_openat(\"%s\", how %#x) = %d, want -ELOOP or -EXDEV", magics[i], hows[h],
                     fd);
            }
        }
    }
    /* "magic" is /proc/self/root: in the root that is root/proc/self/root */
    assert_int_equal(path_openat(root, "magic", O_RDONLY, 0, PATH_IN_ROOT), -ELOOP);
    /* a mount point: crossed unless PATH_NO_XDEV */
    int fd = path_openat(root, "mnt/x", O_RDONLY, 0, PATH_BENEATH);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(path_openat(root, "mnt/x", O_RDONLY, 0, PATH_WORKSPACE), -EXDEV);
    assert_int_equal(path_openat(root, "mnt", O_PATH, 0, PATH_IN_ROOT | PATH_NO_XDEV), -EXDEV);
    assert_int_equal(path_openat(root, "proc/self", O_PATH, 0, PATH_WORKSPACE), -EXDEV);
    report();
}

static void
test_open_parent(void **state)
{
    char name[PATH_NAME_MAX + 1];
    struct stat st;
    (void)state;

    /* The final component is never followed: a link to the outside is
     * reached as the link, in its parent, in both modes. */
    static const unsigned modes[] = {PATH_WORKSPACE, PATH_VIEW, PATH_BENEATH | PATH_NO_SYMLINKS};
    for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
        int d = path_open_parent(root, "abs", modes[m], name);
        assert_true(d >= 0);
        assert_string_equal(name, "abs");
        assert_true(inside(d));
        assert_int_equal(fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(fcntl(d, F_GETFL) & O_PATH, O_PATH);
        close(d);
        d = path_open_parent(root, "a/b/hop", modes[m], name);
        assert_true(d >= 0);
        assert_string_equal(name, "hop");
        assert_int_equal(fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(st.st_mode));
        close(d);
    }
    int d = path_open_parent(root, "/a/b/c.txt", PATH_VIEW, name);
    assert_true(d >= 0);
    assert_string_equal(name, "c.txt");
    close(d);
    /* the parent is resolved as how says */
    assert_int_equal(path_open_parent(root, "abs/secret", PATH_WORKSPACE, name), -EXDEV);
    assert_int_equal(path_open_parent(root, "rel/secret", PATH_BENEATH, name), -EXDEV);
    assert_int_equal(path_open_parent(root, "rel/secret", PATH_VIEW, name), -ENOENT);
    assert_int_equal(path_open_parent(root, "in/c.txt", PATH_BENEATH | PATH_NO_SYMLINKS, name),
                     -ELOOP);
    assert_int_equal(path_open_parent(root, "a/file/x", PATH_WORKSPACE, name), -ENOTDIR);
    assert_int_equal(path_open_parent(root, ".", PATH_WORKSPACE, name), -EINVAL);
    assert_int_equal(path_open_parent(root, "/", PATH_VIEW, name), -EINVAL);
    outside_untouched();
}

/* A directory swapped for a symlink between two calls: the second one
 * sees the symlink and never follows it out. */
static void
test_open_swapped_between_calls(void **state)
{
    (void)state;
    assert_int_equal(write_file_at(root, "sw/f", "in\n", 0644), 0);
    assert_int_equal(write_file_at(outfd, "f", "out\n", 0644), 0);
    outside_entries++;
    for (size_t h = 0; h < ELEMENTSOF(hows); h++) {
        int fd = path_openat(root, "sw/f", O_RDONLY, 0, hows[h]);
        assert_true(fd >= 0);
        close(fd);
    }
    assert_int_equal(renameat2(root, "sw", root, "sw.alt", RENAME_EXCHANGE), 0);
    for (size_t h = 0; h < ELEMENTSOF(hows); h++) {
        int fd = path_openat(root, "sw/f", O_RDONLY, 0, hows[h]);
        if (fd >= 0) {
            assert_true(inside(fd)); /* only in the root: it is root/<top>/outside/f, missing */
            close(fd);
        }
        if (hows[h] & PATH_BENEATH)
            assert_true(fd == -EXDEV || fd == -ELOOP);
        else
            assert_true(fd == -ENOENT || fd == -ELOOP);
        char name[PATH_NAME_MAX + 1];
        int d = path_open_parent(root, "sw/f", hows[h], name);
        assert_true(d < 0 || inside(d));
        if (d >= 0)
            close(d);
    }
    outside_untouched();
}

/* --- mkdir -p --- */

static void
test_mkdir_beneath(void **state)
{
    struct stat st;
    bool created = true;
    (void)state;
    if (geteuid() != 0)
        skip(); /* chown to another uid */

    const struct path_mkdir m = {.mode = 0777, .uid = 12345, .gid = 23456};
    mode_t old = umask(022);
    int fd = path_mkdirat(root, "a/x/y", PATH_WORKSPACE, &m, &created);
    umask(old);
    assert_true(fd >= 0);
    assert_true(created);
    assert_int_equal(fcntl(fd, F_GETFL) & O_PATH, O_PATH);
    assert_true(inside(fd));
    close(fd);
    assert_int_equal(fstatat(root, "a/x/y", &st, 0), 0);
    assert_int_equal(st.st_uid, 12345);
    assert_int_equal(st.st_gid, 23456);
    assert_int_equal(st.st_mode & 07777, 0755); /* the umask applies: not exact */
    assert_int_equal(fstatat(root, "a/x", &st, 0), 0);
    assert_int_equal(st.st_uid, 12345);
    assert_int_equal(fstatat(root, "a", &st, 0), 0);
    assert_int_equal(st.st_uid, 0); /* it existed: not ours to chown */
    fd = path_mkdirat(root, "a/x/y", PATH_WORKSPACE, &m, &created);
    assert_true(fd >= 0);
    assert_false(created);
    close(fd);

    /* exact: the mode whatever the umask; uid -1 keeps the maker's */
    const struct path_mkdir ex = {.mode = 0750, .uid = (uid_t)-1, .gid = (gid_t)-1, .exact = true};
    old = umask(077);
    fd = path_mkdirat(root, "a/e1/e2", PATH_BENEATH, &ex, &created);
    umask(old);
    assert_true(fd >= 0 && created);
    close(fd);
    assert_int_equal(fstatat(root, "a/e1/e2", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0750);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(fstatat(root, "a/e1", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0750);

    /* existing through a symlink inside: fine when nothing needs making;
     * but never made through one, never through a file */
    const struct path_mkdir plain = {.mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1};
    fd = path_mkdirat(root, "in", PATH_WORKSPACE, &plain, NULL);
    assert_true(fd >= 0);
    close(fd);
    int r = path_mkdirat(root, "in/new", PATH_WORKSPACE, &plain, NULL);
    assert_true(r == -ELOOP || r == -ENOTDIR);
    r = path_mkdirat(root, "dangling/new", PATH_WORKSPACE, &plain, NULL);
    assert_true(r == -ELOOP || r == -ENOTDIR);
    assert_int_equal(fstatat(root, "a/b/new", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(fstatat(root, "nonexistent", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(path_mkdirat(root, "a/file", PATH_WORKSPACE, &plain, NULL), -ENOTDIR);
    assert_int_equal(path_mkdirat(root, "a/file/sub", PATH_WORKSPACE, &plain, NULL), -ENOTDIR);
    /* PATH_NO_SYMLINKS: not even an existing directory through one */
    assert_int_equal(path_mkdirat(root, "in", PATH_BENEATH | PATH_NO_SYMLINKS, &plain, NULL),
                     -ELOOP);
    assert_int_equal(path_mkdirat(root, "in/c", PATH_BENEATH | PATH_NO_SYMLINKS, &plain, NULL),
                     -ELOOP);

    /* every escape fails, nothing made outside */
    static const char *const bad[] = {"abs/new",   "abs/dir/new", "rel/new",     "reldeep/new",
                                      "up2/new",   "loop1/new",   "self/new",    "danglingout/new",
                                      "magic/new", "in/hop/new",  "slash/new",   "abs",
                                      "rel",       "up1",         "danglingout", "deepup/new",
                                      "../new",    "a/../../new", "sw.alt/new"};
    for (size_t h = 0; h < 4; h++) /* the PATH_BENEATH ones */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
            r = path_mkdirat(root, bad[i], hows[h], &plain, NULL);
            if (r >= 0) {
                note("path_mkdirat(\"%s\", how %#x) succeeded", bad[i], hows[h]);
                close(r);
            } else if (r != -EXDEV && r != -ELOOP && r != -ENOTDIR) {
                note("path_mkdirat(\"%s\", how %#x) = %d", bad[i], hows[h], r);
            }
        }
    outside_untouched();
    report();
}

static void
test_mkdir_in_root(void **state)
{
    struct stat st;
    bool created = false;
    (void)state;
    if (geteuid() != 0)
        skip();

    /* os.MkdirAll: levels that are links to directories are followed, in
     * the root (absolute ones land inside); levels made 0755 exactly */
    const struct path_mkdir m = {
            .mode = 0755, .uid = 4242, .gid = 4343, .exact = true, .follow = true};
    mode_t old = umask(077);
    int fd = path_mkdirat(root, "/in/n1/n2", PATH_VIEW, &m, &created);
    assert_true(fd >= 0 && created && inside(fd));
    close(fd);
    fd = path_mkdirat(root, "/absin/n3", PATH_VIEW, &m, &created);
    assert_true(fd >= 0 && created && inside(fd));
    close(fd);
    fd = path_mkdirat(root, "/slash/a/../a/n4", PATH_VIEW, &m, &created);
    assert_true(fd >= 0 && created && inside(fd));
    close(fd);
    umask(old);
    assert_int_equal(fstatat(root, "a/b/n1/n2", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(st.st_uid, 4242);
    assert_int_equal(st.st_gid, 4343);
    assert_int_equal(fstatat(root, "etc/n3", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(fstatat(root, "a/n4", &st, AT_SYMLINK_NOFOLLOW), 0);
    fd = path_mkdirat(root, "/in/n1", PATH_VIEW, &m, &created);
    assert_true(fd >= 0 && !created);
    close(fd);
    fd = path_mkdirat(root, "/", PATH_VIEW, &m, &created);
    assert_true(fd >= 0 && !created);
    close(fd);

    /* a dangling link is not made into its target; files are not dirs */
    assert_int_equal(path_mkdirat(root, "/dangling", PATH_VIEW, &m, NULL), -ENOTDIR);
    assert_int_equal(path_mkdirat(root, "/dangling/x", PATH_VIEW, &m, NULL), -ENOTDIR);
    assert_int_equal(fstatat(root, "nonexistent", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(path_mkdirat(root, "/a/file/x", PATH_VIEW, &m, NULL), -ENOTDIR);
    assert_int_equal(path_mkdirat(root, "/loop1/x", PATH_VIEW, &m, NULL), -ELOOP);
    /* links that lead out of the host's view stay in the root: "rel" is
     * root/outside, which does not exist, so it dangles */
    static const char *const out[] = {"/abs/new",         "/rel/new",     "/reldeep/new",
                                      "/up2/outside/new", "/danglingout", "/in/hop/new",
                                      "/sw.alt/new",      "/deepup/x"};
    for (size_t i = 0; i < ELEMENTSOF(out); i++) {
        int r = path_mkdirat(root, out[i], PATH_VIEW, &m, NULL);
        if (r >= 0) {
            if (!inside(r))
                note("path_mkdirat(\"%s\", PATH_VIEW) made it outside", out[i]);
            close(r);
        }
    }
    assert_int_equal(path_mkdirat(root, "/magic/x", PATH_VIEW, &m, NULL),
                     have_proc ? -ELOOP : -ENOTDIR);
    /* without following, a link level is refused in the root too */
    const struct path_mkdir nf = {.mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1};
    int r = path_mkdirat(root, "/in/z", PATH_VIEW, &nf, NULL);
    assert_true(r == -ELOOP || r == -ENOTDIR);
    outside_untouched();
    report();
}

/* --- without openat2 --- */

/* Runs fn in a child in which openat2 answers -ENOSYS. */
static void
without_openat2(void (*fn)(void))
{
    int status;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 ||
            seccomp_load(ctx) < 0)
            _exit(3);
        fn();
        _exit(nfailures ? 1 : 0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
no_openat2(void)
{
    char name[PATH_NAME_MAX + 1];
    const struct path_mkdir m = {.mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1};
    int fd;
    /* PATH_BENEATH with PATH_FALLBACK walks, refusing every link */
    fd = path_openat(root, "a/b/c.txt", O_RDONLY, 0, PATH_WORKSPACE);
    if (fd < 0 || !inside(fd))
        note("fallback: a/b/c.txt = %d", fd);
    safe_close(fd);
    for (size_t i = 0; i < ELEMENTSOF(escapes); i++) {
        fd = path_openat(root, escapes[i], O_RDONLY, 0, PATH_WORKSPACE);
        if (fd >= 0) {
            note("fallback: \"%s\" opened", escapes[i]);
            close(fd);
        } else if (fd != -EXDEV && fd != -ELOOP) {
            note("fallback: \"%s\" = %d", escapes[i], fd);
        }
    }
    if ((fd = path_openat(root, "in/c.txt", O_RDONLY, 0, PATH_WORKSPACE)) != -ELOOP)
        note("fallback: a link inside = %d, want -ELOOP", fd);
    fd = path_mkdirat(root, "a/fb/x", PATH_WORKSPACE, &m, NULL);
    if (fd < 0 || !inside(fd))
        note("fallback: mkdir = %d", fd);
    safe_close(fd);
    fd = path_mkdirat(root, "rel/x", PATH_WORKSPACE, &m, NULL);
    if (fd != -ELOOP)
        note("fallback: mkdir through a link = %d", fd);
    /* everything else: -ENOSYS, never an unconfined walk */
    if ((fd = path_openat(root, "a", O_PATH, 0, PATH_VIEW)) != -ENOSYS)
        note("no openat2: PATH_VIEW = %d", fd);
    if ((fd = path_openat(root, "a", O_PATH, 0, PATH_BENEATH)) != -ENOSYS)
        note("no openat2: PATH_BENEATH without fallback = %d", fd);
    if ((fd = path_open_parent(root, "/a/x", PATH_VIEW, name)) != -ENOSYS)
        note("no openat2: parent = %d", fd);
    if ((fd = path_mkdirat(root, "/nosys", PATH_VIEW, &m, NULL)) != -ENOSYS)
        note("no openat2: mkdir = %d", fd);
    struct stat st;
    if (fstatat(root, "nosys", &st, AT_SYMLINK_NOFOLLOW) == 0)
        note("no openat2: mkdir made something");
    if (count_tree(outfd) != outside_entries)
        note("no openat2: outside changed");
    if (nfailures)
        fprintf(stderr, "%s\n", failures);
}

static void
test_without_openat2(void **state)
{
    (void)state;
    without_openat2(no_openat2);
}

/* --- concurrent swaps --- */

#define SWAP_ITERATIONS 3000 /* resolver calls per test while the swapper runs */
#define SWAP_SECONDS    20   /* and never longer than this */

static volatile int swapping;

/* Keeps exchanging the directory "sw" and the link "sw.alt" (to the
 * outside), so that at any instant "sw" is one or the other. */
static void *
swapper(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&swapping, __ATOMIC_RELAXED))
        (void)renameat2(root, "sw.alt", root, "sw", RENAME_EXCHANGE);
    return NULL;
}

static void
test_concurrent_swaps(void **state)
{
    pthread_t t;
    char name[PATH_NAME_MAX + 1], buf[64];
    unsigned opened = 0;
    (void)state;

    mk(root, "sw/d");
    assert_int_equal(write_file_at(root, "sw/f", "inside\n", 0644), 0);
    /* a relative link out too: it is "sw" half the time */
    assert_int_equal(unlinkat(root, "sw.alt", 0), 0);
    ln("../outside", "sw.alt");
    mk(outfd, "d");
    assert_int_equal(write_file_at(outfd, "f", "secret\n", 0644), 0);
    outside_entries = count_tree(outfd);

    const struct path_mkdir follow = {
            .mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1, .exact = true, .follow = true};
    const struct path_mkdir plain = {.mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1};
    time_t end = time(NULL) + SWAP_SECONDS;
    __atomic_store_n(&swapping, 1, __ATOMIC_RELAXED);
    assert_int_equal(pthread_create(&t, NULL, swapper, NULL), 0);
    for (int i = 0; i < SWAP_ITERATIONS && time(NULL) < end; i++) {
        unsigned how = hows[i % ELEMENTSOF(hows)];
        const char *pfx = (how & PATH_IN_ROOT) ? "/" : "";
        char p[64];
        (void)snprintf(p, sizeof(p), "%ssw/f", pfx);
        int fd = path_openat(root, p, O_RDONLY, 0, how);
        if (fd >= 0) {
            ssize_t n = read(fd, buf, sizeof(buf));
            if (!inside(fd) || n != 7 || memcmp(buf, "inside\n", 7))
                note("open #%d (how %#x) read the outside", i, how);
            opened++;
            close(fd);
        }
        (void)snprintf(p, sizeof(p), "%ssw/d/m%d", pfx, i % 7);
        fd = path_mkdirat(root, p, how, (how & PATH_IN_ROOT) ? &follow : &plain, NULL);
        if (fd >= 0) {
            if (!inside(fd))
                note("mkdir #%d (how %#x) made it outside", i, how);
            close(fd);
        }
        (void)snprintf(p, sizeof(p), "%ssw/new%d", pfx, i % 5);
        fd = path_openat(root, p, O_WRONLY | O_CREAT, 0644, how);
        if (fd >= 0) {
            if (!inside(fd))
                note("create #%d (how %#x) made it outside", i, how);
            close(fd);
        }
        int d = path_open_parent(root, p, how, name);
        if (d >= 0) {
            if (!inside(d))
                note("parent #%d (how %#x) is outside", i, how);
            (void)unlinkat(d, name, 0);
            close(d);
        }
    }
    __atomic_store_n(&swapping, 0, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    outside_untouched();
    report();
    /* the race was real: some opens landed on the directory */
    assert_true(opened > 0);
}

/* --- what a client is told --- */

static void
check_msg(int r, enum path_voice v, const char *path, const char *what, const char *want)
{
    struct err e = {0};
    int got = path_fail(&e, r, v, path, what);
    if (got != r)
        note("path_fail(%d) returned %d", r, got);
    if (e.errnum != -r)
        note("path_fail(%d): errnum %d", r, e.errnum);
    if (strcmp(e.msg, want))
        note("path_fail(%d, %s, \"%s\"):\n  got  \"%s\"\n  want \"%s\"", r,
             v == PATH_VOICE_VIEW ? "view" : "workspace", path, e.msg, want);
}

static void
test_messages(void **state)
{
    (void)state;
    failures[0] = '\0';
    nfailures = 0;
    /* Word for word what files.c and vfs.c told clients before they shared
     * the table: a change here is a change a client sees. */
    static const struct {
        int r;
        const char *ws, *view;
    } rows[] = {
            {-EXDEV, "path '/a/b' leads outside the workspace",
             "cannot open '/a/b': Invalid cross-device link"},
            {-ELOOP, "path '/a/b' goes through a symlink we do not follow",
             "cannot open '/a/b': Too many levels of symbolic links"},
            {-ENOENT, "no such file or directory: '/a/b'", "path '/a/b' does not exist"},
            {-ENOTDIR, "a component of '/a/b' is not a directory",
             "'/a/b' or a directory above it is not a directory"},
            {-EISDIR, "'/a/b' is a directory", "'/a/b' is a directory"},
            {-EEXIST, "'/a/b' already exists", "cannot open '/a/b': File exists"},
            {-ENOSPC, "no space left for '/a/b'", "no space left for '/a/b'"},
            {-EDQUOT, "'/a/b' does not fit: the sandbox's disk bound (disk_mb) is reached",
             "'/a/b' does not fit: the sandbox's disk bound (disk_mb) is reached"},
            {-ENOSYS, "cannot open '/a/b': Function not implemented",
             "this kernel lacks openat2(), needed to reach '/a/b'"},
            {-EACCES, "cannot open '/a/b': Permission denied",
             "cannot open '/a/b': Permission denied"},
            {-EAGAIN, "cannot open '/a/b': Resource temporarily unavailable",
             "cannot open '/a/b': Resource temporarily unavailable"},
    };
    for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
        check_msg(rows[i].r, PATH_VOICE_WORKSPACE, "a/b", "open", rows[i].ws);
        check_msg(rows[i].r, PATH_VOICE_VIEW, "/a/b", "open", rows[i].view);
    }
    /* the workspace root is "/"; what names the verb */
    check_msg(-ENOENT, PATH_VOICE_WORKSPACE, ".", "list", "no such file or directory: '/'");
    check_msg(-EPERM, PATH_VOICE_WORKSPACE, ".", "list",
              "cannot list '/': Operation not permitted");
    check_msg(-EPERM, PATH_VOICE_VIEW, "/", "create directory",
              "cannot create directory '/': Operation not permitted");
    /* a set message wins (the innermost cause); NULL err is fine */
    struct err e = {0};
    (void)path_fail(&e, -ENOENT, PATH_VOICE_VIEW, "/first", "open");
    (void)path_fail(&e, -EISDIR, PATH_VOICE_VIEW, "/second", "open");
    assert_string_equal(e.msg, "path '/first' does not exist");
    assert_int_equal(path_fail(NULL, -EISDIR, PATH_VOICE_VIEW, "/x", "open"), -EISDIR);
    /* long paths are cut at 512 bytes, then at the message's size */
    char lp[PATH_MAX_LEN + 1];
    memset(lp, 'x', sizeof(lp) - 1);
    lp[0] = '/';
    lp[sizeof(lp) - 1] = '\0';
    memset(&e, 0, sizeof(e));
    (void)path_fail(&e, -EISDIR, PATH_VOICE_VIEW, lp, "open");
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
    assert_memory_equal(e.msg, "'/xxx", 5);
    report();
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parent),
            T(test_open_every_mode),
            T(test_open_inside),
            T(test_open_magic_and_mounts),
            T(test_open_parent),
            T(test_open_swapped_between_calls),
            T(test_mkdir_beneath),
            T(test_mkdir_in_root),
            T(test_without_openat2),
            T(test_concurrent_swaps),
            cmocka_unit_test(test_messages),
    };
    if (!path_have_openat2()) {
        fprintf(stderr, "test-resolve: this kernel has no openat2, skipping\n");
        return 77;
    }
    /* Our own mount namespace: the proc and tmpfs mounts vanish with us. */
    private_ns = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
                 mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    if (!private_ns)
        fprintf(stderr, "test-resolve: no private mount namespace (%s): no mount cases\n",
                strerror(errno));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
