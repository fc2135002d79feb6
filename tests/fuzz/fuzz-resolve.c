/*
 * fuzz-resolve.c - the resolver (util/path.h) on arbitrary path text,
 * against a real tree of hostile symlinks made once per process.
 *
 * The first byte picks how (the mode and its flags) and what to do; the
 * rest, up to a NUL, is the path. Checked for every input:
 *   - path_parent(): a name with no '/', not "." or "..", within
 *     PATH_NAME_MAX, and parent + name joining back into the input;
 *   - path_normalize(), then path_parent() of its result agreeing with
 *     path_split();
 *   - path_openat() and path_open_parent() in the mode picked: whatever
 *     they open is the root or below it (the kernel's own name for the
 *     descriptor), a file they open never reads the outside's secret;
 *   - path_mkdirat() (one input in four), in a scratch directory put back
 *     after each run: what it opens is inside, nothing appears outside;
 *   - path_fail(): a NUL-terminated message within ERR_MSG_MAX.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "util/err.h"
#include "util/fd.h"
#include "util/path.h"

static char top[PATH_MAX], rootpath[PATH_MAX];
static int root = -1, outfd = -1;
static size_t outside_n;

static size_t
names_in(int dfd)
{
    char **v = NULL;
    size_t n = 0;
    CHECK(fd_dir_names(dfd, 1000, &v, &n) == 0);
    fd_names_free(v, n);
    return n;
}

static void
link_at(const char *target, const char *name)
{
    CHECK(symlinkat(target, root, name) == 0);
}

/* The scratch directory w, with links of its own, as path_mkdirat() finds it. */
static void
scratch(void)
{
    char p[PATH_MAX + 32];
    (void)rm_rf_at(root, "w");
    CHECK(mkdirat(root, "w", 0755) == 0);
    CHECK(mkdirat(root, "w/d", 0755) == 0);
    (void)snprintf(p, sizeof(p), "%s/outside", top);
    link_at(p, "w/abs");
    link_at("../../outside", "w/rel");
    link_at("d", "w/in");
    link_at("w/loop", "w/loop");
}

static void
cleanup(void)
{
    (void)rm_rf_at(AT_FDCWD, top);
}

static void
setup(void)
{
    char p[PATH_MAX + 32];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    CHECK(snprintf(top, sizeof(top), "%.200s/abx-fuzz-resolve-XXXXXX", tmp) < (int)sizeof(top));
    CHECK(mkdtemp(top) != NULL);
    int t = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(t >= 0);
    CHECK(mkdirat(t, "outside", 0755) == 0 && mkdirat(t, "root", 0755) == 0);
    outfd = openat(t, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    root = openat(t, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(t);
    CHECK(outfd >= 0 && root >= 0);
    CHECK(write_file_at(outfd, "secret", "outside secret\n", 0644) == 0);
    CHECK(mkdirat(outfd, "dir", 0755) == 0);
    CHECK(realpath(top, p) != NULL);
    CHECK(snprintf(rootpath, sizeof(rootpath), "%s/root", p) < (int)sizeof(rootpath));
    CHECK(mkdirat(root, "a", 0755) == 0 && mkdirat(root, "a/b", 0755) == 0);
    CHECK(write_file_at(root, "a/f", "inside\n", 0644) == 0);
    (void)snprintf(p, sizeof(p), "%s/outside", top);
    link_at(p, "abs");
    (void)snprintf(p, sizeof(p), "%s/outside/secret", top);
    link_at(p, "absfile");
    link_at("../outside", "rel");
    link_at("a/../../outside/secret", "reldeep");
    link_at("..", "up");
    link_at("/", "slash");
    link_at("a/b", "in");
    link_at("x", "y");
    link_at("y", "x");
    link_at("/proc/self/root", "magic");
    scratch();
    outside_n = names_in(outfd);
    atexit(cleanup);
}

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

static const unsigned hows[8] = {
        PATH_BENEATH,
        PATH_WORKSPACE,
        PATH_BENEATH | PATH_NO_SYMLINKS,
        PATH_BENEATH | PATH_NO_XDEV | PATH_NO_SYMLINKS | PATH_FALLBACK,
        PATH_IN_ROOT,
        PATH_IN_ROOT | PATH_NO_SYMLINKS,
        PATH_IN_ROOT | PATH_NO_XDEV,
        PATH_BENEATH | PATH_FALLBACK,
};

static void
check_parent_text(const char *path)
{
    char parent[PATH_MAX_LEN + 2], name[PATH_NAME_MAX + 1];
    if (path_parent(path, parent, sizeof(parent), name) < 0)
        return;
    size_t nl = strlen(name);
    CHECK(nl > 0 && nl <= PATH_NAME_MAX && !strchr(name, '/'));
    CHECK(strcmp(name, ".") != 0 && strcmp(name, "..") != 0);
    /* parent + "/" + name is the input ("." and "/" stand for none) */
    size_t pl = strlen(path) - nl;
    CHECK(strcmp(path + pl, name) == 0);
    if (pl == 0)
        CHECK(strcmp(parent, ".") == 0);
    else if (pl == 1)
        CHECK(strcmp(parent, "/") == 0 && path[0] == '/');
    else
        CHECK(strlen(parent) == pl - 1 && strncmp(parent, path, pl - 1) == 0 &&
              path[pl - 1] == '/');
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[PATH_MAX_LEN + 64], norm[PATH_MAX_LEN + 64], name[PATH_NAME_MAX + 1];
    char a[PATH_MAX_LEN + 64], b[PATH_MAX_LEN + 64], n2[PATH_NAME_MAX + 1];

    if (root < 0)
        setup();
    if (size == 0 || size > PATH_MAX_LEN + 32)
        return 0;
    uint8_t sel = data[0];
    size_t len = strnlen((const char *)data + 1, size - 1);
    memcpy(path, data + 1, len);
    path[len] = '\0';
    unsigned how = hows[sel & 7];

    check_parent_text(path);
    if (path_normalize(path, len, norm, sizeof(norm)) == 0 && !path_is_root(norm)) {
        CHECK(path_split(norm, a, b, sizeof(a)) == 0);
        char parent[PATH_MAX_LEN + 2];
        CHECK(path_parent(norm, parent, sizeof(parent), n2) == 0);
        CHECK(strcmp(parent, a) == 0 && strcmp(n2, b) == 0);
    }

    int fd = path_openat(root, path, (sel & 8) ? O_RDONLY : O_PATH, 0, how);
    if (fd >= 0) {
        CHECK(inside(fd));
        if (sel & 8) {
            char buf[32];
            ssize_t k = read(fd, buf, sizeof(buf));
            CHECK(k < 15 || memcmp(buf, "outside secret\n", 15) != 0);
        }
        close(fd);
    }
    int d = path_open_parent(root, path, how, name);
    if (d >= 0) {
        CHECK(inside(d));
        close(d);
    }
    if ((sel & 0x30) == 0x30) {
        const struct path_mkdir m = {.mode = 0755,
                                     .uid = (uid_t)-1,
                                     .gid = (gid_t)-1,
                                     .exact = (sel & 0x40) != 0,
                                     .follow = (sel & 0x80) != 0};
        char scoped[PATH_MAX_LEN + 64];
        (void)snprintf(scoped, sizeof(scoped), "%sw/%s", (how & PATH_IN_ROOT) ? "/" : "", path);
        bool created = false;
        int m_fd = path_mkdirat(root, scoped, how, &m, &created);
        if (m_fd >= 0) {
            CHECK(inside(m_fd));
            close(m_fd);
        }
        CHECK(names_in(outfd) == outside_n);
        int od = openat(outfd, "dir", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        CHECK(od >= 0 && names_in(od) == 0);
        close(od);
        scratch();
    }
    struct err e = {0};
    (void)path_fail(&e, -(int)(sel % 134 + 1), (sel & 1) ? PATH_VOICE_VIEW : PATH_VOICE_WORKSPACE,
                    path[0] ? path : ".", "fuzz");
    CHECK(strlen(e.msg) < ERR_MSG_MAX && e.msg[0]);
    return 0;
}
