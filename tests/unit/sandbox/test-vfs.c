/*
 * test-vfs.c - envd's file operations on a fake sandbox view: a tmpfs (as
 * the real root is) in a private mount namespace, holding the "root" the
 * functions are confined to and, beside it, an "outside" that no path or
 * symlink may reach. Covers Go's perms strings, path resolution, entries
 * (symlinks report their target, targets resolved inside the root, owner
 * names, metadata), ListDir's order and limits, mkdir/rename/remove/open
 * semantics, metadata replacement, procfs opened without host root's
 * privileges, and a symlink swapped in concurrently. Needs root (chown,
 * mounts): skipped otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "sandbox/vfs.h"
#include "util/buf.h"
#include "util/fd.h"

#define RFIRST 200000u          /* host id of sandbox root */
#define USER   (RFIRST + 1000u) /* host id of sandbox "user" */

static const struct vfs_ids ids = {RFIRST, RFIRST, USER, USER, RFIRST, 65536};
static char top[128];
static int root = -1, outfd = -1;

static void
mk(const char *p, mode_t mode)
{
    if (mkdirat(root, p + 1, mode) < 0 || fchmodat(root, p + 1, mode, 0) < 0)
        fail_msg("mkdir %s: %m", p);
}

static void
put(const char *p, const char *content)
{
    assert_int_equal(write_file_at(root, p + 1, content, 0644), 0);
}

static void
ln(const char *target, const char *p)
{
    if (symlinkat(target, root, p + 1) < 0)
        fail_msg("symlink %s: %m", p);
}

static void
own(const char *p, uid_t u, gid_t g)
{
    assert_int_equal(fchownat(root, p + 1, u, g, AT_SYMLINK_NOFOLLOW), 0);
}

static bool
exists(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void
fd_is(int fd, const char *want)
{
    char b[256];
    ssize_t n = read(fd, b, sizeof(b) - 1);
    assert_true(n >= 0);
    b[n] = '\0';
    assert_string_equal(b, want);
}

static void
outside_untouched(void)
{
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(read_file_at(outfd, "secret", 1024, &b), 0);
    assert_string_equal(b.data, "secret\n");
    buf_done(&b);
    DIR *d = fdopendir(openat(outfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 1);
}

/* The fake view: a home with the ListDir example, /etc/passwd inside, and
 * links of every kind. "/esc*" point at the real outside (absolute and by
 * climbing), which inside the root does not exist. */
static int
setup(void **state)
{
    char abs[256], rel[256];
    (void)state;

    (void)snprintf(top, sizeof(top), "/tmp/abx-test-vfs-XXXXXX");
    if (!mkdtemp(top) || mount("tmpfs", top, "tmpfs", 0, "mode=0755") < 0)
        return -1;
    int t = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t < 0 || mkdirat(t, "root", 0755) < 0 || mkdirat(t, "outside", 0755) < 0)
        return -1;
    root = openat(t, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    outfd = openat(t, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(t);
    if (root < 0 || outfd < 0 || write_file_at(outfd, "secret", "secret\n", 0644) < 0)
        return -1;
    mk("/etc", 0755);
    put("/etc/passwd", "inside\n");
    mk("/home", 0755);
    mk("/home/user", 0755);
    own("/home/user", USER, USER);
    mk("/tmp", 01777);
    mk("/home/user/d", 0755);
    put("/home/user/d/file1.txt", "one");
    mk("/home/user/d/subdir1", 0755);
    mk("/home/user/d/subdir1/subdir1_1", 0755);
    mk("/home/user/d/subdir1/subdir1_2", 0700);
    put("/home/user/d/subdir1/subdir1_2/deep", "");
    mk("/home/user/d/subdir2", 0755);
    put("/home/user/d/subdir2/x", "x");
    ln("subdir1", "/home/user/d/subdir3");
    ln("/etc/passwd", "/home/user/pw");
    ln("/home/user/d", "/home/user/dl");
    ln("/nope", "/home/user/broken");
    ln("hop1", "/home/user/hop2");
    ln("../../etc/../home/user/pw", "/home/user/hop1");
    ln("loop", "/home/user/loop");
    (void)snprintf(abs, sizeof(abs), "%s/outside", top);
    (void)snprintf(rel, sizeof(rel), "../../../../../../..%s/outside", top);
    ln(abs, "/home/user/esc");
    ln(rel, "/home/user/escrel");
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    safe_close(root);
    safe_close(outfd);
    return umount2(top, MNT_DETACH) == 0 && rmdir(top) == 0 ? 0 : -1;
}

static void
stat_ok(const char *p, struct vfs_entry *e)
{
    struct err err = {0};
    int r = vfs_stat(root, &ids, p, e, &err);
    if (r < 0)
        fail_msg("stat %s: %s", p, err.msg);
}

/* --- pure --- */

static void
test_go_perms(void **state)
{
    static const struct {
        mode_t m;
        const char *want;
    } cases[] = {
            {S_IFREG | 0644, "-rw-r--r--"},  {S_IFDIR | 0755, "drwxr-xr-x"},
            {S_IFLNK | 0777, "Lrwxrwxrwx"},  {S_IFDIR | 01777, "dtrwxrwxrwx"},
            {S_IFREG | 04755, "urwxr-xr-x"}, {S_IFREG | 02755, "grwxr-xr-x"},
            {S_IFCHR | 0666, "Dcrw-rw-rw-"}, {S_IFBLK | 0660, "Drw-rw----"},
            {S_IFIFO | 0600, "prw-------"},  {S_IFSOCK | 0755, "Srwxr-xr-x"},
            {S_IFREG | 0, "----------"},     {S_IFCHR | 07777, "Dugctrwxrwxrwx"},
    };
    char out[VFS_PERMS_LEN];
    (void)state;
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        vfs_go_perms(cases[i].m, out);
        assert_string_equal(out, cases[i].want);
    }
}

static void
test_resolve(void **state)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
            {"", "/home/user"},
            {"~", "/home/user"},
            {"~/", "/home/user"},
            {"~/a/b", "/home/user/a/b"},
            {"a.txt", "/home/user/a.txt"},
            {"./a/../b", "/home/user/b"},
            {"/tmp/x", "/tmp/x"},
            {"/0/x.txt", "/0/x.txt"},
            {"/a//b/./c/", "/a/b/c"},
            {"/../../etc", "/etc"},
            {"../../../..", "/"},
            {"/", "/"},
            {"..a/.b", "/home/user/..a/.b"},
    };
    char out[PATH_MAX_LEN + 1], big[PATH_MAX_LEN + 64];
    struct err e = {0};
    (void)state;
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        assert_int_equal(vfs_resolve(cases[i].in, "/home/user", out, sizeof(out), &e), 0);
        assert_string_equal(out, cases[i].want);
    }
    assert_int_equal(vfs_resolve(NULL, "/root", out, sizeof(out), NULL), 0);
    assert_string_equal(out, "/root");
    assert_int_equal(vfs_resolve("~bob/x", "/home/user", out, sizeof(out), &e), -EINVAL);
    assert_int_equal(vfs_resolve("x", "rel", out, sizeof(out), NULL), -EINVAL);
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(vfs_resolve(big, "/", out, sizeof(out), NULL), -ENAMETOOLONG);
    for (size_t i = 1; i < sizeof(big) - 1; i += 100)
        big[i] = '/';
    assert_int_equal(vfs_resolve(big, "/", out, sizeof(out), NULL), -ENAMETOOLONG);
    assert_int_equal(vfs_resolve("/a/b", "/", out, 4, NULL), -ENAMETOOLONG);
}

static void
test_meta_limits(void **state)
{
    static struct vfs_meta m;
    char key[VFS_META_KEY_MAX + 2], val[VFS_META_BYTES + 1];
    (void)state;
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    assert_int_equal(vfs_meta_add(&m, key, "v"), -EINVAL); /* 247 bytes */
    key[VFS_META_KEY_MAX] = '\0';
    assert_int_equal(vfs_meta_add(&m, key, "v"), 0);
    assert_int_equal(vfs_meta_add(&m, "", "v"), -EINVAL);
    memset(val, 'v', sizeof(val) - 1);
    val[VFS_META_BYTES - VFS_META_KEY_MAX - 1 - 1] = '\0'; /* exactly 4096 with "b" */
    assert_int_equal(vfs_meta_add(&m, "b", val), 0);
    assert_int_equal(vfs_meta_add(&m, "c", ""), -EINVAL);
    m = (struct vfs_meta){0};
    for (int i = 0; i < VFS_META_MAX; i++) {
        char k[8];
        (void)snprintf(k, sizeof(k), "k%d", i);
        assert_int_equal(vfs_meta_add(&m, k, "v"), 0);
    }
    assert_int_equal(vfs_meta_add(&m, "more", "v"), -EINVAL);
    assert_string_equal(vfs_meta_key(&m, 31), "k31");
    assert_string_equal(vfs_meta_value(&m, 31), "v");
}

/* --- entries --- */

static void
test_stat(void **state)
{
    static struct vfs_entry e;
    struct err err = {0};
    (void)state;

    put("/home/user/a.txt", "hello");
    own("/home/user/a.txt", USER, USER);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1700000000, 123456789}};
    assert_int_equal(utimensat(root, "home/user/a.txt", ts, 0), 0);
    stat_ok("/home/user/a.txt", &e);
    assert_string_equal(e.name, "a.txt");
    assert_string_equal(e.path, "/home/user/a.txt");
    assert_int_equal(e.type, VFS_FILE);
    assert_int_equal(e.size, 5);
    assert_int_equal(e.mode, 0644);
    assert_string_equal(e.perms, "-rw-r--r--");
    assert_string_equal(e.owner, "user");
    assert_string_equal(e.group, "user");
    assert_int_equal(e.mtime_sec, 1700000000);
    assert_int_equal(e.mtime_nsec, 123456789);
    assert_false(e.has_target);
    assert_int_equal(e.meta.n, 0);

    stat_ok("/", &e);
    assert_string_equal(e.name, "/");
    assert_int_equal(e.type, VFS_DIR);
    assert_string_equal(e.owner, "nobody"); /* host 0: outside the range */
    assert_string_equal(e.group, "nogroup");
    stat_ok("/tmp", &e);
    assert_string_equal(e.perms, "dtrwxrwxrwx");
    assert_int_equal(e.mode, 0777);
    put("/su", "");
    assert_int_equal(fchmodat(root, "su", 04755, 0), 0);
    stat_ok("/su", &e);
    assert_string_equal(e.perms, "urwxr-xr-x");
    assert_int_equal(e.mode, 0755);

    /* ownership names as the sandbox's /etc has them */
    static const struct {
        uid_t u;
        gid_t g;
        const char *owner, *group;
    } names[] = {
            {RFIRST, RFIRST, "root", "root"},
            {USER, RFIRST + 5, "user", "tty"},
            {RFIRST + 1234, RFIRST + 100, "1234", "users"},
            {RFIRST + 65534, RFIRST + 65534, "nobody", "nogroup"},
            {RFIRST + 65536, 7, "nobody", "nogroup"},
            {RFIRST - 1, RFIRST + 99, "nobody", "99"},
    };
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        own("/su", names[i].u, names[i].g);
        stat_ok("/su", &e);
        assert_string_equal(e.owner, names[i].owner);
        assert_string_equal(e.group, names[i].group);
    }

    /* symlinks: lstat's size and perms, the target's type and mode */
    stat_ok("/home/user/pw", &e);
    assert_int_equal(e.type, VFS_FILE);
    assert_string_equal(e.perms, "Lrwxrwxrwx");
    assert_int_equal(e.size, strlen("/etc/passwd"));
    assert_int_equal(e.mode, 0644);
    assert_true(e.has_target);
    assert_string_equal(e.target, "/etc/passwd");
    stat_ok("/home/user/hop2", &e); /* hop2 → hop1 → ../../etc/../home/user/pw → /etc/passwd */
    assert_int_equal(e.type, VFS_FILE);
    assert_string_equal(e.target, "/etc/passwd");
    stat_ok("/home/user/dl", &e);
    assert_int_equal(e.type, VFS_DIR);
    assert_string_equal(e.target, "/home/user/d");
    assert_int_equal(e.meta.n, 0);
    stat_ok("/home/user/d/subdir3", &e);
    assert_string_equal(e.target, "/home/user/d/subdir1");
    const char *broken[] = {"/home/user/broken", "/home/user/loop", "/home/user/esc",
                            "/home/user/escrel"};
    for (size_t i = 0; i < ELEMENTSOF(broken); i++) {
        stat_ok(broken[i], &e);
        assert_int_equal(e.type, VFS_UNSPECIFIED);
        assert_int_equal(e.mode, 0777);
        assert_string_equal(e.target, broken[i]);
    }
    /* a FIFO is no file */
    assert_int_equal(mkfifoat(root, "home/user/fifo", 0600), 0);
    stat_ok("/home/user/fifo", &e);
    assert_int_equal(e.type, VFS_UNSPECIFIED);
    assert_string_equal(e.perms, "prw-------");

    assert_int_equal(vfs_stat(root, &ids, "/home/user/none", &e, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "'/home/user/none' does not exist"));
    assert_int_equal(vfs_stat(root, &ids, "/home/user/pw/x", &e, NULL), -ENOTDIR);
    assert_int_equal(vfs_stat(root, &ids, "/home/user/esc/secret", &e, NULL), -ENOENT);
    /* the last component is never followed, the ones before are (inside) */
    stat_ok("/home/user/dl/file1.txt", &e);
    assert_string_equal(e.path, "/home/user/dl/file1.txt");
    assert_int_equal(e.size, 3);
}

static void
test_meta(void **state)
{
    static struct vfs_entry e;
    static struct vfs_meta m;
    struct err err = {0};
    char v[8];
    int fd = -1;
    (void)state;

    /* set by other means, read back without the prefix */
    put("/home/user/m.txt", "m");
    int f = openat(root, "home/user/m.txt", O_RDONLY | O_CLOEXEC);
    assert_true(f >= 0);
    assert_int_equal(fsetxattr(f, "user.e2b.author", "ann", 3, 0), 0);
    assert_int_equal(fsetxattr(f, "user.other", "o", 1, 0), 0);
    assert_int_equal(fsetxattr(f, "user.e2b.bin", "a\0b", 3, 0), 0); /* not text: left out */
    close(f);
    stat_ok("/home/user/m.txt", &e);
    assert_int_equal(e.meta.n, 1);
    assert_string_equal(vfs_meta_key(&e.meta, 0), "author");
    assert_string_equal(vfs_meta_value(&e.meta, 0), "ann");
    /* a link to it has none of its own */
    ln("m.txt", "/home/user/ml");
    stat_ok("/home/user/ml", &e);
    assert_int_equal(e.meta.n, 0);
    /* directories carry metadata too */
    char dpath[300];
    (void)snprintf(dpath, sizeof(dpath), "%s/root/home/user/d", top);
    assert_int_equal(setxattr(dpath, "user.e2b.kind", "dir", 3, 0), 0);
    stat_ok("/home/user/d", &e);
    assert_int_equal(e.meta.n, 1);

    /* replace: the old set goes, other namespaces stay */
    struct vfs_upload *up = NULL;
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/m.txt", false, 100, &up, &err), 0);
    fd = vfs_upload_fd(up);
    assert_int_equal(vfs_meta_add(&m, "k1", "v1"), 0);
    assert_int_equal(vfs_meta_add(&m, "k2", ""), 0);
    assert_int_equal(vfs_set_meta(fd, &m, &err), 0);
    assert_int_equal(vfs_upload_commit(up, NULL, &err), 0);
    fd = openat(root, "home/user/m.txt", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(vfs_stat_fd(fd, &ids, "/home/user/m.txt", &e, &err), 0);
    assert_string_equal(e.name, "m.txt");
    assert_int_equal(e.type, VFS_FILE);
    assert_string_equal(e.owner, "user");
    assert_int_equal(e.meta.n, 2); /* in the file system's order */
    int k1 = !strcmp(vfs_meta_key(&e.meta, 0), "k1") ? 0 : 1;
    assert_string_equal(vfs_meta_key(&e.meta, (uint32_t)k1), "k1");
    assert_string_equal(vfs_meta_value(&e.meta, (uint32_t)k1), "v1");
    assert_string_equal(vfs_meta_key(&e.meta, (uint32_t)!k1), "k2");
    assert_string_equal(vfs_meta_value(&e.meta, (uint32_t)!k1), "");
    assert_int_equal(fgetxattr(fd, "user.other", v, sizeof(v)), 1);
    assert_int_equal(fgetxattr(fd, "user.e2b.author", v, sizeof(v)), -1);
    assert_int_equal(vfs_set_meta(fd, NULL, &err), 0);
    assert_int_equal(vfs_stat_fd(fd, &ids, "/home/user/m.txt", &e, &err), 0);
    assert_int_equal(e.meta.n, 0);
    m.n = VFS_META_MAX + 1; /* hand-made bad sets: too many, an empty key */
    assert_int_equal(vfs_set_meta(fd, &m, &err), -EINVAL);
    m.n = 2;
    m.at[0].key = m.at[1].key;
    m.data[m.at[1].key] = '\0';
    assert_int_equal(vfs_set_meta(fd, &m, &err), -EINVAL);
    close(fd);
}

/* --- listing --- */

struct seen {
    char s[2048];
    int n, stop_at;
};

static int
collect(void *ud, const struct vfs_entry *e)
{
    struct seen *s = ud;
    size_t l = strlen(s->s);
    (void)snprintf(s->s + l, sizeof(s->s) - l, "%s%s%s", l ? "," : "", e->path,
                   e->type == VFS_DIR ? "/" : "");
    return ++s->n == s->stop_at ? -ECANCELED : 0;
}

static const char *
list(const char *p, unsigned depth, int want_r)
{
    static struct seen s;
    struct err e = {0};
    s = (struct seen){0};
    int r = vfs_list(root, &ids, p, depth, collect, &s, &e);
    if (r != want_r)
        fail_msg("list %s: %d (%s), want %d", p, r, e.msg, want_r);
    return s.s;
}

static void
test_list(void **state)
{
    (void)state;
    assert_string_equal(list("/home/user/d", 2, 0),
                        "/home/user/d/file1.txt,/home/user/d/subdir1/,"
                        "/home/user/d/subdir1/subdir1_1/,/home/user/d/subdir1/subdir1_2/,"
                        "/home/user/d/subdir2/,/home/user/d/subdir2/x,"
                        "/home/user/d/subdir3/");
    assert_string_equal(list("/home/user/d", 1, 0),
                        "/home/user/d/file1.txt,/home/user/d/subdir1/,/home/user/d/subdir2/,"
                        "/home/user/d/subdir3/");
    assert_string_equal(list("/home/user/d", 0, 0), list("/home/user/d", 1, 0));
    /* a link to a directory is followed for the listing, its name kept */
    assert_string_equal(list("/home/user/dl/subdir1", 5, 0),
                        "/home/user/dl/subdir1/subdir1_1/,/home/user/dl/subdir1/subdir1_2/,"
                        "/home/user/dl/subdir1/subdir1_2/deep");
    assert_string_equal(list("/etc", 1, 0), "/etc/passwd");
    assert_string_equal(list("/home", 1, 0), "/home/user/");
    list("/home/user/d/file1.txt", 1, -ENOTDIR);
    list("/home/user/pw", 1, -ENOTDIR);
    list("/home/user/none", 1, -ENOENT);
    list("/home/user/esc", 1, -ENOENT);
    list("/home/user/escrel", 1, -ENOENT);
    list("/home/user/broken", 1, -ENOENT);
    /* the callback stops the walk */
    static struct seen s;
    s = (struct seen){.stop_at = 2};
    assert_int_equal(vfs_list(root, &ids, "/home/user/d", 3, collect, &s, NULL), -ECANCELED);
    assert_int_equal(s.n, 2);
    /* "/" lists the root, paths without a double slash */
    assert_non_null(strstr(list("/", 1, 0), "/etc/,/home/"));
}

static void
test_list_limits(void **state)
{
    char p[PATH_MAX_LEN];
    struct err e = {0};
    (void)state;

    /* deeper than VFS_MAX_DEPTH */
    size_t o = (size_t)snprintf(p, sizeof(p), "/deep");
    mk(p, 0755);
    for (int i = 0; i <= VFS_MAX_DEPTH; i++) {
        o += (size_t)snprintf(p + o, sizeof(p) - o, "/d");
        mk(p, 0755);
    }
    static struct seen s;
    s = (struct seen){0};
    assert_int_equal(vfs_list(root, &ids, "/deep", VFS_MAX_DEPTH + 10, collect, &s, &e), -ELOOP);
    assert_int_equal(vfs_list(root, &ids, "/deep", VFS_MAX_DEPTH, collect, &(struct seen){0}, NULL),
                     0);
    /* removal has no depth limit */
    assert_int_equal(vfs_remove(root, "/deep", &e), 0);
    assert_false(exists(root, "deep"));

    /* more than VFS_LIST_MAX entries */
    mk("/many", 0755);
    int d = openat(root, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < VFS_LIST_MAX; i++) {
        char n[16];
        (void)snprintf(n, sizeof(n), "%d", i);
        assert_int_equal(mkdirat(d, n, 0755), 0);
    }
    s = (struct seen){0};
    assert_int_equal(vfs_list(root, &ids, "/many", 1, collect, &s, &e), 0);
    assert_int_equal(s.n, VFS_LIST_MAX);
    assert_int_equal(mkdirat(d, "0/x", 0755), 0);
    s = (struct seen){0};
    err_clear(&e);
    assert_int_equal(vfs_list(root, &ids, "/many", 2, collect, &s, &e), -E2BIG);
    assert_non_null(strstr(e.msg, "more than 100000 entries"));
    assert_int_equal(mkdirat(d, "extra", 0755), 0);
    assert_int_equal(vfs_list(root, &ids, "/many", 1, collect, &s, NULL), -E2BIG);
    close(d);
    assert_int_equal(vfs_remove(root, "/many", &e), 0);
    assert_false(exists(root, "many"));
}

/* --- changing --- */

static void
owned_by(const char *p, uid_t u, mode_t mode)
{
    struct stat st;
    assert_int_equal(fstatat(root, p + 1, &st, AT_SYMLINK_NOFOLLOW), 0);
    if (st.st_uid != u || st.st_gid != u || (st.st_mode & 07777) != mode)
        fail_msg("%s: %u:%u %o, want %u:%u %o", p, st.st_uid, st.st_gid, st.st_mode & 07777, u, u,
                 mode);
}

static void
test_mkdir(void **state)
{
    struct err e = {0};
    bool created = false;
    (void)state;

    umask(077);
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/n1/n2", false, &created, &e), 0);
    assert_true(created);
    owned_by("/home/user/n1", USER, 0755);
    owned_by("/home/user/n1/n2", USER, 0755);
    assert_int_equal(vfs_mkdir(root, &ids, "/0/r", true, &created, &e), 0);
    owned_by("/0", RFIRST, 0755);
    owned_by("/0/r", RFIRST, 0755);
    umask(022);
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/n1/n2", false, &created, &e), 0);
    assert_false(created);
    assert_int_equal(vfs_mkdir(root, &ids, "/", false, &created, &e), 0);
    assert_false(created);
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/dl", false, &created, &e), 0);
    assert_false(created); /* a link to a directory is one */
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/dl/new", false, &created, &e), 0);
    assert_true(created);
    assert_true(exists(root, "home/user/d/new"));
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/pw", false, &created, &e), -ENOTDIR);
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/pw/x", false, &created, &e), -ENOTDIR);
    assert_int_equal(vfs_mkdir(root, &ids, "/etc/passwd/x/y", false, &created, &e), -ENOTDIR);
    assert_int_equal(vfs_mkdir(root, &ids, "/home/user/broken", false, &created, &e), -ENOTDIR);
    /* through a link to the outside: made inside the root, if anywhere */
    (void)vfs_mkdir(root, &ids, "/home/user/esc/new", false, &created, NULL);
    (void)vfs_mkdir(root, &ids, "/home/user/escrel/new", false, &created, NULL);
    outside_untouched();
}

static void
test_rename(void **state)
{
    struct err e = {0};
    struct stat st;
    (void)state;

    put("/home/user/r.txt", "r");
    assert_int_equal(vfs_rename(root, &ids, "/home/user/r.txt", "/home/user/p/q/r2.txt", false, &e),
                     0);
    assert_false(exists(root, "home/user/r.txt"));
    owned_by("/home/user/p", USER, 0755);
    owned_by("/home/user/p/q", USER, 0755);
    assert_true(exists(root, "home/user/p/q/r2.txt"));
    assert_int_equal(vfs_rename(root, &ids, "/home/user/none", "/home/user/x", false, &e), -ENOENT);
    assert_false(exists(root, "home/user/x"));
    /* a link moves as a link */
    assert_int_equal(vfs_rename(root, &ids, "/home/user/pw", "/home/user/pw2", false, &e), 0);
    assert_int_equal(fstatat(root, "home/user/pw2", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(exists(root, "etc/passwd"));
    /* onto an existing directory: Go's EEXIST; a file is replaced */
    assert_int_equal(vfs_rename(root, &ids, "/home/user/pw2", "/home/user/d", false, &e), -EEXIST);
    assert_int_equal(vfs_rename(root, &ids, "/home/user/pw2", "/home/user/p/q/r2.txt", false, &e),
                     0);
    assert_int_equal(vfs_rename(root, &ids, "/", "/x", false, &e), -EBUSY);
    assert_int_equal(vfs_rename(root, &ids, "/home/user/p", "/", false, &e), -EBUSY);
    assert_int_equal(vfs_rename(root, &ids, "/home/user/p", "/home/user/p/q/in", false, &e),
                     -EINVAL);
    /* to and from the outside: inside the root, or not at all */
    put("/home/user/s", "s");
    (void)vfs_rename(root, &ids, "/home/user/s", "/home/user/esc/s", false, NULL);
    assert_int_equal(vfs_rename(root, &ids, "/home/user/esc/secret", "/home/user/t", false, NULL),
                     -ENOENT);
    outside_untouched();
}

static void
test_remove(void **state)
{
    struct err e = {0};
    (void)state;

    assert_int_equal(vfs_remove(root, "/home/user/none", &e), 0);
    assert_int_equal(vfs_remove(root, "/none/deeper", &e), 0);
    /* a link goes, never what it points to */
    assert_int_equal(vfs_remove(root, "/home/user/dl", &e), 0);
    assert_false(exists(root, "home/user/dl"));
    assert_true(exists(root, "home/user/d/subdir1/subdir1_2/deep"));
    assert_int_equal(vfs_remove(root, "/home/user/esc", &e), 0);
    assert_int_equal(vfs_remove(root, "/home/user/escrel", &e), 0);
    outside_untouched();
    /* a tree, with a link inside pointing out */
    char abs[256];
    (void)snprintf(abs, sizeof(abs), "%s/outside", top);
    ln(abs, "/home/user/d/subdir1/out");
    ln("/etc", "/home/user/d/subdir2/etc");
    assert_int_equal(vfs_remove(root, "/home/user/d", &e), 0);
    assert_false(exists(root, "home/user/d"));
    assert_true(exists(root, "etc/passwd"));
    outside_untouched();
    /* a component followed on the way (inside) */
    mk("/home/user/t", 0755);
    put("/home/user/t/f", "");
    ln("/home/user/t", "/home/user/tl");
    assert_int_equal(vfs_remove(root, "/home/user/tl/f", &e), 0);
    assert_false(exists(root, "home/user/t/f"));
    assert_int_equal(vfs_remove(root, "/", &e), -EBUSY);
    assert_int_equal(vfs_remove(root, "/etc/passwd/x", &e), -ENOTDIR);
}

/* 1,500 levels with sockets and fifos in them go; what cannot go (a mount
 * point) is named, not blamed on depth or symlinks. */
static void
test_remove_deep(void **state)
{
    struct err e = {0};
    char p[4096];
    (void)state;

    mk("/home/user/deep", 0755);
    int cur = openat(root, "home/user/deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 1500; i++) {
        if (i % 500 == 0) {
            assert_int_equal(mkfifoat(cur, "fifo", 0600), 0);
            assert_int_equal(write_file_at(cur, "f", "x", 0644), 0);
        }
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
    }
    close(cur);
    int r = vfs_remove(root, "/home/user/deep", &e);
    if (r < 0)
        fail_msg("remove of a 1500-deep tree: %s", e.msg);
    assert_false(exists(root, "home/user/deep"));

    /* a mount point 3 levels down */
    mk("/home/user/m", 0755);
    mk("/home/user/m/a", 0755);
    mk("/home/user/m/a/b", 0755);
    mk("/home/user/m/a/b/mnt", 0755);
    (void)snprintf(p, sizeof(p), "%s/root/home/user/m/a/b/mnt", top);
    assert_int_equal(mount("tmpfs", p, "tmpfs", 0, NULL), 0);
    err_clear(&e);
    assert_int_equal(vfs_remove(root, "/home/user/m", &e), -EBUSY);
    if (!strstr(e.msg, "cannot remove 'mnt' (3 levels below '/home/user/m')"))
        fail_msg("message: %s", e.msg);
    assert_int_equal(umount2(p, MNT_DETACH), 0);
    assert_int_equal(vfs_remove(root, "/home/user/m", &e), 0);
    outside_untouched();
}

static void
test_open_read(void **state)
{
    struct err e = {0};
    uint64_t size = 0;
    int fd = -1;
    (void)state;

    assert_int_equal(vfs_open_read(root, &ids, "/home/user/pw", false, &fd, &size, &e), 0);
    assert_int_equal(size, 7);
    fd_is(fd, "inside\n"); /* /etc/passwd of the root, not the host's */
    close(fd);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/hop2", false, &fd, &size, &e), 0);
    close(fd);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/d", false, &fd, &size, &e), -EISDIR);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/dl", false, &fd, &size, &e), -EISDIR);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/none", false, &fd, &size, &e), -ENOENT);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/esc/secret", false, &fd, &size, &e),
                     -ENOENT);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/escrel/secret", false, &fd, &size, &e),
                     -ENOENT);
    assert_int_equal(mkfifoat(root, "home/user/fifo2", 0600), 0); /* must not block */
    err_clear(&e);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/fifo2", false, &fd, &size, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'/home/user/fifo2' is a fifo, not a regular file"));
    assert_int_equal(mknodat(root, "home/user/null", S_IFCHR | 0666, makedev(1, 3)), 0);
    err_clear(&e);
    assert_int_equal(vfs_open_read(root, &ids, "/home/user/null", false, &fd, &size, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "is a character device"));
}

/* Writes data to path with a staged upload, as the E2B route does. */
static int
write_via(const char *path, bool as_root, const char *data, struct err *e)
{
    struct vfs_upload *up = NULL;
    int r = vfs_upload_begin(root, &ids, path, as_root, 1 << 20, &up, e);
    if (r < 0)
        return r;
    r = vfs_upload_write(up, data, strlen(data), e);
    if (r < 0) {
        vfs_upload_abort(up);
        return r;
    }
    return vfs_upload_commit(up, NULL, e);
}

static void
content_is(const char *p, const char *want)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(read_file_at(root, p + 1, 1 << 20, &b), 0);
    assert_string_equal(b.data, want);
    buf_done(&b);
}

/* Names in directory p joined with ',', sorted: no temporary name may
 * ever show up here. */
static void
names_are(const char *p, const char *want)
{
    char **v = NULL, out[1024] = "";
    size_t n = 0;
    _cleanup_close_ int d = openat(root, p + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(d >= 0);
    assert_int_equal(fd_dir_names(d, 64, &v, &n), 0);
    for (size_t i = 0; i < n; i++)
        (void)snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "," : "", v[i]);
    fd_names_free(v, n);
    assert_string_equal(out, want);
}

static void
test_upload(void **state)
{
    struct err e = {0};
    (void)state;

    umask(077);
    assert_int_equal(write_via("/0/deep/x.txt", false, "data", &e), 0);
    umask(022);
    owned_by("/0", USER, 0755);
    owned_by("/0/deep", USER, 0755);
    owned_by("/0/deep/x.txt", USER, 0644);
    content_is("/0/deep/x.txt", "data");
    /* an existing file: replaced, chowned, mode kept (set-id bits not) */
    put("/home/user/w.txt", "longer content");
    assert_int_equal(fchmodat(root, "home/user/w.txt", 04600, 0), 0);
    assert_int_equal(write_via("/home/user/w.txt", true, "new", &e), 0);
    content_is("/home/user/w.txt", "new");
    owned_by("/home/user/w.txt", RFIRST, 0600);
    /* a final symlink is followed, inside the root, and stays a link */
    assert_int_equal(write_via("/home/user/pw", false, "via link\n", &e), 0);
    content_is("/etc/passwd", "via link\n");
    struct stat st;
    assert_int_equal(fstatat(root, "home/user/pw", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    /* a dangling one creates its target */
    ln("/tmp/made", "/home/user/dangling");
    assert_int_equal(write_via("/home/user/dangling", false, "", &e), 0);
    owned_by("/tmp/made", USER, 0644);
    assert_int_equal(write_via("/home/user/broken", false, "", &e), 0);
    assert_true(exists(root, "nope"));
    assert_int_equal(write_via("/home/user/loop", false, "", &e), -ELOOP);
    /* refused */
    assert_int_equal(write_via("/home/user/d", false, "", &e), -EISDIR);
    assert_int_equal(write_via("/home/user/dl", false, "", &e), -EISDIR);
    assert_int_equal(write_via("/", false, "", &e), -EISDIR);
    assert_int_equal(write_via("/etc/passwd/x", false, "", &e), -ENOTDIR);
    assert_int_equal(mkfifoat(root, "home/user/fifo3", 0600), 0);
    err_clear(&e);
    assert_int_equal(write_via("/home/user/fifo3", false, "", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "is a fifo, not a regular file"));
    /* the outside, by every link: inside the root or nowhere */
    (void)write_via("/home/user/esc/secret", false, "x", NULL);
    (void)write_via("/home/user/escrel/secret", false, "x", NULL);
    char abs[256];
    (void)snprintf(abs, sizeof(abs), "%s/outside/new", top);
    ln(abs, "/home/user/escnew");
    assert_int_equal(write_via("/home/user/escnew", false, "x", &e), -ENOENT);
    outside_untouched();
}

/* Nothing is visible before commit; abort, a limit, or a directory put in
 * the way leave the old content and no temporary name. */
static void
test_upload_atomic(void **state)
{
    struct vfs_upload *up = NULL;
    struct err e = {0};
    bool created = true;
    (void)state;

    mk("/home/user/at", 0755);
    put("/home/user/at/f", "old content");
    char pf[300];
    (void)snprintf(pf, sizeof(pf), "%s/root/home/user/at/f", top);
    assert_int_equal(setxattr(pf, "user.keep", "k", 1, 0), 0);
    assert_int_equal(setxattr(pf, "user.e2b.old", "o", 1, 0), 0);
    /* aborted half way */
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/f", false, 100, &up, &e), 0);
    assert_int_equal(vfs_upload_write(up, "half", 4, &e), 0);
    content_is("/home/user/at/f", "old content");
    names_are("/home/user/at", "f");
    vfs_upload_abort(up);
    content_is("/home/user/at/f", "old content");
    names_are("/home/user/at", "f");
    /* over the limit */
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/f", false, 6, &up, &e), 0);
    assert_int_equal(vfs_upload_write(up, "12345", 5, &e), 0);
    assert_int_equal(vfs_upload_write(up, "67", 2, &e), -EFBIG);
    assert_int_equal(vfs_upload_size(up), 5);
    vfs_upload_abort(up);
    content_is("/home/user/at/f", "old content");
    /* a new file that never commits leaves nothing */
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/new", false, 9, &up, &e), 0);
    assert_int_equal(vfs_upload_write(up, "x", 1, &e), 0);
    names_are("/home/user/at", "f");
    vfs_upload_abort(up);
    names_are("/home/user/at", "f");
    /* commit: the new content at once; user.* kept, user.e2b.* the upload's */
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/f", false, 100, &up, &e), 0);
    assert_int_equal(vfs_upload_write(up, "new", 3, &e), 0);
    static struct vfs_meta m;
    assert_int_equal(vfs_meta_add(&m, "k", "v"), 0);
    assert_int_equal(vfs_set_meta(vfs_upload_fd(up), &m, &e), 0);
    assert_int_equal(vfs_upload_commit(up, &created, &e), 0);
    assert_false(created);
    content_is("/home/user/at/f", "new");
    names_are("/home/user/at", "f");
    char v[8] = "";
    assert_int_equal(getxattr(pf, "user.keep", v, sizeof(v)), 1);
    assert_int_equal(getxattr(pf, "user.e2b.k", v, sizeof(v)), 1);
    assert_int_equal(getxattr(pf, "user.e2b.old", v, sizeof(v)), -1);
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/g", false, 9, &up, &e), 0);
    assert_int_equal(vfs_upload_commit(up, &created, &e), 0);
    assert_true(created);
    names_are("/home/user/at", "f,g");
    /* a directory put where the file goes meanwhile is never replaced */
    assert_int_equal(vfs_upload_begin(root, &ids, "/home/user/at/h", false, 9, &up, &e), 0);
    mk("/home/user/at/h", 0755);
    assert_int_equal(vfs_upload_commit(up, &created, &e), -EISDIR);
    names_are("/home/user/at", "f,g,h");
    names_are("/home/user/at/h", "");
}

/* procfs in the view: readable as the sandbox, never writable, never with
 * host root's privileges. */
static void
test_procfs(void **state)
{
    struct err e = {0};
    uint64_t size = 1;
    char buf[64];
    int fd = -1;
    (void)state;

    mk("/proc", 0555);
    char p[300];
    (void)snprintf(p, sizeof(p), "%s/root/proc", top);
    if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        skip();
    assert_int_equal(
            vfs_open_read(root, &ids, "/proc/sys/kernel/random/boot_id", false, &fd, &size, &e), 0);
    assert_int_equal(size, 0);
    assert_int_equal(read(fd, buf, sizeof(buf)), 37);
    close(fd);
    /* host root could read the kernel log; the sandbox's user cannot */
    assert_int_equal(vfs_open_read(root, &ids, "/proc/kmsg", true, &fd, &size, &e), -EACCES);
    assert_int_equal(geteuid(), 0); /* and we are ourselves again */
    assert_int_equal(getegid(), 0);
    assert_int_equal(fchownat(root, "home/user", USER, USER, 0), 0);
    assert_int_equal(write_via("/proc/sys/kernel/hostname", true, "x", &e), -EACCES);
    assert_int_equal(write_via("/proc/newfile", true, "x", NULL) < 0, 1);
    /* magic links are neither followed nor resolved */
    static struct vfs_entry ent;
    char self[64];
    (void)snprintf(self, sizeof(self), "/proc/%d/cwd", (int)getpid());
    stat_ok(self, &ent);
    assert_int_equal(ent.type, VFS_UNSPECIFIED);
    assert_string_equal(ent.target, self);
    (void)snprintf(self, sizeof(self), "/proc/%d/root/etc/passwd", (int)getpid());
    assert_int_equal(vfs_open_read(root, &ids, self, false, &fd, &size, &e), -ELOOP);
    assert_int_equal(umount2(p, MNT_DETACH), 0);
}

/* The directory a watch starts from, and the ones below it it descends to. */
static void
test_open_dir(void **state)
{
    struct err e = {0};
    struct stat a, b;
    int d = -1, l = -1, sub = -1, x = -1;
    (void)state;

    assert_int_equal(vfs_open_dir(root, "/home/user/d", &d, &e), 0);
    assert_int_equal(vfs_open_dir(root, "/home/user/dl", &l, &e), 0); /* followed, inside */
    assert_int_equal(fstat(d, &a), 0);
    assert_int_equal(fstat(l, &b), 0);
    assert_true(S_ISDIR(a.st_mode) && a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    assert_true(fcntl(d, F_GETFD) & FD_CLOEXEC);
    close(l);
    assert_int_equal(vfs_open_dir(root, "/home/user/d/file1.txt", &x, NULL), -ENOTDIR);
    assert_int_equal(vfs_open_dir(root, "/home/user/nope", &x, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/home/user/nope"));
    assert_int_equal(vfs_open_dir(root, "/home/user/broken", &x, NULL), -ENOENT);
    assert_int_equal(vfs_open_dir(root, "/home/user/esc", &x, NULL), -ENOENT); /* not the outside */
    assert_int_equal(x, -1);

    assert_int_equal(vfs_open_below(d, "subdir1/subdir1_1", &sub, &e), 0);
    assert_int_equal(fstat(sub, &a), 0);
    assert_int_equal(fstatat(root, "home/user/d/subdir1/subdir1_1", &b, 0), 0);
    assert_true(a.st_ino == b.st_ino);
    close(sub);
    assert_int_equal(vfs_open_below(d, "subdir1/../subdir2", &sub, NULL), 0);
    close(sub);
    assert_int_equal(vfs_open_below(d, "subdir3", &x, NULL), -ELOOP); /* a link, even inside */
    assert_int_equal(vfs_open_below(d, "subdir3/subdir1_1", &x, NULL), -ELOOP);
    assert_int_equal(vfs_open_below(d, "file1.txt", &x, NULL), -ENOTDIR);
    assert_int_equal(vfs_open_below(d, "missing", &x, NULL), -ENOENT);
    assert_int_equal(vfs_open_below(d, "../d", &x, NULL), -EXDEV);
    assert_int_equal(vfs_open_below(d, "/etc", &x, NULL), -EXDEV);
    assert_int_equal(x, -1);
    close(d);
}

/* A directory swapped for a link to the outside while we write through it. */
static volatile bool stop;

static void *
swapper(void *arg)
{
    (void)arg;
    while (!stop)
        (void)renameat2(root, "home/user/sw.alt", root, "home/user/sw", RENAME_EXCHANGE);
    return NULL;
}

static void
test_swap_race(void **state)
{
    pthread_t t;
    static struct vfs_entry ent;
    int fd;
    (void)state;

    char abs[256];
    (void)snprintf(abs, sizeof(abs), "%s/outside", top);
    mk("/home/user/sw", 0755);
    ln(abs, "/home/user/sw.alt");
    stop = false;
    assert_int_equal(pthread_create(&t, NULL, swapper, NULL), 0);
    for (int i = 0; i < 3000; i++) {
        (void)write_via("/home/user/sw/secret", false, "x", NULL);
        if (vfs_open_read(root, &ids, "/home/user/sw/secret", false, &fd, &(uint64_t){0}, NULL) ==
            0)
            close(fd);
        (void)vfs_mkdir(root, &ids, "/home/user/sw/m", false, &(bool){0}, NULL);
        (void)vfs_stat(root, &ids, "/home/user/sw/secret", &ent, NULL);
        (void)vfs_remove(root, "/home/user/sw/secret", NULL);
    }
    stop = true;
    pthread_join(t, NULL);
    outside_untouched();
}

/* Without openat2 every operation refuses, never walks unconfined. */
static void
test_no_openat2(void **state)
{
    int status;
    (void)state;

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static struct vfs_entry e;
        struct err err = {0};
        bool created;
        int fd;
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 ||
            seccomp_load(ctx) < 0)
            _exit(3);
        if (vfs_stat(root, &ids, "/etc/passwd", &e, &err) != -ENOSYS ||
            !strstr(err.msg, "lacks openat2") ||
            vfs_list(root, &ids, "/", 1, collect, &(struct seen){0}, NULL) != -ENOSYS ||
            vfs_mkdir(root, &ids, "/new", false, &created, NULL) != -ENOSYS ||
            vfs_open_read(root, &ids, "/etc/passwd", false, &fd, &(uint64_t){0}, NULL) != -ENOSYS ||
            write_via("/etc/x", false, "", NULL) != -ENOSYS ||
            vfs_remove(root, "/etc/passwd", NULL) != -ENOSYS ||
            vfs_open_dir(root, "/etc", &fd, NULL) != -ENOSYS ||
            vfs_open_below(root, "etc", &fd, NULL) != -ENOSYS || exists(root, "new"))
            _exit(1);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(exists(root, "etc/passwd"));
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_go_perms),
            cmocka_unit_test(test_resolve),
            cmocka_unit_test(test_meta_limits),
            T(test_stat),
            T(test_meta),
            T(test_list),
            T(test_list_limits),
            T(test_mkdir),
            T(test_rename),
            T(test_remove),
            T(test_remove_deep),
            T(test_open_read),
            T(test_upload),
            T(test_upload_atomic),
            T(test_open_dir),
            T(test_procfs),
            T(test_swap_race),
            T(test_no_openat2),
    };
    if (geteuid() != 0) {
        fprintf(stderr, "test-vfs: needs root (chown, mounts), skipping\n");
        return 77;
    }
    /* Our own mount namespace: the tmpfs and proc mounts vanish with us. */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        fprintf(stderr, "test-vfs: no private mount namespace (%s), skipping\n", strerror(errno));
        return 77;
    }
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
