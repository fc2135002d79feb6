/*
 * test-files.c - workspace file operations against a real temporary
 * directory used as the workspace root: uploads (parents created and owned,
 * replace, never a directory, abort leaves no names, size limit, a parent
 * swapped for a symlink mid-upload), delete, mkdir -p, rmdir, rename,
 * 1,500 levels, walk (order, types, symlink targets, never following, entry
 * and depth limits), sockets, fifos and devices named and never opened, versions that change even
 * when mtime is reset, and every path that escapes through a symlink refused with -EXDEV or -ELOOP.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/files.h"
#include "util/buf.h"
#include "util/fd.h"
#include "util/path.h"

#define UID 4321
#define GID 4322

static char top[256];
static char outside[300];
static int topfd = -1, root = -1, outfd = -1;
static uid_t uid = (uid_t)-1;
static gid_t gid = (gid_t)-1;

static void
mk(const char *p)
{
    if (mkdirat(root, p, 0755) < 0)
        fail_msg("mkdir %s: %m", p);
}

static void
put(const char *p, const char *content)
{
    assert_int_equal(write_file_at(root, p, content, 0644), 0);
}

static void
ln(const char *target, const char *p)
{
    if (symlinkat(target, root, p) < 0)
        fail_msg("symlink %s: %m", p);
}

static bool
exists(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void
content_is(int dfd, const char *p, const char *want)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    int r = read_file_at(dfd, p, 1 << 20, &b);
    if (r < 0)
        fail_msg("read %s: %s", p, strerror(-r));
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    buf_done(&b);
}

/* Names in dfd/p joined with ',' in sorted order, to compare listings. */
static void
listing(int dfd, const char *p, char *out, size_t n)
{
    char names[64][NAME_MAX + 1];
    int k = 0;
    int fd = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    DIR *d = fdopendir(fd);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        assert_true(k < 64);
        (void)snprintf(names[k++], sizeof(names[0]), "%s", de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        size_t l = strlen(out);
        (void)snprintf(out + l, n - l, "%s%s", i ? "," : "", names[i]);
    }
}

static void
outside_untouched(void)
{
    char l[1024];
    listing(outfd, ".", l, sizeof(l));
    assert_string_equal(l, "dir,secret");
    content_is(outfd, "secret", "secret\n");
    listing(outfd, "dir", l, sizeof(l));
    assert_string_equal(l, "keep");
}

static int
setup(void **state)
{
    char target[400];
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(top, sizeof(top), "%.200s/abx-test-files-XXXXXX", tmp) >= (int)sizeof(top) ||
        !mkdtemp(top))
        return -1;
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (topfd < 0 || mkdirat(topfd, "ws", 0755) < 0 || mkdirat(topfd, "outside", 0755) < 0)
        return -1;
    root = openat(topfd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    outfd = openat(topfd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 || outfd < 0)
        return -1;
    (void)snprintf(outside, sizeof(outside), "%s/outside", top);
    if (write_file_at(outfd, "secret", "secret\n", 0644) < 0 || mkdirat(outfd, "dir", 0755) < 0 ||
        write_file_at(outfd, "dir/keep", "keep\n", 0644) < 0)
        return -1;
    /* the hostile links every test can use */
    (void)snprintf(target, sizeof(target), "%s", outside);
    if (symlinkat(target, root, "out") < 0 || symlinkat("../outside", root, "outrel") < 0 ||
        symlinkat("../outside/secret", root, "outfile") < 0 || symlinkat("/", root, "slash") < 0 ||
        symlinkat("loop", root, "loop") < 0)
        return -1;
    if (geteuid() == 0) {
        uid = UID;
        gid = GID;
    }
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    safe_close(root);
    safe_close(outfd);
    safe_close(topfd);
    return rm_rf_at(AT_FDCWD, top) == 0 ? 0 : -1;
}

static void
owned(const char *p)
{
    struct stat st;
    assert_int_equal(fstatat(root, p, &st, AT_SYMLINK_NOFOLLOW), 0);
    if (uid != (uid_t)-1) {
        if (st.st_uid != uid || st.st_gid != gid)
            fail_msg("%s belongs to %u:%u, want %u:%u", p, st.st_uid, st.st_gid, uid, gid);
    }
}

static int
upload(const char *rel, const char *data, uint64_t max, struct files_stat *st, bool *created,
       struct err *e)
{
    struct files_upload *up = NULL;
    int r = files_upload_begin(root, rel, uid, gid, max, &up, e);
    if (r < 0)
        return r;
    size_t n = strlen(data), half = n / 2;
    r = files_upload_write(up, data, half, e);
    if (r == 0)
        r = files_upload_write(up, data + half, n - half, e);
    if (r < 0) {
        files_upload_abort(up);
        return r;
    }
    return files_upload_commit(up, st, created, e);
}

/* --- uploads --- */

static void
test_upload_creates_and_replaces(void **state)
{
    struct files_stat st, again;
    struct err e = {0};
    bool created = false;
    (void)state;

    assert_int_equal(upload("a/b/c.txt", "hello world", 1000, &st, &created, &e), 0);
    assert_false(err_isset(&e));
    assert_true(created);
    content_is(root, "a/b/c.txt", "hello world");
    owned("a");
    owned("a/b");
    owned("a/b/c.txt");
    assert_int_equal(st.type, FILES_FILE);
    assert_int_equal(st.size, 11);
    assert_int_equal(strlen(st.version), FILES_VERSION_LEN);
    assert_int_equal(strspn(st.version, "0123456789abcdef"), FILES_VERSION_LEN);
    assert_int_equal(files_stat(root, "a/b/c.txt", &again, &e), 0);
    assert_string_equal(again.version, st.version);
    assert_int_equal(again.mode, 0644);

    /* replace: not created, new content, new version */
    assert_int_equal(upload("a/b/c.txt", "bye", 1000, &again, &created, &e), 0);
    assert_false(created);
    content_is(root, "a/b/c.txt", "bye");
    assert_string_not_equal(again.version, st.version);
    /* an empty file */
    assert_int_equal(upload("empty", "", 0, &st, &created, &e), 0);
    assert_true(created);
    assert_int_equal(st.size, 0);
    content_is(root, "empty", "");

    /* a symlink at the target is replaced itself, never followed */
    assert_int_equal(upload("outfile", "overwritten?", 1000, &st, &created, &e), 0);
    assert_false(created);
    struct stat lst;
    assert_int_equal(fstatat(root, "outfile", &lst, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(lst.st_mode));
    content_is(root, "outfile", "overwritten?");
    outside_untouched();
}

static void
test_upload_refuses_directory(void **state)
{
    struct files_stat st;
    struct err e = {0};
    bool created = true;
    char before[1024], after[1024];
    (void)state;

    mk("d");
    put("d/inner", "x");
    listing(root, ".", before, sizeof(before));
    assert_int_equal(upload("d", "data", 100, &st, &created, &e), -EISDIR);
    assert_non_null(strstr(e.msg, "'/d' is a directory"));
    listing(root, ".", after, sizeof(after));
    assert_string_equal(before, after); /* no temporary name left */
    content_is(root, "d/inner", "x");

    /* the root itself cannot be uploaded to */
    struct files_upload *up = NULL;
    err_clear(&e);
    assert_int_equal(files_upload_begin(root, ".", uid, gid, 10, &up, &e), -EINVAL);
    assert_null(up);
    /* nor a path below a file */
    put("file", "x");
    err_clear(&e);
    assert_int_equal(files_upload_begin(root, "file/x", uid, gid, 10, &up, &e), -ENOTDIR);
    assert_null(up);
}

static void
test_upload_abort(void **state)
{
    struct files_upload *up = NULL;
    struct err e = {0};
    char before[1024], after[1024];
    (void)state;

    mk("dir");
    put("dir/existing", "old");
    listing(root, "dir", before, sizeof(before));
    /* aborted after some data: no name appears, the old file is intact */
    assert_int_equal(files_upload_begin(root, "dir/existing", uid, gid, 100, &up, &e), 0);
    assert_int_equal(files_upload_write(up, "partial", 7, &e), 0);
    listing(root, "dir", after, sizeof(after));
    assert_string_equal(before, after); /* readers never see half a file */
    files_upload_abort(up);
    listing(root, "dir", after, sizeof(after));
    assert_string_equal(before, after);
    content_is(root, "dir/existing", "old");
    /* a new name, aborted without data */
    assert_int_equal(files_upload_begin(root, "dir/new", uid, gid, 100, &up, &e), 0);
    files_upload_abort(up);
    listing(root, "dir", after, sizeof(after));
    assert_string_equal(before, after);
    files_upload_abort(NULL);
}

static void
test_upload_size_limit(void **state)
{
    struct files_upload *up = NULL;
    struct files_stat st;
    struct err e = {0};
    bool created;
    char before[1024], after[1024];
    (void)state;

    assert_int_equal(files_upload_begin(root, "big", uid, gid, 10, &up, &e), 0);
    assert_int_equal(files_upload_write(up, "123456", 6, &e), 0);
    assert_int_equal(files_upload_write(up, "78901", 5, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "'/big' would be larger than 10 bytes"));
    assert_int_equal(files_upload_write(up, "7890", 4, &e), 0); /* exactly 10 */
    assert_int_equal(files_upload_write(up, "", 0, &e), 0);
    assert_int_equal(files_upload_write(up, "x", 1, NULL), -EFBIG);
    assert_int_equal(files_upload_commit(up, &st, &created, &e), 0);
    assert_int_equal(st.size, 10);
    content_is(root, "big", "1234567890");

    /* a failed upload, aborted, leaves nothing */
    listing(root, ".", before, sizeof(before));
    err_clear(&e);
    assert_int_equal(upload("big2", "0123456789ABC", 12, &st, &created, &e), -EFBIG);
    listing(root, ".", after, sizeof(after));
    assert_string_equal(before, after);
    /* max 0 allows only the empty file */
    assert_int_equal(files_upload_begin(root, "zero", uid, gid, 0, &up, &e), 0);
    assert_int_equal(files_upload_write(up, "x", 1, NULL), -EFBIG);
    assert_int_equal(files_upload_commit(up, &st, &created, NULL), 0);
    assert_int_equal(st.size, 0);
}

static void
test_upload_parent_swapped(void **state)
{
    struct files_upload *up = NULL;
    struct files_stat st;
    struct err e = {0};
    bool created;
    char target[400];
    (void)state;

    mk("sw");
    assert_int_equal(files_upload_begin(root, "sw/f", uid, gid, 100, &up, &e), 0);
    assert_int_equal(files_upload_write(up, "mine", 4, &e), 0);
    /* code in the sandbox moves the directory away and plants a symlink
     * out in its place: the commit lands in the directory we opened */
    assert_int_equal(renameat(root, "sw", root, "sw.moved"), 0);
    (void)snprintf(target, sizeof(target), "%s/dir", outside);
    ln(target, "sw");
    assert_int_equal(files_upload_commit(up, &st, &created, &e), 0);
    content_is(root, "sw.moved/f", "mine");
    outside_untouched();
}

/* --- delete, mkdir, rmdir, rename --- */

static void
test_delete(void **state)
{
    struct err e = {0};
    (void)state;

    mk("p");
    put("p/f", "x");
    ln("f", "p/l");
    assert_int_equal(files_delete(root, "p/f", &e), 0);
    assert_false(exists(root, "p/f"));
    assert_true(exists(root, "p"));                     /* the parent stays, even empty */
    assert_int_equal(files_delete(root, "p/l", &e), 0); /* a dangling link */
    assert_false(exists(root, "p/l"));
    char l[64];
    listing(root, "p", l, sizeof(l));
    assert_string_equal(l, "");

    assert_int_equal(files_delete(root, "p", &e), -EISDIR);
    assert_non_null(strstr(e.msg, "use rmdir"));
    assert_true(exists(root, "p"));
    err_clear(&e);
    assert_int_equal(files_delete(root, "p/missing", &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/p/missing"));
    assert_int_equal(files_delete(root, "missing/x", NULL), -ENOENT);
    assert_int_equal(files_delete(root, ".", NULL), -EINVAL);
    /* symlinks are deleted themselves, their targets stay */
    assert_int_equal(files_delete(root, "outfile", &e), 0);
    assert_false(exists(root, "outfile"));
    outside_untouched();
}

static void
test_mkdir(void **state)
{
    struct err e = {0};
    bool created = false;
    (void)state;

    assert_int_equal(files_mkdir(root, "m/n/o", uid, gid, &created, &e), 0);
    assert_true(created);
    owned("m");
    owned("m/n/o");
    created = true;
    assert_int_equal(files_mkdir(root, "m/n/o", uid, gid, &created, &e), 0);
    assert_false(created);
    assert_int_equal(files_mkdir(root, "m", uid, gid, &created, &e), 0);
    assert_false(created);
    assert_int_equal(files_mkdir(root, ".", uid, gid, &created, &e), 0);
    assert_false(created);
    put("m/file", "x");
    assert_int_equal(files_mkdir(root, "m/file", uid, gid, &created, &e), -EEXIST);
    assert_non_null(strstr(e.msg, "already exists"));
    assert_int_equal(files_mkdir(root, "m/file/sub", uid, gid, &created, NULL), -ENOTDIR);
    /* a symlink inside to a directory counts as that directory */
    ln("m/n", "alias");
    created = true;
    assert_int_equal(files_mkdir(root, "alias", uid, gid, &created, &e), 0);
    assert_false(created);
}

static void
test_rmdir(void **state)
{
    struct err e = {0};
    char target[400];
    (void)state;

    mk("t");
    mk("t/a");
    mk("t/a/b");
    put("t/a/b/f", "x");
    put("t/g", "y");
    (void)snprintf(target, sizeof(target), "%s", outside);
    ln(target, "t/a/out");
    ln("../../../outside/dir", "t/a/b/rel");
    assert_int_equal(mkfifoat(root, "t/fifo", 0644), 0);
    /* 200 levels: below FILES_MAX_DEPTH */
    int cur = openat(root, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
    }
    close(cur);

    assert_int_equal(files_rmdir(root, "t", &e), 0);
    assert_false(exists(root, "t"));
    outside_untouched();

    mk("keep");
    mk("keep/sub");
    assert_int_equal(files_rmdir(root, "keep/sub", &e), 0);
    assert_true(exists(root, "keep"));
    assert_int_equal(files_rmdir(root, ".", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "root cannot be removed"));
    put("keep/file", "x");
    assert_int_equal(files_rmdir(root, "keep/file", NULL), -ENOTDIR);
    assert_int_equal(files_rmdir(root, "keep/missing", NULL), -ENOENT);
    /* a symlink to a directory is not followed: refused, both stay */
    ln("../keep", "keep/loop");
    assert_int_equal(files_rmdir(root, "keep/loop", NULL), -ENOTDIR);
    assert_true(exists(root, "keep/loop"));
    assert_int_equal(files_rmdir(root, "out", NULL), -ENOTDIR);
    assert_true(exists(root, "out"));
    outside_untouched();
}

static void
test_rename(void **state)
{
    struct err e = {0};
    (void)state;

    put("src", "S");
    put("dst", "D");
    assert_int_equal(files_rename(root, "src", "dst", false, uid, gid, &e), -EEXIST);
    assert_non_null(strstr(e.msg, "'/dst' already exists"));
    content_is(root, "src", "S");
    content_is(root, "dst", "D");
    assert_int_equal(files_rename(root, "src", "dst", true, uid, gid, &e), 0);
    assert_false(exists(root, "src"));
    content_is(root, "dst", "S");

    /* into new parents, which are created as uid:gid */
    assert_int_equal(files_rename(root, "dst", "x/y/moved", false, uid, gid, &e), 0);
    content_is(root, "x/y/moved", "S");
    owned("x");
    owned("x/y");

    /* directories, and not into themselves */
    mk("dir");
    put("dir/f", "f");
    assert_int_equal(files_rename(root, "dir", "dir2", false, uid, gid, &e), 0);
    content_is(root, "dir2/f", "f");
    err_clear(&e);
    assert_int_equal(files_rename(root, "dir2", "dir2/inside", false, uid, gid, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "into itself"));
    content_is(root, "dir2/f", "f");
    /* a file over a directory, a directory over a non-empty one */
    put("plain", "p");
    assert_int_equal(files_rename(root, "plain", "dir2", true, uid, gid, NULL), -EISDIR);
    mk("other");
    assert_true(files_rename(root, "other", "dir2", true, uid, gid, NULL) < 0);
    assert_true(exists(root, "dir2/f"));

    assert_int_equal(files_rename(root, ".", "z", false, uid, gid, NULL), -EINVAL);
    assert_int_equal(files_rename(root, "plain", ".", true, uid, gid, NULL), -EINVAL);
    assert_int_equal(files_rename(root, "missing", "z", false, uid, gid, NULL), -ENOENT);
    /* a symlink moves as itself */
    assert_int_equal(files_rename(root, "outfile", "moved-link", false, uid, gid, &e), 0);
    struct stat st;
    assert_int_equal(fstatat(root, "moved-link", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    outside_untouched();
}

/* --- walk --- */

struct collected {
    char paths[64][128];
    struct files_stat st[64];
    char targets[64][128];
    int n;
    int stop_after; /* return -ECANCELED from this entry (1-based); 0 = never */
};

static int
collect(const struct files_entry *en, void *ud)
{
    struct collected *c = ud;
    assert_true(c->n < 64);
    (void)snprintf(c->paths[c->n], sizeof(c->paths[0]), "%s", en->path);
    c->st[c->n] = en->st;
    (void)snprintf(c->targets[c->n], sizeof(c->targets[0]), "%s", en->target ? en->target : "");
    if (en->st.type == FILES_SYMLINK)
        assert_non_null(en->target);
    else
        assert_null(en->target);
    c->n++;
    return c->stop_after && c->n == c->stop_after ? -ECANCELED : 0;
}

static int
count_only(const struct files_entry *en, void *ud)
{
    (void)en;
    (*(size_t *)ud)++;
    return 0;
}

static void
test_walk(void **state)
{
    struct collected *c = calloc(1, sizeof(*c));
    struct err e = {0};
    (void)state;

    assert_non_null(c);
    put("b.txt", "bbb");
    mk("a");
    put("a/x", "x");
    mk("a/y");
    put("a/y/z", "zz");
    mk("a-b");
    ln("a/x", "link");
    assert_int_equal(mkfifoat(root, "a/fifo", 0600), 0);
    assert_int_equal(files_walk(root, ".", collect, c, &e), 0);
    static const char *const want[] = {"/a",       "/a-b",    "/a/fifo", "/a/x",  "/a/y",
                                       "/a/y/z",   "/b.txt",  "/link",   "/loop", "/out",
                                       "/outfile", "/outrel", "/slash"};
    assert_int_equal(c->n, sizeof(want) / sizeof(want[0]));
    for (int i = 0; i < c->n; i++)
        assert_string_equal(c->paths[i], want[i]);
    assert_int_equal(c->st[0].type, FILES_DIR);
    assert_int_equal(c->st[2].type, FILES_OTHER);
    assert_int_equal(c->st[3].type, FILES_FILE);
    assert_int_equal(c->st[3].size, 1);
    assert_int_equal(c->st[5].size, 2);
    assert_int_equal(c->st[7].type, FILES_SYMLINK);
    assert_string_equal(c->targets[7], "a/x");
    assert_int_equal(c->st[7].size, 3); /* the link's own length */
    assert_int_equal(c->st[9].type, FILES_SYMLINK);
    assert_string_equal(c->targets[9], outside); /* reported, never followed */
    assert_string_equal(c->targets[12], "/");
    assert_string_equal(files_type_name(c->st[0].type), "dir");
    assert_string_equal(files_type_name(c->st[3].type), "file");
    assert_string_equal(files_type_name(c->st[7].type), "symlink");
    assert_string_equal(files_type_name(c->st[2].type), "other");

    /* below a subdirectory: paths still from the workspace root */
    memset(c, 0, sizeof(*c));
    assert_int_equal(files_walk(root, "a", collect, c, &e), 0);
    assert_int_equal(c->n, 4);
    assert_string_equal(c->paths[0], "/a/fifo");
    assert_string_equal(c->paths[3], "/a/y/z");

    /* the callback's error stops the walk and is returned */
    memset(c, 0, sizeof(*c));
    c->stop_after = 2;
    assert_int_equal(files_walk(root, ".", collect, c, &e), -ECANCELED);
    assert_int_equal(c->n, 2);

    memset(c, 0, sizeof(*c));
    assert_int_equal(files_walk(root, "b.txt", collect, c, NULL), -ENOTDIR);
    assert_int_equal(files_walk(root, "missing", collect, c, NULL), -ENOENT);
    /* a symlink to a directory inside may be listed, under its own name */
    ln("a/y", "ylink");
    assert_int_equal(files_walk(root, "ylink", collect, c, NULL), 0);
    assert_int_equal(c->n, 1);
    assert_string_equal(c->paths[0], "/ylink/z");
    free(c);
}

static void
test_walk_empty(void **state)
{
    size_t n = 0;
    (void)state;
    /* an empty directory lists nothing. BUG: files_walk() then calls
     * qsort(ws.items, 0, ...) with ws.items == NULL, which is undefined
     * (glibc declares the argument nonnull); UBSan stops here with "null
     * pointer passed as argument 1" (files.c, the qsort in files_walk).
     * Sort only when ws.n > 0. */
    mk("empty");
    assert_int_equal(files_walk(root, "empty", count_only, &n, NULL), 0);
    assert_int_equal(n, 0);
}

static void
test_walk_limits(void **state)
{
    struct err e = {0};
    size_t n = 0;
    char name[32];
    (void)state;

    /* depth: FILES_MAX_DEPTH levels below the start are fine, one more is not */
    mk("deep");
    int cur = openat(root, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < FILES_MAX_DEPTH + 2; i++) {
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
    }
    close(cur);
    assert_int_equal(files_walk(root, "deep", count_only, &n, &e), -ELOOP);
    assert_non_null(strstr(e.msg, "nested deeper than"));
    n = 0;
    assert_int_equal(files_walk(root, "deep/d/d", count_only, &n, NULL), 0);
    assert_int_equal(n, FILES_MAX_DEPTH);
    assert_int_equal(rm_rf_at(root, "deep"), 0);

    /* entries: FILES_WALK_MAX fine, one more refused */
    mk("many");
    int d = openat(root, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(d >= 0);
    for (int i = 0; i < FILES_WALK_MAX; i++) {
        (void)snprintf(name, sizeof(name), "%d", i);
        int fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
    }
    n = 0;
    assert_int_equal(files_walk(root, "many", count_only, &n, &e), 0);
    assert_int_equal(n, FILES_WALK_MAX);
    int fd = openat(d, "one-more", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
    close(d);
    n = 0;
    err_clear(&e);
    assert_int_equal(files_walk(root, "many", count_only, &n, &e), -E2BIG);
    assert_int_equal(n, 0); /* nothing handed out from a refused walk */
    assert_non_null(strstr(e.msg, "more than 100000 entries"));
    assert_int_equal(rm_rf_at(root, "many"), 0);
}

/* --- versions --- */

static void
rewrite_same_size(const char *p, const char *data)
{
    int fd = openat(root, p, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, data, strlen(data)), 0);
    close(fd);
}

static void
test_versions(void **state)
{
    struct files_stat a, b, c;
    struct err e = {0};
    (void)state;

    put("v", "aaaa");
    assert_int_equal(files_stat(root, "v", &a, &e), 0);
    assert_int_equal(files_stat(root, "v", &b, &e), 0);
    assert_string_equal(a.version, b.version); /* stable while nothing changes */

    /* content changed, size kept, and mtime put back where it was: the
     * version still changes (ctime cannot be reset from user space). Many
     * rounds in a row, faster than a coarse clock tick. */
    struct stat st0;
    assert_int_equal(fstatat(root, "v", &st0, 0), 0);
    char seen[200][FILES_VERSION_LEN + 1];
    memcpy(seen[0], a.version, sizeof(seen[0]));
    for (int i = 1; i < 200; i++) {
        char data[8];
        (void)snprintf(data, sizeof(data), "%04d", i);
        rewrite_same_size("v", data);
        struct timespec ts[2] = {st0.st_atim, st0.st_mtim};
        assert_int_equal(utimensat(root, "v", ts, 0), 0);
        assert_int_equal(files_stat(root, "v", &c, &e), 0);
        assert_int_equal(c.mtime_ms, a.mtime_ms);
        assert_int_equal(c.size, 4);
        for (int k = 0; k < i; k++)
            if (!strcmp(seen[k], c.version))
                fail_msg("round %d: version %s seen before (round %d)", i, c.version, k);
        memcpy(seen[i], c.version, sizeof(seen[0]));
    }

    /* two files with the same content and times still differ (inode) */
    put("w1", "same");
    put("w2", "same");
    struct stat s1;
    assert_int_equal(fstatat(root, "w1", &s1, 0), 0);
    struct timespec ts[2] = {s1.st_atim, s1.st_mtim};
    assert_int_equal(utimensat(root, "w2", ts, 0), 0);
    assert_int_equal(files_stat(root, "w1", &a, &e), 0);
    assert_int_equal(files_stat(root, "w2", &b, &e), 0);
    assert_string_not_equal(a.version, b.version);
    /* a chmod changes it too */
    assert_int_equal(fchmodat(root, "w1", 0600, 0), 0);
    assert_int_equal(files_stat(root, "w1", &c, &e), 0);
    assert_string_not_equal(a.version, c.version);
    assert_int_equal(c.mode, 0600);
}

static void
test_stat_and_open_read(void **state)
{
    struct files_stat st;
    struct err e = {0};
    int fd = -1;
    (void)state;

    put("r", "readme");
    ln("r", "rlink");
    mk("dir");
    assert_int_equal(mkfifoat(root, "fifo", 0644), 0);

    assert_int_equal(files_open_read(root, "r", &fd, &st, &e), 0);
    assert_true(fd >= 0);
    char b[16] = {0};
    assert_int_equal(read(fd, b, sizeof(b)), 6);
    assert_string_equal(b, "readme");
    assert_int_equal(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    assert_int_equal(st.size, 6);
    assert_int_equal(st.type, FILES_FILE);
    /* symlinks inside are followed */
    assert_int_equal(files_stat(root, "rlink", &st, &e), 0);
    assert_int_equal(st.type, FILES_FILE);
    assert_int_equal(st.size, 6);
    assert_int_equal(files_stat(root, "dir", &st, &e), 0);
    assert_int_equal(st.type, FILES_DIR);
    assert_int_equal(st.size, 0);
    assert_int_equal(files_stat(root, ".", &st, &e), 0);
    assert_int_equal(st.type, FILES_DIR);

    fd = -1;
    assert_int_equal(files_open_read(root, "dir", &fd, &st, &e), -EISDIR);
    err_clear(&e);
    /* a FIFO planted by the sandbox neither blocks nor is read */
    assert_int_equal(files_open_read(root, "fifo", &fd, &st, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "not a regular file"));
    assert_int_equal(files_open_read(root, "missing", &fd, &st, NULL), -ENOENT);
    assert_int_equal(fd, -1);
}

/* Binds a unix socket at root/rel. */
static void
make_socket(const char *rel)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ws/%s", top, rel);
    assert_true(n > 0 && (size_t)n < sizeof(sa.sun_path));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(s);
}

/* Sockets, fifos and devices are named, refused with -EINVAL (a 400), and
 * never opened: a socket used to fail open() with ENXIO (a 500). */
static void
test_open_read_odd_types(void **state)
{
    struct files_stat st;
    struct err e = {0};
    int fd = -1;
    (void)state;

    make_socket("sock");
    ln("sock", "socklink");
    assert_int_equal(mkfifoat(root, "fifo", 0666), 0);
    assert_int_equal(files_open_read(root, "sock", &fd, &st, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'/sock' is a unix socket, not a regular file"));
    err_clear(&e);
    assert_int_equal(files_open_read(root, "socklink", &fd, &st, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "unix socket"));
    err_clear(&e);
    assert_int_equal(files_open_read(root, "fifo", &fd, &st, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "is a fifo"));
    if (geteuid() == 0) {
        err_clear(&e);
        assert_int_equal(mknodat(root, "null", S_IFCHR | 0666, makedev(1, 3)), 0);
        assert_int_equal(files_open_read(root, "null", &fd, &st, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "is a character device"));
    }
    assert_int_equal(fd, -1);
    /* they are still there and can be stat'ed, deleted, removed with a tree */
    assert_int_equal(files_stat(root, "sock", &st, &e), 0);
    assert_int_equal(st.type, FILES_OTHER);
    assert_int_equal(files_delete(root, "sock", &e), 0);
    err_clear(&e);
    assert_int_equal(files_rmdir(root, "fifo", &e), -ENOTDIR);
    assert_non_null(strstr(e.msg, "is a fifo, not a directory"));
    mk("odd");
    make_socket("odd/s");
    assert_int_equal(mkfifoat(root, "odd/f", 0600), 0);
    assert_int_equal(files_rmdir(root, "odd", &e), 0);
    assert_false(exists(root, "odd"));
}

/* Any depth the kernel allows goes, with few descriptors, and a failure
 * names what failed rather than blaming depth or symlinks. */
static void
test_rmdir_deep(void **state)
{
    struct err e = {0};
    (void)state;

    mk("deep");
    int cur = openat(root, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 1500; i++) {
        if (i % 100 == 0)
            assert_int_equal(write_file_at(cur, "f", "x", 0644), 0);
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
    }
    close(cur);
    int r = files_rmdir(root, "deep", &e);
    if (r < 0)
        fail_msg("rmdir of a 1500-deep tree: %s", e.msg);
    assert_false(exists(root, "deep"));
    outside_untouched();
}

/* --- escapes, through every operation --- */

static const char *const escapes[] = {"out",          "out/secret",       "outrel/secret",
                                      "outfile",      "slash/etc/passwd", "loop",
                                      "out/dir/keep", "outrel/dir"};

static bool
refused(int r)
{
    return r == -EXDEV || r == -ELOOP;
}

static void
test_escapes(void **state)
{
    char fails[4096] = "";
    int nfail = 0;
    (void)state;

#define EXPECT_REFUSED(call, what, p)                                                           \
    do {                                                                                        \
        struct err e_ = {0};                                                                    \
        int r_ = (call);                                                                        \
        (void)e_;                                                                               \
        if (!refused(r_)) {                                                                     \
            size_t l_ = strlen(fails);                                                          \
            (void)snprintf(fails + l_, sizeof(fails) - l_, "\n  %s(\"%s\") = %d", what, p, r_); \
            nfail++;                                                                            \
        }                                                                                       \
    } while (0)

    for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
        const char *p = escapes[i];
        struct files_stat st;
        int fd = -1;
        struct files_upload *up = NULL;
        bool created;
        char deeper[128];
        (void)snprintf(deeper, sizeof(deeper), "%s/new", p);

        EXPECT_REFUSED(files_stat(root, p, &st, &e_), "files_stat", p);
        EXPECT_REFUSED(files_open_read(root, p, &fd, &st, &e_), "files_open_read", p);
        assert_int_equal(fd, -1);
        EXPECT_REFUSED(files_walk(root, p, count_only, &(size_t){0}, &e_), "files_walk", p);
        EXPECT_REFUSED(files_upload_begin(root, deeper, uid, gid, 10, &up, &e_),
                       "files_upload_begin", deeper);
        if (up) {
            files_upload_abort(up);
            up = NULL;
        }
        EXPECT_REFUSED(files_mkdir(root, deeper, uid, gid, &created, &e_), "files_mkdir", deeper);
        EXPECT_REFUSED(files_delete(root, deeper, &e_), "files_delete", deeper);
        EXPECT_REFUSED(files_rmdir(root, deeper, &e_), "files_rmdir", deeper);
        EXPECT_REFUSED(files_rename(root, deeper, "inside", false, uid, gid, &e_),
                       "files_rename from", deeper);
        put("tomove", "t");
        EXPECT_REFUSED(files_rename(root, "tomove", deeper, false, uid, gid, &e_),
                       "files_rename to", deeper);
        assert_true(exists(root, "tomove"));
    }
    outside_untouched();
    if (nfail)
        fail_msg("%d escape(s) not refused with -EXDEV or -ELOOP:%s", nfail, fails);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
            T(test_upload_creates_and_replaces),
            T(test_upload_refuses_directory),
            T(test_upload_abort),
            T(test_upload_size_limit),
            T(test_upload_parent_swapped),
            T(test_delete),
            T(test_mkdir),
            T(test_rmdir),
            T(test_rename),
            T(test_walk),
            T(test_walk_limits),
            T(test_versions),
            T(test_stat_and_open_read),
            T(test_open_read_odd_types),
            T(test_rmdir_deep),
            T(test_escapes),
            /* last: under UBSan with halt_on_error its bug ends the binary */
            T(test_walk_empty),
    };
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
