/*
 * test-tree.c - the walker and the copier (util/tree.h) on real trees that
 * fight back: symlinks out of the tree (absolute, relative, in-then-out),
 * loops, directories swapped for links or for other directories between
 * the walker looking and entering, and by a second thread all along;
 * budgets (depth, names, path bytes, data bytes); the number of
 * descriptors a deep walk holds; every copy mode (new, replace, sync, dry)
 * with owners, modes, times, holes, fifos, mount points at the
 * destination. Nothing outside the trees may ever be visited, read,
 * created or changed.
 *
 * Needs root for owners and mounts; those parts skip without.
 */
#include <dirent.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fd.h"
#include "util/tree.h"

static char top[PATH_MAX], toppath[PATH_MAX];
static int topfd = -1, src = -1, dst = -1, outfd = -1;
static bool private_ns;
static size_t outside_entries;

static void
mk(int dirfd, const char *p)
{
    if (mkdirat(dirfd, p, 0755) < 0)
        fail_msg("mkdir %s: %m", p);
}

static void
put(int dirfd, const char *p, const char *content)
{
    assert_int_equal(write_file_at(dirfd, p, content, 0644), 0);
}

static void
ln(int dirfd, const char *target, const char *p)
{
    if (symlinkat(target, dirfd, p) < 0)
        fail_msg("symlink %s: %m", p);
}

static size_t
count_tree(int dfd)
{
    char **names = NULL;
    size_t n = 0, total;
    assert_int_equal(fd_dir_names(dfd, 10000, &names, &n), 0);
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

static void
outside_untouched(void)
{
    char buf[32];
    struct stat st;
    assert_int_equal(count_tree(outfd), outside_entries);
    int fd = openat(outfd, "secret", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof(buf)), 7);
    close(fd);
    assert_memory_equal(buf, "secret\n", 7);
    assert_int_equal(fstatat(outfd, "secret", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(fstatat(outfd, "dir", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
}

/* Whether fd is below top/<under>, by the kernel's name for it. */
static bool
below(int fd, const char *under)
{
    char p[64], got[PATH_MAX], want[PATH_MAX + 32];
    (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, got, sizeof(got) - 1);
    if (n < 0)
        return false;
    got[n] = '\0';
    int wl = snprintf(want, sizeof(want), "%s/%s", toppath, under);
    return strncmp(got, want, (size_t)wl) == 0 && (got[wl] == '\0' || got[wl] == '/');
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

/*
 * top/outside: secret, dir/, marker-outside
 * top/src:     a/ (b/ (c.txt), f1), a2/, z.txt, links out and in, loops
 * top/dst:     empty
 */
static int
setup(void **state)
{
    char p[PATH_MAX + 64];
    (void)state;

    failures[0] = '\0';
    nfailures = 0;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-tree-XXXXXX", tmp) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    assert_non_null(realpath(top, toppath));
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(topfd >= 0);
    mk(topfd, "outside");
    mk(topfd, "outside/dir");
    mk(topfd, "src");
    mk(topfd, "dst");
    outfd = openat(topfd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    src = openat(topfd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dst = openat(topfd, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(outfd >= 0 && src >= 0 && dst >= 0);
    assert_int_equal(write_file_at(outfd, "secret", "secret\n", 0600), 0);
    assert_int_equal(fchmodat(outfd, "secret", 0600, 0), 0);
    put(outfd, "marker-outside", "x");
    put(outfd, "dir/marker-outside-deep", "x");

    mk(src, "a");
    mk(src, "a/b");
    put(src, "a/b/c.txt", "inside\n");
    put(src, "a/f1", "f1\n");
    mk(src, "a2");
    put(src, "z.txt", "z\n");
    (void)snprintf(p, sizeof(p), "%s/outside", toppath);
    ln(src, p, "abs");
    ln(src, "../outside", "rel");
    ln(src, "a/../../outside", "reldeep");
    ln(src, "../../rel", "a/b/hop");
    ln(src, "a/b", "in");
    ln(src, "loop", "loop");
    ln(src, "nonexistent", "dangling");
    outside_entries = count_tree(outfd);
    return 0;
}

static int
teardown(void **state)
{
    char p[PATH_MAX + 16];
    (void)state;
    (void)snprintf(p, sizeof(p), "%s/dst/mnt", toppath);
    (void)umount2(p, MNT_DETACH);
    safe_close(src);
    safe_close(dst);
    safe_close(outfd);
    safe_close(topfd);
    src = dst = outfd = topfd = -1;
    (void)rm_rf_at(AT_FDCWD, top);
    return 0;
}

/* --- walking --- */

/* What a walk saw, one line per event. */
struct seen {
    char log[16384];
    unsigned entries, dirs, leaves, errors;
    bool enter_all; /* enter every directory */
    bool outside;   /* something outside was visited */
    const char *under;
};

static int
record(void *ud, enum tree_event ev, struct tree_entry *e)
{
    struct seen *s = ud;
    size_t n = strlen(s->log);
    static const char *const what[] = {"E", "D", "L", "X"};
    (void)snprintf(s->log + n, sizeof(s->log) - n, "%s %u %s\n", what[ev], e->depth, e->path);
    if (strlen(e->path) != e->path_len)
        s->outside = true;
    if (strstr(e->name, "marker-outside") || !below(e->dirfd, s->under ? s->under : "src"))
        s->outside = true;
    switch (ev) {
    case TREE_ENTRY:
        s->entries++;
        return s->enter_all ? TREE_ENTER : S_ISDIR(e->st.st_mode) ? TREE_ENTER : 0;
    case TREE_DIR:
        s->dirs++;
        if (!below(e->fd, s->under ? s->under : "src"))
            s->outside = true;
        return 0;
    case TREE_LEAVE:
        s->leaves++;
        return 0;
    case TREE_ERROR:
        s->errors++;
        return -e->error;
    }
    return 0;
}

static void
test_walk_order_and_paths(void **state)
{
    struct seen s = {.enter_all = true};
    (void)state;

    /* every symlink is an entry, never entered; names sorted per level;
     * a directory's entries between its TREE_DIR and TREE_LEAVE */
    assert_int_equal(tree_walk(src, -EBADF, NULL, record, &s), 0);
    assert_string_equal(s.log, "E 1 a\n"
                               "D 1 a\n"
                               "E 2 a/b\n"
                               "D 2 a/b\n"
                               "E 3 a/b/c.txt\n"
                               "E 3 a/b/hop\n"
                               "L 2 a/b\n"
                               "E 2 a/f1\n"
                               "L 1 a\n"
                               "E 1 a2\n"
                               "D 1 a2\n"
                               "L 1 a2\n"
                               "E 1 abs\n"
                               "E 1 dangling\n"
                               "E 1 in\n"
                               "E 1 loop\n"
                               "E 1 rel\n"
                               "E 1 reldeep\n"
                               "E 1 z.txt\n");
    assert_false(s.outside);

    /* prefixes: "" and "/" give "/a", others "<prefix>/a" */
    static const struct {
        const char *prefix, *first, *deep;
    } px[] = {{"", "E 1 /a\n", "E 3 /a/b/c.txt\n"},
              {"/", "E 1 /a\n", "E 3 /a/b/c.txt\n"},
              {"/home/user", "E 1 /home/user/a\n", "E 3 /home/user/a/b/c.txt\n"},
              {"/x/", "E 1 /x/a\n", "E 3 /x/a/b/c.txt\n"},
              {"rel", "E 1 rel/a\n", "E 3 rel/a/b/c.txt\n"}};
    for (size_t i = 0; i < ELEMENTSOF(px); i++) {
        struct seen t = {0};
        const struct tree_opts o = {.prefix = px[i].prefix};
        assert_int_equal(tree_walk(src, -EBADF, &o, record, &t), 0);
        assert_non_null(strstr(t.log, px[i].first));
        assert_non_null(strstr(t.log, px[i].deep));
    }

    /* tree_walk_at(): the entry itself is depth 0 */
    struct seen at = {0};
    assert_int_equal(tree_walk_at(src, "a", -EBADF, NULL, record, &at), 0);
    assert_string_equal(at.log, "E 0 a\nD 0 a\nE 1 a/b\nD 1 a/b\nE 2 a/b/c.txt\nE 2 a/b/hop\n"
                                "L 1 a/b\nE 1 a/f1\nL 0 a\n");
    struct seen f = {0};
    assert_int_equal(tree_walk_at(src, "z.txt", -EBADF, NULL, record, &f), 0);
    assert_string_equal(f.log, "E 0 z.txt\n");
    struct seen l = {.enter_all = true};
    assert_int_equal(tree_walk_at(src, "abs", -EBADF, NULL, record, &l), 0);
    assert_string_equal(l.log, "E 0 abs\n"); /* a link, entered: nothing */
    struct seen m = {0};
    assert_int_equal(tree_walk_at(src, "missing", -EBADF, NULL, record, &m), -ENOENT);
    assert_string_equal(m.log, "X 0 missing\n");

    /* an O_PATH descriptor works, and the caller's offset stays put */
    int p = openat(topfd, "src", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct seen q = {0};
    assert_int_equal(tree_walk(p, -EBADF, NULL, record, &q), 0);
    assert_int_equal(q.entries, 13);
    close(p);
    DIR *d = fdopendir(dup(src));
    assert_non_null(d);
    struct seen r = {0};
    assert_int_equal(tree_walk(src, -EBADF, NULL, record, &r), 0);
    unsigned k = 0;
    while (readdir(d))
        k++;
    closedir(d);
    assert_int_equal(k, 11); /* src's own 9 names, "." and "..", from the start */
    outside_untouched();
}

static int
stop_at(void *ud, enum tree_event ev, struct tree_entry *e)
{
    (void)e;
    unsigned *left = ud;
    if (ev == TREE_ENTRY && (*left)-- == 0)
        return -ECANCELED;
    return ev == TREE_ENTRY ? TREE_ENTER : 0;
}

static void
test_walk_budgets(void **state)
{
    (void)state;
    /* names read in all: exactly the tree's 13 fit */
    struct seen s = {0};
    const struct tree_opts n13 = {.max_names = 13}, n12 = {.max_names = 12};
    assert_int_equal(tree_walk(src, -EBADF, &n13, record, &s), 0);
    struct seen s2 = {0};
    assert_int_equal(tree_walk(src, -EBADF, &n12, record, &s2), -E2BIG);
    /* depth: a/b is depth 2 */
    struct seen d = {0};
    const struct tree_opts d1 = {.max_depth = 1}, d2 = {.max_depth = 2};
    assert_int_equal(tree_walk(src, -EBADF, &d1, record, &d), -ELOOP);
    struct seen d_ = {0};
    assert_int_equal(tree_walk(src, -EBADF, &d2, record, &d_), 0);
    /* path bytes: "a/b/c.txt" is 9 */
    struct seen p = {0};
    const struct tree_opts p9 = {.path_max = 9}, p8 = {.path_max = 8};
    assert_int_equal(tree_walk(src, -EBADF, &p9, record, &p), 0);
    struct seen p_ = {0};
    assert_int_equal(tree_walk(src, -EBADF, &p8, record, &p_), -ENAMETOOLONG);
    const struct tree_opts longprefix = {.prefix = "/0123456789", .path_max = 5};
    assert_int_equal(tree_walk(src, -EBADF, &longprefix, record, &p_), -ENAMETOOLONG);
    /* a callback's error stops the walk and is returned */
    unsigned left = 3;
    assert_int_equal(tree_walk(src, -EBADF, NULL, stop_at, &left), -ECANCELED);
}

/* Open descriptors of this process. */
static unsigned
open_fds(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", "..", d's own */
}

struct deep {
    unsigned max_fds, deepest, base;
    bool no_count; /* under a low descriptor limit: do not open /proc/self/fd */
};

static int
deep_fn(void *ud, enum tree_event ev, struct tree_entry *e)
{
    struct deep *d = ud;
    if (ev == TREE_DIR) {
        /* an aux descriptor per level, as the copier has */
        e->own_aux = fcntl(e->fd, F_DUPFD_CLOEXEC, 3);
        if (e->own_aux < 0)
            return -errno;
        if (!d->no_count) {
            unsigned n = open_fds() - d->base;
            d->max_fds = n > d->max_fds ? n : d->max_fds;
        }
    }
    if (ev == TREE_ENTRY && e->depth > d->deepest)
        d->deepest = e->depth;
    if (ev == TREE_ERROR)
        return -e->error;
    return ev == TREE_ENTRY ? TREE_ENTER : 0;
}

/* Makes a chain of n directories "d/d/d..." below dirfd. */
static void
chain(int dirfd, unsigned n)
{
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    for (unsigned i = 0; i < n; i++) {
        mk(cur, "d");
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    close(cur);
}

static void
test_walk_deep_bounded(void **state)
{
    (void)state;
    /* TREE_DEPTH_MAX levels walk with 2 descriptors per level (each
     * level's directory and its aux), one more past it is -ELOOP */
    mk(topfd, "deep");
    int dd = openat(topfd, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    chain(dd, TREE_DEPTH_MAX);
    struct deep d = {.base = open_fds()};
    const struct tree_opts path_ok = {.path_max = 2 * TREE_DEPTH_MAX + 16};
    assert_int_equal(tree_walk(dd, -EBADF, &path_ok, deep_fn, &d), 0);
    assert_int_equal(d.deepest, TREE_DEPTH_MAX);
    assert_true(d.max_fds <= 2 * (TREE_DEPTH_MAX + 1) + 1);
    assert_int_equal(open_fds(), d.base); /* all closed again */
    /* one level more */
    int last = openat(dd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (unsigned i = 1; i < TREE_DEPTH_MAX; i++) {
        int next = openat(last, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(last);
        last = next;
    }
    mk(last, "d");
    mk(last, "d/d");
    close(last);
    struct deep e = {.base = open_fds()};
    const struct tree_opts big = {.max_depth = 100000, .path_max = 4 * TREE_DEPTH_MAX};
    assert_int_equal(tree_walk(dd, -EBADF, &big, deep_fn, &e), -ELOOP);
    assert_int_equal(open_fds(), e.base);
    /* and under a descriptor limit the walk fails cleanly, closing all */
    struct rlimit old, low = {64, 64};
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low.rlim_max = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    struct deep f = {.base = open_fds(), .no_count = true};
    int r = tree_walk(dd, -EBADF, &big, deep_fn, &f);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(r, -EMFILE);
    assert_int_equal(open_fds(), f.base);
    close(dd);
}

/* Swaps a/b for a link out, or for another directory, right after the
 * walker looked at it and before it goes in. */
struct swap_at {
    const char *name;
    const char *with; /* a name in src to exchange it with */
    bool done, outside;
};

static int
swap_fn(void *ud, enum tree_event ev, struct tree_entry *e)
{
    struct swap_at *s = ud;
    if (strstr(e->name, "marker-outside") || !below(e->dirfd, "src"))
        s->outside = true;
    if (ev == TREE_DIR && !below(e->fd, "src"))
        s->outside = true;
    if (ev == TREE_ERROR)
        return -e->error;
    if (ev != TREE_ENTRY)
        return 0;
    if (!strcmp(e->path, s->name) && !s->done) {
        assert_int_equal(renameat2(src, s->name, src, s->with, RENAME_EXCHANGE), 0);
        s->done = true;
    }
    return TREE_ENTER;
}

static void
test_walk_swapped_under_it(void **state)
{
    char p[PATH_MAX + 16];
    (void)state;
    (void)snprintf(p, sizeof(p), "%s/outside", toppath);
    ln(src, p, "a/out");
    mk(src, "a/other");
    put(src, "a/other/o.txt", "o\n");
    /* a/b becomes a link to the outside: skipped, never entered */
    struct swap_at s = {.name = "a/b", .with = "a/out"};
    assert_int_equal(tree_walk(src, -EBADF, NULL, swap_fn, &s), 0);
    assert_true(s.done);
    assert_false(s.outside);
    assert_int_equal(renameat2(src, "a/b", src, "a/out", RENAME_EXCHANGE), 0);
    /* a/b becomes another directory: not the one looked at, skipped */
    struct swap_at t = {.name = "a/b", .with = "a/other"};
    assert_int_equal(tree_walk(src, -EBADF, NULL, swap_fn, &t), 0);
    assert_true(t.done);
    assert_false(t.outside);
    outside_untouched();
}

/* A directory the walker may not read: TREE_ERROR, and fn decides. */
static int
eacces_fn(void *ud, enum tree_event ev, struct tree_entry *e)
{
    unsigned *errors = ud;
    if (ev == TREE_ERROR) {
        if (e->step == TREE_STEP_OPEN && e->error == EACCES && !strcmp(e->path, "a2"))
            (*errors)++;
        return 0;
    }
    return ev == TREE_ENTRY ? TREE_ENTER : 0;
}

static void
test_walk_unreadable(void **state)
{
    int status;
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(fchmodat(src, "a2", 0700, 0), 0);
    assert_int_equal(fchmod(src, 0755), 0);
    assert_int_equal(fchmod(topfd, 0755), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsigned errors = 0;
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(3);
        int r = tree_walk(src, -EBADF, NULL, eacces_fn, &errors);
        _exit(r == 0 && errors == 1 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* --- copying --- */

struct cp {
    uid_t uid;
    gid_t gid;
    bool times;
    unsigned decided, failures, made;
    enum tree_step last_step;
    int last_error;
    char made_log[4096];
    bool skip_fail; /* failed() lets the entry go */
};

static int
cp_decide(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    struct cp *c = ud;
    c->decided++;
    if (S_ISSOCK(e->st.st_mode) || S_ISCHR(e->st.st_mode) || S_ISBLK(e->st.st_mode))
        return TREE_SKIP;
    mk->uid = c->uid;
    mk->gid = c->gid;
    mk->times = c->times;
    return 0;
}

static int
cp_failed(void *ud, const struct tree_entry *e, enum tree_step step, int error)
{
    struct cp *c = ud;
    (void)e;
    c->failures++;
    c->last_step = step;
    c->last_error = error;
    return c->skip_fail ? 0 : -error;
}

static int
cp_made(void *ud, const struct tree_entry *e, const struct tree_make *mk, const char *target)
{
    struct cp *c = ud;
    size_t n = strlen(c->made_log);
    (void)mk;
    c->made++;
    (void)snprintf(c->made_log + n, sizeof(c->made_log) - n, "%s%s%s\n", e->path,
                   target ? " -> " : "", target ? target : "");
    return 0;
}

static const struct tree_copy_ops cp_ops = {cp_decide, cp_failed, cp_made};

static void
file_is(int dirfd, const char *p, const char *content)
{
    char buf[256];
    int fd = openat(dirfd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        fail_msg("open %s: %m", p);
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    assert_int_equal(n, (ssize_t)strlen(content));
    assert_memory_equal(buf, content, (size_t)n);
}

static void
link_is(int dirfd, const char *p, const char *target)
{
    char buf[PATH_MAX];
    ssize_t n = readlinkat(dirfd, p, buf, sizeof(buf) - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, target);
}

static void
test_copy_new(void **state)
{
    struct stat st, s2;
    char abs[PATH_MAX + 16];
    (void)state;
    if (geteuid() != 0)
        skip();

    /* a sparse file of 64 MiB holding 4 KiB, a fifo, odd modes, times */
    int f = openat(src, "a/sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    assert_true(f >= 0);
    assert_int_equal(pwrite(f, "data", 4, 32 << 20), 4);
    assert_int_equal(ftruncate(f, 64 << 20), 0);
    close(f);
    assert_int_equal(mkfifoat(src, "a/fifo", 0600), 0);
    assert_int_equal(fchmodat(src, "a/fifo", 0620, 0), 0);
    assert_int_equal(fchmodat(src, "a/f1", 04751, 0), 0);
    assert_int_equal(fchmodat(src, "a/b", 0555, 0), 0); /* we must still write into its copy */
    const struct timespec ts[2] = {{1000000, 5}, {2000000, 7}};
    assert_int_equal(utimensat(src, "z.txt", ts, 0), 0);

    struct cp c = {.uid = 4242, .gid = 4343, .times = true};
    uint64_t budget = 1 << 20, bytes = 0;
    const struct tree_copy_opts o = {
            .mode = TREE_COPY_NEW, .data_budget = &budget, .ops = &cp_ops, .ud = &c};
    assert_int_equal(tree_copy(src, dst, &o, &bytes), 0);
    assert_int_equal(c.failures, 0);
    assert_int_equal(fstatat(dst, "z.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mtim.tv_sec, 2000000);
    assert_int_equal(st.st_mtim.tv_nsec, 7);
    assert_int_equal(st.st_atim.tv_sec, 1000000); /* (before reading it moves atime) */
    file_is(dst, "a/b/c.txt", "inside\n");
    file_is(dst, "a/f1", "f1\n");
    file_is(dst, "z.txt", "z\n");
    (void)snprintf(abs, sizeof(abs), "%s/outside", toppath);
    link_is(dst, "abs", abs); /* links copied as links, never followed */
    link_is(dst, "rel", "../outside");
    link_is(dst, "a/b/hop", "../../rel");
    link_is(dst, "loop", "loop");
    assert_int_equal(fstatat(dst, "a/f1", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_uid, 4242);
    assert_int_equal(st.st_gid, 4343);
    assert_int_equal(st.st_mode & 07777, 04751); /* set-id bits survive the chown */
    assert_int_equal(fstatat(dst, "a/b", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(st.st_uid, 4242);
    assert_int_equal(fstatat(dst, "abs", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_uid, 4242);
    assert_int_equal(fstatat(dst, "a/fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0620);
    /* holes stay holes and cost nothing of the budget */
    assert_int_equal(fstatat(dst, "a/sparse", &st, 0), 0);
    assert_int_equal(fstatat(src, "a/sparse", &s2, 0), 0);
    assert_int_equal(st.st_size, 64 << 20);
    assert_true(st.st_blocks <= s2.st_blocks + 16);
    assert_true(bytes < 64 * 1024);
    assert_int_equal(budget, (1 << 20) - bytes);
    assert_int_equal(st.st_mode & 07777, 0640);
    /* made() for each of them, a directory before what is in it */
    assert_non_null(strstr(c.made_log, "a\na/b\na/b/c.txt\na/b/hop -> ../../rel\n"));
    assert_int_equal(c.made, c.decided);

    /* again into the same destination: everything exists */
    struct cp again = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts o2 = {.mode = TREE_COPY_NEW, .ops = &cp_ops, .ud = &again};
    assert_int_equal(tree_copy(src, dst, &o2, NULL), -EEXIST);
    assert_int_equal(again.last_error, EEXIST);
    outside_untouched();
}

static void
test_copy_at_and_budgets(void **state)
{
    (void)state;
    struct cp c = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts o = {.mode = TREE_COPY_NEW, .ops = &cp_ops, .ud = &c};
    /* one entry, to another name */
    assert_int_equal(tree_copy_at(src, "a", dst, "copied", &o, NULL), 0);
    file_is(dst, "copied/b/c.txt", "inside\n");
    assert_int_equal(tree_copy_at(src, "z.txt", dst, "z2", &o, NULL), 0);
    file_is(dst, "z2", "z\n");
    assert_int_equal(tree_copy_at(src, "rel", dst, "rel2", &o, NULL), 0);
    link_is(dst, "rel2", "../outside");
    assert_int_equal(tree_copy_at(src, "missing", dst, "m", &o, NULL), -ENOENT);
    assert_int_equal(c.last_step, TREE_STEP_STAT);

    /* data budget: 7 bytes of a/b/c.txt do not fit in 6 */
    struct cp d = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    uint64_t budget = 6;
    const struct tree_copy_opts ob = {
            .mode = TREE_COPY_NEW, .data_budget = &budget, .ops = &cp_ops, .ud = &d};
    assert_int_equal(tree_copy_at(src, "a", dst, "b6", &ob, NULL), -EFBIG);
    assert_int_equal(d.last_step, TREE_STEP_DATA);
    /* depth and names of the walk below it */
    struct cp e = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts od = {
            .walk = {.max_depth = 1}, .mode = TREE_COPY_NEW, .ops = &cp_ops, .ud = &e};
    mk(dst, "d1");
    int d1 = openat(dst, "d1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(tree_copy(src, d1, &od, NULL), -ELOOP); /* a/b is depth 2 */
    close(d1);
    const struct tree_copy_opts on = {
            .walk = {.max_names = 3}, .mode = TREE_COPY_NEW, .ops = &cp_ops, .ud = &e};
    assert_int_equal(tree_copy_at(src, "a", dst, "n3", &on, NULL), -E2BIG);
    /* something decide lets through that cannot be made */
    outside_untouched();
}

static int
let_all(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    (void)ud;
    (void)e;
    (void)mk;
    return 0;
}

static void
test_copy_refuses_odd_types(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    if (mknodat(src, "a2/null", S_IFCHR | 0600, makedev(1, 3)) < 0)
        skip(); /* no devices here (a container) */
    const struct tree_copy_ops ops = {.decide = let_all};
    const struct tree_copy_opts o = {.mode = TREE_COPY_NEW, .ops = &ops};
    assert_int_equal(tree_copy_at(src, "a2", dst, "a2", &o, NULL), -EOPNOTSUPP);
    struct stat st;
    assert_int_equal(fstatat(dst, "a2/null", &st, AT_SYMLINK_NOFOLLOW), -1);
}

static void
test_copy_replace(void **state)
{
    struct stat st;
    char abs[PATH_MAX + 16];
    (void)state;

    /* the destination has: a file where a file goes (replaced), a
     * directory where a directory goes (merged, kept as it is), a
     * directory where a file goes, a link to the outside where a
     * directory goes */
    mk(dst, "a");
    assert_int_equal(fchmod(dst, 0755), 0);
    assert_int_equal(fchmodat(dst, "a", 0711, 0), 0);
    put(dst, "a/f1", "old\n");
    put(dst, "a/keep", "keep\n");
    mk(dst, "z.txt");
    (void)snprintf(abs, sizeof(abs), "%s/outside", toppath);
    ln(dst, abs, "a2");
    struct cp c = {.uid = (uid_t)-1, .gid = (gid_t)-1, .skip_fail = true};
    const struct tree_copy_opts o = {.mode = TREE_COPY_REPLACE, .ops = &cp_ops, .ud = &c};
    assert_int_equal(tree_copy(src, dst, &o, NULL), 0);
    file_is(dst, "a/f1", "f1\n");
    file_is(dst, "a/keep", "keep\n");
    file_is(dst, "a/b/c.txt", "inside\n");
    assert_int_equal(fstatat(dst, "a", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0711); /* merged: its mode kept */
    assert_int_equal(c.failures, 2);
    /* z.txt: a directory where a file goes; a2: a link where a directory
     * goes, never followed */
    assert_int_equal(fstatat(dst, "z.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(fstatat(dst, "a2", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));

    struct cp d = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts o2 = {.mode = TREE_COPY_REPLACE, .ops = &cp_ops, .ud = &d};
    assert_int_equal(tree_copy_at(src, "z.txt", dst, "z.txt", &o2, NULL), -EISDIR);
    assert_int_equal(d.last_step, TREE_STEP_REPLACE);
    int r = tree_copy_at(src, "a2", dst, "a2", &o2, NULL);
    assert_true(r == -ENOTDIR || r == -ELOOP); /* O_DIRECTORY|O_NOFOLLOW on a link */
    assert_int_equal(d.last_step, TREE_STEP_OPEN_DST);
    outside_untouched();
}

static void
test_copy_sync(void **state)
{
    struct stat st;
    char p[PATH_MAX + 16];
    (void)state;
    if (geteuid() != 0 || !private_ns)
        skip();

    /* dst: extras (removed), another type at a name (replaced), a merged
     * directory (given the source's attributes), a mount point (left) */
    mk(dst, "a");
    assert_int_equal(fchmodat(dst, "a", 0700, 0), 0);
    put(dst, "a/extra", "x");
    mk(dst, "a/extradir");
    put(dst, "a/extradir/deep", "x");
    mk(dst, "a/f1"); /* a directory where a file goes */
    put(dst, "a/f1/in", "x");
    put(dst, "a2", "file where a directory goes");
    put(dst, "top-extra", "x");
    mk(dst, "mnt");
    (void)snprintf(p, sizeof(p), "%s/dst/mnt", toppath);
    assert_int_equal(mount("tmpfs", p, "tmpfs", 0, "size=1m"), 0);
    put(dst, "mnt/kept", "kept\n");
    mk(src, "mnt"); /* the source has a directory there too */
    put(src, "mnt/new", "new\n");
    assert_int_equal(fchmodat(src, "a", 0751, 0), 0);

    struct cp c = {.uid = 777, .gid = 778};
    const struct tree_copy_opts o = {.mode = TREE_COPY_SYNC, .ops = &cp_ops, .ud = &c};
    assert_int_equal(tree_copy(src, dst, &o, NULL), 0);
    assert_int_equal(c.failures, 0);
    assert_int_equal(fstatat(dst, "a/extra", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(fstatat(dst, "a/extradir", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(fstatat(dst, "top-extra", &st, AT_SYMLINK_NOFOLLOW), -1);
    file_is(dst, "a/f1", "f1\n");
    assert_int_equal(fstatat(dst, "a2", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(fstatat(dst, "a", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0751);
    assert_int_equal(st.st_uid, 777);
    file_is(dst, "mnt/kept", "kept\n"); /* the mount point is not ours */
    assert_int_equal(fstatat(dst, "mnt/new", &st, AT_SYMLINK_NOFOLLOW), -1);
    (void)umount2(p, MNT_DETACH);
    outside_untouched();
}

static void
test_copy_dry(void **state)
{
    (void)state;
    struct cp c = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts o = {.mode = TREE_COPY_DRY, .ops = &cp_ops, .ud = &c};
    assert_int_equal(tree_copy(src, -EBADF, &o, NULL), 0);
    assert_int_equal(count_tree(dst), 0);
    assert_int_equal(c.made, 13);
    assert_non_null(strstr(c.made_log, "a/b\na/b/c.txt\na/b/hop -> ../../rel\na/f1\na2\n"));
    struct cp d = {.uid = (uid_t)-1, .gid = (gid_t)-1};
    const struct tree_copy_opts od = {.mode = TREE_COPY_DRY, .ops = &cp_ops, .ud = &d};
    assert_int_equal(tree_copy_at(src, "a", -EBADF, "a", &od, NULL), 0);
    assert_int_equal(d.made, 5);
}

/* --- concurrent swaps --- */

#define SWAP_COPIES  150 /* copies and walks while the swapper runs */
#define SWAP_SECONDS 20  /* and never longer than this */

static volatile int swapping;
static int swap_dir = -1;

/* Keeps exchanging the directory "sw" and the link "sw.alt" (out). */
static void *
swapper(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&swapping, __ATOMIC_RELAXED))
        (void)renameat2(swap_dir, "sw.alt", swap_dir, "sw", RENAME_EXCHANGE);
    return NULL;
}

/* Whether anything below dirfd holds the outside's secret or markers. */
static bool
holds_outside(int dirfd)
{
    char **names = NULL;
    size_t n = 0;
    bool bad = false;
    if (fd_dir_names(dirfd, 100000, &names, &n) < 0)
        return true;
    for (size_t i = 0; i < n && !bad; i++) {
        struct stat st;
        if (strstr(names[i], "marker-outside") || !strcmp(names[i], "secret"))
            bad = true;
        else if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            bad = sub < 0 || holds_outside(sub);
            safe_close(sub);
        }
    }
    fd_names_free(names, n);
    return bad;
}

static void
run_swaps(int in, void (*body)(int i))
{
    pthread_t t;
    swap_dir = in;
    time_t end = time(NULL) + SWAP_SECONDS;
    __atomic_store_n(&swapping, 1, __ATOMIC_RELAXED);
    assert_int_equal(pthread_create(&t, NULL, swapper, NULL), 0);
    for (int i = 0; i < SWAP_COPIES && time(NULL) < end; i++)
        body(i);
    __atomic_store_n(&swapping, 0, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
}

static void
swap_src_body(int i)
{
    char name[32];
    struct cp c = {.uid = (uid_t)-1, .gid = (gid_t)-1, .skip_fail = true};
    const struct tree_copy_opts o = {.mode = TREE_COPY_NEW, .ops = &cp_ops, .ud = &c};
    (void)snprintf(name, sizeof(name), "c%d", i);
    mk(dst, name);
    int d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(d >= 0);
    int r = tree_copy(src, d, &o, NULL);
    if (r < 0)
        note("copy #%d: %d", i, r);
    if (holds_outside(d))
        note("copy #%d holds the outside", i);
    struct seen s = {.enter_all = true};
    r = tree_walk(src, -EBADF, NULL, record, &s);
    if (s.outside)
        note("walk #%d visited the outside", i);
    close(d);
    (void)rm_rf_at(dst, name);
}

static void
swap_dst_body(int i)
{
    /* the sync below may remove the link (it is "another type" at sw):
     * put it back, racing the swapper as a sandbox would */
    if (symlinkat("../outside", dst, "sw.alt") < 0 && errno != EEXIST)
        note("symlink: %s", strerror(errno));
    (void)mkdirat(dst, "sw", 0755);
    struct cp c = {.uid = (uid_t)-1, .gid = (gid_t)-1, .skip_fail = true};
    const struct tree_copy_opts o = {
            .mode = i % 2 ? TREE_COPY_REPLACE : TREE_COPY_SYNC, .ops = &cp_ops, .ud = &c};
    /* into dst/sw, which is a link out half the time; sync removes what
     * the source lacks, so it is where removal would go out */
    int r = tree_copy_at(src, "a", dst, "sw", &o, NULL);
    (void)r;
}

static void
test_concurrent_swaps(void **state)
{
    char abs[PATH_MAX + 16];
    (void)state;
    /* the source: src/sw is a directory with files, or a link out */
    mk(src, "sw");
    mk(src, "sw/d");
    put(src, "sw/d/f", "inside\n");
    put(src, "sw/g", "inside\n");
    (void)snprintf(abs, sizeof(abs), "%s/outside", toppath);
    ln(src, abs, "sw.alt");
    run_swaps(src, swap_src_body);
    (void)renameat2(src, "sw.alt", src, "sw", 0);
    outside_untouched();

    /* the destination: dst/sw a directory, or a link out */
    mk(dst, "sw");
    ln(dst, "../outside", "sw.alt");
    put(outfd, "f1", "outside f1\n"); /* what a copy through the link would replace */
    outside_entries = count_tree(outfd);
    run_swaps(dst, swap_dst_body);
    outside_untouched();
    file_is(outfd, "f1", "outside f1\n");
    report();
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
            T(test_walk_order_and_paths),
            T(test_walk_budgets),
            T(test_walk_deep_bounded),
            T(test_walk_swapped_under_it),
            T(test_walk_unreadable),
            T(test_copy_new),
            T(test_copy_at_and_budgets),
            T(test_copy_refuses_odd_types),
            T(test_copy_replace),
            T(test_copy_sync),
            T(test_copy_dry),
            T(test_concurrent_swaps),
    };
    /* Our own mount namespace: the tmpfs mounts vanish with us. */
    private_ns = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
                 mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
